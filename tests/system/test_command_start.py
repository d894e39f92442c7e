"""A command line's start reaches its listener before the command runs, so
a line whose end the shell never reports -- it execs another program, or
the terminal is closed while the line runs -- is still stored: its text,
working directory, start time and session, the files it wrote before, the
exit status unknown and the record marked incomplete.  Real bash and zsh
on a pty as the unprivileged test user, through the setuid helper, with
the Python listener and with the store daemon."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from fixtures_shell import Shell, recorded, wait_for, wait_stored
from test_daemon import daemon_env, daemon_pid, wait_drained

from shournal.data import RETURN_VALUE_UNKNOWN

pytestmark = [pytest.mark.shell, pytest.mark.root]

LISTENERS = ["python", "daemon"]


def _env(install, listener: str) -> dict[str, str]:
    return daemon_env(install) if listener == "daemon" else {}


def _stored(home: Path, listener: str):
    if listener == "daemon":
        wait_drained(home)
    else:
        wait_stored(home)
    return recorded(home, create=False)


def _only(found, text: str):
    matches = [c for c in found if c.text == text]
    assert len(matches) == 1, [c.text for c in found]
    return matches[0]


def _assert_incomplete(cmd, home: Path, written: str) -> None:
    assert cmd.return_value == RETURN_VALUE_UNKNOWN
    assert cmd.incomplete
    assert cmd.working_dir == str(home / "work")
    assert cmd.session_uuid is not None
    assert cmd.end_time >= cmd.start_time
    assert os.fsencode(home / "work" / written) in [e.path for e in cmd.writes]


def _kill_daemon(home: Path) -> None:
    pid = daemon_pid(home)
    if pid is not None:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_line_ending_in_exec_of_a_shell_is_stored(kind, listener, install, user_home):
    """`exec bash` (`exec zsh`): the new shell starts recording its own
    lines; the line that exec'd it is stored, incomplete."""
    sh = Shell(kind, install, user_home, extra_env=_env(install, listener))
    try:
        line = f"echo one > before_exec; exec {kind}"
        sh.run(line)
        sh.run("echo two > after_exec")
        sh.exit()
        found = _stored(user_home, listener)
        _assert_incomplete(_only(found, line), user_home, "before_exec")
        after = _only(found, "echo two > after_exec")
        assert after.return_value == 0 and not after.incomplete
    finally:
        _kill_daemon(user_home)


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_line_ending_in_exec_of_a_program_is_stored(kind, listener, install, user_home):
    """`exec python3 ...`: the shell is gone when the program ends."""
    sh = Shell(kind, install, user_home, extra_env=_env(install, listener))
    try:
        line = "echo one > before_exec; exec python3 -c 'import sys; sys.exit(7)'"
        sh.proc.sendline(line)
        sh.wait_exit()
        assert sh.proc.exitstatus == 7
        _assert_incomplete(_only(_stored(user_home, listener), line), user_home, "before_exec")
    finally:
        _kill_daemon(user_home)


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_terminal_closed_while_a_command_runs(kind, listener, install, user_home):
    """SIGHUP to the shell (the terminal closed, an ssh connection dropped)
    while the line's command runs: the shell hangs up its jobs and exits
    without a prompt."""
    sh = Shell(kind, install, user_home, extra_env=_env(install, listener))
    try:
        pid = int(re.search(r"pid=(\d+)", sh.run("echo pid=$$")).group(1))  # type: ignore[union-attr]
        line = "echo one > before_hup; sleep 300.25"
        sh.proc.sendline(line)
        wait_for(lambda: subprocess.run(
            ["pgrep", "-u", install.user.pw_name, "-f", "^sleep 300.25$"], capture_output=True
        ).returncode == 0, "the command to run")
        os.kill(pid, signal.SIGHUP)
        sh.wait_exit()
        cmd = _only(_stored(user_home, listener), line)
        _assert_incomplete(cmd, user_home, "before_hup")
    finally:
        _kill_daemon(user_home)


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_space_prefixed_line_ending_in_exec_stays_unrecorded(kind, install, user_home):
    """A line the user keeps out of history (ignorespace, histignorespace)
    is not sent at its start either: ending it with `exec` does not
    journal it."""
    rc = "HISTCONTROL=ignorespace" if kind == "bash" else "setopt histignorespace"
    sh = Shell(kind, install, user_home, rc_extra=rc)
    sh.run(f" echo secret > hidden; exec {kind}")
    sh.run("echo shown > visible")
    sh.exit()
    # `exit`, which no prompt follows either, is stored from its start
    texts = [c.text for c in _stored(user_home, "python")]
    assert texts == ["echo shown > visible", "exit 123"], texts


