"""The real `shournal` process for CLI tests: `cli_env` points it at a
private SQLite journal and private XDG directories, `run_shournal` runs it,
`answer_shournal` runs it on a pty and answers its question."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["SHOURNAL_DB_URL"] = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    env["XDG_RUNTIME_DIR"] = str(tmp_path)
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["TZ"] = "UTC"
    return env


def run_shournal(
    args: list[str], env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shournal", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def answer_shournal(
    args: list[str], env: dict[str, str], question: str, answer: str, cwd: Path | None = None
) -> tuple[int | None, str, str]:
    """Run shournal on a pty, wait for ``question``, type ``answer``; its
    exit status, what it wrote before the question and after the answer.
    The process has no children, so the pty's EOF comes when it exits (the
    timeout is only a bound)."""
    import pexpect

    child = pexpect.spawn(sys.executable, ["-m", "shournal", *args], env=env,
                          cwd=None if cwd is None else str(cwd), encoding="utf-8",
                          timeout=60, dimensions=(24, 80))  # fmt: skip
    child.expect_exact(question)
    before = child.before
    child.sendline(answer)
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus, before, child.before
