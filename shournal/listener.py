"""The per-command listener: reads fanotify events of one command line and
stores the finished command.

The setuid helper execs this program after dropping privileges for good,
with the control socket on fd 3 and the event relay on fd 4 (see
native/shournal_protocol.h).  The fanotify group itself stays in the
helper's holder process: it was made with CAP_SYS_ADMIN, so its event fds
are opened without permission checks, and this program is the user's code.
The holder forwards only events of files the user may read (faccessat2 with
his ids and groups), each with its fd.

Why one listener per command line, and not a per-user daemon: the shell
never waits for it (the helper answers the shell before exec'ing Python), a
crash loses at most this command, and there is no daemon life cycle to get
wrong.  Its price -- a Python start-up per command line -- is paid on a core
the prompt is not waiting for; bench/latency.py measures what the prompt
does wait for.

The permission rules in shournal.filters then apply the original's
owner/group/other test against the real ids on top.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import time
from contextlib import suppress

from shournal import _paths, protocol
from shournal.fanotify import FAN_CLOSE_NOWRITE, FAN_CLOSE_WRITE
from shournal.record import CommandRecord, FileEvent

# (Batching like the original -- sleep after a small batch so events queue
# up -- happens in the holder, which reads the fanotify group.)
# After EOF, closes that raced the socket's release may still arrive.
_GRACE_FLUSHES = 2
_GRACE_SLEEP = 0.01
# How long to wait for the holder to answer a flush.
_FLUSH_TIMEOUT = 10.0
_RELAY_BUFSIZE = protocol.EVENTS.size + protocol.MAX_EVENTS_PER_MSG * protocol.EVENT.size


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

    # The hot path: called for every batch the holder relays.
    def handle_events(self, records: bytes, fds: list[int]) -> None:
        readlink, fstat, close = os.readlink, os.fstat, os.close
        events = protocol.EVENT.iter_unpack(records)
        for fd in fds:
            try:
                mask, pid, _ = next(events, (0, 0, 0))
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


def _raise_nofile() -> None:
    """Every relayed event arrives with an open fd (up to 253 per message):
    a login's soft limit of 1024 is tight for a burst."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


class Relay:
    """Our end of the holder's event relay (fd 4)."""

    def __init__(self, fd: int) -> None:
        self.sock = socket.socket(fileno=fd)
        self.sock.setblocking(False)
        self.seq = 0
        self.flushed = 0
        self.closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def pump(self, collector: Collector) -> int:
        """Handle every message waiting; return the number of events."""
        total = 0
        while not self.closed:
            try:
                data, fds, _flags, _ = socket.recv_fds(
                    self.sock, _RELAY_BUFSIZE, protocol.MAX_EVENTS_PER_MSG, socket.MSG_CMSG_CLOEXEC
                )
            except BlockingIOError:
                break
            except InterruptedError:
                continue
            except OSError:
                self.closed = True
                break
            if not data:
                self.closed = True
                break
            total += self._handle(data, fds, collector)
        return total

    def _handle(self, data: bytes, fds: list[int], collector: Collector) -> int:
        if len(data) < protocol.EVENTS.size:
            for fd in fds:
                os.close(fd)
            return 0
        mtype, count, lost, seq = protocol.EVENTS.unpack_from(data)
        collector.overflows += lost
        if mtype == protocol.MSG_FLUSHED:
            self.flushed = seq
        if mtype != protocol.MSG_EVENTS:
            for fd in fds:
                os.close(fd)
            return 0
        if len(fds) < count:  # MSG_CTRUNC: we ran out of descriptors
            collector.unreadable += count - len(fds)
        collector.handle_events(data[protocol.EVENTS.size :], fds)
        return count

    def flush(self, collector: Collector) -> bool:
        """Make the holder forward everything queued so far; False if it is
        gone or does not answer (events may be missing)."""
        if self.closed:
            return False
        self.seq += 1
        try:
            self.sock.send(protocol.FLUSH.pack(protocol.MSG_FLUSH, self.seq))
        except OSError:
            self.closed = True
            return False
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        deadline = time.monotonic() + _FLUSH_TIMEOUT
        while self.flushed != self.seq and not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if poller.poll(left * 1000):
                self.pump(collector)
        return self.flushed == self.seq

    def close(self) -> None:
        self.sock.close()


def _warn(message: str) -> None:
    """Leave one line for the shell to show at its next prompt."""
    try:
        rundir = _paths.runtime_dir()
        with open(rundir / "warnings", "a", encoding="utf-8") as fh:
            fh.write(message.replace("\n", " ") + "\n")
    except OSError:
        pass


def _write_setup_args(cfg) -> None:
    """Leave the helper options for the shell's next command line (the
    preload library reads <rundir>/setup-args; it cannot read TOML)."""
    from shournal.config import helper_options

    data = b"".join(os.fsencode(a) + b"\0" for a in helper_options(cfg))
    path = _paths.runtime_dir() / "setup-args"
    try:
        with open(path, "rb") as fh:
            if fh.read() == data:
                return
    except OSError:
        pass
    tmp = path.with_name(f"setup-args.{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        with suppress(OSError):
            os.unlink(tmp)


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


def listen(
    sock: socket.socket, relay: Relay, collector: Collector
) -> protocol.CommandMessage | None:
    """Collect events until every process of the command line has exited."""
    poller = select.poll()
    poller.register(relay.fileno(), select.POLLIN)
    poller.register(sock.fileno(), select.POLLIN)
    command: protocol.CommandMessage | None = None
    command_seen = 0.0
    eof_at = 0.0
    while True:
        ready = dict(poller.poll())
        # Always take events first: the last ones must not be lost.
        relay.pump(collector)
        if relay.closed and relay.fileno() in ready:
            poller.unregister(relay.fileno())
        if sock.fileno() in ready:
            data = sock.recv(protocol.COMMAND.size + protocol.MAX_COMMAND_LEN + 1)
            if not data:
                eof_at = time.monotonic()
                break
            msg = protocol.unpack_command(data)
            if msg is not None:
                command, command_seen = msg, time.monotonic()
    complete = relay.flush(collector)
    for _ in range(_GRACE_FLUSHES):
        time.sleep(_GRACE_SLEEP)
        complete = relay.flush(collector) and complete
    if not complete:
        # the holder died (or was killed): we cannot know what we missed
        collector.unreadable += 1
        _warn("event relay ended early: file events of this command may be missing")
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


def run(sock: socket.socket, relay: Relay) -> int:
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
    _write_setup_args(cfg)
    gids = frozenset(os.getgroups()) | {os.getgid()}
    collector = Collector(cfg, os.getuid(), gids)
    command = listen(sock, relay, collector)
    relay.close()  # the holder exits: nothing we do from here is observed
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
        relay = Relay(protocol.FD_EVENTS)
    except OSError:
        print("shournal-listener: started by shournal-suid only", file=sys.stderr)
        return 2
    _raise_nofile()
    try:
        return run(sock, relay)
    except Exception as exc:  # noqa: BLE001
        _warn(f"listener failed: {exc}".splitlines()[0])
        _remove_markers()
        return 1


if __name__ == "__main__":
    sys.exit(main())
