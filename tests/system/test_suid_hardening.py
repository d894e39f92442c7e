"""More attacks on the setuid helper (see the rules at the top of
native/shournal_suid.c): members of group shournal whose process lacks the
group, namespaces of other user namespaces, `check` charged to root, a
small stack, the process limit.

Users created here, so that counting their processes and fanotify groups is
not disturbed by other tests (and does not disturb them):
  shournal-member  listed for group shournal in /etc/group while this module
                   runs (never in his processes' credentials);
  shournal-hard    an ordinary user whose allowances this module uses up."""

from __future__ import annotations

import os
import select
import shlex
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import test_suid_security as _security
from fixtures_shell import GROUP, Shell, _ensure_user, users_locked, wait_for, warnings_in
from test_suid_security import (
    NO_SUCH_PID,
    SLEEP,
    TIMEOUT,
    as_user,
    high_fd,
    parse_status,
    proc_status,
    run,
    shournal_gid,
    spawn,
    start_reporting,
    user_dir,
    wait_exit,
)

from shournal.capture import protocol

# the attack tools and process bookkeeping of test_suid_security
tools = _security.tools
recorders = _security.recorders
scratch = _security.scratch

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: setuid copies and test users"),
]

NATIVE_TESTS = Path(__file__).resolve().parents[1] / "native"
MEMBER_USER = "shournal-member"
HARD_USER = "shournal-hard"
SMALL_STACK = 128 * 1024  # ulimit -s 128
PRLIMIT = "/usr/bin/prlimit"


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def member(install) -> Iterator:
    """shournal-member, listed for group shournal in /etc/group."""
    user = _ensure_user(MEMBER_USER)
    with users_locked():
        subprocess.run(["gpasswd", "-a", MEMBER_USER, GROUP], check=True, capture_output=True)
    try:
        yield user
    finally:
        with users_locked():
            subprocess.run(["gpasswd", "-d", MEMBER_USER, GROUP], check=True,
                           capture_output=True)


@pytest.fixture(scope="module")
def hard(install):
    return _ensure_user(HARD_USER)


@pytest.fixture(scope="module")
def freeze_at(tools) -> Path:
    out = tools.root / "freeze_at"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(NATIVE_TESTS / "freeze_at.c")], check=True, capture_output=True)
    return out


