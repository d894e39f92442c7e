"""`shournal doctor`: everything a recording needs, each with its fix.

"No results" was the original's most common complaint; every check here is
a reason why nothing would have been recorded.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
import sys
import time

from shournal import _paths
from shournal.data import _Value
from shournal.terminal import printable

GROUP = "shournal"


class Check(_Value):
    """One line of the report.  ``blocks``: a failure keeps commands from
    being recorded."""

    __slots__ = ("name", "ok", "detail", "fix", "blocks")

    def __init__(self, name: str, ok: bool, detail: str, fix: str = "",
                 blocks: bool = True) -> None:
        self.name = name
        self.ok = ok
        self.detail = detail
        self.fix = fix
        self.blocks = blocks


class _Timeout(Exception):
    """A started program ran out of time (killed); said as
    subprocess.TimeoutExpired says it."""

    def __init__(self, argv: list[str], timeout: float) -> None:
        super().__init__(f"Command '{argv}' timed out after {timeout} seconds")


def _above_stdio(fd: int) -> int:
    """``fd``, or a copy of it above 0-2 (where a closed stdin, stdout or
    stderr of ours put it), so that a child's dup2 onto 0-2 moves it."""
    if fd > 2:
        return fd
    import fcntl

    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return high


def _inherited() -> list[int]:
    """Our descriptors above 0-2 that a program would inherit (ones our own
    parent left open): closed in the child, as close_fds=True does."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if int(name) > 2 and os.get_inheritable(int(name)):
                fds.append(int(name))
        except OSError:  # (the descriptor of the listing, closed by now)
            continue
    return fds


class _Started:
    """A program started now and collected later, run as
    ``subprocess.run(argv, capture_output=True, text=True, timeout=timeout)``
    runs it (with ``stdin=DEVNULL`` if ``null_stdin``).  The doctor starts
    the helper's check and the bubblewrap probe before its other checks, so
    that their cold start (exec, their libraries read from disk) overlaps
    its imports and the reading of the journal; and without subprocess
    (~9 ms of imports: locale, re, threading, selectors)."""

    __slots__ = ("argv", "timeout", "_deadline", "_pid", "_out", "_err", "_error")

    def __init__(self, argv: list[str], timeout: float, null_stdin: bool = False) -> None:
        import _signal

        self.argv = argv
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._pid = 0
        self._error: OSError | None = None
        out_r, out_w = (_above_stdio(fd) for fd in os.pipe())
        err_r, err_w = (_above_stdio(fd) for fd in os.pipe())
        self._out, self._err = out_r, err_r
        try:
            stdin = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)] if null_stdin else []
            self._pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[
                *stdin, (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2),
                *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited()),
            ], setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ))  # as restore_signals does
            # (glibc's own signals, 32 and 33, stay ignored in the child: a
            # glibc program sets their handlers itself when it uses them)
        except OSError as exc:
            self._error = exc
            os.close(out_r)
            os.close(err_r)
        finally:
            os.close(out_w)
            os.close(err_w)

    def result(self) -> tuple[int, str, str]:
        """Its exit status, stdout and stderr, once it exited and closed
        both; OSError: it could not be started; _Timeout: it was killed."""
        if self._error is not None:
            raise self._error
        import select

        try:
            done = os.pidfd_open(self._pid)
        except OSError:  # (a kernel before 5.3: waitpid once both are closed)
            done = -1
        chunks: dict[int, list[bytes]] = {self._out: [], self._err: []}
        poller = select.poll()
        for fd in (*chunks, done):
            if fd >= 0:
                poller.register(fd, select.POLLIN)
        waiting = {fd for fd in (*chunks, done) if fd >= 0}
        try:
            while waiting:
                left = self._deadline - time.monotonic()
                ready = poller.poll(left * 1000) if left > 0 else []
                if not ready:
                    os.kill(self._pid, 9)  # SIGKILL, as subprocess.run does
                    os.waitpid(self._pid, 0)
                    raise _Timeout(self.argv, self.timeout)
                for fd, _ in ready:
                    data = os.read(fd, 65536) if fd != done else b""
                    if data:
                        chunks[fd].append(data)
                    else:
                        poller.unregister(fd)
                        waiting.discard(fd)
            status = os.waitpid(self._pid, 0)[1]
        finally:
            for fd in (*chunks, done):
                if fd >= 0:
                    os.close(fd)
        if sys.flags.utf8_mode:
            encoding = "utf-8"
        else:
            import _locale

            encoding = _locale.getencoding()
        out, err = (b"".join(chunks[fd]).decode(encoding) for fd in (self._out, self._err))
        out, err = (t.replace("\r\n", "\n").replace("\r", "\n") for t in (out, err))
        return os.waitstatus_to_exitcode(status), out, err


def _helper_check(helper: str) -> _Started:
    """The helper's `check`, started."""
    return _Started([helper, "check"], timeout=10)


