"""The per-command listener: reads fanotify events of one command line and
stores the finished command.

The setuid helper execs this program after dropping privileges for good,
with the control socket on fd 3, the fanotify group on fd 4 and the holder's
lifetime pipe on fd 5 (see native/shournal_protocol.h).

Why one listener per command line, and not a per-user daemon: the shell
never waits for it (the helper answers the shell before exec'ing Python), a
crash loses at most this command, and there is no daemon life cycle to get
wrong.  Its price -- a Python start-up per command line -- is paid on a core
the prompt is not waiting for; bench/latency.py measures what the prompt
does wait for.

Event fds are opened by the kernel with *our* credentials when we read(),
so files the user may not read never reach us; the permission rules in
shournal.filters then apply the original's owner/group/other test against
the real ids on top.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import time

from shournal import _paths, protocol
from shournal.fanotify import (
    FAN_CLOSE_NOWRITE,
    FAN_CLOSE_WRITE,
    FAN_Q_OVERFLOW,
    META_SIZE,
    iter_events,
)
from shournal.record import CommandRecord, FileEvent

# Batch like the original: after a short read, let more events queue up
# instead of waking up for each one.
_READ_SIZE = 4096 * 24 * 4
_SMALL_BATCH_BYTES = 512 * 24
_BATCH_SLEEP = 0.02
# After EOF, closes that raced the socket's release may still arrive.
_GRACE_POLLS = 3
_GRACE_MS = 15


class Collector:
    """Turns fanotify events into FileEvents, applying the config's rules."""

    def __init__(self, cfg, uid: int, gids: frozenset[int]) -> None:
        from shournal import filters

        self.cfg = cfg
        self.uid = uid
        self.gids = gids
        self.mypid = os.getpid()
        self.writes: dict[bytes, FileEvent] = {}
        self.reads: dict[bytes, FileEvent] = {}
        self.dropped_writes = 0
        self.dropped_reads = 0
        self.overflows = 0
        self.unreadable = 0
        self.archived = 0
        self.write_rule = filters.PathRule.from_config(cfg.write_events)
        self.read_rule = filters.PathRule.from_config(cfg.read_events)
        self.archive_rule = filters.ScriptArchiveRule.from_config(cfg.script_archive)
        self.may_read = filters.may_read
        self.may_write = filters.may_write
        self.hash_on = cfg.hash.enable
        self.chunk = cfg.hash.chunk_size
        self.max_reads = cfg.hash.max_count_of_reads
        self.max_w = cfg.write_events.max_event_count or sys.maxsize
        self.max_r = cfg.read_events.max_event_count or sys.maxsize
        self.read_enabled = cfg.read_events.enable
        self.read_only_writable = cfg.read_events.only_writable
        from shournal.hashing import partial_xxh64

        self.hash = partial_xxh64

    # The hot path: called for every batch read from the fanotify fd.
    def handle_batch(self, buf: bytes) -> None:
        readlink, fstat, close = os.readlink, os.fstat, os.close
        for mask, fd, pid in iter_events(buf):
            if fd < 0:
                if mask & FAN_Q_OVERFLOW:
                    self.overflows += 1
                else:  # FAN_REPORT_FD_ERROR: -errno, a file we may not open
                    self.unreadable += 1
                continue
            try:
                if pid == self.mypid:
                    continue
                path = readlink(b"/proc/self/fd/%d" % fd)
                st = fstat(fd)
                if st.st_nlink == 0:
                    continue
                if mask & FAN_CLOSE_WRITE:
                    self._write(fd, path, st)
                if mask & FAN_CLOSE_NOWRITE:
                    self._read(fd, path, st)
            except OSError:
                self.unreadable += 1
            finally:
                close(fd)

    def _hash(self, fd: int, size: int) -> int | None:
        if not self.hash_on or size == 0:
            return None
        return self.hash(fd, size, self.chunk, self.max_reads)

    def _write(self, fd: int, path: bytes, st: os.stat_result) -> None:
        if not self.may_write(st, self.uid, self.gids) or not self.write_rule.match(path):
            return
        if path not in self.writes and len(self.writes) >= self.max_w:
            self.dropped_writes += 1
            return
        self.writes[path] = FileEvent(
            path, st.st_size, st.st_mtime_ns, st.st_mode, self._hash(fd, st.st_size)
        )

    def _read(self, fd: int, path: bytes, st: os.stat_result) -> None:
        if not self.may_read(st, self.uid, self.gids):
            return
        writable = None
        general = False
        if self.read_enabled and self.read_rule.match(path):
            if self.read_only_writable:
                writable = self.may_write(st, self.uid, self.gids)
                general = writable
            else:
                general = True
        archive = False
        rule = self.archive_rule
        if rule.enable and self.archived < rule.max_count_of_files and rule.match(path, st.st_size):
            if rule.only_writable:
                if writable is None:
                    writable = self.may_write(st, self.uid, self.gids)
                archive = writable
            else:
                archive = True
        if not general and not archive:
            return
        known = self.reads.get(path)
        if known is None and len(self.reads) >= self.max_r:
            self.dropped_reads += 1
            return
        content = None
        if archive and (known is None or known.content is None):
            content = _read_all(fd, st.st_size)
            if content is not None:
                self.archived += 1
        elif known is not None:
            content = known.content
        self.reads[path] = FileEvent(
            path, st.st_size, st.st_mtime_ns, st.st_mode, self._hash(fd, st.st_size), content
        )


