"""Write the DDL of an old journal schema, from the models of its time in
git history, for the migration tests (tests/system/test_migrations.py).

    .venv/bin/python tests/data/schema/generate.py VERSION COMMIT

writes ``v<VERSION>.sqlite.sql`` and ``v<VERSION>.postgresql.sql`` here:
what ``metadata.create_all`` of shournal/store/models.py at COMMIT (the
last commit whose schema was VERSION) ran on each backend.  The files are
kept as written: an old schema never changes.  Made so far:

    1 08c8489   2 b62c00f   3 6365f29   4 d6bb1f3   5 43fe8d1   6 44c2c64
    7 5a8099f (the models and migrations.py of the split store)
    8 74a72c4 (notes and tags)   9 0473485 (imports)   10 245ee57 (redactions)
"""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from shournal.store import models as today

HERE = Path(__file__).resolve().parent
# What the old models imported from shournal (constants and helpers,
# re-exported by today's models; modules have moved since).
_SHOURNAL_IMPORT = re.compile(r"^from shournal\.\S+ import (\w+)( as \w+)?$", re.MULTILINE)


def _show(commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{commit}:{path}"], check=True, capture_output=True, text=True, cwd=HERE
    ).stdout


def old_models(commit: str) -> types.ModuleType:
    source = _show(commit, "shournal/store/models.py")

    def constant(match: re.Match[str]) -> str:
        name = match.group(1)
        if not hasattr(today, name):
            raise SystemExit(f"the models at {commit} import {name}: give its value here")
        return f"{name} = _today.{name}"

    module = types.ModuleType(f"models_{commit}")
    module._today = today  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module  # (SQLAlchemy resolves annotations there)
    exec(compile(_SHOURNAL_IMPORT.sub(constant, source), module.__name__, "exec"), module.__dict__)
    return module


def ddl(module: types.ModuleType, dialect: object) -> str:
    statements = []
    for table in module.Base.metadata.sorted_tables:
        statements.append(str(CreateTable(table).compile(dialect=dialect)))
        for index in sorted(table.indexes, key=lambda ix: str(ix.name)):
            statements.append(str(CreateIndex(index).compile(dialect=dialect)))
    lines = ("\n".join(line.rstrip() for line in s.strip().splitlines()) for s in statements)
    return "".join(f"{s};\n\n" for s in lines)


def main() -> None:
    version, commit = int(sys.argv[1]), sys.argv[2]
    module = old_models(commit)
    found = getattr(module, "SCHEMA_VERSION", None)
    if found is None:  # (since the version is the last migration's)
        migrations = _show(commit, "shournal/store/migrations.py")
        found = int(re.findall(r"Migration\((\d+),", migrations)[-1])
    if found != version:
        raise SystemExit(f"the models at {commit} are of schema {found}")
    for name, dialect in (("sqlite", sqlite.dialect()), ("postgresql", postgresql.dialect())):
        header = f"-- shournal journal schema {version} (models at {commit}) on {name}\n\n"
        (HERE / f"v{version}.{name}.sql").write_text(header + ddl(module, dialect))


if __name__ == "__main__":
    main()
