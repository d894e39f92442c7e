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
from fixtures_shell import (
    PROMPT,
    Shell,
    recorded,
    spool_of,
    wait_for,
    wait_stored,
    warnings_in,
)
from test_daemon import (
    JournalLock,
    daemon_env,
    daemon_pid,
    kill_daemon,
    listener_env,
    spool_backlog,
    stored_texts,
    wait_drained,
)

from shournal.capture import spool as sp
from shournal.data import RETURN_VALUE_UNKNOWN

pytestmark = [pytest.mark.shell, pytest.mark.root]

LISTENERS = ["python", "daemon"]


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


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_line_ending_in_exec_of_a_shell_is_stored(kind, listener, install, user_home):
    """`exec bash` (`exec zsh`): the new shell starts recording its own
    lines; the line that exec'd it is stored, incomplete."""
    sh = Shell(kind, install, user_home, extra_env=listener_env(install, listener))
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
        kill_daemon(user_home)


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_line_ending_in_exec_of_a_program_is_stored(kind, listener, install, user_home):
    """`exec python3 ...`: the shell is gone when the program ends."""
    sh = Shell(kind, install, user_home, extra_env=listener_env(install, listener))
    try:
        line = "echo one > before_exec; exec python3 -c 'import sys; sys.exit(7)'"
        sh.proc.sendline(line)
        sh.wait_exit()
        assert sh.proc.exitstatus == 7
        _assert_incomplete(_only(_stored(user_home, listener), line), user_home, "before_exec")
    finally:
        kill_daemon(user_home)


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_terminal_closed_while_a_command_runs(kind, listener, install, user_home):
    """SIGHUP to the shell (the terminal closed, an ssh connection dropped)
    while the line's command runs: the shell hangs up its jobs and exits
    without a prompt."""
    sh = Shell(kind, install, user_home, extra_env=listener_env(install, listener))
    try:
        pid = int(re.search(r"pid=(\d+)", sh.run("echo pid=$$")).group(1))  # type: ignore[union-attr]
        line = "echo one > before_hup; sleep 300.25"
        sh.proc.sendline(line)
        sh.wait_program("sleep 300.25")
        os.kill(pid, signal.SIGHUP)
        sh.wait_exit()
        cmd = _only(_stored(user_home, listener), line)
        _assert_incomplete(cmd, user_home, "before_hup")
    finally:
        kill_daemon(user_home)


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


# -- the start on disk: a recorder killed, or a crash, while the line runs ----


def _starts(home: Path) -> Path:
    return spool_of(home) / "starts"


def _start_files(home: Path) -> list[str]:
    try:
        return sorted(p.name for p in _starts(home).iterdir())
    except FileNotFoundError:
        return []