def _start_helper() -> _Started | None:
    """:func:`_helper_check` of the helper; None if there is no helper
    file (:func:`_helper_checks` says so)."""
    helper = _paths.suid_helper_text()
    try:
        os.stat(helper)
    except OSError:
        return None
    return _helper_check(helper)


def _helper_checks(started: _Started | None = None) -> list[Check]:
    helper = _paths.suid_helper()
    try:
        st = os.stat(helper)
    except OSError as exc:
        return [Check("setuid helper", False, f"{helper}: {exc.strerror}", "sudo make install")]
    checks = []
    setuid = st.st_uid == 0 and bool(st.st_mode & stat.S_ISUID)
    checks.append(
        Check(
            "setuid helper",
            setuid,
            f"{helper} owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}",
            f"sudo chown root {helper} && sudo chmod 4755 {helper}",
        )
    )
    nosuid = bool(os.statvfs(helper).f_flag & os.ST_NOSUID)
    checks.append(
        Check(
            "mount allows setuid",
            not nosuid,
            f"{helper} is on a {'nosuid' if nosuid else 'suid-capable'} mount",
            "install shournal on a file system mounted without nosuid",
        )
    )
    try:
        out = (started or _helper_check(str(helper))).result()[1]
    except (OSError, _Timeout) as exc:
        checks.append(Check("kernel support", False, str(exc), "see the README"))
        return checks
    results = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    fan = results.get("fanotify", results.get("unshare", "FAIL not checked"))
    checks.append(
        Check(
            "mount namespace + fanotify mount marks",
            fan == "ok",
            fan,
            "needs CAP_SYS_ADMIN for the helper (in containers: --cap-add SYS_ADMIN) "
            "and a kernel with fanotify",
        )
    )
    join = results.get("join", "FAIL not checked")
    checks.append(
        Check(
            "programs can join a command's namespace",
            join == "ok",
            join,
            "needs CAP_SYS_PTRACE for the helper (in containers: --cap-add SYS_PTRACE)",
        )
    )
    return checks


def _listed(group: grp.struct_group) -> bool:
    """Listed as a member in the group database: a session started before
    that lacks the group, but sg gives it to him (the helper refuses him)."""
    try:
        me = pwd.getpwuid(os.getuid())
    except KeyError:
        return False
    return group.gr_gid in os.getgrouplist(me.pw_name, me.pw_gid)


def _group_check() -> Check:
    try:
        group = grp.getgrnam(GROUP)
    except KeyError:
        return Check("group", False, f"group '{GROUP}' missing", f"sudo groupadd --system {GROUP}")
    member = group.gr_gid in os.getgroups() or os.getgid() == group.gr_gid or _listed(group)
    return Check(
        "group",
        not member,
        f"group '{GROUP}' exists" + (" but you are a member" if member else ""),
        f"nobody may be a member of '{GROUP}': sudo gpasswd -d $USER {GROUP}",
    )