def _clones_during(sh: Shell, pid: int, line: str) -> list[str]:
    """The clone/fork calls of process `pid` itself (not its children)
    while `line` runs, up to its next prompt."""
    import time

    out = sh.home / "clones.strace"
    tracer = subprocess.Popen(
        ["strace", "-qq", "-o", str(out), "-e", "trace=clone,clone3,fork,vfork", "-p", str(pid)],
        stderr=subprocess.PIPE,
    )
    try:
        # strace has attached once the shell's status shows a tracer
        wait_for(lambda: int(re.search(r"TracerPid:\s*(\d+)", Path(
            f"/proc/{pid}/status").read_text()).group(1)) != 0,  # type: ignore[union-attr]
            "strace to attach")
        sh.run(line)
        time.sleep(0.2)  # the prepared set-up for the next line, after the prompt
    finally:
        tracer.terminate()
        tracer.wait(timeout=30)
    return [x for x in out.read_text().splitlines() if "clone" in x or "fork" in x]


def test_bash_starts_a_line_without_a_fork(install, user_home):
    """bash >= 5.1: PS0 starts the command line and sends its text from the
    shell's own process (getrandom() for $SRANDOM, bash's history read
    in-process): a builtin-only line makes the shell fork nothing; it only
    spawns the helper for the next line (clone with CLONE_VM, as
    posix_spawn).  Its start still reaches the listener: see
    test_line_ending_in_exec_of_a_shell_is_stored."""
    sh = Shell("bash", install, user_home, extra_env=daemon_env(install))
    try:
        pid = int(re.search(r"pid=(\d+)", sh.run("echo pid=$$")).group(1))  # type: ignore[union-attr]
        assert "mode=[]" in sh.run('echo "mode=[$_SHOURNAL_PS0_FORK]"')
        clones = _clones_during(sh, pid, "true")
        assert clones, "strace saw no clone at all (the helper is spawned per line)"
        forks = [c for c in clones if "CLONE_VM" not in c]
        assert not forks, clones
        sh.exit()
        texts = [c.text for c in _stored(user_home, "daemon")]
        assert "true" in texts, texts
    finally:
        _kill_daemon(user_home)


@pytest.mark.parametrize("rc", ["unset SRANDOM", "HISTIGNORE='ls*'"])
def test_bash_line_start_through_a_forked_ps0(rc, install, user_home):
    """Where PS0 still forks its command substitution (no SRANDOM, as in
    bash 5.0; the emulated HISTIGNORE decides in bash code what is sent),
    the line's start is sent from there: a line ending in `exec bash` is
    stored, incomplete; a line HISTIGNORE matches is not."""
    sh = Shell("bash", install, user_home, rc_extra=rc)
    assert "mode=[1]" in sh.run('echo "mode=[$_SHOURNAL_PS0_FORK]"')
    sh.run("ls -d . > /dev/null; exec bash")
    line = "echo one > before_exec; exec bash"
    sh.run(line)
    sh.run("echo two > after_exec")
    sh.exit()
    found = _stored(user_home, "python")
    texts = [c.text for c in found]
    assert any(t.startswith("ls ") for t in texts) == ("HISTIGNORE" not in rc), texts
    _assert_incomplete(_only(found, line), user_home, "before_exec")
