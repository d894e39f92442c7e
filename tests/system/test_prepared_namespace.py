"""The namespaces a shell prepares at its prompt for the next command lines
(real bash and zsh on a pty, the setuid helper, real mounts): one exec of
the helper prepares two, taken by the next two command lines, dropped when
they no longer fit -- another working directory, a mount made meanwhile --
or when they are gone, and never keeping a command line open or a helper
behind."""

from __future__ import annotations

import grp
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
from fixtures_shell import (
    SCHED_BATCH,
    SCHED_OTHER,
    Install,
    Shell,
    proc_sched,
    wait_for,
    wait_stored,
    warnings_in,
)
from fixtures_shell import recorded as recorded_in_journal
from test_daemon import daemon_pid, kill_daemon, listener_env, wait_drained

pytestmark = [pytest.mark.shell, pytest.mark.root]

SHELLS = ["bash", "zsh"]


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def _gid(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return -1
    return int(next(line for line in text.splitlines() if line.startswith("Gid:")).split()[1])


def helper_processes(install: Install, home: Path) -> tuple[list[int], list[int]]:
    """(helpers, holders) for the shells using `home` (their environment
    has its runtime dir): processes running the helper, the holders being
    those of group shournal (the helpers run as the user's group)."""
    exe: dict[int, str] = {}
    runtime = f"XDG_RUNTIME_DIR={home / 'run'}".encode()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if runtime not in (d / "environ").read_bytes().split(b"\0"):
                continue
            exe[int(d.name)] = os.readlink(d / "exe")
        except OSError:
            continue
    group = grp.getgrnam("shournal").gr_gid
    ours = [p for p, e in exe.items() if e == str(install.helper)]
    holders = [p for p in ours if _gid(p) == group]
    return [p for p in ours if p not in holders], holders


def prepared_helpers(install: Install, home: Path) -> list[int]:
    """The helpers no command line has taken, the next one to be taken
    first: a taken one has a marker (<pid>.run) until its listener has
    stored.  The shell prepares them once the prompt is drawn -- two from
    one exec of the helper, the second (the spare) its child, or the spare
    left from the last prompt alone -- and a taken helper that handed its
    line to the daemon lives on for a moment without markers: the same
    ones, three times in a row, 50 ms apart."""
    found: list[int] = []
    seen: list[tuple[int, ...]] = []
    rundir = home / "run" / "shournal"

    def ready() -> bool:
        helpers, holders = helper_processes(install, home)
        found[:] = sorted((p for p in helpers if not any(rundir.glob(f"{p}.*"))),
                          key=lambda p: _parent(p) in helpers)  # a spare after its helper
        # set up: each answered the shell and waits in "/" (after its holder
        # reported ready)
        ok = 1 <= len(found) <= 2 and all(
            any(_parent(h) == p for h in holders) and _cwd(p) == "/" for p in found)
        seen[:] = [*seen, tuple(found)][-3:] if ok else []
        if len(seen) == 3 and len(set(seen)) == 1:
            return True
        time.sleep(0.05)
        return False

    wait_for(ready, "one or two prepared namespaces at the prompt")
    return list(found)


def the_prepared_helper(install: Install, home: Path) -> int:
    """The prepared helper the next command line takes."""
    return prepared_helpers(install, home)[0]


@pytest.fixture(params=["daemon", "listener"])
def listener(request, user_home: Path) -> Iterator[str]:
    """What stores the command lines: the store daemon (as installed; its
    shells prepare spares) or a Python listener per command line."""
    yield request.param
    kill_daemon(user_home)


def recorded(home: Path, **criteria) -> list:
    """The journal's matching command lines, once a daemon has stored what
    it spooled."""
    if daemon_pid(home) is not None:
        wait_drained(home)
    return recorded_in_journal(home, **criteria)


def open_shell(kind: str, install: Install, home: Path, listener: str, **kw) -> Shell:
    return Shell(kind, install, home, extra_env=listener_env(install, listener), **kw)


def steady(sh: Shell, home: Path) -> None:
    """Past a fresh home's first command line, whose listener writes
    setup-args (a namespace prepared before that is dropped, as it would be
    after a config change)."""
    sh.run("true")
    wait_stored(home)
    sh.run("true")


@pytest.mark.parametrize("listener", ["daemon"], indirect=True)
@pytest.mark.parametrize("kind", SHELLS)
def test_one_helper_prepares_the_next_two_command_lines(kind, install, user_home, listener):
    """One exec of the setuid helper prepares two namespaces (--spare): the
    next command line takes the first, the line after it the second, and
    the prompt between them starts no helper."""
    work = user_home / "work"
    sh = open_shell(kind, install, user_home, listener)
    steady(sh, user_home)
    if len(prepared_helpers(install, user_home)) == 1:  # the spare of the last pair
        sh.run("true")
    first, spare = prepared_helpers(install, user_home)
    assert _parent(spare) == first  # forked by the helper, not exec'd by the shell
    ns = [os.readlink(f"/proc/{p}/ns/mnt") for p in (first, spare)]
    assert ns[0] != ns[1]
    out = sh.run(f"readlink /proc/self/ns/mnt > {work}/ns1")
    assert warnings_in(out) == [], out
    assert prepared_helpers(install, user_home) == [spare]
    out = sh.run(f"readlink /proc/self/ns/mnt > {work}/ns2")
    assert warnings_in(out) == [], out
    assert [(work / f).read_text().strip() for f in ("ns1", "ns2")] == ns
    assert spare not in prepared_helpers(install, user_home)  # the next pair
    sh.exit()
    for i in (1, 2):
        assert [c.text for c in recorded(user_home, wfile=work / f"ns{i}")] == [
            f"readlink /proc/self/ns/mnt > {work}/ns{i}"]


@pytest.mark.parametrize("listener", ["listener"], indirect=True)
@pytest.mark.parametrize("kind", SHELLS)
def test_a_python_listener_gets_no_spare(kind, install, user_home, listener):
    """A Python listener takes the shell's environment of the time of its
    set-up: a spare, taken a command line later, would give it a stale one
    (an `export` in between)."""
    sh = open_shell(kind, install, user_home, listener)
    steady(sh, user_home)
    assert len(prepared_helpers(install, user_home)) == 1
    sh.run("true")
    assert len(prepared_helpers(install, user_home)) == 1
    sh.exit()


@pytest.mark.parametrize("kind", SHELLS)
def test_the_next_command_line_runs_in_the_prepared_namespace(kind, install, user_home, listener):
    work = user_home / "work"
    sh = open_shell(kind, install, user_home, listener)
    steady(sh, user_home)
    helper = the_prepared_helper(install, user_home)
    ns = os.readlink(f"/proc/{helper}/ns/mnt")
    assert ns != os.readlink("/proc/self/ns/mnt")
    out = sh.run(f"readlink /proc/self/ns/mnt > {work}/ns")
    assert warnings_in(out) == [], out
    assert (work / "ns").read_text().strip() == ns
    assert the_prepared_helper(install, user_home) != helper  # the next one, for the next line
    sh.exit()
    assert [c.text for c in recorded(user_home, wfile=work / "ns")] == [
        f"readlink /proc/self/ns/mnt > {work}/ns"]


CD_AT_PROMPT = {
    # runs after shournal's own prompt hook, which prepared the namespace
    "bash": "_cdto=\nPROMPT_COMMAND='if [[ -n $_cdto ]]; then cd \"$_cdto\"; _cdto=; fi'",
    "zsh": "_cdto=\n_cd_at_prompt() { if [[ -n $_cdto ]]; then cd \"$_cdto\"; _cdto=; fi }\n"
           "precmd_functions+=(_cd_at_prompt)",
}


@pytest.mark.parametrize("kind", SHELLS)
def test_a_directory_changed_at_the_prompt_is_the_recorded_one(kind, install, user_home, listener):
    work = user_home / "work"
    there = work / "there"
    there.mkdir()
    os.chown(there, install.user.pw_uid, install.user.pw_gid)
    sh = open_shell(kind, install, user_home, listener, rc_extra=CD_AT_PROMPT[kind])
    steady(sh, user_home)
    sh.run(f"_cdto={there}")  # the hook changes directory after this line
    sh.run("echo x > rel")
    sh.exit()
    assert (there / "rel").read_text() == "x\n"
    (cmd,) = recorded(user_home, wfile=there / "rel")
    assert cmd.working_dir == str(there)


@pytest.mark.parametrize("kind", SHELLS)
def test_pasted_lines_each_run_in_their_own_directory(kind, install, user_home, listener):
    """With more lines waiting on the terminal (a paste), the next line's
    namespace is prepared while a line runs, in the directory it started
    in: a line that changes directory leaves it unfit for the next one,
    which is recorded in the new directory all the same."""
    from fixtures_shell import PROMPT

    work = user_home / "work"
    there = work / "there"
    there.mkdir()
    os.chown(there, install.user.pw_uid, install.user.pw_gid)
    sh = open_shell(kind, install, user_home, listener)
    steady(sh, user_home)
    pasted = [f"cd {there}", "echo x > rel", "cd ..", "echo y > rel"]
    sh.proc.send("".join(f"{line}\n" for line in pasted))
    for _ in pasted:
        sh.proc.expect_exact(PROMPT, timeout=60)
    sh.exit()
    assert (there / "rel").read_text() == "x\n" and (work / "rel").read_text() == "y\n"
    for path in (there / "rel", work / "rel"):
        (cmd,) = recorded(user_home, wfile=path)
        assert cmd.working_dir == str(path.parent), (path, cmd)


@pytest.mark.parametrize("kind", SHELLS)
def test_a_mount_made_at_the_prompt_is_observed(kind, install, user_home, listener):
    """The prepared namespace copied the mount table when it was made; a
    file system mounted while the prompt waits must be there, and marked."""
    work = user_home / "work"
    mnt = work / "mnt"
    mnt.mkdir()
    sh = open_shell(kind, install, user_home, listener)
    try:
        steady(sh, user_home)
        the_prepared_helper(install, user_home)  # made before the mount
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs", str(mnt)],
                       check=True)
        sh.run(f"echo x > {mnt}/f")
        sh.exit()
        assert (mnt / "f").read_text() == "x\n"  # in the tmpfs, not under it
        assert [c.text for c in recorded(user_home, wfile=mnt / "f")] == [f"echo x > {mnt}/f"]
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.parametrize("kind", SHELLS)
def test_a_prepared_namespace_killed_at_the_prompt_is_replaced(kind, install, user_home, listener):
    work = user_home / "work"
    sh = open_shell(kind, install, user_home, listener)
    steady(sh, user_home)
    for helper in prepared_helpers(install, user_home):
        os.kill(helper, signal.SIGKILL)  # its holder follows
    wait_for(lambda: helper_processes(install, user_home) == ([], []),
             "the killed helpers' holders")
    out = sh.run(f"echo x > {work}/f")
    assert warnings_in(out) == [], out  # nothing of the user's was lost
    sh.exit()
    assert [c.text for c in recorded(user_home, wfile=work / "f")] == [f"echo x > {work}/f"]