def _file_check(name: str, path: os.PathLike[str], mode: int) -> Check:
    ok = os.access(path, mode)
    return Check(name, ok, str(path), "sudo make install")


def _shell_check() -> Check:
    enabled = bool(os.environ.get("SHOURNAL_SESSION_ID"))
    return Check(
        "recording in this shell",
        enabled,
        "enabled" if enabled else "SHOURNAL_ENABLE has not run in this shell",
        "add the lines printed by `shournal init bash` (or zsh) to your rc file "
        "and open a new shell",
    )


# Exported by SHOURNAL_ENABLE in a shell it restarted to preload the
# library: "<lines above it>:<its line>:<rc file>" (shell/shournal.bash).
RESTART_ENV = "_SHOURNAL_RESTARTED"


def _rc_check() -> Check | None:
    """The rc lines above SHOURNAL_ENABLE ran twice (it re-executes the
    shell); None outside a shell that SHOURNAL_ENABLE restarted."""
    value = os.environ.get(RESTART_ENV)
    if not value:
        return None
    try:
        count_s, line_s, rcfile = value.split(":", 2)
        count, line = int(count_s), int(line_s)
    except ValueError:
        return None
    name = "rc file runs once"
    if count == 0:
        return Check(name, True, f"nothing above SHOURNAL_ENABLE in {rcfile or 'the rc file'}")
    return Check(
        name,
        False,
        f"{count} line(s) of {rcfile} above SHOURNAL_ENABLE (line {line}) ran twice: "
        "it restarts the shell once to preload the recorder",
        f"move the two shournal lines to the top of {rcfile}",
        blocks=False,
    )


def _config_check() -> Check:
    from shournal.config import ConfigError, load_config

    try:
        load_config(create=False)
    except ConfigError as exc:
        return Check("config", False, str(exc), f"edit {_paths.config_file()}")
    return Check("config", True, str(_paths.config_file()))


def _store_check() -> Check:
    """The journal every command uses, opened read-only: a check must not
    create one."""
    from shournal.errors import StoreError, StoreMissing
    from shournal.journal import Journal

    fix = "set SHOURNAL_DB_URL or [store] url to a sqlite:/// or postgresql URL"
    try:
        with Journal.open(create=False) as journal:
            return Check("store", True, journal.location)
    except StoreMissing as exc:
        detail = f"no journal yet ({exc}); the first recorded command creates it"
        return Check("store", True, detail)
    except StoreError as exc:
        return Check("store", False, str(exc), fix)
    except Exception as exc:  # noqa: BLE001 - report anything as one line
        return Check("store", False, (str(exc).splitlines() or [type(exc).__name__])[0], fix)


def _redaction_check() -> Check:
    """Not a problem, a fact worth knowing: the secrets kept out of the
    journal, and the patterns that find them (shournal.redact)."""
    from shournal import redact
    from shournal.config import ConfigError, load_config
    from shournal.journal import Journal

    try:
        user = len(load_config(create=False).redact.patterns)
    except ConfigError:
        user = 0  # (the config check says what is wrong)
    rules = f"{len(redact.BUILTIN_SPECS)} built-in patterns"
    rules += f" and {user} of yours" if user else ""
    try:
        with Journal.open(create=False, read_only=True) as journal:
            commands, counts = journal.redactions()
    except Exception as exc:  # noqa: BLE001 - the store check says what is wrong
        return Check("redaction", True, f"{rules}; not counted ({exc})".splitlines()[0],
                     blocks=False)
    if not counts:
        return Check("redaction", True, f"{rules}; no secret redacted yet", blocks=False)
    total = sum(counts.values())
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda e: (-e[1], e[0])))
    return Check(
        "redaction", True,
        f"{rules}; {total} secret(s) redacted in {commands} command(s): {kinds}", blocks=False,
    )


