"""A broken recorder never breaks a shell, and nothing is lost silently."""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
import signal
from pathlib import Path

import pytest
from fixtures_shell import Shell, recorded, wait_for, wait_stored, warnings_in

from shournal.report.human import render_human
from shournal.report.json import write_json

pytestmark = [pytest.mark.shell, pytest.mark.root]


def json_of(cmd) -> dict:
    out = io.StringIO()
    write_json([cmd], out)
    (obj,) = json.loads(out.getvalue())
    return obj

SHELLS = ["bash", "zsh"]


@pytest.mark.parametrize("broken", ["not setuid", "missing"])
@pytest.mark.parametrize("kind", SHELLS)
def test_broken_helper_runs_commands_with_one_warning(kind, broken, install, user_home):
    helper = install.root / f"helper-{broken.replace(' ', '-')}-{kind}"
    if broken == "not setuid":
        shutil.copy2(install.helper, helper)
        helper.chmod(0o755)  # copy2 drops nothing, chmod drops the setuid bit
        expected = "not setuid root"
    else:
        expected = f"cannot run {helper}: No such file or directory"
    sh = Shell(kind, install, user_home, extra_env={"SHOURNAL_SUID_PATH": str(helper)})
    first = sh.run("echo one > out1; cat out1")
    second = sh.run("echo two > out2; cat out2")
    sh.exit()
    assert "one" in first and "two" in second
    assert len(warnings_in(first)) == 1, first
    assert expected in warnings_in(first)[0]
    assert warnings_in(second) == [], second
    assert (user_home / "work" / "out2").read_text() == "two\n"


@pytest.mark.parametrize("kind", SHELLS)
def test_store_failure_is_reported_at_the_next_prompt(kind, install, user_home):
    bad_url = f"sqlite:///{user_home}/no/such/dir/journal.sqlite"
    os.makedirs(user_home / "no", exist_ok=True)
    (user_home / "no").chmod(0o555)  # the listener (the user) cannot create dir/
    sh = Shell(kind, install, user_home, extra_env={"SHOURNAL_DB_URL": bad_url})
    out1 = sh.run("echo stored > out1")
    wait_stored(user_home)
    out2 = sh.run("true")
    out3 = sh.run("true")
    sh.exit()
    assert warnings_in(out1) == []
    (line,) = warnings_in(out2)
    # the journal cannot be made: the command waits in the spool, named
    assert "kept in the spool" in line and "echo stored > out1" in line, line
    assert warnings_in(out3) == []
    assert (user_home / "work" / "out1").read_text() == "stored\n"


@pytest.mark.parametrize("kind", SHELLS)
def test_listener_crash_keeps_the_shell_working(kind, install, user_home):
    """The listener starts when its command line has ended (shournal-suid
    --lazy-listener) and dies at once: the shell notices the dead recorder
    before its next command line and says so once."""
    crash = install.root / f"crashing-listener-{kind}"
    crash.write_text("#!/bin/sh\nexit 3\n")
    crash.chmod(0o755)
    rundir = user_home / "run" / "shournal"
    sh = Shell(kind, install, user_home, extra_env={"SHOURNAL_LISTENER": str(crash)})
    out1 = sh.run("/bin/echo alive > out1; /bin/cat out1")
    # its listener is started now, and dies
    wait_for(lambda: any(not Path(f"/proc/{p.stem}").exists() for p in rundir.glob("*.end")),
             "the crashed listener")
    out2 = sh.run("/bin/echo again")
    out3 = sh.run("/bin/echo more")
    sh.exit()
    assert "alive" in out1 and "again" in out2 and "more" in out3
    assert warnings_in(out1) == [], out1
    (line,) = warnings_in(out2)
    # its start is on disk: no working listener stores it here, but it is not lost
    assert "died" in line and "start is kept on disk" in line, out2
    # every affected command line gets its one line, never more
    assert len(warnings_in(out3)) <= 1


def test_listener_crash_during_the_command_is_one_warning(install, user_home):
    """A listener that died while its command line ran (here: killed while
    started early by a full queue, simulated by killing the waiting helper):
    the line is stored from its start on disk by the next listener, with one
    warning naming it, not a second one."""
    rundir = user_home / "run" / "shournal"
    sh = Shell("bash", install, user_home)
    text = "kill -KILL $(basename $(ls $XDG_RUNTIME_DIR/shournal/*.run) .run); /bin/echo alive"
    out1 = sh.run(text)
    out2 = sh.run("/bin/echo again")
    wait_stored(user_home)  # its listener stored the line of the killed one
    out3 = sh.run("true")
    out4 = sh.run("true")
    sh.exit()
    assert "alive" in out1 and "again" in out2
    lines = warnings_in(out1 + out2 + out3 + out4)
    assert len(lines) == 1, lines
    (line,) = lines
    assert "killed" in line and "stored from its start" in line and "kill -KILL" in line
    assert not list(rundir.glob("*.end"))
    (cmd,) = [c for c in recorded(user_home) if c.text == text]
    assert cmd.incomplete and cmd.lost_reasons == {"relay": 1}


@pytest.mark.parametrize("kind", SHELLS)
def test_missing_listener_is_one_setup_warning(kind, install, user_home):
    sh = Shell(
        kind, install, user_home, extra_env={"SHOURNAL_LISTENER": str(install.root / "nope")}
    )
    out = sh.run("echo fine")
    sh.exit()
    assert "fine" in out
    (line,) = warnings_in(out)
    assert "not recording" in line and "listener" in line