# A forked shell (no exec) that outlives the prompt, like an async prompt
# worker: it writes its pid to $_bg and waits until the test kills it (`:`
# keeps the shell from exec'ing sleep in its place).  shournal's hook runs
# first at a prompt (it sees $?), so the child is forked after the prompt's
# namespace was prepared: it would hold the shell's socket to it, and so
# the next command line open, if the preload library's fork() did not close
# it in the child.  Nothing of the pty is kept (nor the shell's exit held).
BACKGROUND_AT_PROMPT = {
    "bash": "_bg=\nPROMPT_COMMAND='if [[ -n $_bg ]]; then "
            "{ sh -c \"echo \\$PPID\" >$_bg; sleep infinity; :; } "
            "</dev/null >/dev/null 2>&1 & _bg=; fi'",
    "zsh": "_bg=\n_bg_at_prompt() { if [[ -n $_bg ]]; then "
           "{ sh -c 'echo $PPID' >$_bg; sleep infinity; : } </dev/null >/dev/null 2>&1 &! "
           "_bg=; fi }\nprecmd_functions+=(_bg_at_prompt)",
}


def holders_of(inode: int) -> list[int]:
    """The processes that have socket `inode` open."""
    target = f"socket:[{inode}]"
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with suppress(OSError):
            if any(os.readlink(fd) == target for fd in (d / "fd").iterdir()):
                found.append(int(d.name))
    return found


