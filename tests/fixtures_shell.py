"""Fixtures for tests against the real thing: the setuid helper installed
as root, an unprivileged user, and real bash/zsh driven through a pty."""

from __future__ import annotations

import fcntl
import functools
import os
import pwd
import re
import shutil
import signal
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shournal.capture import protocol
from shournal.data import CommandView

REPO = Path(__file__).resolve().parent.parent
GROUP = "shournal"
# Each pytest-xdist worker ("gw0", ...) has test users of its own: tests
# count and kill the test user's processes, fanotify groups and marks, which
# another worker's tests must not disturb.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
TEST_USER = "shournal-test" + (f"-{_WORKER}" if _WORKER else "")
OTHER_USER = "shournal-other" + (f"-{_WORKER}" if _WORKER else "")
USERS_LOCK = Path("/var/tmp/shournal-tests-users.lock")
PROMPT = "__SHOURNAL_PROMPT__"
_MARKERS = (protocol.MARK_RUN, protocol.MARK_END, protocol.MARK_STORE)


@contextmanager
def users_locked() -> Iterator[None]:
    """/etc/passwd and /etc/group changed by one test process at a time:
    parallel workers (and other test runs) start at once, and useradd,
    groupadd and gpasswd fail when another holds the files' lock."""
    with open(USERS_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _ensure_user(name: str) -> pwd.struct_passwd:
    with users_locked():
        try:
            return pwd.getpwnam(name)
        except KeyError:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/bin/bash", name],
                check=True,
            )
            return pwd.getpwnam(name)


def _user_can_read(user: str, path: Path) -> bool:
    rc = subprocess.run(["runuser", "-u", user, "--", "test", "-r", str(path)]).returncode
    return rc == 0


@dataclass
class Install:
    """The helper (setuid root), the library and the listener for tests."""

    root: Path
    helper: Path
    preload: Path
    listener: Path
    cli: Path  # the `shournal` command usable by the test user
    pythonpath: str  # for processes of the test user ('' when not needed)
    user: pwd.struct_passwd
    other: pwd.struct_passwd

    def env(self, home: Path) -> dict[str, str]:
        env = {
            "HOME": str(home),
            "USER": self.user.pw_name,
            "LOGNAME": self.user.pw_name,
            "PATH": f"{self.cli.parent}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "TERM": "xterm",
            "XDG_RUNTIME_DIR": str(home / "run"),
            "SHOURNAL_SUID_PATH": str(self.helper),
            "SHOURNAL_LISTENER": str(self.listener),
            "SHOURNAL_PRELOAD_LIB": str(self.preload),
            "SHOURNAL_SHELL_DIR": str(REPO / "shell"),
        }
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        return env


def build_native(dest: Path, *make_args: str) -> None:
    """native/ built into `dest` (`make_args`: e.g. a variable and a target)."""
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["make", "-s", "-C", str(REPO / "native"), f"BUILD={dest}", *make_args],
        check=True,
        capture_output=True,
    )


