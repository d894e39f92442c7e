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
