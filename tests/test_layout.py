"""The package layout's one rule that protects every command line: the
modules under shournal/capture/ run while a command is recorded, so they
import only the standard library, each other and the store (with the few
stdlib-only settings and data modules at the top of the package)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CAPTURE = REPO / "shournal" / "capture"

# Outside shournal.capture.* and shournal.store.*: the data types, the
# journal's front door (which URL; it opens the store), the settings
# (config.toml, install paths), the escaping of text for a terminal, and
# the apparatus recorder's hook (shournal.reproduce itself, not its
# submodules: those load only for a command recorded with its apparatus).
ALLOWED_SHOURNAL = {
    "shournal.data",
    "shournal.journal",
    "shournal.config",
    "shournal._paths",
    "shournal.terminal",
    "shournal.reproduce",
}
# The partial hash of file content.
ALLOWED_THIRD_PARTY = {"xxhash"}


def imported_modules(source: str) -> set[str]:
    """Every module ``source`` imports, function-level and TYPE_CHECKING
    imports included; ``from pkg import name`` counts as ``pkg.name``
    (a submodule or a name of ``pkg``: both need ``pkg``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports are not used in shournal"
            assert node.module
            if node.module == "shournal":
                names.update(f"shournal.{a.name}" for a in node.names)
            else:
                names.add(node.module)
    return names


def allowed(name: str) -> bool:
    top = name.split(".")[0]
    if top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY:
        return True
    if any(name == p or name.startswith(p + ".") for p in ("shournal.capture", "shournal.store")):
        return True
    return name in ALLOWED_SHOURNAL


CAPTURE_MODULES = sorted(CAPTURE.glob("*.py"))


def test_the_capture_modules_are_found() -> None:
    assert {"listener.py", "daemon.py", "protocol.py"} <= {p.name for p in CAPTURE_MODULES}


@pytest.mark.parametrize("path", CAPTURE_MODULES, ids=lambda p: p.name)
def test_capture_imports_only_the_standard_library_and_the_store(path: Path) -> None:
    bad = sorted(n for n in imported_modules(path.read_text()) if not allowed(n))
    assert bad == [], f"{path.relative_to(REPO)} imports {bad}"


def test_the_rule_sees_function_level_and_from_imports() -> None:
    code = (
        "import os\n"
        "from shournal import report\n"
        "def f():\n"
        "    from shournal.query.find import find_commands\n"
        "    import sqlalchemy\n"
    )
    assert sorted(n for n in imported_modules(code) if not allowed(n)) == [
        "shournal.query.find",
        "shournal.report",
        "sqlalchemy",
    ]
