"""The warnings file: a writer appending while a shell takes the file (the
shell's side is show_warnings_file in the preload library, emulated here;
tests/system/test_failure_modes.py runs the real one)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from shournal.capture import listener

_flock = fcntl.flock  # the shell's own, when a test wraps the writer's


def shell_takes(path: Path) -> str | None:
    """What a shell's prompt does: the file's first line, or None when a
    writer holds the lock (or there is no file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        try:
            _flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        if os.fstat(fd).st_ino != os.lstat(path).st_ino:
            return None
        taken = path.with_name(path.name + ".taken")
        os.rename(path, taken)
        text = os.read(fd, 1024).decode()
        os.unlink(taken)
        return text.splitlines()[0] if text else ""
    finally:
        os.close(fd)


@pytest.mark.parametrize("step", ["open", "fstat"])
def test_a_shell_taking_the_file_meanwhile_loses_no_line(step, tmp_path, monkeypatch):
    """A shell prompts right after the writer opened the file, or while it
    holds the lock: the line is shown then or at the next prompt, never
    written to a file the shell has already read and removed."""
    path = tmp_path / "warnings"
    shown: list[str | None] = []
    real = getattr(os, step)

    def interleaved(*args, **kwargs):
        result = real(*args, **kwargs)
        if not shown:
            shown.append(None)  # (shell_takes calls it too)
            shown[0] = shell_takes(path)
        return result

    monkeypatch.setattr(os, step, interleaved)
    listener.append_warning(path, "the journal is locked\n")
    monkeypatch.undo()
    shown.append(shell_takes(path))
    assert "the journal is locked" in shown, shown


def test_lines_are_appended(tmp_path):
    path = tmp_path / "warnings"
    listener.append_warning(path, "one\n")
    listener.append_warning(path, "two\n")
    assert path.read_text() == "one\ntwo\n"
    assert shell_takes(path) == "one"
    assert not path.exists()


def test_a_lock_never_released_delays_the_line_but_does_not_lose_it(tmp_path):
    """(A shell stopped while it held the lock.)"""
    path = tmp_path / "warnings"
    path.write_text("")
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        listener.append_warning(path, "written anyway\n")
    finally:
        os.close(fd)
    assert path.read_text() == "written anyway\n"
