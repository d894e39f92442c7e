"""Attacks on the setuid helper, one group per rule in the header of
native/shournal_suid.c.  Everything attack-side runs as the unprivileged test
user (setpriv --reuid/--regid/--init-groups); root only prepares files and
looks at the result.

Processes are started with os.posix_spawn so the SEQPACKET socket can be put
on fd 3 exactly; every process started here is killed by its pid (or pidfd)
and reaped before the test ends."""

from __future__ import annotations

import errno
import fcntl
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import xxhash
from fixtures_shell import (
    SCHED_BATCH,
    SCHED_OTHER,
    Install,
    Shell,
    journal_url,
    proc_sched,
    wait_for,
    write_config,
)
from sqlalchemy import select as sql_select

from shournal.capture import protocol
from shournal.journal import Journal
from shournal.store import Store
from shournal.store.models import Content

NATIVE = Path(__file__).resolve().parents[2] / "native"
NATIVE_TESTS = Path(__file__).resolve().parents[1] / "native"

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: setuid copies and a second user"),
]

TIMEOUT = 30.0
NO_SUCH_PID = "2147483647"  # valid syntax, above any pid_max: /proc has no such entry
BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C"}
SLEEP = os.path.realpath("/bin/sleep")

# ------------------------------------------------------------------ tools



REPORT_SH = """#!/bin/sh
# A LISTENER for the tests: report what we are, run "$@", then just keep
# fds 3-4 open (so the holder lives) until killed.
out=$1
shift
cat /proc/$$/status > "$out/status"
readlink /proc/$$/ns/mnt > "$out/ns"
umask > "$out/umask"
if [ $# -gt 0 ]; then
    "$@" > "$out/cmd.out" 2>&1
    echo $? > "$out/cmd.rc"
fi
: > "$out/ready"
exec /bin/sleep 300
"""

TOUCH_SH = """#!/bin/sh
: > "$1"
"""


@dataclass
class Tools:
    root: Path
    marks: Path  # world-writable (sticky) directory for markers
    evil_so: Path
    evil_lib_dir: Path  # holds libevil.so for LD_LIBRARY_PATH
    tryroot: Path
    suidread: Path  # setuid root
    tamper: Path
    evil_listener: Path
    report: Path
    touch: Path
    evil_path_dir: Path  # a PATH entry with a `true` that leaves a marker

    @property
    def evil_marker(self) -> Path:
        return self.marks / "evil-loaded"

    @property
    def path_marker(self) -> Path:
        return self.marks / "path-true-ran"


def _cc(src: str, out: Path, *extra: str) -> None:
    """Build tests/native/<src> as `out`."""
    subprocess.run(["cc", "-O2", "-Wall", "-o", str(out), str(NATIVE_TESTS / src), *extra],
                   check=True, capture_output=True)  # fmt: skip
    out.chmod(0o755)


@pytest.fixture(scope="module")
def tools(install: Install) -> Iterator[Tools]:
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler for the attack programs")
    root = Path(tempfile.mkdtemp(prefix="shournal-sec-", dir="/var/tmp"))
    try:
        root.chmod(0o755)
        marks = root / "marks"
        marks.mkdir()
        marks.chmod(0o1777)
        lib = root / "lib"
        lib.mkdir()
        lib.chmod(0o755)
        define = f'-DEVIL_MARKER="{marks / "evil-loaded"}"'
        _cc("evil_preload.c", lib / "libevil.so", "-shared", "-fPIC", define)
        _cc("tryroot.c", root / "tryroot")
        _cc("suidread.c", root / "suidread")
        os.chown(root / "suidread", 0, 0)
        (root / "suidread").chmod(0o4755)
        _cc("tamper.c", root / "tamper")
        _cc("evil_listener.c", root / "evil-listener", "-I", str(NATIVE))
        for name, text in (("report.sh", REPORT_SH), ("touch.sh", TOUCH_SH)):
            (root / name).write_text(text)
            (root / name).chmod(0o755)
        evil_path = root / "evilpath"
        evil_path.mkdir()
        evil_path.chmod(0o755)
        (evil_path / "true").write_text(f"#!/bin/sh\n: > {marks / 'path-true-ran'}\n")
        (evil_path / "true").chmod(0o755)
        yield Tools(root, marks, lib / "libevil.so", lib, root / "tryroot", root / "suidread",
                    root / "tamper", root / "evil-listener", root / "report.sh",
                    root / "touch.sh", evil_path)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------ processes


@dataclass
class Ran:
    rc: int
    out: str
    err: str


def as_user(user, chroot: Path | None = None) -> list[str]:
    """setpriv to `user`; with `chroot`, inside that directory (chroot as root first)."""
    jail = ["/usr/sbin/chroot", str(chroot)] if chroot is not None else []
    return [*jail, "/usr/bin/setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
            "--init-groups"]


def spawn(argv: Sequence[str], *, env: dict[str, str] | None = None,
          fds: dict[int, int] | None = None, out: int | None = None,
          err: int | None = None) -> int:
    """posix_spawn with stdin from /dev/null and fds[target] = source."""
    actions: list[tuple] = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0)]
    if out is not None:
        actions.append((os.POSIX_SPAWN_DUP2, out, 1))
    if err is not None:
        actions.append((os.POSIX_SPAWN_DUP2, err, 2))
    for target, source in (fds or {}).items():
        actions.append((os.POSIX_SPAWN_DUP2, source, target))
    return os.posix_spawn(argv[0], list(argv), BASE_ENV if env is None else env,
                          file_actions=actions)