def _read_all(fd: int, size: int) -> bytes | None:
    parts, off = [], 0
    while off < size:
        block = os.pread(fd, size - off, off)
        if not block:
            break
        parts.append(block)
        off += len(block)
    data = b"".join(parts)
    return data if len(data) == size else None


def _read_size() -> int:
    """The kernel opens one fd per event inside read(): a read must never
    ask for more events than we have free descriptors, or the listener dies
    with EMFILE (a login's soft limit is often 1024).  Raise the soft limit
    to the hard one and size reads to it."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return _READ_SIZE
    # leave room for the descriptors we hold ourselves (sockets, store)
    return max(META_SIZE, min(_READ_SIZE, (soft - 64) * META_SIZE))


def _drain(fan: int, collector: Collector, read_size: int) -> int:
    """Read until the queue is empty; return the bytes read."""
    total = 0
    while True:
        try:
            buf = os.read(fan, read_size)
        except BlockingIOError:
            return total
        except OSError:
            # Without FAN_REPORT_FD_ERROR the kernel fails the read for an
            # event whose file we may not open; that event is gone.
            collector.unreadable += 1
            continue
        if not buf:
            return total
        total += len(buf)
        collector.handle_batch(buf)


def _warn(message: str) -> None:
    """Leave one line for the shell to show at its next prompt."""
    try:
        rundir = _paths.runtime_dir()
        with open(rundir / "warnings", "a", encoding="utf-8") as fh:
            fh.write(message.replace("\n", " ") + "\n")
    except OSError:
        pass


def _mark_drained() -> None:
    """`<pid>.end` -> `<pid>.store`: every event is read, the next command
    line may start (the shell waits for this); storing follows."""
    rundir = _paths.runtime_dir()
    pid = os.getpid()
    try:
        os.rename(rundir / f"{pid}.end", rundir / f"{pid}.store")
    except OSError:
        pass


def _remove_markers() -> None:
    rundir = _paths.runtime_dir()
    for suffix in ("run", "end", "store"):
        try:
            os.unlink(rundir / f"{os.getpid()}.{suffix}")
        except OSError:
            pass


def listen(sock: socket.socket, fan: int, collector: Collector) -> protocol.CommandMessage | None:
    """Collect events until every process of the command line has exited."""
    poller = select.poll()
    poller.register(fan, select.POLLIN)
    poller.register(sock.fileno(), select.POLLIN)
    command: protocol.CommandMessage | None = None
    command_seen = 0.0
    eof_at = 0.0
    read_size = _read_size()
    while True:
        ready = dict(poller.poll())
        # Always drain fanotify first: the last events must not be lost.
        got = _drain(fan, collector, read_size)
        if sock.fileno() in ready:
            data = sock.recv(protocol.COMMAND.size + protocol.MAX_COMMAND_LEN + 1)
            if not data:
                eof_at = time.monotonic()
                break
            msg = protocol.unpack_command(data)
            if msg is not None:
                command, command_seen = msg, time.monotonic()
            continue
        if got < _SMALL_BATCH_BYTES:
            time.sleep(_BATCH_SLEEP)
    for _ in range(_GRACE_POLLS):
        if poller.poll(_GRACE_MS):
            _drain(fan, collector, read_size)
    if command is not None and command_seen and eof_at - command_seen > 0.2:
        # Background processes kept the command line open past the prompt.
        eof_ns = time.time_ns() - int((time.monotonic() - eof_at) * 1e9)
        command.end_ns = max(command.end_ns, eof_ns)
    return command


def build_record(cwd: str, cmd: protocol.CommandMessage, collector: Collector) -> CommandRecord:
    import pwd

    try:
        username = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        username = str(os.getuid())
    cfg = collector.cfg
    return CommandRecord(
        text=cmd.text.decode("utf-8", errors="backslashreplace"),
        return_value=cmd.return_value,
        start_ns=cmd.start_ns,
        end_ns=max(cmd.end_ns, cmd.start_ns),
        working_dir=cwd,
        username=username,
        hostname=socket.gethostname(),
        session_uuid=cmd.session if any(cmd.session) else None,
        hash_chunk_size=cfg.hash.chunk_size if cfg.hash.enable else None,
        hash_max_reads=cfg.hash.max_count_of_reads if cfg.hash.enable else None,
        writes=list(collector.writes.values()),
        reads=list(collector.reads.values()),
        dropped_writes=collector.dropped_writes,
        dropped_reads=collector.dropped_reads,
        lost_events=collector.overflows + collector.unreadable,
    )


def _ignored(cfg, text: str) -> bool:
    from shournal.filters import IgnoredCommands

    words = text.split()
    return bool(words) and IgnoredCommands.from_config(cfg.ignore_commands).matches(words)


def store_record(rec: CommandRecord, cfg) -> int:
    from shournal.store import Store

    url = os.environ.get("SHOURNAL_DB_URL") or getattr(cfg.store, "url", "") or None
    store = Store(url)
    try:
        return store.add_command(rec)
    finally:
        store.close()


def run(sock: socket.socket, fan: int) -> int:
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = os.environ.get("PWD", "/")
    os.chdir("/")  # never keep a mount busy for the command's lifetime

    from shournal.config import ConfigError, load_config

    try:
        cfg = load_config()
    except ConfigError as exc:
        _warn(f"config error, using defaults: {exc}")
        cfg = load_config(path=None, create=False, defaults_only=True)
    gids = frozenset(os.getgroups()) | {os.getgid()}
    collector = Collector(cfg, os.getuid(), gids)
    command = listen(sock, fan, collector)
    os.close(fan)  # nothing we do from here may produce events for us
    sock.close()
    _mark_drained()
    if command is None or not command.text.strip():
        _remove_markers()
        return 0
    rec = build_record(cwd, command, collector)
    if _ignored(cfg, rec.text):
        _remove_markers()
        return 0
    try:
        os.nice(10)
    except OSError:
        pass
    try:
        store_record(rec, cfg)
    except Exception as exc:  # noqa: BLE001 - any failure becomes one warning line
        _warn(f"command not stored: {exc}".splitlines()[0])
        _remove_markers()
        return 1
    _remove_markers()
    return 0


def main() -> int:
    # We are a detached session of our own; a stop/continue of our orphaned
    # process group makes the kernel send SIGHUP, which must not kill us.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        sock = socket.socket(fileno=protocol.FD_SOCKET)
        os.fstat(protocol.FD_FANOTIFY)
    except OSError:
        print("shournal-listener: started by shournal-suid only", file=sys.stderr)
        return 2
    try:
        return run(sock, protocol.FD_FANOTIFY)
    except Exception as exc:  # noqa: BLE001
        _warn(f"listener failed: {exc}".splitlines()[0])
        _remove_markers()
        return 1


if __name__ == "__main__":
    sys.exit(main())