def recorder_state(home: Path, listener: int) -> str:
    """What a test says when a command line's record does not come: the
    line's markers and whether its listener still runs."""
    rundir = home / "run" / "shournal"
    markers = sorted(p.name for p in rundir.glob(f"{listener}.*"))
    warnings = {p.name: p.read_text() for p in rundir.glob("warnings*")}
    try:
        cmd = Path(f"/proc/{listener}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        cmd = "(gone)"
    return f"listener {listener}: {cmd}; markers {markers}; warnings {warnings}"


@pytest.mark.parametrize("kind", SHELLS)
def test_a_child_forked_at_the_prompt_does_not_hold_the_next_command_line(kind, install,
                                                                         user_home, listener):
    work = user_home / "work"
    sh = open_shell(kind, install, user_home, listener, rc_extra=BACKGROUND_AT_PROMPT[kind])
    child = 0
    try:
        steady(sh, user_home)
        sh.run(f"_bg={work}/bg.pid")
        wait_for(lambda: (work / "bg.pid").read_text().endswith("\n")
                 if (work / "bg.pid").exists() else False, "the child's pid")  # fmt: skip
        child = int((work / "bg.pid").read_text())
        assert os.getpgid(child) == child  # a job of its own: killed as one below
        helper = the_prepared_helper(install, user_home)  # there when the child forked
        ns = os.readlink(f"/proc/{helper}/ns/mnt")
        shell = _parent(child)
        at_prompt = {os.readlink(fd) for fd in Path(f"/proc/{shell}/fd").iterdir()}
        # The line's programs inherit its control socket (the shell's end):
        # `find` names it.
        sh.run(f"readlink /proc/self/ns/mnt > {work}/ns; echo x > {work}/f; "
               f"find /proc/self/fd -mindepth 1 -lname 'socket:*' -printf '%l\\n' > {work}/ctl")
        assert (work / "ns").read_text().strip() == ns  # the line took that namespace
        sockets = (work / "ctl").read_text().split()
        assert len(sockets) == 1, sockets
        assert sockets[0] in at_prompt  # the one prepared at the prompt (a
        # namespace's number alone may be reused by the next one)
        ctl = int(sockets[0].removeprefix("socket:[").removesuffix("]"))
        # At the prompt the line has ended: its programs are gone and the
        # shell closed its end, so nothing may hold the socket -- the child
        # forked at the prompt before the line would hold it for as long as
        # it runs, and with it the line open.  (Its listener sees EOF when
        # the last holder is gone; it holds the other end.)
        assert Path(f"/proc/{child}").exists()
        assert holders_of(ctl) == [], f"the child is {child}"
        # and so the line is stored while the child still runs
        try:
            wait_for(lambda: len(recorded(user_home, wfile=work / "f")) == 1,
                     "the command line's record", timeout=60)
        except AssertionError as e:
            raise AssertionError(f"{e}: {recorder_state(user_home, helper)}") from None
        assert Path(f"/proc/{child}").exists()
        sh.exit()
    finally:
        if child:
            with suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)