def high_fd(fd: int) -> int:
    """A CLOEXEC copy above the fds spawn() places, so dup2s never clash."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 20)


def wait_exit(pid: int, timeout: float = TIMEOUT) -> int:
    """Reap our child; kill it (and fail) if it outlives the timeout."""
    pidfd = os.pidfd_open(pid)
    try:
        if not select.select([pidfd], [], [], timeout)[0]:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"pid {pid} still running after {timeout}s")
    finally:
        os.close(pidfd)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def run(argv: Sequence[str], *, env: dict[str, str] | None = None,
        fds: dict[int, int] | None = None, timeout: float = TIMEOUT) -> Ran:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = spawn(argv, env=env, fds=fds, out=out.fileno(), err=err.fileno())
        rc = wait_exit(pid, timeout)
        out.seek(0)
        err.seek(0)
        return Ran(rc, out.read().decode(errors="replace"), err.read().decode(errors="replace"))


def user_dir(parent: Path, user, name: str) -> Path:
    d = parent / name
    d.mkdir()
    os.chown(d, user.pw_uid, user.pw_gid)
    d.chmod(0o755)
    return d


def proc_status(pid: int | str) -> dict[str, list[str]]:
    text = Path(f"/proc/{pid}/status").read_text()
    return parse_status(text)


def parse_status(text: str) -> dict[str, list[str]]:
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()
    return fields


def shournal_gid() -> int:
    import grp

    return grp.getgrnam("shournal").gr_gid


@dataclass
class Recorder:
    """A namespace made by `shournal-suid setup` and its processes."""

    child: int  # our child: setpriv -> helper -> LISTENER, one pid
    holder: int
    listener: int
    flags: int
    sock: socket.socket
    fds: list[int]
    holder_pidfd: int
    log: object  # the listener's stdout and stderr (a temporary file)
    reaped: bool = False

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")


@dataclass
class Recorders:
    install: Install
    items: list[Recorder] = field(default_factory=list)
    children: list[int] = field(default_factory=list)

    def start(self, user, listener: Sequence[str], *, opts: Sequence[str] = (),
              env: dict[str, str] | None = None, wrap: Sequence[str] = (),
              chroot: Path | None = None) -> Recorder:
        """Run `setup` as `user` (in `chroot` if given) with a SEQPACKET socket on
        fd 3 and wait for SETUP_DONE.  `wrap` goes between setpriv and the helper
        and must exec it."""
        parent, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = high_fd(child_end.fileno())
        child_end.close()
        log = tempfile.TemporaryFile()
        try:
            argv = [*as_user(user, chroot), *wrap, str(self.install.helper), "setup", *opts, "--",
                    *listener]
            pid = spawn(argv, env=env, fds={3: fd}, out=log.fileno(), err=log.fileno())
        except BaseException:
            log.close()
            raise
        finally:
            os.close(fd)
        parent.settimeout(TIMEOUT)
        try:
            msg, fds, _, _ = socket.recv_fds(parent, 4096, 8)
        except BaseException:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            log.close()
            raise
        if len(msg) < protocol.SETUP_DONE.size or \
                protocol.SETUP_DONE.unpack_from(msg)[0] != protocol.MSG_SETUP_DONE:
            for f in fds:
                os.close(f)
            rc = wait_exit(pid)
            log.seek(0)
            text = log.read().decode(errors="replace")
            log.close()
            raise AssertionError(f"setup failed (exit {rc}): {msg!r} {text}")
        for f in fds:
            os.set_inheritable(f, False)  # must not leak into later spawns
        _, holder, listener_pid, flags = protocol.SETUP_DONE.unpack_from(msg)
        rec = Recorder(pid, holder, listener_pid, flags, parent, fds, os.pidfd_open(holder),
                       log)
        self.items.append(rec)
        return rec

    def wait(self, rec: Recorder) -> int:
        """Wait for a LISTENER that exits by itself."""
        try:
            return wait_exit(rec.child)
        finally:
            rec.reaped = True  # reaped even on timeout: never signal the pid again

    def spawn(self, argv: Sequence[str], **kw) -> int:
        pid = spawn(argv, **kw)
        self.children.append(pid)
        return pid

    def close(self) -> None:
        for pid in self.children:
            os.kill(pid, signal.SIGKILL)  # our unreaped child: the pid is still ours
            os.waitpid(pid, 0)
        for rec in self.items:
            if not rec.reaped:
                os.kill(rec.child, signal.SIGKILL)  # unreaped: still ours
                os.waitpid(rec.child, 0)
            try:
                signal.pidfd_send_signal(rec.holder_pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            select.select([rec.holder_pidfd], [], [], TIMEOUT)
            os.close(rec.holder_pidfd)
            rec.sock.close()
            rec.log.close()
            for f in rec.fds:
                os.close(f)


@pytest.fixture
def recorders(install: Install) -> Iterator[Recorders]:
    r = Recorders(install)
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def scratch(tools: Tools) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="case-", dir=tools.root))
    d.chmod(0o755)
    for marker in (tools.evil_marker, tools.path_marker):
        marker.unlink(missing_ok=True)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
        for marker in (tools.evil_marker, tools.path_marker):
            marker.unlink(missing_ok=True)


def start_reporting(recorders: Recorders, tools: Tools, user, out: Path, *cmd: str,
                    **kw) -> Recorder:
    rec = recorders.start(user, [str(tools.report), str(out), *cmd], **kw)
    wait_for((out / "ready").exists, "the listener's report")
    return rec


def helper_exec(install: Install, pid: int | str, filename: str, given_env: Sequence[str],
                *argv: str, user=None, chroot: Path | None = None, **kw) -> Ran:
    """`exec PID FILENAME ENVC [ENV]... ARGV0 [ARG]...` as the user (in `chroot`)."""
    user = user or install.user
    args = [*as_user(user, chroot), str(install.helper), "exec", str(pid), filename,
            str(len(given_env)), *given_env, *argv]
    return run(args, **kw)


# ============================================================== the basics


def test_version_works_as_user(install):
    r = run([*as_user(install.user), str(install.helper), "--version"])
    assert r.rc == 0 and r.out.startswith("shournal-suid ") and r.err == "", r


# ======================================================== 1. strict argv


def _usage_cases(tools: Tools, marker: Path) -> list[tuple[str, list[str]]]:
    touch = ["/usr/bin/touch", "1", "PATH=/usr/bin", "touch", str(marker)]
    listener = [str(tools.touch), str(marker)]
    excl = [a for i in range(65) for a in ("--exclude-mount", f"/nonexistent{i}")]
    cases = [
        ("no subcommand", []),
        ("unknown subcommand", ["frobnicate"]),
        ("subcommand case", ["EXEC", NO_SUCH_PID, *touch]),
        ("help", ["--help"]),
        ("check with argument", ["check", "extra"]),
        ("version with argument", ["--version", "extra"]),
        ("exec without args", ["exec"]),
        ("exec pid only", ["exec", NO_SUCH_PID]),
        ("exec no envc", ["exec", NO_SUCH_PID, "/usr/bin/touch"]),
        ("exec no argv0", ["exec", NO_SUCH_PID, "/usr/bin/touch", "0"]),
        ("exec envc == rest, no argv0", ["exec", NO_SUCH_PID, "/usr/bin/touch", "2", "A=1", "B=2"]),
        ("exec envc > rest", ["exec", NO_SUCH_PID, "/usr/bin/touch", "5", "A=1", "touch",
                              str(marker)]),
        ("exec envc huge", ["exec", NO_SUCH_PID, "/usr/bin/touch", "99999999999999999999",
                            "touch", str(marker)]),
        ("exec envc negative", ["exec", NO_SUCH_PID, "/usr/bin/touch", "-1", "touch",
                                str(marker)]),
        ("exec envc not a number", ["exec", NO_SUCH_PID, "/usr/bin/touch", "x", "touch",
                                    str(marker)]),
        ("exec envc empty", ["exec", NO_SUCH_PID, "/usr/bin/touch", "", "touch", str(marker)]),
        ("exec envc with suffix", ["exec", NO_SUCH_PID, "/usr/bin/touch", "0x", "touch",
                                   str(marker)]),
        ("exec env without =", ["exec", NO_SUCH_PID, "/usr/bin/touch", "1", "NOEQUALS", "touch",
                                str(marker)]),
        ("exec empty filename", ["exec", NO_SUCH_PID, "", "0", "touch", str(marker)]),
        ("setup alone", ["setup"]),
        ("setup no listener", ["setup", "--"]),
        ("setup without --", ["setup", *listener]),
        ("setup unknown option", ["setup", "--bogus", "--", *listener]),
        ("setup option with value", ["setup", "--no-read=1", "--", *listener]),
        ("setup relative listener", ["setup", "--", "touch.sh", str(marker)]),
        ("setup dot-relative listener", ["setup", "--", "./touch.sh", str(marker)]),
        ("setup listener by PATH", ["setup", "--", "sh", str(tools.touch), str(marker)]),
        ("setup listener too long", ["setup", "--", "/" + "a" * 4096]),
        ("setup relative exclude", ["setup", "--exclude-mount", "tmp", "--", *listener]),
        ("setup empty exclude", ["setup", "--exclude-mount", "", "--", *listener]),
        ("setup exclude missing dir", ["setup", "--exclude-mount"]),
        ("setup exclude swallowing --", ["setup", "--exclude-mount", "--", *listener]),
        ("setup 65 excludes", ["setup", *excl, "--", *listener]),
        ("setup hash without value", ["setup", "--hash"]),
        ("setup hash swallowing --", ["setup", "--hash", "--", *listener]),
        ("setup hash no colon", ["setup", "--hash", "256", "--", *listener]),
        ("setup hash chunk too small", ["setup", "--hash", "7:3", "--", *listener]),
        ("setup hash chunk too large", ["setup", "--hash", "40961:3", "--", *listener]),
        ("setup hash zero reads", ["setup", "--hash", "256:0", "--", *listener]),
        ("setup hash negative", ["setup", "--hash", "-256:3", "--", *listener]),
        ("setup hash trailing", ["setup", "--hash", "256:3x", "--", *listener]),
        ("setup hash huge reads", ["setup", "--hash", "256:99999999999999999999", "--",
                                   *listener]),
        ("setup archive size missing", ["setup", "--archive-max-size"]),
        ("setup archive size negative", ["setup", "--archive-max-size", "-1", "--", *listener]),
        ("setup archive size text", ["setup", "--archive-max-size", "1k", "--", *listener]),
        ("setup archive ext empty", ["setup", "--archive-ext", "", "--", *listener]),
        ("setup archive ext with dot", ["setup", "--archive-ext", "tar.gz", "--", *listener]),
        ("setup archive ext with slash", ["setup", "--archive-ext", "a/b", "--", *listener]),
        ("setup archive ext too long", ["setup", "--archive-ext", "x" * 33, "--", *listener]),
        ("setup archive name empty", ["setup", "--archive-name", "", "--", *listener]),
        ("setup archive name with dot", ["setup", "--archive-name", "a.mk", "--", *listener]),
        ("setup archive name with slash", ["setup", "--archive-name", "a/Makefile", "--",
                                           *listener]),
        ("setup archive name missing", ["setup", "--archive-name"]),
        ("setup lazy with value", ["setup", "--lazy-listener=1", "--", *listener]),
        ("setup lazy after --", ["setup", "--", "--lazy-listener", *listener]),
        ("setup prepared not lazy", ["setup", "--prepared", "5", "--", *listener]),
        *[(f"setup prepared {v!r}", ["setup", "--lazy-listener", "--prepared", v, "--",
                                      *listener])
          for v in ("0", "-1", "+5", "5s", "", "86401", "99999999999999999999")],
        ("setup prepared swallowing --", ["setup", "--lazy-listener", "--prepared", "--",
                                          *listener]),
        ("setup prepared missing", ["setup", "--lazy-listener", "--prepared"]),
        ("setup spare not prepared", ["setup", "--lazy-listener", "--spare", "--", *listener]),
        ("setup spare with value", ["setup", "--lazy-listener", "--prepared", "5", "--spare=1",
                                    "--", *listener]),
        # only fd 3 is given here: nothing on SHOURNAL_FD_SPARE
        ("setup spare without its socket", ["setup", "--lazy-listener", "--prepared", "5",
                                            "--spare", "--", *listener]),
        # the benchmarks' floor is a switch of bench-helper builds only
        ("setup discard-events", ["setup", "--discard-events", "--", *listener]),
        ("setup 33 archive exts", ["setup", *[a for i in range(33)
                                              for a in ("--archive-ext", f"e{i}")],
                                   "--", *listener]),
        # extensions and names share the one table
        ("setup 32 archive exts and a name", ["setup", *[a for i in range(32)
                                                         for a in ("--archive-ext", f"e{i}")],
                                              "--archive-name", "Makefile", "--", *listener]),
    ]
    for pid in ("abc", "-1", "0", "+5", " 5", "5 ", "012", "0x10", "5x", "",
                "2147483648", "4294967297", "99999999999999999999"):
        cases.append((f"exec pid {pid!r}", ["exec", pid, *touch]))
    return cases


def test_usage_errors_exit_2_and_run_nothing(install, tools, scratch):
    out = user_dir(scratch, install.user, "out")
    marker = out / "ran"
    failures = []
    for name, args in _usage_cases(tools, marker):
        # a valid SEQPACKET socket on fd 3, so only the argv can be wrong
        parent, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = high_fd(child_end.fileno())
        child_end.close()
        try:
            # cwd = tools dir: a relative listener would be found there
            r = run([*as_user(install.user), "/usr/bin/env", "-C", str(tools.root),
                     str(install.helper), *args], fds={3: fd})
        finally:
            os.close(fd)
            parent.close()
        if r.rc != 2 or not r.err.startswith("usage: ") or marker.exists():
            failures.append((name, r, marker.exists()))
        marker.unlink(missing_ok=True)
    assert not failures, "\n".join(map(repr, failures))


def test_well_formed_invocations_do_run(install, tools, scratch, recorders):
    """Positive control for the marker: the same programs run when the argv
    is right (no holder: unobserved; 64 excludes and --no-read accepted)."""
    out = user_dir(scratch, install.user, "out")
    r = helper_exec(install, NO_SUCH_PID, "/usr/bin/touch", ["PATH=/usr/bin"], "touch",
                    str(out / "exec-ran"))
    assert r.rc == 0 and (out / "exec-ran").exists(), r
    excl = [a for i in range(64) for a in ("--exclude-mount", f"/nonexistent{i}")]
    exts = [a for i in range(30) for a in ("--archive-ext", f"e{i}")]
    exts += ["--archive-name", "Makefile", "--archive-name", "Snakefile"]
    rec = recorders.start(install.user, [str(tools.touch), str(out / "setup-ran")],
                          opts=["--no-read", *excl, "--hash", "40960:2147483647",
                                "--archive-max-size", "0", *exts, "--no-hash",
                                "--no-archive"])
    wait_for((out / "setup-ran").exists, "the listener")
    assert rec.listener == rec.child


# ================================================ 2. no trust in the environment


def _evil_lines(tools: Tools) -> list[str]:
    try:
        return tools.evil_marker.read_text().splitlines()
    except FileNotFoundError:
        return []


PRELOADS = {
    "LD_PRELOAD=path": lambda t: [f"LD_PRELOAD={t.evil_so}"],
    "LD_PRELOAD=name+LD_LIBRARY_PATH": lambda t: [
        "LD_PRELOAD=libevil.so", f"LD_LIBRARY_PATH={t.evil_lib_dir}"],
}


@pytest.mark.parametrize("how", sorted(PRELOADS))
def test_preload_payload_is_live(how, install, tools, scratch):
    """Positive control: the evil library does load into a normal program."""
    r = run([*as_user(install.user), "/usr/bin/env", *PRELOADS[how](tools), "/bin/true"])
    assert r.rc == 0
    assert _evil_lines(tools) and all(
        f"euid={install.user.pw_uid}" in line for line in _evil_lines(tools))


@pytest.mark.parametrize("how", sorted(PRELOADS))
@pytest.mark.parametrize("sub", ["--version", "check", "exec-unobserved", "exec-holder", "setup"])
def test_preload_never_reaches_the_privileged_helper(sub, how, install, tools, scratch,
                                                    recorders):
    out = user_dir(scratch, install.user, "out")
    evil_env = PRELOADS[how](tools)
    pre = [*as_user(install.user), "/usr/bin/env", *evil_env, str(install.helper)]
    if sub == "--version":
        r = run([*pre, "--version"])
        assert r.rc == 0, r
    elif sub == "check":
        r = run([*pre, "check"])
        assert "setuid-root ok" in r.out, r
    elif sub == "exec-unobserved":
        r = run([*pre, "exec", NO_SUCH_PID, "/bin/true", "0", "true"])
        assert r.rc == 0, r
    elif sub == "exec-holder":
        rec = start_reporting(recorders, tools, install.user, out)
        r = run([*pre, "exec", str(rec.holder), "/bin/true", "0", "true"])
        assert r.rc == 0, r
    else:
        rec = recorders.start(install.user, [str(tools.report), str(out)],
                              wrap=["/usr/bin/env", *evil_env])
        wait_for((out / "ready").exists, "the listener's report")
    lines = _evil_lines(tools)
    # The listener of `setup` runs as the user; loading a library there is
    # the user's business.  Nothing may ever have loaded with euid 0.
    assert not [line for line in lines if "euid=0" in line], lines
    if sub != "setup":
        assert lines == [], lines


def test_path_is_never_searched(install, tools, scratch):
    out = user_dir(scratch, install.user, "out")
    env = {**BASE_ENV, "PATH": f"{tools.evil_path_dir}:/usr/bin:/bin"}
    pre = [*as_user(install.user), "/usr/bin/env", "-C", str(out), str(install.helper)]
    # `true` is not in the cwd: found only by a PATH search
    r = run([*pre, "exec", NO_SUCH_PID, "true", "1", f"PATH={env['PATH']}", "true"], env=env)
    assert r.rc == 127 and not tools.path_marker.exists(), r
    # the same program by its path does run (the payload works)
    r = run([*pre, "exec", NO_SUCH_PID, str(tools.evil_path_dir / "true"), "0", "true"], env=env)
    assert r.rc == 0 and tools.path_marker.exists(), r


# ============================================== 3. permanent privilege drop


def _assert_user_ids(status: dict[str, list[str]], user, *, groups: Sequence[int]) -> None:
    assert status["Uid"] == [str(user.pw_uid)] * 4, status["Uid"]
    assert status["Gid"] == [str(user.pw_gid)] * 4, status["Gid"]
    assert sorted(map(int, status.get("Groups", []))) == sorted(groups), status.get("Groups")
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(status[cap][0], 16) == 0, (cap, status[cap])


def _user_groups(user) -> list[int]:
    return sorted(set(os.getgrouplist(user.pw_name, user.pw_gid)))


@pytest.mark.parametrize("observed", [False, True], ids=["unobserved", "in-namespace"])
def test_exec_program_runs_with_user_ids_only(observed, install, tools, scratch, recorders):
    out = user_dir(scratch, install.user, "out")
    pid = NO_SUCH_PID
    if observed:
        pid = start_reporting(recorders, tools, install.user, out).holder
    r = helper_exec(install, pid, "/bin/cat", [], "cat", "/proc/self/status")
    assert r.rc == 0, r
    _assert_user_ids(parse_status(r.out), install.user, groups=_user_groups(install.user))
    r = helper_exec(install, pid, str(tools.tryroot), [], "tryroot")
    assert r.rc == 0, r
    assert "REGAINED" not in r.out, r.out


def test_listener_runs_with_user_ids_only(install, tools, scratch, recorders):
    out = user_dir(scratch, install.user, "out")
    rec = start_reporting(recorders, tools, install.user, out, str(tools.tryroot))
    assert rec.listener == rec.child
    _assert_user_ids(parse_status((out / "status").read_text()), install.user,
                     groups=_user_groups(install.user))
    assert (out / "cmd.rc").read_text().strip() == "0", (out / "cmd.out").read_text()
    assert "REGAINED" not in (out / "cmd.out").read_text()


def test_listener_gets_exactly_fds_0_to_4(install, tools, scratch, recorders):
    """Every descriptor not handed on is closed: nothing the helper opened
    as root (mounts, group file, ns/mnt, the fanotify group) leaks."""
    out = user_dir(scratch, install.user, "out")
    rec = start_reporting(recorders, tools, install.user, out)
    wait_for(lambda: os.readlink(f"/proc/{rec.listener}/exe") == SLEEP, "exec of sleep")
    fds = {int(n): os.readlink(f"/proc/{rec.listener}/fd/{n}")
           for n in os.listdir(f"/proc/{rec.listener}/fd")}
    assert sorted(fds) == [0, 1, 2, 3, 4], fds
    assert fds[0] == "/dev/null"
    assert fds[3].startswith("socket:"), fds
    assert fds[4].startswith("socket:"), fds  # the relay, never the fanotify group


def test_exec_passes_exactly_the_given_env_and_argv(install, tools, scratch, recorders):
    out = user_dir(scratch, install.user, "out")
    rec = start_reporting(recorders, tools, install.user, out)
    helper_env = {**BASE_ENV, "SHOURNAL_LEAK": "1", "HOME": "/root", "IFS": "x",
                  "LD_PRELOAD": "", "TMPDIR": "/root"}
    given = ["A=1", "B=two words", "C=", "PATH=/nonexistent"]
    for pid in (NO_SUCH_PID, rec.holder):
        r = helper_exec(install, pid, "/usr/bin/env", given, "env", env=helper_env)
        assert r.rc == 0, r
        assert r.out.splitlines() == given
        r = helper_exec(install, pid, "/bin/sh", [], "argv0-x", "-c",
                        'printf "%s|" "$0" "$@"', "zero", "a b", "", env=helper_env)
        assert (r.rc, r.out) == (0, "zero|a b||"), r


@pytest.mark.parametrize("observed", [False, True], ids=["unobserved", "in-namespace"])
def test_exec_keeps_the_callers_umask(observed, install, tools, scratch, recorders):
    """The helper sets umask(022) for itself; a user with umask 077 must not
    get world-readable files from every recorded command.  (Fails while
    main() never restores the caller's umask.)"""
    out = user_dir(scratch, install.user, "out")
    pid = NO_SUCH_PID
    if observed:
        pid = start_reporting(recorders, tools, install.user, out).holder
    wrap = ["/bin/sh", "-c", 'umask 077 && exec "$@"', "sh"]
    r = run([*as_user(install.user), *wrap, str(install.helper), "exec", str(pid), "/bin/sh",
             "0", "sh", "-c", "umask"])
    assert (r.rc, r.out.strip()) == (0, "0077"), r


def test_listener_keeps_the_callers_umask(install, tools, scratch, recorders):
    """Same for the listener, which creates the journal and runtime files."""
    out = user_dir(scratch, install.user, "out")
    start_reporting(recorders, tools, install.user, out,
                    wrap=["/bin/sh", "-c", 'umask 077 && exec "$@"', "sh"])
    assert (out / "umask").read_text().strip() == "0077"


# ===================================== 4. joins only namespaces made for the user


def test_refuses_an_ordinary_process_of_the_user(install, tools, scratch, recorders):
    out = user_dir(scratch, install.user, "out")
    sleeper = recorders.spawn([*as_user(install.user), "/bin/sleep", "300"])
    r = helper_exec(install, sleeper, "/usr/bin/touch", [], "touch", str(out / "ran"))
    assert r.rc == 1 and "refusing to join" in r.err, r
    assert not (out / "ran").exists()


def test_refuses_the_users_own_user_and_mount_namespace(userns_allowed, install, tools, scratch,
                                                        recorders):
    """The user is "root" in a namespace of his own and has bind-mounted
    over a directory: joining it would let him rewrite what paths mean.
    (With unprivileged user namespaces allowed, as on Debian by default.)"""
    out = user_dir(scratch, install.user, "out")
    target = user_dir(scratch, install.user, "target")
    decoy = user_dir(scratch, install.user, "decoy")
    script = f"mount --bind {decoy} {target} && : > {out}/mounted && exec /bin/sleep 300"
    pid = recorders.spawn([*as_user(install.user), "/usr/bin/unshare", "-Urm", "/bin/sh", "-c",
                           script])
    try:
        wait_for((out / "mounted").exists, "the user's namespace", timeout=10)
    except AssertionError:
        pytest.skip("unprivileged user namespaces are not available here")
    wait_for(lambda: os.readlink(f"/proc/{pid}/exe") == SLEEP, "exec of sleep")
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    r = helper_exec(install, pid, "/usr/bin/touch", [], "touch", str(out / "ran"))
    assert r.rc == 1 and "refusing to join" in r.err, r
    assert not (out / "ran").exists()


@pytest.mark.parametrize("who", ["init", "this root process"])
def test_refuses_root_processes(who, install, tools, scratch):
    out = user_dir(scratch, install.user, "out")
    pid = 1 if who == "init" else os.getpid()
    assert os.stat(f"/proc/{pid}").st_uid == 0
    r = helper_exec(install, pid, "/usr/bin/touch", [], "touch", str(out / "ran"))
    assert r.rc == 1 and "refusing to join" in r.err, r
    assert not (out / "ran").exists()


def test_refuses_the_users_own_listener(install, tools, scratch, recorders):
    """The listener is in the namespace but runs with the user's gid."""
    out = user_dir(scratch, install.user, "out")
    rec = start_reporting(recorders, tools, install.user, out)
    r = helper_exec(install, rec.listener, "/usr/bin/touch", [], "touch", str(out / "ran"))
    assert r.rc == 1 and "refusing to join" in r.err, r
    assert not (out / "ran").exists()


def test_refuses_the_holder_of_another_user(install, tools, scratch, recorders):
    other_out = user_dir(scratch, install.other, "other")
    out = user_dir(scratch, install.user, "out")
    rec = start_reporting(recorders, tools, install.other, other_out)
    st = os.stat(f"/proc/{rec.holder}")
    assert (st.st_uid, st.st_gid) == (install.other.pw_uid, shournal_gid())
    r = helper_exec(install, rec.holder, "/usr/bin/touch", [], "touch", str(out / "ran"))
    assert r.rc == 1 and "refusing to join" in r.err, r
    assert not (out / "ran").exists()
    # and the other way round
    out2 = user_dir(scratch, install.user, "out2")
    mine = start_reporting(recorders, tools, install.user, out2)
    r = helper_exec(install, mine.holder, "/usr/bin/touch", [], "touch",
                    str(other_out / "ran"), user=install.other)
    assert r.rc == 1 and "refusing to join" in r.err, r
    assert not (other_out / "ran").exists()


def test_joins_the_users_own_holder(install, tools, scratch, recorders):
    out = user_dir(scratch, install.user, "out")
    rec = start_reporting(recorders, tools, install.user, out)
    holder_ns = os.readlink(f"/proc/{rec.holder}/ns/mnt")
    assert (out / "ns").read_text().strip() == holder_ns
    outside = run([*as_user(install.user), "/usr/bin/readlink", "/proc/self/ns/mnt"])
    r = helper_exec(install, rec.holder, "/usr/bin/readlink", [], "readlink",
                    "/proc/self/ns/mnt")
    assert r.rc == 0, r
    assert r.out.strip() == holder_ns
    assert r.out.strip() != outside.out.strip()
    # the working directory is kept
    r = run([*as_user(install.user), "/usr/bin/env", "-C", str(out), str(install.helper),
             "exec", str(rec.holder), "/bin/pwd", "0", "pwd", "-P"])
    assert (r.rc, r.out.strip(), r.err) == (0, str(out), ""), r


# ================================== 5. the holder cannot be tampered with


@pytest.mark.parametrize("suid_dumpable", ["0", "1", "2"], indirect=True)
def test_holder_credential_and_isolation(suid_dumpable, install, tools, scratch, recorders):
    """Whatever fs.suid_dumpable says: the refusals rest on the holder's
    gids (shournal), not on its dumpability."""
    out = user_dir(scratch, install.user, "out")
    rec = start_reporting(recorders, tools, install.user, out)
    st = os.stat(f"/proc/{rec.holder}")
    assert (st.st_uid, st.st_gid) == (install.user.pw_uid, shournal_gid())
    status = proc_status(rec.holder)
    assert status["Uid"] == [str(install.user.pw_uid)] * 4
    # real, effective, saved gid shournal (the credential); the fs gid and
    # the groups are the user's, so the holder's access checks are his
    assert status["Gid"] == [str(shournal_gid())] * 3 + [str(install.user.pw_gid)]
    assert sorted(map(int, status.get("Groups", []))) == _user_groups(install.user)
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(status[cap][0], 16) == 0, (cap, status[cap])

    r = run([*as_user(install.user), "/bin/cat", f"/proc/{rec.holder}/environ"])
    assert r.rc != 0 and "Permission denied" in r.err, r
    r = run([*as_user(install.user), "/usr/bin/nsenter", "-t", str(rec.holder), "-m",
             "/bin/true"])
    assert r.rc != 0, r

    # every fd handed to the shell (root dir, ns/mnt) must not help either
    fds = {10 + i: fd for i, fd in enumerate(rec.fds)}
    nsfd = [t for t, fd in fds.items() if os.readlink(f"/proc/self/fd/{fd}").startswith("mnt:")]
    r = run([*as_user(install.user), str(tools.tamper), str(rec.holder),
             *(str(t) for t in nsfd)], fds=fds)
    assert r.rc == 0, r
    got = {name: int(e) for name, e in (line.split() for line in r.out.splitlines())}
    expect_eacces = ["open-environ", "open-mem", "open-mem-rw", "open-auxv", "open-maps",
                     "open-ns-mnt", "readlink-cwd", "readlink-root", "readlink-exe",
                     "readlink-ns-mnt"]
    expect_eperm = ["ptrace-attach", "ptrace-seize", "process_vm_readv", "process_vm_writev",
                    "setns-pidfd"]
    if "pidfd_getfd" in got:
        expect_eperm.append("pidfd_getfd")
    if nsfd:
        expect_eperm.append("setns-handed-fd")
    wrong = {k: errno.errorcode.get(got.get(k, -1), got.get(k)) for k in expect_eacces
             if got.get(k) != errno.EACCES}
    wrong |= {k: errno.errorcode.get(got.get(k, -1), got.get(k)) for k in expect_eperm
              if got.get(k) != errno.EPERM}
    assert not wrong, (wrong, r.out)
    # still there, still the same
    assert not select.select([rec.holder_pidfd], [], [], 0)[0]
    assert proc_status(rec.holder)["State"][0] in ("S", "R")


@pytest.mark.parametrize("suid_dumpable", ["0", "1", "2"], indirect=True)
def test_user_cannot_make_the_holder_dump_core(suid_dumpable, install, tools, scratch,
                                               recorders):
    """SIGSEGV from the user must not make the holder write its memory, as
    uid user and gid shournal, where he can read it -- whatever
    fs.suid_dumpable says (1 makes a process that changed its ids dumpable
    as itself).  The holder never needs to be dumpable: /proc/<pid> itself
    shows the euid/egid whether dumpable or not."""
    out = user_dir(scratch, install.user, "out")
    cwd = user_dir(scratch, install.user, "cwd")
    wrap = ["/bin/sh", "-c", 'ulimit -c unlimited && cd "$0" && exec "$@"', str(cwd)]
    rec = start_reporting(recorders, tools, install.user, out, wrap=wrap)
    # the kernel gives the /proc files of a process that is not dumpable
    # (as its user) to root; the holder's cwd is "/", so that is what shows
    # a core could be written where core_pattern says (an absolute path)
    st = os.stat(f"/proc/{rec.holder}/environ")
    assert (st.st_uid, st.st_gid) == (0, 0), f"the holder is dumpable: {st}"
    r = run([*as_user(install.user), "/bin/kill", "-SEGV", str(rec.holder)])
    assert r.rc == 0, r
    assert select.select([rec.holder_pidfd], [], [], TIMEOUT)[0], "holder survived SIGSEGV"
    # a core file is complete before the process is reported dead
    dumped = [(p.name, p.stat().st_uid, p.stat().st_gid) for p in cwd.iterdir()]
    assert dumped == [], dumped


# =================== 6. users never see events of files they could not read


SECRET = b"TOP-SECRET-do-not-record-4711\n"
PUBLIC = b"public-content-0815\n"


def test_journal_never_holds_what_the_user_cannot_read(install, user_home, tools):
    work = user_home / "work"
    secret = work / "secret.sh"
    other_secret = work / "other-secret.sh"
    public = work / "public.sh"
    suid = work / "suidread"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)  # root's
    other_secret.write_bytes(SECRET)
    os.chown(other_secret, install.other.pw_uid, install.other.pw_gid)
    other_secret.chmod(0o600)
    public.write_bytes(PUBLIC)
    public.chmod(0o644)  # root's: readable, never writable for the user
    shutil.copy(tools.suidread, suid)
    os.chown(suid, 0, 0)
    suid.chmod(0o4755)
    write_config(
        user_home,
        f'[read_events]\nonly_writable = false\ninclude_paths = ["{work}"]\n\n'
        "[script_archive]\nonly_writable = false\ninclude_file_extensions = []\n",
        install,
    )
    sh = Shell("bash", install, user_home)
    try:
        out_cat = sh.run("cat secret.sh other-secret.sh")
        sh.run("cat public.sh")
        out_write = sh.run("echo x >> public.sh")
        out_suid = sh.run("env ./suidread secret.sh other-secret.sh public.sh")
        sh.exit()
    except BaseException:
        sh.proc.terminate(force=True)
        raise
    assert out_cat.count("Permission denied") == 2, out_cat
    assert "Permission denied" in out_write, out_write
    # the setuid program did read everything, inside the recorded command
    assert "euid 0" in out_suid and f"read {public.name} " in out_suid, out_suid
    assert f"read {secret.name} " in out_suid and f"read {other_secret.name} " in out_suid

    store = Store(journal_url(user_home))
    try:
        cmds = Journal(store).find()
        with store.reading() as conn:
            contents = [bytes(row[0]) for row in conn.execute(sql_select(Content.data))]
    finally:
        store.close()
    by_text = {c.text: c for c in cmds}
    forbidden = {os.fsencode(secret), os.fsencode(other_secret)}
    for c in cmds:
        paths = {e.path for e in c.reads} | {e.path for e in c.writes}
        assert not paths & forbidden, (c.text, paths)
        assert os.fsencode(public) not in {e.path for e in c.writes}, c.text
    # positive controls: events of the setuid program were seen at all, and
    # the public file was recorded as read and archived
    suid_cmd = by_text["env ./suidread secret.sh other-secret.sh public.sh"]
    assert os.fsencode(public) in {e.path for e in suid_cmd.reads}
    assert os.fsencode(public) in {e.path for e in by_text["cat public.sh"].reads}
    assert PUBLIC in contents
    assert not [c for c in contents if SECRET.strip() in c]


