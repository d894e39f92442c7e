"""The library example in README.md runs, against a real journal, and
``help(shournal.Journal)`` documents the API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from synthetic import record

from shournal.record import FileEvent
from shournal.store import Store

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## As a library") :]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m is not None, "no python code block in README's library section"
    return m.group(1)


def test_readme_library_example_runs(cli_env: dict[str, str], tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    out = FileEvent(path=os.fsencode(work / "out.o"), size=42, mtime_ns=1_700_000_000 * 10**9,
                    mode=0o100644, hash=123456789)  # fmt: skip
    now = time.time_ns()
    with Store(cli_env["SHOURNAL_DB_URL"]) as s:
        s.add_command(record("make -j2", start_ns=now - 120 * 10**9, working_dir=str(work),
                             writes=[out]))  # fmt: skip
        s.add_command(record("ld out.o", start_ns=now - 60 * 10**9, working_dir=str(work),
                             reads=[out]))  # fmt: skip
        s.add_command(record("echo password=x", start_ns=now - 30 * 10**9))
    res = subprocess.run([sys.executable, "-c", readme_example()], cwd=work, env=cli_env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("1 ") and lines[0].endswith(" make -j2"), res.stdout
    assert lines[1] == f"  wrote {work}/out.o 42"
    assert lines[2] == "    read by 2 ld out.o"
    assert lines[3] == "3 commands in 1 sessions this week"
    assert lines[4] == "would delete [3]"


def test_help_documents_the_journal() -> None:
    res = subprocess.run([sys.executable, "-c", "import shournal; help(shournal.Journal)"],
                         capture_output=True, text=True, env={**os.environ, "PAGER": "cat"},
                         timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr
    for name in ("open(", "find(", "stats(", "plan_delete(", "delete(", "archived(",
                 "writers_of(", "readers_of("):  # fmt: skip
        assert name in res.stdout, name
    assert "SHOURNAL_DB_URL" in res.stdout or "resolve_url" in res.stdout


def test_import_shournal_stays_cheap() -> None:
    code = (
        "import sys, shournal; print(sorted(m for m in sys.modules "
        "if m.startswith(('sqlalchemy', 'typer', 'shournal'))))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert res.returncode == 0 and res.stdout.strip() == "['shournal']", res