@pytest.mark.parametrize("kind", SHELLS)
def test_disable_and_end_of_input_leave_no_helper_behind(kind, install, user_home, listener):
    sh = open_shell(kind, install, user_home, listener)
    steady(sh, user_home)
    the_prepared_helper(install, user_home)
    sh.run("SHOURNAL_DISABLE")
    gone = lambda: helper_processes(install, user_home) == ([], [])  # noqa: E731
    wait_for(gone, "no namespace while disabled")
    # and none made at the prompt: the shell has read the next line, so its
    # wait for input there -- before which a namespace is prepared -- is over
    sh.run("true")
    assert helper_processes(install, user_home) == ([], [])
    sh.run("SHOURNAL_ENABLE")
    the_prepared_helper(install, user_home)
    sh.proc.sendeof()  # Ctrl-D at the prompt: no command line takes it
    sh.wait_exit()
    wait_for(gone, "the dropped namespace's helper")


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


@pytest.mark.parametrize("kind", SHELLS)
def test_the_prepared_helper_is_detached_from_the_shell(kind, install, user_home, listener):
    """Started by the shell as no child of its own (see
    test_shournal_processes_send_the_shell_no_sigchld): nothing of the
    shell's is inherited but the control socket (no terminal, no signal
    mask, a session of its own), and it waits SCHED_BATCH so it never
    preempts the shell at its prompt."""
    sh = open_shell(kind, install, user_home, listener)
    shell = int(re.search(r"PID=(\d+)", sh.run("echo PID=$$")).group(1))
    assert Path(f"/proc/{shell}/exe").resolve().name in ("bash", "zsh")
    steady(sh, user_home)
    helper = the_prepared_helper(install, user_home)
    assert _parent(helper) != shell
    fddir = Path(f"/proc/{helper}/fd")
    fds = {int(fd.name): os.readlink(fd) for fd in fddir.iterdir()}
    assert [fds[0], fds[1], fds[2]] == ["/dev/null"] * 3, fds
    assert fds[3].startswith("socket:"), fds
    assert not [t for t in fds.values() if t.startswith("/dev/pts") or t == "/dev/tty"], fds
    # a session of its own, whose leader (the helper's parent, gone) it is
    # not: it can never get a controlling terminal
    assert os.getsid(shell) != os.getsid(helper) != helper
    assert int(_status(helper)["SigBlk"], 16) == 0
    holder = next(h for h in helper_processes(install, user_home)[1] if _parent(h) == helper)
    assert proc_sched(helper)[0] == SCHED_BATCH
    # the holder reads fanotify as an ordinary task; the shell is untouched
    assert proc_sched(holder)[0] == proc_sched(shell)[0] == SCHED_OTHER
    sh.exit()