def _loot(out: Path) -> list[str]:
    wait_for((out / "loot").exists, "the evil listener's loot")
    return (out / "loot").read_text().splitlines()


def test_own_listener_gets_nothing_of_setuid_programs_in_the_namespace(
        install, tools, scratch, recorders):
    """The user picks LISTENER; it gets fd 4.  A setuid program he runs in
    the namespace reads a root-only file: the user must learn nothing of it.
    (A group made with CAP_SYS_ADMIN opens event fds without any permission
    check, so it must never reach user code: the holder relays only what
    the user may read.)"""
    secret_dir = scratch / "private"
    secret_dir.mkdir(mode=0o755)
    secret = secret_dir / "secret"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    public = secret_dir / "public"
    public.write_bytes(PUBLIC)
    public.chmod(0o644)
    out = user_dir(scratch, install.user, "out")
    rec = recorders.start(install.user, [str(tools.evil_listener), str(out), "ns",
                                         str(tools.suidread), str(secret), str(public)])
    loot = _loot(out)
    assert "child 0" in loot, (loot, rec.output())  # the setuid program read the secret
    leaked = [line for line in loot
              if SECRET.hex() in line or line.startswith(f"event {secret} ")
              or line.startswith(f"record {secret} ") or line.startswith("raw-fd")]
    assert not leaked, f"the user's listener got root-only {secret}: {leaked}"
    # positive controls: the relay works, and hands over what the user may
    # read -- its record (path, hash), and its fd (a small file read: a
    # script candidate under the helper's default options)
    assert f"record {public} {xxhash.xxh64_intdigest(PUBLIC)}" in loot, loot
    assert f"event {public} {PUBLIC.hex()}" in loot, loot
    recorders.wait(rec)