def _native_built_once(tmp_path_factory: pytest.TempPathFactory, dest: Path) -> None:
    """native/ built into `dest`; pytest-xdist's workers share one build
    (in the run's base temp dir, which is their temp dirs' parent) and copy it."""
    if not _WORKER:
        build_native(dest)
        return
    shared = tmp_path_factory.getbasetemp().parent / "native-build"
    with open(shared.with_name("native-build.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / ".complete").exists():
            build_native(shared)
            (shared / ".complete").touch()
    shutil.copytree(shared, dest, ignore=shutil.ignore_patterns(".complete"))


@pytest.fixture(scope="session")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates a test user and a setuid copy of the helper")
    with users_locked():
        if subprocess.run(["getent", "group", GROUP], capture_output=True).returncode != 0:
            subprocess.run(["groupadd", "--system", GROUP], check=True)
    user = _ensure_user(TEST_USER)
    other = _ensure_user(OTHER_USER)
    root = Path(tempfile.mkdtemp(prefix="shournal-test-", dir="/var/tmp"))
    root.chmod(0o755)
    if os.statvfs(root).f_flag & os.ST_NOSUID:
        pytest.fail(f"{root} is on a nosuid mount; the setuid helper cannot work there")
    _native_built_once(tmp_path_factory, root / "build")
    helper = root / "shournal-suid"
    shutil.copy2(root / "build" / "shournal-suid", helper)
    os.chown(helper, 0, 0)
    helper.chmod(0o4755)
    assert helper.stat().st_mode & 0o4000
    preload = root / "libshournal_preload.so"
    shutil.copy2(root / "build" / "libshournal_preload.so", preload)
    preload.chmod(0o644)

    venv_listener = REPO / ".venv" / "bin" / "shournal-listener"
    pythonpath = ""
    listener_py = REPO / "shournal" / "capture" / "listener.py"
    if _user_can_read(user.pw_name, listener_py) and _user_can_read(user.pw_name, venv_listener):
        listener = venv_listener
        cli = REPO / ".venv" / "bin" / "shournal"
    else:
        # The checkout is not readable by other users (e.g. under /root):
        # give the test user a copy of the package and its dependencies.
        site = root / "site"
        shutil.copytree(sysconfig.get_paths()["purelib"], site, symlinks=True)
        shutil.rmtree(site / "shournal", ignore_errors=True)
        shutil.copytree(REPO / "shournal", site / "shournal")
        pythonpath = str(site)
        listener = root / "shournal-listener"
        listener.write_text(
            "#!/bin/sh\nexec /usr/bin/python3 -m shournal.capture.listener \"$@\"\n"
        )
        listener.chmod(0o755)
        cli = root / "bin" / "shournal"
        cli.parent.mkdir()
        cli.write_text("#!/bin/sh\nexec /usr/bin/python3 -m shournal \"$@\"\n")
        cli.chmod(0o755)
        subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
    yield Install(root, helper, preload, listener, cli, pythonpath, user, other)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def user_home(install: Install) -> Iterator[Path]:
    """A fresh home for the test user (config, journal, runtime dir)."""
    home = Path(tempfile.mkdtemp(prefix="shournal-home-", dir="/var/tmp"))
    for sub in ("run", "work"):
        (home / sub).mkdir()
    subprocess.run(["chown", "-R", f"{install.user.pw_uid}:{install.user.pw_gid}", str(home)])
    home.chmod(0o755)  # tests (root) and the other user may look in
    (home / "run").chmod(0o700)
    yield home
    shutil.rmtree(home, ignore_errors=True)


def warnings_in(text: str) -> list[str]:
    """The shournal warning lines in what a shell printed."""
    return [line for line in text.splitlines() if "shournal" in line and ":" in line]


SCHED_OTHER, SCHED_BATCH = 0, 3


def proc_sched(pid: int) -> tuple[int, int]:
    """(scheduling policy, nice value) of `pid`."""
    policy = next(int(line.split(":")[1]) for line in
                  Path(f"/proc/{pid}/sched").read_text().splitlines()
                  if line.startswith("policy"))
    return policy, int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def wait_stored(home: Path, timeout: float = 60.0) -> None:
    """Wait until every listener of this home has stored its command."""
    rundir = home / "run" / "shournal"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        markers = [p for p in rundir.glob("*.*") if p.suffix[1:] in _MARKERS]
        alive = []
        for m in markers:
            try:
                os.kill(int(m.stem), 0)
                alive.append(m)
            except (ValueError, ProcessLookupError):
                m.unlink(missing_ok=True)
        if not alive:
            return
        time.sleep(0.05)
    raise AssertionError(f"listeners still running after {timeout}s: {alive}")


def write_config(home: Path, text: str, install: Install) -> None:
    cfg = home / ".config" / "shournal"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.toml").write_text(text)
    owner = f"{install.user.pw_uid}:{install.user.pw_gid}"
    subprocess.run(["chown", "-R", owner, str(home / ".config")])


def spool_of(home: Path, **env: str) -> Path:
    """The spool of the journal of a shell of `home` (with `env` added to
    its environment): one per journal key."""
    from shournal._paths import journal_key

    e = {"HOME": str(home), **env}
    data = e.get("XDG_DATA_HOME") or f"{e['HOME']}/.local/share"
    return Path(data) / "shournal" / "spool" / journal_key(e)


def daemon_file(home: Path, name: str, **env: str) -> Path:
    """`name` (protocol.DAEMON_SOCKET or DAEMON_LOCK) of the store daemon
    of the journal of a shell of `home` (with `env` added)."""
    from shournal._paths import journal_key

    return home / "run" / "shournal" / (name % journal_key({"HOME": str(home), **env}))


def journal_url(home: Path) -> str:
    return f"sqlite:///{home}/.local/share/shournal/journal.sqlite"


@contextmanager
def as_owner_of(path: Path) -> Iterator[None]:
    """Act as the owner of `path` (a test user's home) meanwhile.  The test
    reads journals that the user's recorder writes at the same moment: a
    journal, or SQLite's -wal/-shm beside it, that root creates is the
    root's for an instant (SQLite hands its files to the journal's owner
    only after creating them), and a recorder opening it then gets
    "attempt to write a readonly database"."""
    st = path.stat()
    if os.geteuid() != 0 or st.st_uid == 0 or not _readable_by(st.st_uid, REPO):
        yield  # (its modules must stay importable: imports are lazy)
        return
    os.setegid(st.st_gid)
    os.seteuid(st.st_uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@functools.cache
def _readable_by(uid: int, path: Path) -> bool:
    return _user_can_read(pwd.getpwuid(uid).pw_name, path)


def recorded(home: Path, *, create: bool = True, **criteria: Any) -> list[CommandView]:
    """The commands in the test user's journal matching ``criteria`` (as
    :func:`shournal.query.find.find_commands` takes them), oldest first."""
    from shournal.journal import Journal

    with as_owner_of(home), Journal.open(journal_url(home), create=create) as store:
        return store.find(**criteria)


def signals_as_a_terminal_gives_them() -> None:
    """Run in the child before the shell under test is started: every
    signal at its default and none blocked, as a terminal emulator or a
    login starts a shell -- whatever the test runner has.  A runner started
    in the background of a script (a CI job's `&`, nohup) ignores SIGINT
    and SIGQUIT, and bash hands signals ignored at its start on to every
    program it runs: Ctrl-C would not interrupt them, and an interrupted
    line would run to its end with status 0 (zsh resets them)."""
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # (the C library's own real-time signals)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


class Shell:
    """A real interactive bash or zsh of the test user on a pty."""

    def __init__(self, kind: str, install: Install, home: Path, *, enable: bool = True,
                 extra_env: dict[str, str] | None = None, rc_extra: str = "",
                 rc_after: str = "", chroot: Path | None = None,
                 user: pwd.struct_passwd | None = None, wrap: list[str] | None = None) -> None:
        """`rc_after`: rc lines after shournal's.  `chroot`: run the shell
        inside that directory (which must show the home, the install and the
        checkout at their paths).  `user`: whose shell (default: the test
        user); `wrap`: the command (as root) that runs the rest, such as
        nsenter into a network namespace."""
        import pexpect

        self.kind = kind
        self.home = home
        env = install.env(home)
        env.update(extra_env or {})
        if kind == "bash":
            rc = home / ".bashrc"
            rc.write_text(
                f"PS1='{PROMPT}$ '\nHISTFILE={home}/.bash_history\n{rc_extra}\n"
                + (f"source {REPO}/shell/shournal.bash\nSHOURNAL_ENABLE\n" if enable else "")
                + rc_after
            )
            argv = ["bash", "--noprofile", "--rcfile", str(rc), "-i"]
        elif kind == "zsh":
            rc = home / ".zshrc"
            rc.write_text(
                f"PS1='{PROMPT}%# '\nunsetopt PROMPT_SP\nHISTFILE={home}/.zsh_history\n"
                f"SAVEHIST=100\nHISTSIZE=100\n{rc_extra}\n"
                + (f"source {REPO}/shell/shournal.zsh\nSHOURNAL_ENABLE\n" if enable else "")
                + rc_after
            )
            env["ZDOTDIR"] = str(home)
            argv = ["zsh", "-i"]
        else:
            raise ValueError(kind)
        user = user or install.user
        os.chown(rc, user.pw_uid, user.pw_gid)
        cmd = [*(wrap or []), "runuser", "-u", user.pw_name, "--", "env", "-i"]
        if chroot is not None:
            # chroot(1) changes to the new "/"
            cmd = ["/usr/sbin/chroot", str(chroot), *cmd, "-C", str(home / "work")]
        cmd += [f"{k}={v}" for k, v in env.items()]
        cmd += argv
        self.proc = pexpect.spawn(
            cmd[0], cmd[1:], cwd=str(home / "work"), encoding="utf-8",
            codec_errors="replace", timeout=60, dimensions=(50, 400),
            preexec_fn=signals_as_a_terminal_gives_them,
        )
        self.proc.expect(PROMPT)

    def wait_program(self, cmdline: str, timeout: float = 30) -> int:
        """The pid of the program this shell runs with exactly `cmdline`,
        once it runs (exec'd: the trampoline through the helper has another
        command line).  Only this shell's session is searched: a test of
        another run (the same test user) may run the same line."""
        found: list[int] = []
        pattern = re.sub(r"([][.^$*+?(){}|\\])", r"\\\1", cmdline)  # literal, for ERE

        def runs() -> bool:
            out = subprocess.run(
                ["pgrep", "-s", str(self.proc.pid), "-f", f"^{pattern}$"],
                capture_output=True, text=True,
            ).stdout.split()
            found[:] = [int(p) for p in out]
            return bool(found)

        wait_for(runs, f"`{cmdline}` to run", timeout)
        return found[0]

    def run(self, line: str, timeout: float = 60) -> str:
        """Type a line, wait for the next prompt, return what was printed."""
        self.proc.sendline(line)
        self.proc.expect(PROMPT, timeout=timeout)
        return self.proc.before

    def exit(self, status: int = 123) -> None:
        self.proc.sendline(f"exit {status}")
        self.wait_exit()
        assert self.proc.exitstatus == status, (self.proc.exitstatus, self.proc.signalstatus)
        wait_stored(self.home)

    def wait_exit(self, timeout: float = 60) -> None:
        """Wait until the shell has exited, reading what it prints meanwhile.
        Not for the pty's EOF: a process the shell left behind may keep the
        pty open, and pexpect then reports EOF only when a read of up to
        the whole timeout finds the shell gone."""
        import pexpect

        deadline = time.monotonic() + timeout
        while self.proc.isalive():
            if time.monotonic() > deadline:
                raise AssertionError(f"the shell has not exited after {timeout}s")
            try:
                self.proc.expect(pexpect.EOF, timeout=0.1)
            except pexpect.TIMEOUT:
                continue
            time.sleep(0.01)  # EOF: the shell is exiting
        self.proc.close()