@pytest.mark.parametrize("kind", SHELLS)
def test_kernel_queue_overflow_is_counted_and_shown(kind, install, user_home):
    sh = Shell(kind, install, user_home)
    rundir = user_home / "run" / "shournal"
    # the files are made once the test has stopped the holder ("go": `[ -e
    # go ]` opens nothing)
    line = ("while [ ! -e go ]; do sleep 0.01; done; "
            "mkdir ov && cd ov && seq 1 40000 | xargs touch; cd ..")
    sh.proc.sendline(line)
    wait_for(lambda: any(rundir.glob("*.run")), "the command line's marker")
    pid = int(next(rundir.glob("*.run")).stem)
    # Stop the holder (the listener's child), which reads the fanotify
    # group: the kernel's queue (16384 events) overflows.  (Stopping the
    # listener would not do: the holder queues what it cannot send.)
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    (holder,) = map(int, children)
    pid = holder
    os.kill(pid, signal.SIGSTOP)
    try:
        (user_home / "work" / "go").touch()
        sh.proc.expect("__SHOURNAL_PROMPT__", timeout=120)
    finally:
        os.kill(pid, signal.SIGCONT)
    sh.exit()
    left = {p.name: p.read_text() for p in rundir.glob("warnings*")}
    assert not left, left
    (cmd,) = recorded(user_home, command_text=f"eq:{line}")
    assert cmd.lost_events > 0
    # the reason is the kernel's queue, nothing else
    assert cmd.lost_reasons.get("overflow", 0) > 0, cmd.lost_reasons
    assert "relay" not in cmd.lost_reasons, cmd.lost_reasons
    # stored events stay consistent: every one of them is a file in ov/
    assert all(b"/ov/" in e.path for e in cmd.writes)


@pytest.mark.parametrize("kind", SHELLS)
def test_killed_holder_is_one_warning_and_counted_as_lost(kind, install, user_home):
    """The holder relays the events and runs as the user, who may kill it:
    the command still runs and is stored, marked as missing events."""
    sh = Shell(kind, install, user_home)
    text = "pkill -KILL -G shournal -u $(id -u); /bin/echo after > out1"
    out1 = sh.run(text)
    wait_stored(user_home)
    out2 = sh.run("true")
    sh.exit()
    assert (user_home / "work" / "out1").read_text() == "after\n"
    assert len(warnings_in(out1 + out2)) == 1, (out1, out2)
    assert "event relay ended early" in warnings_in(out1 + out2)[0]
    (cmd,) = recorded(user_home, command_text=f"eq:{text}")
    assert cmd.lost_events >= 1
    # stored and shown as what it was: the relay ended, not an overflow
    assert cmd.lost_reasons.get("relay", 0) >= 1, cmd.lost_reasons
    assert "overflow" not in cmd.lost_reasons, cmd.lost_reasons
    shown = render_human([cmd], local_hostname=cmd.hostname)
    assert "event relay ended early" in shown, shown
    assert "queue overflow" not in shown, shown
    assert json_of(cmd)["lostEventReasons"]["relay"] >= 1


@pytest.mark.parametrize("kind", SHELLS)
def test_a_warning_reaches_the_shell_whose_command_it_concerns(kind, install, user_home):
    """Two shells of one user; only A's journal cannot be made.  The warning
    about A's command is shown in A (naming that command, control
    characters escaped), never in B, even when B prompts first."""
    bad_url = f"sqlite:///{user_home}/no/such/dir/journal.sqlite"
    os.makedirs(user_home / "no", exist_ok=True)
    (user_home / "no").chmod(0o555)
    a = Shell(kind, install, user_home, extra_env={"SHOURNAL_DB_URL": bad_url})
    b = Shell(kind, install, user_home)
    text = "echo $'a\\tb' > outA; : " + "x" * 100
    out_a1 = a.run(text)
    wait_stored(user_home)
    out_b1 = b.run("echo b1")
    out_b2 = b.run("echo b2")
    out_a2 = a.run("true")
    a.exit()
    b.exit()
    assert warnings_in(out_a1) == []
    assert warnings_in(out_b1 + out_b2) == [], (out_b1, out_b2)
    (line,) = warnings_in(out_a2)
    assert "kept in the spool" in line, line
    # the command it concerns, shortened
    assert "echo $'a\\tb' > outA; : xxx" in line and "x" * 100 not in line, line


@pytest.mark.parametrize("kind", SHELLS)
def test_a_warning_being_written_waits_for_the_next_prompt(kind, install, user_home):
    """A writer holds the warnings file's lock while it appends: a prompt
    then leaves the file alone (else the line would go to a file already
    read and removed) and shows it at the next prompt, without waiting."""
    sh = Shell(kind, install, user_home)
    sh.run("true")
    path = user_home / "run" / "shournal" / "warnings"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.fchown(fd, install.user.pw_uid, install.user.pw_gid)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"a line being written\n")
        out_locked = sh.run("echo locked")  # (a prompt waiting for the lock: a timeout)
        assert path.exists()
    finally:
        os.close(fd)  # releases the lock
    out_free = sh.run("echo free")
    sh.exit()
    assert warnings_in(out_locked) == [], out_locked
    assert warnings_in(out_free) == ["shournal: a line being written"], out_free
    assert not path.exists()