def _privacy_check() -> Check:
    """The journal holds what the user's commands read and wrote (and the
    archive, beside it, their scripts): nobody else may read it."""
    from shournal.journal import Journal

    try:
        found = Journal.open_to_others()
    except Exception as exc:  # noqa: BLE001 - the store check says what is wrong
        return Check("journal private", True, f"not checked ({exc})".splitlines()[0])
    if not found:
        return Check("journal private", True, "only you may read the journal")
    detail = ", ".join(f"{p} (mode {m & 0o7777:04o})" for p, m in found)
    return Check(
        "journal private", False,
        f"open to group or others: {detail}; commands are kept in the spool, not stored",
        " && ".join(_paths.private_fix(p, m) for p, m in found),
    )


def _runtime_check() -> Check:
    """The runtime folder (markers, warnings, the store daemon's socket):
    one somebody else made first in /tmp is not used, and the shells then
    run without warnings and without the daemon."""
    name = "runtime folder"
    path = _paths.runtime_dir_text()
    try:
        _paths.private_runtime_dir_text(create=False)
    except FileNotFoundError:
        return Check(name, True, f"{path} (made by the next command line)")
    except _paths.UnsafeDirectory as exc:
        try:
            st = os.lstat(path)
            owner = pwd.getpwuid(st.st_uid).pw_name
        except (OSError, KeyError):
            st, owner = None, "?"
        if st is not None and st.st_uid == os.getuid() and stat.S_ISDIR(st.st_mode):
            fix = f"chmod 700 {path}"
        else:
            fix = (f"ask root to remove {path} (its owner: {owner}), or set XDG_RUNTIME_DIR "
                   "to a folder of yours (mode 0700) before shournal's lines in your rc file")
        return Check(name, False, f"{exc}: shells get no warnings and no store daemon", fix)
    except OSError as exc:
        return Check(name, False, f"{path}: {exc.strerror}", "set XDG_RUNTIME_DIR to a folder "
                     "of yours (mode 0700)")
    return Check(name, True, path)


def _daemon_check() -> Check:
    """The store daemon and its spool's backlog (shournal.capture.daemon)."""
    check = _daemon_state()
    from shournal.capture import spool

    kept = spool.inbox_count()
    if kept:
        check.detail += (
            f"; {kept} command(s) in the spool's inbox, left by a listener the journal "
            "did not take, stored by the next one that stores"
        )
    return check


def _sync_check() -> Check | None:
    """The push to a lab server (`shournal sync`): the backlog, the last
    error and the last successful push, as the store daemon left them
    beside the spool (shournal.capture.sync_state).  None for a journal
    file that never had a push state."""
    from shournal.capture import spool
    from shournal.capture.sync_state import SyncState, read_state, when
    from shournal.location import resolve_url

    try:
        url = resolve_url()
    except Exception:  # noqa: BLE001 - the store check says it
        url = None
    state = read_state(spool.spool_dir())
    if state is None and (not url or url.startswith("sqlite")):
        return None
    from shournal.capture.sync import waiting_commands

    try:
        waiting = waiting_commands()
    except Exception:  # noqa: BLE001 - the config check says it
        waiting = spool.backlog_of()[0]
    detail = f"{waiting} command(s) waiting in the spool"
    # (a running daemon's time of the last push is newer than its file's:
    # see shournal.capture.daemon._STATE_REFRESH)
    try:
        status = _daemon_status(_paths.runtime_dir(), _paths.journal_key()) or {}
    except Exception:  # noqa: BLE001 - the store daemon check says it
        status = {}
    pushed = status.get("last_push")
    if isinstance(pushed, int | float) and not isinstance(pushed, bool) and (
            state is None or state.last_push is None or pushed > state.last_push):
        state = state or SyncState()
        state.last_push = float(pushed)
    last = when(state.last_push) if state is not None else "never (by a running daemon)"
    detail += f"; last successful push: {last}"
    if state is not None and state.cause is not None:
        return Check(
            "lab sync", False,
            f"{detail}; last error: {state.cause} (since {when(state.since)})",
            "the commands are kept in the spool and pushed once the server is usable; "
            "`shournal sync` pushes now", blocks=False,
        )  # fmt: skip
    return Check("lab sync", True, detail + "; last error: none")