def _recorder_of_running_line(install, home: Path) -> tuple[int, int]:
    """(helper -- later the forwarder or listener --, holder) of the one
    command line running: the helper named by its `.run` marker, the holder
    its child running the helper."""
    rundir = home / "run" / "shournal"
    (marker,) = list(rundir.glob("*.run"))
    helper = int(marker.stem)
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == helper and os.readlink(d / "exe") == str(install.helper):
                return helper, int(d.name)
        except (OSError, IndexError):
            continue
    raise AssertionError(f"no holder of helper {helper}")


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _starttime(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _session_warnings(home: Path, session: bytes) -> list[str]:
    path = home / "run" / "shournal" / f"warnings.{session.hex()}"
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def _assert_recovered(cmd, home: Path) -> None:
    assert cmd.return_value == RETURN_VALUE_UNKNOWN
    assert cmd.incomplete
    assert cmd.working_dir == str(home / "work")
    assert cmd.session_uuid is not None
    assert cmd.lost_reasons.get("relay", 0) >= 1, cmd.lost_reasons


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_holder_killed_then_terminal_closed_stores_the_line_from_its_start(
    kind, listener, install, user_home
):
    """The holder (which keeps the start it got from the shell) is killed
    while the line runs, then the terminal is closed: no prompt reports the
    line and its start went with the holder -- it is stored from the start
    the shell left on disk, incomplete, the loss counted with its reason,
    one warning for that shell naming it."""
    sh = Shell(kind, install, user_home, extra_env=listener_env(install, listener))
    try:
        pid = int(re.search(r"pid=(\d+)", sh.run("echo pid=$$")).group(1))  # type: ignore[union-attr]
        line = "echo one > before_kill; sleep 300.25"
        sh.proc.sendline(line)
        sh.wait_program("sleep 300.25")
        _helper, holder = _recorder_of_running_line(install, user_home)
        os.kill(holder, signal.SIGKILL)
        wait_for(lambda: _gone(holder), "the holder to die")
        os.kill(pid, signal.SIGHUP)
        sh.wait_exit()
        cmd = _only(_stored(user_home, listener), line)
        _assert_recovered(cmd, user_home)
        wait_for(lambda: _start_files(user_home) == [], "the start to be removed")
        warned = _session_warnings(user_home, cmd.session_uuid)
        assert len(warned) == 1 and "sleep 300.25" in warned[0], warned
        assert "event relay ended early" in warned[0], warned
    finally:
        kill_daemon(user_home)


def test_a_recorder_killed_while_the_daemon_runs_is_in_the_next_query(install, user_home):
    """Holder and helper of a running line killed, the store daemon up and
    no other line coming: a query in another terminal finds the line (its
    drain makes the daemon look for orphaned starts at once), incomplete,
    stored once."""
    sh = Shell("bash", install, user_home, extra_env=listener_env(install, "daemon"))
    try:
        sh.run("echo first > first")
        wait_drained(user_home)
        line = "echo one > before_kill; sleep 300.5"
        sh.proc.sendline(line)
        sh.wait_program("sleep 300.5")
        helper, holder = _recorder_of_running_line(install, user_home)
        # the helper first: a helper that sees its holder die hands the line
        # to the daemon at once, which then reads it (and stores it at its
        # end) -- not an orphaned start
        for p in (helper, holder):
            os.kill(p, signal.SIGKILL)
        for p in (helper, holder):
            wait_for(lambda p=p: _gone(p), f"{p} to die")
        other = Shell("bash", install, user_home, extra_env=listener_env(install, "daemon"))
        out = other.run("shournal query --command-text '%sleep 300.5'")
        assert line in out, out
        other.exit()
        os.kill(sh.wait_program("sleep 300.5"), signal.SIGINT)
        sh.proc.expect(PROMPT)
        sh.exit()
        _assert_recovered(_only(_stored(user_home, "daemon"), line), user_home)
    finally:
        kill_daemon(user_home)


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_recorder_and_daemon_killed_while_a_line_runs_store_it_once(
    kind, listener, install, user_home
):
    """A simulated crash of everything that records a line (holder, helper,
    store daemon: SIGKILL) while it runs: the line is stored once from its
    start by the next daemon (or listener), incomplete, and the shell gets
    one warning naming it."""
    sh = Shell(kind, install, user_home, extra_env=listener_env(install, listener))
    try:
        sh.run("echo first > first")
        wait_stored(user_home)  # (its start is gone)
        line = "echo one > before_crash; sleep 300.25"
        sh.proc.sendline(line)
        sh.wait_program("sleep 300.25")
        helper, holder = _recorder_of_running_line(install, user_home)
        # the start names them, with their start times (pid reuse)
        (name,) = _start_files(user_home)
        start = sp.read_start(_starts(user_home) / name)
        assert start is not None and start.text.decode() == line
        assert (start.holder_pid, start.listener_pid) == (holder, helper)
        assert start.holder_starttime == _starttime(holder)
        assert start.listener_starttime == _starttime(helper)
        daemon = daemon_pid(user_home) if listener == "daemon" else None
        for p in (helper, holder, daemon):  # (the helper first: see above)
            if p is not None:
                os.kill(p, signal.SIGKILL)
        for p in (helper, holder, daemon):
            if p is not None:
                wait_for(lambda p=p: _gone(p), f"{p} to die")
        os.kill(sh.wait_program("sleep 300.25"), signal.SIGINT)
        sh.proc.expect(PROMPT)
        outs = [sh.proc.before]
        outs.append(sh.run("echo after > after"))  # a new daemon (or a listener) recovers
        wait_for(lambda: line in [c.text for c in _stored(user_home, listener)],
                 "the line to be stored")
        outs.append(sh.run("true"))
        sh.exit()
        found = _stored(user_home, listener)
        recovered = _only(found, line)
        _assert_recovered(recovered, user_home)
        # the UUID the shell drew when the line started, as its end would have
        assert recovered.uuid is not None and recovered.uuid == start.uuid
        _only(found, "echo after > after")
        assert _start_files(user_home) == []
        warned = warnings_in("".join(outs))
        assert len(warned) == 1 and "sleep 300.25" in warned[0], outs
    finally:
        kill_daemon(user_home)


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_start_is_on_disk_before_the_line_runs_and_gone_once_stored(
    kind, listener, install, user_home
):
    """The command itself sees its start on disk (text, working directory,
    start time, session, its recorder's pids); once the line is stored the
    start is gone and the line is stored once, complete."""
    sh = Shell(kind, install, user_home, extra_env=listener_env(install, listener))
    try:
        copy = user_home / "work" / "copy"
        line = f"cp -r {_starts(user_home)} {copy}"
        sh.run(line)
        sh.run("true")
        sh.exit()
        found = _stored(user_home, listener)
        cmd = _only(found, line)
        assert cmd.return_value == 0 and not cmd.incomplete
        assert _start_files(user_home) == []
        (name,) = [p.name for p in copy.iterdir()]
        start = sp.read_start(copy / name)
        assert start is not None
        assert name == sp.start_name(start.listener_pid, start.session, start.start_ns)
        assert start.text.decode() == line
        assert start.cwd == str(user_home / "work")
        assert start.session == cmd.session_uuid
        assert start.holder_pid > 0 and start.holder_starttime > 0
        assert start.listener_starttime > 0
        assert abs(start.start_ns - int(cmd.start_time.timestamp() * 1e9)) < 1e6
    finally:
        kill_daemon(user_home)


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_a_line_has_one_uuid_from_its_start_to_its_end_and_is_stored_once(
    kind, listener, install, user_home
):
    """A recorded line carries a random UUID (version 4), drawn when it
    started: its start on disk has the one its finished record has.  That
    start brought back after the line was stored (as a recorder killed
    between storing and removing it would leave it) is recovered as the
    same command: nothing is stored twice."""
    sh = Shell(kind, install, user_home, extra_env=listener_env(install, listener))
    try:
        copy = user_home / "work" / "copy"
        line = f"cp -r {_starts(user_home)} {copy}"
        sh.run(line)
        sh.run("echo second")
        cmd = _only(_stored(user_home, listener), line)
        second = _only(_stored(user_home, listener), "echo second")
        assert cmd.uuid is not None and len(cmd.uuid) == 16 and cmd.uuid[6] >> 4 == 4
        assert second.uuid is not None and second.uuid != cmd.uuid
        (name,) = [p.name for p in copy.iterdir()]
        start = sp.read_start(copy / name)
        assert start is not None and start.uuid == cmd.uuid
        wait_for(lambda: _start_files(user_home) == [], "the starts to be removed")
        os.rename(copy / name, _starts(user_home) / name)  # its recorder is long gone
        sh.run("echo third")  # the next listener (or the daemon's drain) recovers it
        if listener == "daemon":
            sh.run("shournal query --history 1 >/dev/null")
        wait_for(lambda: _start_files(user_home) == [], "the start to be taken")
        sh.exit()
        found = _stored(user_home, listener)
        assert [c.uuid for c in found if c.text == line] == [cmd.uuid]
        assert None not in {c.uuid for c in found}
        assert len({c.uuid for c in found}) == len(found), [c.text for c in found]
    finally:
        kill_daemon(user_home)


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_daemon_killed_between_spool_and_journal_leaves_no_start(kind, install, user_home):
    """Lines spooled while the journal is locked, the daemon killed before
    it stored them: their starts went when they were spooled, so the next
    daemon stores each once, complete -- no incomplete copy from a start."""
    sh = Shell(kind, install, user_home, extra_env=daemon_env(install))
    try:
        sh.run("echo before > before")
        wait_drained(user_home)
        lock = JournalLock(install, user_home)
        lines = [f"echo {i} > killed{i}" for i in range(2)]
        lines.append(f"ls {_starts(user_home)} > seen")
        for line in lines:
            sh.run(line)
        wait_stored(user_home)
        assert spool_backlog(user_home) == len(lines)
        assert _start_files(user_home) == []
        pid = daemon_pid(user_home)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: daemon_pid(user_home) is None, "the daemon to die")
        lock.release()
        sh.run("echo after > after")
        sh.exit()
        wait_drained(user_home)
        texts = stored_texts(user_home)
        assert all(texts[line] == 1 for line in [*lines, "echo after > after"]), texts
        # (`exit`, which no prompt follows, is stored from its start)
        assert [c.text for c in _stored(user_home, "daemon") if c.incomplete] == ["exit 123"]
        assert _start_files(user_home) == []
        # the line saw its own start
        assert len((user_home / "work" / "seen").read_text().split()) == 1
    finally:
        kill_daemon(user_home)