@dataclass
class Adopted:
    """Processes that are not our children (left stopped by freeze_at, or
    started by sg, which forks): init reaps them; each is killed through
    its pidfd."""

    tool: Path
    pidfds: dict[int, int] = field(default_factory=dict)

    def freeze(self, user, syscall: str, *argv: str) -> tuple[int, int]:
        r = run([str(self.tool), str(user.pw_uid), str(user.pw_gid), syscall, *argv])
        assert r.rc == 0, f"{argv} never returned from {syscall}: {r}"
        pid, rval = map(int, r.out.split())
        self.watch(pid)
        wait_for(lambda: proc_status(pid)["State"][0] == "T", f"pid {pid} stopped")
        return pid, rval

    def watch(self, pid: int) -> int:
        self.pidfds[pid] = os.pidfd_open(pid)
        return self.pidfds[pid]

    def gone(self, pid: int, timeout: float = TIMEOUT) -> bool:
        return bool(select.select([self.pidfds[pid]], [], [], timeout)[0])

    def kill(self, pid: int) -> None:
        try:
            signal.pidfd_send_signal(self.pidfds[pid], signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        for pid in self.pidfds:
            self.kill(pid)
        for pid, fd in self.pidfds.items():
            assert self.gone(pid), f"pid {pid} survived SIGKILL"
            os.close(fd)


@pytest.fixture
def adopted(freeze_at) -> Iterator[Adopted]:
    f = Adopted(freeze_at)
    try:
        yield f
    finally:
        f.close()


def without_group(user) -> list[str]:
    """The user's own groups only: a session started before an admin listed
    him for group shournal."""
    return ["/usr/bin/setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
            f"--groups={user.pw_gid}"]


def setup_answer(argv: list[str]) -> tuple[bytes, int, str]:
    """Run `setup` (argv) with a SEQPACKET socket on fd 3: its first
    message, exit status and stderr."""
    parent, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fd = high_fd(child_end.fileno())
    child_end.close()
    with parent, tempfile.TemporaryFile() as log:
        try:
            pid = spawn(argv, fds={3: fd}, out=log.fileno(), err=log.fileno())
        finally:
            os.close(fd)
        parent.settimeout(TIMEOUT)
        msg = parent.recv(4096)
        rc = wait_exit(pid)
        log.seek(0)
        return msg, rc, log.read().decode(errors="replace")


def fail_text(msg: bytes) -> str:
    assert protocol.SETUP_FAIL.unpack_from(msg)[0] == protocol.MSG_SETUP_FAIL, msg
    return msg[8:].decode()


def namespace_holder(recorders, adopted: Adopted, prefix: list[str], out: Path, decoy: Path,
                     target: Path, *, sg: bool = False) -> int:
    """A process started with `prefix` (and through `sg shournal`) that made
    its own user and mount namespace, bind-mounted `decoy` over `target` and
    now sleeps: what a fake holder looks like."""
    script = (f"mount --bind {decoy} {target} && echo $$ > {out}/pid.tmp && "
              f"mv {out}/pid.tmp {out}/pid && exec /bin/sleep 300")
    argv = ["/usr/bin/unshare", "-Urm", "/bin/sh", "-c", script]
    if run([*prefix, "/usr/bin/unshare", "-Urm", "/bin/true"]).rc != 0:
        pytest.skip("unprivileged user namespaces are not available here")
    if sg:
        argv = ["/usr/bin/sg", GROUP, "-c", shlex.join(argv)]
    recorders.spawn([*prefix, *argv])
    wait_for((out / "pid").exists, "the fake holder")
    pid = int((out / "pid").read_text())
    adopted.watch(pid)
    wait_for(lambda: os.readlink(f"/proc/{pid}/exe") == SLEEP, "exec of sleep")
    return pid


def attack_files(scratch: Path, user) -> tuple[Path, Path, Path]:
    out = user_dir(scratch, user, "out")
    (out / "target").write_text("genuine\n")
    (out / "decoy").write_text("ATTACKER'S OWN CONTENT\n")
    for p in (out / "target", out / "decoy"):
        os.chown(p, user.pw_uid, user.pw_gid)
        p.chmod(0o644)
    return out, out / "decoy", out / "target"


def assert_passes_the_proc_owner_check(pid: int, user, decoy: Path, target: Path) -> None:
    """Positive control: everything `exec` looked at before it asked who
    owns the namespace holds for the fake holder, and the namespace really
    has the attacker's file in place of the real one."""
    st = os.stat(f"/proc/{pid}")
    assert (st.st_uid, st.st_gid) == (user.pw_uid, shournal_gid())
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    assert os.readlink(f"/proc/{pid}/ns/user") != os.readlink("/proc/self/ns/user")
    assert Path(f"/proc/{pid}/root{target}").read_text() == decoy.read_text()


# ================================ 1. membership and foreign user namespaces


def test_member_without_the_group_is_refused(install, tools, scratch, member):
    """Listed in /etc/group, but his process lacks the group (a session from
    before he was added): `sg shournal` gives it to him at any time, so he is
    a member all the same."""
    out = user_dir(scratch, member, "out")
    ids = run([*without_group(member), "/usr/bin/id", "-G"])
    assert str(shournal_gid()) not in ids.out.split(), ids  # the old check saw nothing
    msg, rc, err = setup_answer([*without_group(member), str(install.helper), "setup", "--",
                                 str(tools.touch), str(out / "listener-ran")])
    assert "member of group" in fail_text(msg) and rc == 1, (msg, err)
    assert not (out / "listener-ran").exists()
    r = run([*without_group(member), str(install.helper), "exec", NO_SUCH_PID,
             "/usr/bin/touch", "0", "touch", str(out / "ran")])
    assert r.rc == 1 and "member of group" in r.err, r
    assert not (out / "ran").exists()
    r = run([*without_group(member), str(install.helper), "check"])
    assert "group FAIL member" in r.out.splitlines() and r.rc == 1, r


def test_doctor_names_a_member_without_the_group(install, scratch, member):
    home = user_dir(scratch, member, "home")
    env = {**install.env(home), "USER": member.pw_name, "LOGNAME": member.pw_name}
    r = run([*without_group(member), "/usr/bin/env", "-i", *[f"{k}={v}" for k, v in env.items()],
             str(install.cli), "doctor"], timeout=120)
    (line,) = [x for x in r.out.splitlines() if x.split()[1:2] == ["group:"]]
    assert line.startswith("FAIL") and "you are a member" in line, r


@pytest.mark.usefixtures("userns_allowed")
def test_member_cannot_run_setuid_programs_in_his_own_namespace(install, tools, scratch,
                                                                 recorders, adopted, member):
    """The whole chain: as a member whose process lacks the group, `sg
    shournal` and `unshare -Urm` make a fake holder (uid his, gid shournal) in
    a user and mount namespace of his own where his file is bind-mounted over
    another; joined by `exec` as root, a setuid program there (su reading
    /etc/pam.d/su) runs as root on his file."""
    out, decoy, target = attack_files(scratch, member)
    pid = namespace_holder(recorders, adopted, without_group(member), out, decoy, target,
                           sg=True)
    assert_passes_the_proc_owner_check(pid, member, decoy, target)
    r = run([*without_group(member), str(install.helper), "exec", str(pid),
             str(tools.suidread), "0", "suidread", str(target)])
    assert r.rc == 1 and "refusing" in r.err, r
    assert "euid 0" not in r.out, r


@pytest.mark.usefixtures("userns_allowed")
def test_refuses_a_holder_in_a_user_namespace_of_the_user(install, tools, scratch, recorders,
                                                          adopted):
    """The same fake holder made for an ordinary user (root gives it the
    shournal gid here, as a member would with sg): only the check of the
    namespace's owner stands between him and root."""
    user = install.user
    out, decoy, target = attack_files(scratch, user)
    creds = ["/usr/bin/setpriv", f"--reuid={user.pw_uid}", f"--regid={shournal_gid()}",
             "--clear-groups"]
    pid = namespace_holder(recorders, adopted, creds, out, decoy, target)
    assert_passes_the_proc_owner_check(pid, user, decoy, target)
    r = run([*as_user(user), str(install.helper), "exec", str(pid), str(tools.suidread), "0",
             "suidread", str(target)])
    assert r.rc == 1 and "refusing to join" in r.err and "user namespace" in r.err, r
    assert "euid 0" not in r.out, r
    # control: the same program joins the user's genuine namespace (setuid
    # programs work in recorded commands), where the file is the real one
    rec = start_reporting(recorders, tools, user, user_dir(scratch, user, "rep"))
    r = run([*as_user(user), str(install.helper), "exec", str(rec.holder), str(tools.suidread),
             "0", "suidread", str(target)])
    assert (r.rc, r.out.splitlines()[0]) == (0, "euid 0"), r
    assert f"read {target} {len(target.read_bytes())}" in r.out, r


# ============================================ 3. check is charged to the user


@pytest.mark.parametrize("syscall", ["unshare", "fanotify_init"])
def test_check_takes_its_namespace_and_group_as_the_user(syscall, install, hard, adopted):
    """Namespaces and fanotify groups count against the euid of their
    creator: stopped right after it made one, `check` runs as the user."""
    pid, _ = adopted.freeze(hard, syscall, str(install.helper), "check")
    uids = proc_status(pid)["Uid"]
    assert uids[0] == str(hard.pw_uid) and uids[1] == str(hard.pw_uid), uids


def test_frozen_checks_use_up_only_the_users_fanotify_groups(install, hard, adopted):
    """A user who stops `check` processes right after fanotify_init holds
    their groups; he must exhaust his own allowance, never root's."""
    limit = int(Path("/proc/sys/user/max_fanotify_groups").read_text())
    if limit > 512:
        pytest.skip(f"max_fanotify_groups is {limit}: too many processes to exhaust it")
    pid, _ = adopted.freeze(hard, "fanotify_init", str(install.helper), "check")
    # guard: as root, the rest would take root's groups (other tests run now)
    assert proc_status(pid)["Uid"][1] == str(hard.pw_uid)
    for _ in range(limit - 1):
        adopted.freeze(hard, "fanotify_init", str(install.helper), "check")
    mine = run([*as_user(hard), str(install.helper), "check"])
    assert any(line.startswith("fanotify FAIL") for line in mine.out.splitlines()), mine
    roots = run([str(install.helper), "check"])
    assert "fanotify ok" in roots.out.splitlines(), roots


def test_checks_probe_child_dies_with_the_check(install, hard, adopted):
    """`check` forks a child as the user to see whether it may open another
    uid's namespace; killed meanwhile, it must not leave that child behind."""
    parent, child = adopted.freeze(hard, "fork", str(install.helper), "check")
    adopted.watch(child)

    def child_waits() -> bool:
        status = proc_status(child)
        return status["Uid"][0] == str(hard.pw_uid) and status["State"][0] == "S"

    wait_for(child_waits, "the probe child to wait as the user")
    adopted.kill(parent)
    assert adopted.gone(parent)
    assert adopted.gone(child), "the probe child outlived its parent"


# ============================================== 9. a small stack, while root


@pytest.mark.parametrize("sub", ["--version", "check", "setup", "exec-unobserved",
                                 "exec-in-namespace"])
def test_every_subcommand_works_with_a_small_stack(sub, install, tools, scratch, recorders):
    user = install.user
    out = user_dir(scratch, user, "out")
    small = [PRLIMIT, f"--stack={SMALL_STACK}", "--"]
    touch = ["/usr/bin/touch", "0", "touch", str(out / "ran")]
    if sub == "setup":
        rec = recorders.start(user, [str(tools.touch), str(out / "ran")], wrap=small)
        assert recorders.wait(rec) == 0
    elif sub.startswith("exec"):
        holder = NO_SUCH_PID
        if sub == "exec-in-namespace":
            holder = str(start_reporting(recorders, tools, user,
                                         user_dir(scratch, user, "rep")).holder)
        r = run([*as_user(user), *small, str(install.helper), "exec", holder, *touch])
        assert (r.rc, r.err) == (0, ""), r
    else:
        r = run([*as_user(user), *small, str(install.helper), sub])
        assert r.rc == 0 and r.out.startswith(("shournal-suid ", "version ")), r
        (out / "ran").touch()
    assert (out / "ran").exists()


# ======================================================= 10. RLIMIT_NPROC


def _user_processes(user) -> int:
    count = 0
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                status = parse_status((p / "status").read_text())
            except OSError:
                continue
            count += status.get("Uid", [""])[0] == str(user.pw_uid)
    return count


def test_setup_forks_within_the_users_process_limit(install, tools, scratch):
    """setup forks the holder as root; CAP_SYS_ADMIN or CAP_SYS_RESOURCE
    would exempt that fork from the user's RLIMIT_NPROC.  With a limit of
    one process (the helper itself), the fork must fail: one line to the
    shell, which runs the command unobserved."""
    user = install.user
    out = user_dir(scratch, user, "out")
    argv = [*as_user(user), PRLIMIT, "--nproc=1", "--", str(install.helper), "setup", "--",
            str(tools.touch), str(out / "listener-ran")]
    msg, rc, err = setup_answer(argv)
    text = fail_text(msg)
    assert text.startswith("fork: ") and "\n" not in text and rc == 1, (msg, err)
    assert err == f"shournal-suid: {text}\n", err
    assert not (out / "listener-ran").exists()


def test_the_spare_fork_is_within_the_users_process_limit(install, tools, scratch):
    """setup --spare forks a copy of the helper with its privileges whole:
    that fork too counts against the user's RLIMIT_NPROC.  With a limit of
    one process it fails, so the spare's socket sees only the helper go --
    an exempt fork would have made a copy that reported its own holder's
    failed fork there -- and the helper's own set-up fails at its holder.
    (Positive control: test_suid_security's spare test, without a limit.)"""
    user = install.user
    out = user_dir(scratch, user, "out")
    pid, (first, spare), log = _security._start_with_spare(
        install, [*as_user(user), PRLIMIT, "--nproc=1", "--"],
        [str(tools.touch), str(out / "listener-ran")])
    try:
        text = fail_text(first.recv(4096))
        assert text.startswith("fork: "), text
        assert spare.recv(4096) == b""
        assert wait_exit(pid) == 1
    finally:
        first.close()
        spare.close()
        log.close()
    assert not (out / "listener-ran").exists()


def test_setup_forks_with_headroom_in_the_process_limit(install, tools, scratch, recorders):
    """Positive control for the limit above."""
    user = install.user
    out = user_dir(scratch, user, "out")
    room = _user_processes(user) + 64
    rec = recorders.start(user, [str(tools.touch), str(out / "listener-ran")],
                          wrap=[PRLIMIT, f"--nproc={room}", "--"])
    assert recorders.wait(rec) == 0
    assert (out / "listener-ran").exists()


@pytest.mark.shell
@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_shell_runs_the_command_when_setup_cannot_fork(kind, install, user_home, scratch):
    """What the user sees of the failure above: one line, and the command
    runs (unobserved).  Only `setup` gets the limit of one process."""
    wrapper = scratch / "limited-helper"
    wrapper.write_text(f"""#!/bin/sh
if [ "$1" = setup ]; then
    exec {PRLIMIT} --nproc=1 -- {install.helper} "$@"
fi
exec {install.helper} "$@"
""")
    wrapper.chmod(0o755)
    sh = Shell(kind, install, user_home, extra_env={"SHOURNAL_SUID_PATH": str(wrapper)})
    first = sh.run("echo one > out1; cat out1")
    second = sh.run("echo two > out2; cat out2")
    sh.exit()
    assert "one" in first and "two" in second
    (line,) = warnings_in(first)
    assert "fork: Resource temporarily unavailable" in line, line
    assert warnings_in(second) == [], second
    assert (user_home / "work" / "out2").read_text() == "two\n"


# ----------------------------------------- no core dump of a privileged helper


def _killed_with_core_limit(freeze_at: Path, user, workdir: Path, *argv: str) -> int:
    """Start ARGV as USER in WORKDIR with no core size limit, stop it at its
    first fork (the helper is still root there), kill it with SIGSEGV and
    return its pid once it is gone."""
    r = subprocess.run([PRLIMIT, "--core=unlimited", "--", str(freeze_at), str(user.pw_uid),
                        str(user.pw_gid), "fork", *argv],
                       cwd=workdir, capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == 0, r
    pid = int(r.stdout.split()[0])
    pidfd = os.pidfd_open(pid)
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGSEGV)
        signal.pidfd_send_signal(pidfd, signal.SIGCONT)
        assert select.select([pidfd], [], [], TIMEOUT)[0], f"pid {pid} survived SIGSEGV"
    finally:
        os.close(pidfd)
    return pid


@pytest.mark.parametrize("suid_dumpable", ["1"], indirect=True)
def test_the_privileged_helper_never_dumps_core(suid_dumpable, install, hard, freeze_at, scratch):
    """fs.suid_dumpable=1 makes a process that changed its ids dumpable, and
    its core is written as its fsuid: the user could make the helper, while
    it is root, leave a root-owned image of its memory in his directory.
    Positive control: a program of the user killed the same way does dump
    core there (core_pattern permitting)."""
    if Path("/proc/sys/kernel/core_pattern").read_text().startswith("|"):
        pytest.skip("core dumps go to a program here, not to the working directory")
    control = user_dir(scratch, hard, "control")
    _killed_with_core_limit(freeze_at, hard, control, "/bin/sh", "-c", "sleep 60 & wait")
    assert any(p.name.startswith("core") for p in control.iterdir()), "control dumped no core"
    work = user_dir(scratch, hard, "work")
    _killed_with_core_limit(freeze_at, hard, work, str(install.helper), "check")
    assert [p.name for p in work.iterdir()] == []