def _daemon_statuses() -> dict[str, dict]:
    """The status of every store daemon running in our runtime directory
    (one per journal), by journal key."""
    from shournal.capture import protocol

    rundir = _paths.runtime_dir()
    prefix, suffix = protocol.DAEMON_SOCKET.split("%s")
    try:
        names = os.listdir(rundir)
    except OSError:
        return {}
    out: dict[str, dict] = {}
    for name in sorted(names):
        key = name[len(prefix) : -len(suffix)]
        if not (name.startswith(prefix) and name.endswith(suffix)) or len(key) != protocol.KEY_LEN:
            continue
        status = _daemon_status(rundir, key)
        if status is not None:
            out[key] = status
    return out


def _daemon_status(rundir: os.PathLike[str], key: str) -> dict | None:
    """The status of the store daemon of `key`; None: none answers, {}:
    one answers without a status."""
    import json

    from shournal.capture import protocol

    answer = protocol.daemon_request(rundir, protocol.MSG_STATUS, timeout=2.0, key=key)
    if answer is None:
        return None
    try:
        status = json.loads(answer[1])
    except ValueError:
        return {}
    return status if isinstance(status, dict) else {}


def _daemon_state() -> Check:
    from shournal.capture import spool

    statuses = _daemon_statuses()
    status = statuses.pop(_paths.journal_key(), None)
    others = "".join(
        f"; also running for {printable(str(s.get('journal', '?')))} (pid {s.get('pid')})"
        for s in statuses.values()
    )
    if status is None:
        waiting, _ = spool.backlog_of()
        detail = "not running for this journal (the next command line starts it)"
        if waiting:
            detail += f"; {waiting} command(s) in the spool, stored once it runs"
        return Check("store daemon", True, detail + others)
    if not status:
        return Check("store daemon", False, "answers, but not with a status" + others, "")
    waiting, _ = spool.backlog_of()
    detail = (
        f"running (pid {status.get('pid')}) for {printable(str(status.get('journal', '?')))}, "
        f"{waiting} command(s) waiting in the spool{others}"
    )
    error = status.get("error")
    if error:
        return Check(
            "store daemon",
            False,
            f"{detail}; {error}",
            "the commands are kept in the spool until the journal is usable (see the store check)",
        )
    return Check("store daemon", True, detail)


_USERNS_FIX = ("enable unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 "
               "and user.max_user_namespaces > 0 (Ubuntu: also "
               "kernel.apparmor_restrict_unprivileged_userns=0)")


