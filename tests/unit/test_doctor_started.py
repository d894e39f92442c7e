"""The doctor runs the helper's check and the bubblewrap probe without
subprocess (shournal.doctor._Started, started first, collected last) and
finds bwrap without shutil (_which): each must behave as the standard
library's, which the checks used before."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from shournal import doctor


def _run(argv: list[str], **kwargs) -> tuple[int, str, str]:
    r = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    return r.returncode, r.stdout, r.stderr


def test_a_started_program_is_collected_as_subprocess_run_collects_it() -> None:
    argv = ["/bin/sh", "-c", "printf 'a\\r\\nb\\rc'; echo 'é' >&2; exit 3"]
    assert doctor._Started(argv, timeout=10).result() == _run(argv) == (3, "a\nb\nc", "é\n")


def test_a_large_output_on_both_pipes_does_not_block_it() -> None:
    argv = ["/bin/sh", "-c", "head -c 300000 /dev/zero; head -c 300000 /dev/zero >&2"]
    code, out, err = doctor._Started(argv, timeout=10).result()
    assert (code, len(out), len(err)) == (0, 300000, 300000)


def test_a_program_that_cannot_start_raises_what_subprocess_raises(tmp_path: Path) -> None:
    for argv in ([str(tmp_path / "missing"), "check"], ["/etc/passwd", "check"]):
        with pytest.raises(OSError) as ours:
            doctor._Started(argv, timeout=10).result()
        with pytest.raises(OSError) as theirs:
            _run(argv)
        assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))


def test_a_program_out_of_time_is_killed_and_said_as_subprocess_says_it() -> None:
    argv = ["/bin/sleep", "60"]
    started = doctor._Started(argv, timeout=0.2)
    with pytest.raises(doctor._Timeout) as ours:
        started.result()
    assert str(ours.value) == str(subprocess.TimeoutExpired(argv, 0.2))
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(started._pid, os.WNOHANG)


def test_the_program_gets_what_subprocess_run_gives_it() -> None:
    """No descriptor of ours beyond 0-2 (close_fds), SIGPIPE and SIGXFSZ
    at their defaults (restore_signals), stdin ours or /dev/null."""
    r, w = os.pipe()
    os.set_inheritable(r, True)
    os.set_inheritable(w, True)
    try:
        argv = ["/bin/sh", "-c", "ls /proc/$$/fd; grep SigIgn /proc/$$/status; cat"]
        ours = doctor._Started(argv, timeout=10, null_stdin=True).result()
        theirs = _run(argv, stdin=subprocess.DEVNULL)
    finally:
        os.close(r)
        os.close(w)
    assert ours[1].split()[:3] == ["0", "1", "2"] and str(r) not in ours[1].split()
    # (glibc's posix_spawn leaves its own two signals, 32 and 33, ignored:
    # a glibc program sets their handlers itself when it uses them)
    own = ~(0b11 << 31)
    ignored = [int(t.split("SigIgn:")[1].split()[0], 16) & own for t in (ours[1], theirs[1])]
    assert ignored[0] == ignored[1] and not ignored[0] & (1 << 12 | 1 << 24)  # SIGPIPE, SIGXFSZ
    assert ours[1].split("SigIgn")[0] == theirs[1].split("SigIgn")[0]
    assert (ours[0], ours[2]) == (theirs[0], theirs[2]) == (0, "")
    argv = ["/bin/sh", "-c", "readlink /proc/$$/fd/0"]
    with open("/dev/zero", "rb") as zero:
        stdin = os.dup(0)
        os.dup2(zero.fileno(), 0)
        try:
            assert doctor._Started(argv, timeout=10).result() == _run(argv) == (
                0, "/dev/zero\n", "")
        finally:
            os.dup2(stdin, 0)
            os.close(stdin)


@pytest.mark.parametrize("path", [
    "a:b:c", "c:a", "b", "", ":", "a::c", "/nonexistent:c", "c:c", None,
])  # fmt: skip
def test_which_finds_what_shutil_which_finds(path, tmp_path: Path, monkeypatch) -> None:
    """A file that is not executable (a), a folder of the name (b), the
    program (c); an empty entry is the current directory."""
    for name in "abc":
        (tmp_path / name).mkdir()
    (tmp_path / "a" / "prog").write_text("")
    (tmp_path / "b" / "prog").mkdir()
    (tmp_path / "c" / "prog").write_text("#!/bin/sh\n")
    (tmp_path / "c" / "prog").chmod(0o755)
    (tmp_path / "prog").write_text("#!/bin/sh\n")
    (tmp_path / "prog").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    if path is None:
        monkeypatch.delenv("PATH", raising=False)
    else:
        monkeypatch.setenv("PATH", ":".join(str(tmp_path / p) if p and not p.startswith("/")
                                            else p for p in path.split(":")))
    for name in ("prog", "sh", "missing"):
        assert doctor._which(name) == shutil.which(name), (path, name)