def test_own_listener_cannot_watch_root_outside_the_namespace(
        install, tools, scratch, recorders):
    """With the fanotify fd the user may add marks of his own: an inode mark
    on a directory he can list must not report root's reads of files in it
    that only root may read (think /etc/shadow, ssh host keys).  (Inode
    marks need no capability on a privileged group: fd 4 must not be one.)"""
    pub = scratch / "pub"
    pub.mkdir(mode=0o755)
    secret = pub / "secret"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    out = user_dir(scratch, install.user, "out")
    rec = recorders.start(install.user, [str(tools.evil_listener), str(out), "mark", str(pub)])
    wait_for((out / "ready").exists, "the evil listener's mark")
    assert secret.read_bytes() == SECRET  # root, outside the namespace
    (out / "go").touch()
    loot = _loot(out)
    leaked = [line for line in loot
              if SECRET.hex() in line or line.startswith(f"event {secret} ")
              or line.startswith(f"record {secret} ")]
    assert not leaked, f"the user's listener watched root read {secret}: {loot}"
    assert [line for line in loot if line.startswith("mark -1 ")], loot  # no group to mark
    recorders.wait(rec)


# ============================================== 7. the fd 3 socket check


def _fd3_variants(tmp: Path) -> dict[str, Callable[[], tuple[list[int], dict[int, int]]]]:
    def regular():
        fd = os.open(tmp / "regular", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return [fd], {3: fd}

    def pair(kind):
        def make():
            a, b = socket.socketpair(socket.AF_UNIX, kind)
            fa, fb = a.detach(), b.detach()
            return [fa, fb], {3: fb}
        return make

    def pipe():
        r, w = os.pipe()
        return [r, w], {3: r}

    def devnull():
        fd = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
        return [fd], {3: fd}

    return {
        "closed": lambda: ([], {}),
        "regular file": regular,
        "/dev/null": devnull,
        "pipe": pipe,
        "stream socket": pair(socket.SOCK_STREAM),
        "datagram socket": pair(socket.SOCK_DGRAM),
    }


@pytest.mark.parametrize("kind", ["closed", "regular file", "/dev/null", "pipe",
                                  "stream socket", "datagram socket"])
def test_setup_requires_a_seqpacket_socket_on_fd3(kind, install, tools, scratch):
    out = user_dir(scratch, install.user, "out")
    marker = out / "ran"
    opened, fds = _fd3_variants(scratch)[kind]()
    fds = {t: high_fd(fd) for t, fd in fds.items()}
    # the wrapper closes fd 3 for "closed" and is a no-op otherwise
    wrap = ["/bin/sh", "-c", 'exec 3>&-; exec "$@"', "sh"] if kind == "closed" else []
    try:
        r = run([*as_user(install.user), *wrap, str(install.helper), "setup", "--",
                 str(tools.touch), str(marker)], fds=fds)
    finally:
        for fd in [*opened, *fds.values()]:
            os.close(fd)
    assert r.rc == 2 and r.err.startswith("usage: "), r
    assert not marker.exists()


def test_setup_with_a_seqpacket_socket_runs_the_listener(install, tools, scratch, recorders):
    """Positive control for the fd 3 cases above."""
    out = user_dir(scratch, install.user, "out")
    rec = recorders.start(install.user, [str(tools.touch), str(out / "ran")])
    wait_for((out / "ran").exists, "the listener")
    assert recorders.wait(rec) == 0
    assert stat.S_ISREG((out / "ran").stat().st_mode)


# ============================ 8. members of the group and resource limits


def _as_member(user) -> list[str]:
    """The user with group shournal among his supplementary groups (as if an
    admin had added him), who could then forge a holder's credential."""
    return ["/usr/bin/setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
            f"--groups={user.pw_gid},{shournal_gid()}"]


def test_members_of_the_group_are_refused(install, tools, scratch, recorders):
    out = user_dir(scratch, install.user, "out")
    # setup: one clear line, nothing started
    parent, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fd = high_fd(child_end.fileno())
    child_end.close()
    with tempfile.TemporaryFile() as log:
        pid = spawn([*_as_member(install.user), str(install.helper), "setup", "--",
                     str(tools.report), str(out)], fds={3: fd}, out=log.fileno(),
                    err=log.fileno())
        os.close(fd)
        parent.settimeout(TIMEOUT)
        msg = parent.recv(4096)
        rc = wait_exit(pid)
        log.seek(0)
        err = log.read().decode()
    parent.close()
    assert protocol.SETUP_FAIL.unpack_from(msg)[0] == protocol.MSG_SETUP_FAIL, msg
    assert b"member of group" in msg and rc == 1, (msg, err)
    assert not (out / "ready").exists()
    # exec: never joins, even the user's own genuine holder
    rec = start_reporting(recorders, tools, install.user, out)
    r = run([*_as_member(install.user), str(install.helper), "exec", str(rec.holder),
             "/usr/bin/touch", "0", "touch", str(out / "ran")])
    assert r.rc == 1 and "member of group" in r.err, r
    assert not (out / "ran").exists()


def test_fanotify_groups_are_charged_to_the_user_not_root(install, tools, scratch, recorders):
    """Groups count against max_fanotify_groups of their creator's euid.  Made
    as root, one user could use up root's allowance and stop recording for
    everybody; charged to the user he can only exhaust his own."""
    limit = int(Path("/proc/sys/user/max_fanotify_groups").read_text())
    if limit > 512:
        pytest.skip(f"max_fanotify_groups is {limit}: too many processes to exhaust it")
    out = user_dir(scratch, install.user, "out")
    failed = ""
    # (/proc/sys is read-only here, so the real limit is exhausted)
    for _ in range(limit + 1):
        try:
            recorders.start(install.other, ["/bin/sleep", "300"])
        except AssertionError as exc:
            failed = str(exc)
            break
    assert "fanotify_init" in failed, f"the hog was never limited: {failed!r}"
    # the victim can still record
    start_reporting(recorders, tools, install.user, out)
    assert (out / "ready").exists()


def test_closed_standard_fds_are_not_reused(install, tools, scratch):
    """A setuid program started with fd 0-2 closed must not hand what it
    opens as root out on them (libc opens /dev/null there; we rely on it)."""
    out = user_dir(scratch, install.user, "out")
    script = f'ls -l /proc/self/fd/ > "{out}/fds"'
    r = run([*as_user(install.user), "/bin/sh", "-c",
             'exec 0<&- 1>&- 2>&- "$@"', "sh", str(install.helper), "exec", str(NO_SUCH_PID),
             "/bin/sh", "0", "sh", "-c", script])
    assert r.rc == 0, r
    listing = (out / "fds").read_text()
    for n in ("0", "2"):  # glibc puts /dev/full on 0 (reads fail), /dev/null on 2
        line = [x for x in listing.splitlines()
                if " -> " in x and x.split(" -> ")[0].endswith(f" {n}")]
        assert line and line[0].endswith(("/dev/null", "/dev/full")), listing


# ============================ 9. the lazily started listener (--lazy-listener)
# Not a privilege boundary (the wait happens after the final drop), but the
# helper's behaviour: Python must not start next to a short command, and
# must start when the command line ends, when the holder's queue fills, or
# when the holder is gone -- else events would pile up or a listener hang.


def _waiting(rec: Recorder, install: Install) -> bool:
    """Still the helper, waiting (the listener not exec'd yet)."""
    return os.readlink(f"/proc/{rec.child}/exe") == str(install.helper)


def test_lazy_listener_waits_for_the_end_of_the_command_line(install, tools, scratch,
                                                            recorders):
    out = user_dir(scratch, install.user, "out")
    work = user_dir(scratch, install.user, "work")
    rec = recorders.start(install.user, [str(tools.report), str(out)],
                          opts=["--lazy-listener"], wrap=["/usr/bin/env", "-C", str(work)])
    # a command runs in the namespace: some events, far below the pressure
    r = helper_exec(install, rec.holder, "/bin/sh", ["PATH=/usr/bin:/bin"], "sh", "-c",
                    f'for i in 1 2 3; do echo $i > "{work}/f$i"; done')
    assert r.rc == 0, r
    time.sleep(0.5)
    assert _waiting(rec, install) and not (out / "ready").exists()
    assert os.readlink(f"/proc/{rec.child}/cwd") == "/"  # no mount kept busy
    rec.sock.send(b"the command line ended")  # what the shell sends at its end
    wait_for((out / "ready").exists, "the lazily started listener")
    environ = Path(f"/proc/{rec.child}/environ").read_bytes().split(b"\0")
    assert f"SHOURNAL_CWD={work}".encode() in environ
    # after its command line: yields to the user (and never preempted the shell)
    assert proc_sched(rec.child) == (SCHED_BATCH, 10)


def test_lazy_listener_starts_when_the_control_socket_closes(install, tools, scratch,
                                                            recorders):
    out = user_dir(scratch, install.user, "out")
    rec = recorders.start(install.user, [str(tools.report), str(out)],
                          opts=["--lazy-listener"])
    time.sleep(0.2)
    assert _waiting(rec, install)
    rec.sock.close()  # every process of the command line has exited
    wait_for((out / "ready").exists, "the lazily started listener")


def test_lazy_listener_starts_when_the_holder_is_gone(install, tools, scratch, recorders):
    out = user_dir(scratch, install.user, "out")
    rec = recorders.start(install.user, [str(tools.report), str(out)],
                          opts=["--lazy-listener"])
    time.sleep(0.2)
    assert _waiting(rec, install)
    signal.pidfd_send_signal(rec.holder_pidfd, signal.SIGKILL)
    wait_for((out / "ready").exists, "the listener after the holder died")


def test_lazy_listener_starts_when_the_holders_queue_fills(install, tools, scratch,
                                                          recorders):
    """A long command line with many events: the holder queues what the
    socket cannot take, and past QUEUE_PRESSURE (24 MiB of records) it
    wakes the listener before the command line ends (else it would have to
    block and the kernel queue would overflow)."""
    out = user_dir(scratch, install.user, "out")
    work = user_dir(scratch, install.user, "work")
    rec = recorders.start(install.user, [str(tools.report), str(out)],
                          opts=["--lazy-listener", "--no-read"])
    # paths of ~1 KB make records of ~1 KB (48 bytes + the padded path)
    few = ("import os, sys\nd, first, n = sys.argv[1], *map(int, sys.argv[2:])\n"
           "os.makedirs(d, exist_ok=True)\n"
           "for i in range(first, first + n): open(f'{d}/{i:06}', 'w').close()")
    deep = work.joinpath(*(c * 240 for c in "abc"), "f" * 240)
    mib = (1 << 20) // (48 + (len(f"{deep}/000000") + 7) // 8 * 8)  # records per MiB
    # 20 MiB: a big command (a kernel tree copied: 17 MB) starts no Python
    r = helper_exec(install, rec.holder, "/usr/bin/python3", [], "python3", "-c", few,
                    str(deep), "0", str(20 * mib), timeout=120)
    assert r.rc == 0, r
    time.sleep(0.5)
    assert _waiting(rec, install)
    # 6 MiB more: past 24 MiB
    r = helper_exec(install, rec.holder, "/usr/bin/python3", [], "python3", "-c", few,
                    str(deep), str(20 * mib), str(6 * mib), timeout=120)
    assert r.rc == 0, r
    wait_for((out / "ready").exists, "the listener woken by the holder's queue")
    assert not select.select([rec.holder_pidfd], [], [], 0)[0]  # the holder is fine
    # during its command line: keeps up as an ordinary task, like the holder
    assert proc_sched(rec.child) == proc_sched(rec.holder) == (SCHED_OTHER, 0)


# ====================== 10. the namespace prepared at the prompt (--prepared)
# The shell sets up the next command line's namespace while its prompt
# waits: the helper must start nothing and hold nothing (no directory, no
# fanotify group for long) until the shell takes it with GO.
GO = protocol.GO
MSG_GO, MSG_GO_ACK = protocol.MSG_GO, protocol.MSG_GO_ACK


def test_prepared_namespace_is_taken_with_go(install, tools, scratch, recorders):
    out = user_dir(scratch, install.user, "out")
    work = user_dir(scratch, install.user, "work")
    rec = recorders.start(install.user, [str(tools.report), str(out)],
                          opts=["--lazy-listener", "--prepared", "600"],
                          wrap=["/usr/bin/env", "-C", str(work)])
    time.sleep(0.3)
    assert _waiting(rec, install)
    # pins no directory while the prompt waits (a busy mount copy fails umount)
    assert os.readlink(f"/proc/{rec.child}/cwd") == "/"
    assert os.readlink(f"/proc/{rec.holder}/cwd") == "/"
    rec.sock.send(GO.pack(MSG_GO, 0))
    assert GO.unpack(rec.sock.recv(64)) == (MSG_GO_ACK, 0)
    # from here on an ordinary lazy listener: a command runs, then ends
    r = helper_exec(install, rec.holder, "/bin/sh", ["PATH=/usr/bin:/bin"], "sh", "-c",
                    f'echo x > "{work}/f"')
    assert r.rc == 0, r
    time.sleep(0.3)
    assert _waiting(rec, install) and not (out / "ready").exists()
    rec.sock.send(b"the command line ended")
    wait_for((out / "ready").exists, "the listener of the taken namespace")
    # after `ready` the report script execs sleep: mid-exec, environ reads empty
    wait_for(lambda: Path(f"/proc/{rec.child}/comm").read_text().strip() == "sleep",
             "the listener to settle in sleep")
    environ = Path(f"/proc/{rec.child}/environ").read_bytes().split(b"\0")
    assert f"SHOURNAL_CWD={work}".encode() in environ


@pytest.mark.parametrize("how", ["eof", "junk", "command", "idle"])
def test_prepared_namespace_not_taken_starts_nothing(how, install, tools, scratch, recorders):
    """A shell that drops its prepared namespace (exit, a changed working
    directory, disable) or idles too long: the helper exits without the
    listener, and the holder -- with the fanotify group -- follows."""
    out = user_dir(scratch, install.user, "out")
    rec = recorders.start(install.user, [str(tools.report), str(out)],
                          opts=["--lazy-listener", "--prepared", "1" if how == "idle" else "600"])
    time.sleep(0.2)
    assert _waiting(rec, install)
    if how == "eof":
        rec.sock.close()
    elif how == "junk":
        rec.sock.send(GO.pack(MSG_GO_ACK, 0))  # well-formed, but not GO
    elif how == "command":
        rec.sock.send(b"the command line ended")  # never taken: nothing ran
    assert recorders.wait(rec) == 0
    assert select.select([rec.holder_pidfd], [], [], TIMEOUT)[0], "the holder stays"
    assert not (out / "ready").exists(), "the listener ran"
    assert rec.output() == ""  # quietly
    if how == "idle":  # too late now: no answer, and the shell sees EOF
        try:
            rec.sock.send(GO.pack(MSG_GO, 0))
        except OSError:
            pass
        else:
            rec.sock.settimeout(TIMEOUT)
            assert rec.sock.recv(64) == b""


# --spare: a second prepared namespace from the same exec, on fd 4.
SPARE_OPTS = ["--lazy-listener", "--prepared", "600", "--spare"]


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _start_with_spare(install, argv_user: Sequence[str], listener: Sequence[str],
                      spare: socket.socket | int | None = None):
    """`setup` with SPARE_OPTS, a SEQPACKET socket on fd 3 and `spare` (a
    SEQPACKET socket by default, or any fd) on fd 4: (pid, our ends, log)."""
    ours, ends = [], {}
    for target in (protocol.FD_SOCKET, protocol.FD_SPARE):
        if target == protocol.FD_SPARE and spare is not None:
            ends[target] = high_fd(spare if isinstance(spare, int) else spare.fileno())
            continue
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ends[target] = high_fd(theirs.fileno())
        theirs.close()
        mine.settimeout(TIMEOUT)
        ours.append(mine)
    log = tempfile.TemporaryFile()
    try:
        pid = spawn([*argv_user, str(install.helper), "setup", *SPARE_OPTS, "--", *listener],
                    fds=ends, out=log.fileno(), err=log.fileno())
    finally:
        for fd in ends.values():
            os.close(fd)
    return pid, ours, log


def test_spare_namespace_is_set_up_by_a_copy_that_drops_as_the_first(install, tools,
                                                                       scratch):
    """--spare: after the same checks, a copy of the helper sets up a second
    namespace on the socket on fd 4 -- a namespace, fanotify group and
    holder of its own -- and is left with the user's ids only, as the
    first; each is taken with GO on its own socket and joined as usual."""
    out = user_dir(scratch, install.user, "out")
    pid, socks, log = _start_with_spare(install, as_user(install.user),
                                        [str(tools.report), str(out)])
    pidfds = []
    try:
        done = []
        for sock in socks:
            msg, fds, _, _ = socket.recv_fds(sock, 4096, 8)
            for f in fds:
                os.close(f)
            mtype, holder, listener, _ = protocol.SETUP_DONE.unpack_from(msg)
            assert mtype == protocol.MSG_SETUP_DONE, msg
            done.append((holder, listener))
            pidfds += [os.pidfd_open(holder), os.pidfd_open(listener)]
        (h1, l1), (h2, l2) = done
        assert l1 == pid and _ppid(l2) == l1 and len({h1, h2, l1, l2}) == 4
        assert _ppid(h1) == l1 and _ppid(h2) == l2
        ns = [os.readlink(f"/proc/{h}/ns/mnt") for h in (h1, h2)]
        assert len({*ns, os.readlink("/proc/self/ns/mnt")}) == 3
        for listener in (l1, l2):  # the first one is the positive control
            _assert_user_ids(proc_status(listener), install.user,
                             groups=_user_groups(install.user))
        for holder in (h1, h2):
            st = proc_status(holder)
            assert st["Uid"] == [str(install.user.pw_uid)] * 4, st["Uid"]
            # (its fsgid is the user's: it opens files as him)
            assert st["Gid"][:3] == [str(shournal_gid())] * 3, st["Gid"]
            assert int(st["CapEff"][0], 16) == 0
        for sock in reversed(socks):  # the spare first: they are independent
            sock.send(GO.pack(MSG_GO, 0))
            assert GO.unpack(sock.recv(64)) == (MSG_GO_ACK, 0)
        r = helper_exec(install, h2, "/usr/bin/readlink", [], "readlink", "/proc/self/ns/mnt")
        assert r.rc == 0 and r.out.strip() == ns[1], r
    finally:
        for sock in socks:
            sock.close()
        for fd in pidfds:
            with suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        wait_exit(pid)
        for fd in pidfds:
            select.select([fd], [], [], TIMEOUT)
            os.close(fd)
        log.close()


@pytest.mark.parametrize("fd4", ["stream socket", "file"])
def test_spare_needs_a_seqpacket_socket_on_fd_4(fd4, install, tools, scratch):
    out = user_dir(scratch, install.user, "out")
    if fd4 == "file":
        spare = os.open("/dev/null", os.O_RDWR)
        keep = None
    else:
        keep, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        spare = os.dup(theirs.fileno())
        theirs.close()
    try:
        pid, socks, log = _start_with_spare(install, as_user(install.user),
                                            [str(tools.touch), str(out / "ran")], spare)
    finally:
        os.close(spare)
    rc = wait_exit(pid)
    log.seek(0)
    err = log.read().decode()
    log.close()
    assert rc == 2 and err.startswith("usage: "), (rc, err)
    assert socks[0].recv(64) == b""  # nothing set up on fd 3 either
    socks[0].close()
    if keep is not None:
        keep.close()
    assert not (out / "ran").exists()


def test_members_of_the_group_get_no_spare(install, tools, scratch):
    """The copy is made after the checks: a member is refused on fd 3 and
    the spare's socket only sees the helper go."""
    out = user_dir(scratch, install.user, "out")
    pid, (first, spare), log = _start_with_spare(install, _as_member(install.user),
                                                 [str(tools.report), str(out)])
    msg = first.recv(4096)
    rc = wait_exit(pid)
    log.close()
    assert protocol.SETUP_FAIL.unpack_from(msg)[0] == protocol.MSG_SETUP_FAIL, msg
    assert b"member of group" in msg and rc == 1, msg
    assert spare.recv(4096) == b""
    first.close()
    spare.close()
    assert not (out / "ready").exists()