def _start_userns() -> int:
    """A child that tries to create a user namespace and exits with
    unshare's errno (0: it could); its pid.  ctypes is imported in the
    child only (~1.5 ms not spent by the doctor)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover -- the child
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            clone_newuser = 0x10000000
            os._exit(0 if libc.unshare(clone_newuser) == 0 else (ctypes.get_errno() or 255))
        except BaseException:
            os._exit(255)
    return pid


def _userns_check(child: int | None = None) -> Check:
    """replay/rerun's sandbox (bubblewrap) needs unprivileged user
    namespaces; tried in a child (:func:`_start_userns`)."""
    name = "unprivileged user namespaces (replay, rerun)"
    pid = _start_userns() if child is None else child
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code == 0:
        return Check(name, True, "available", blocks=False)
    why = os.strerror(code) if 0 < code < 255 else "unshare failed"
    return Check(name, False, f"cannot create one: {why}", _USERNS_FIX, blocks=False)


def _which(name: str) -> str | None:
    """``shutil.which(name)`` of a bare name on POSIX (the same walk of
    PATH), without importing shutil (~2 ms: bz2, lzma, fnmatch)."""
    path = os.environ.get("PATH")
    if path is None:
        try:
            path = os.confstr("CS_PATH")
        except (AttributeError, ValueError):
            path = os.defpath
    if not path:  # PATH='' finds nothing, PATH=':' looks in the current directory
        return None
    seen = set()
    for folder in os.fsdecode(path).split(os.pathsep):
        if folder in seen:
            continue
        seen.add(folder)
        file = os.path.join(folder, name)
        if os.path.exists(file) and os.access(file, os.F_OK | os.X_OK) and not os.path.isdir(file):
            return file
    return None


def _start_bwrap() -> _Started | None:
    """A sandbox made as replay and rerun make theirs, started; None if
    bwrap is not on PATH."""
    bwrap = _which("bwrap")
    if bwrap is None:
        return None
    return _Started(
        [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
         "--unshare-all", "--die-with-parent", "--", "/bin/true"], timeout=30, null_stdin=True)


def _bwrap_check(started: _Started | None = None) -> Check:
    """The sandbox of replay and rerun, tried as they use it."""
    name = "bubblewrap (replay, rerun)"
    started = started or _start_bwrap()
    if started is None:
        return Check(name, False, "bwrap is not installed", "apt-get install bubblewrap",
                     blocks=False)
    bwrap = started.argv[0]
    try:
        returncode, _, stderr = started.result()
    except (OSError, _Timeout) as exc:
        return Check(name, False, f"{bwrap}: {exc}", "reinstall bubblewrap", blocks=False)
    if returncode != 0:
        first = (stderr.strip().splitlines() or [f"exit status {returncode}"])[0]
        return Check(name, False, f"{bwrap} cannot make a sandbox: {first}",
                     "see the user namespaces check; " + _USERNS_FIX, blocks=False)
    return Check(name, True, bwrap, blocks=False)


def _history_check() -> Check:
    """Not a problem, a fact worth knowing: which typed lines are not recorded."""
    control = os.environ.get("HISTCONTROL", "")
    spaced = "ignorespace" in control or "ignoreboth" in control
    detail = (
        "space-prefixed lines are not recorded (bash HISTCONTROL=ignorespace or ignoreboth, "
        "zsh HIST_IGNORE_SPACE), nor bash HISTIGNORE lines"
    )
    if spaced:
        detail = f"HISTCONTROL={control}: {detail}"
    return Check("history", True, detail, blocks=False)


def run_checks() -> list[Check]:
    # The checks that run programs start them first, before anything
    # imports pathlib (~20 module files read from a cold disk): their cold
    # start overlaps the others (results in the report's order below).
    bwrap = _start_bwrap()
    helper = _start_helper()
    userns = _start_userns()
    checks = _helper_checks(helper)
    checks.append(_group_check())
    checks.append(_file_check("preload library", _paths.preload_lib(), os.R_OK))
    checks.append(_file_check("listener", _paths.listener(), os.X_OK))
    checks.append(_config_check())
    checks.append(_store_check())
    checks.append(_privacy_check())
    checks.append(_redaction_check())
    checks.append(_runtime_check())
    checks.append(_daemon_check())
    sync = _sync_check()
    if sync is not None:
        checks.append(sync)
    checks.append(_userns_check(userns))
    checks.append(_bwrap_check(bwrap))
    checks.append(_shell_check())
    checks.append(_history_check())
    rc = _rc_check()
    if rc is not None:
        checks.append(rc)
    return checks


def print_report(checks: list[Check]) -> bool:
    from shournal.terminal import printable

    for c in checks:
        # details quote paths, URLs and error texts: never raw controls
        print(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {printable(c.detail)}")
        if not c.ok and c.fix:
            print(f"     fix: {c.fix}")
    failed = [c for c in checks if not c.ok]
    blocking = [c for c in failed if c.blocks]
    if blocking:
        print(f"{len(blocking)} problem(s): commands are not recorded until they are fixed.")
    elif failed:
        print(f"{len(failed)} problem(s); commands are recorded.")
    else:
        print("Everything needed for recording is in place.")
    return not failed