def _clones_during(sh: Shell, pid: int, lines: list[str]) -> list[str]:
    """The clone/fork calls of process `pid` itself (not its children)
    while `lines` run, up to the last one's next prompt."""
    out = _traced_during(sh, pid, lines, ["-e", "trace=clone,clone3,fork,vfork"])
    return [x for x in out if "clone" in x or "fork" in x]


# The system calls a shell waits for terminal input in (read, poll,
# select, pselect6, ppoll), by machine.
_INPUT_WAITS = {"x86_64": {0, 7, 23, 270, 271}, "aarch64": {63, 72, 73}}


def _waits_for_input(pid: int) -> bool:
    """The shell `pid` is blocked waiting for terminal input: past its
    prompt, and past the set-up prepared for the next line, which the
    preload library makes just before that wait (see prepare_if_due)."""
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    call = Path(f"/proc/{pid}/syscall").read_text().split()[0]
    return state == "S" and call.isdigit() and int(call) in _INPUT_WAITS[os.uname().machine]


def _traced_during(sh: Shell, pid: int, lines: list[str], options: list[str]) -> list[str]:
    """strace's lines for process `pid` itself (not its children) while
    `lines` run, up to the last one's next prompt and the set-up prepared
    after it."""
    out = sh.home / "shell.strace"
    tracer = subprocess.Popen(
        ["strace", "-qq", "-o", str(out), *options, "-p", str(pid)],
        stderr=subprocess.PIPE,
    )
    try:
        # strace has attached once the shell's status shows a tracer
        wait_for(lambda: int(re.search(r"TracerPid:\s*(\d+)", Path(
            f"/proc/{pid}/status").read_text()).group(1)) != 0,  # type: ignore[union-attr]
            "strace to attach")
        for line in lines:
            sh.run(line)
        wait_for(lambda: _waits_for_input(pid), "the shell to wait for input")
    finally:
        tracer.terminate()
        tracer.wait(timeout=30)
    return out.read_text().splitlines()


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_the_shell_says_whether_it_forked_while_a_line_ran(kind, install, user_home):
    """A line's COMMAND message carries SHOURNAL_COMMAND_SHELL_ONLY when the
    shell forked nothing while it ran: no process but the shell held the
    control socket, so the listener need not wait for closes racing the
    socket's release.  A line that ran a program, or a command
    substitution, does not; each is stored."""
    from shournal.capture import protocol

    sh = Shell(kind, install, user_home, extra_env=daemon_env(install))
    lines = {"true": True, "ls -d . > /dev/null": False, "x=$(echo a)": False,
             "echo builtin > f": True}
    try:
        pid = int(re.search(r"pid=(\d+)", sh.run("echo pid=$$")).group(1))  # type: ignore[union-attr]
        for line, shell_only in lines.items():
            traced = _traced_during(sh, pid, [line], ["-xx", "-s", "4", "-e", "trace=sendto"])
            sent = [x for x in traced if f", {protocol.COMMAND.size + len(line)}, " in x]
            assert len(sent) == 1, sent
            kind_of = int.from_bytes(bytes.fromhex(sent[0].split('"')[1].replace("\\x", "")),
                                     "little")
            assert kind_of == protocol.MSG_COMMAND | (protocol.COMMAND_SHELL_ONLY * shell_only), \
                (line, sent)
        sh.exit()
        texts = [c.text for c in _stored(user_home, "daemon")]
        assert all(line in texts for line in lines), texts
    finally:
        kill_daemon(user_home)


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
        # two lines: with the store daemon one exec of the helper prepares
        # the next two lines' namespaces, at every other prompt
        clones = _clones_during(sh, pid, ["true", "true"])
        assert clones, "strace saw no clone at all (a helper is spawned at every other prompt)"
        forks = [c for c in clones if "CLONE_VM" not in c]
        assert not forks, clones
        sh.exit()
        texts = [c.text for c in _stored(user_home, "daemon")]
        assert "true" in texts, texts
    finally:
        kill_daemon(user_home)


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
