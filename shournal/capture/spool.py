"""The store daemon's durable spool: finished command lines wait here until
the journal has them.

One append-only file, `<data dir>/spool/<journal key>/records`, in the data directory
(not the runtime directory: that is a tmpfs, and what waits here must
survive a reboot).  Every record is framed

    magic "SHSP" | payload length (u32) | crc32 of length and payload (u32)
    | payload

so that a record torn by a crash (power loss between write and fsync, or
a full disk) is recognised: the first frame that does not check out ends
the spool, it and everything after it are cut off (and counted); nothing
before it is touched.  The payload is marshal of plain values (str, bytes,
int, None, tuples), never pickle: loading it runs no code: the format
number (_FORMAT), then the CommandRecord's fields in their order, its
events as tuples.  Format 2 added the record's last field, `uuid`; a frame
of format 1 (written by an older shournal) is read with uuid None.

What the journal already holds is remembered in `<spool>/committed`
("<inode of records> <offset> <crc32 of those, hex>", padded to
COMMITTED_SIZE bytes and overwritten in place: one write per journal
batch, no new file): a crash between a journal commit and this file's
update, or a torn update (its checksum fails: offset 0), makes the daemon
replay the commands after the offset with a check that each is not stored
yet (Store.has_command), so each command is stored exactly once.  Once
everything is committed and the file has grown past ROTATE_BYTES it is
replaced by an empty one (see Spool._rotate).
"""

from __future__ import annotations

import fcntl
import functools
import marshal
import operator
import os
import stat
import struct
import time
import zlib
from collections.abc import Container, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from shournal import _paths
from shournal.capture import proc
from shournal.capture.protocol import KEY_LEN, STARTS_DIR, CommandMessage
from shournal.data import RETURN_VALUE_UNKNOWN, _Value

# Not typing.TYPE_CHECKING (~2 ms); shournal.record is imported where a
# record is made or laid out (see _Layout).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from shournal.record import CommandRecord, FileEvent

MAGIC = b"SHSP"
FRAME = struct.Struct("=4sII")  # magic, payload length, crc32
# A payload larger than this is not a record of ours (a torn length).
MAX_PAYLOAD = 1 << 30
ROTATE_BYTES = 4 << 20
_FORMAT = 2  # first value of every payload


class SpoolError(Exception):
    """The spool cannot be used (one line, ready for "shournal: ")."""


def spool_dir() -> Path:
    """The spool of our journal: one per journal key (see
    shournal._paths.journal_key), as there is one store daemon per key."""
    return _paths.data_dir() / "spool" / _paths.journal_key()


class _Layout:
    """A record's values in field order, its events as tuples (what
    dataclasses.astuple gives, without its deep copy of every value).
    Made on first use (:func:`_layout`): the readers of the spool's size
    alone (`shournal doctor`) do without shournal.record and dataclasses
    (~7 ms)."""

    __slots__ = ("record", "event", "record_values", "event_values", "writes", "reads",
                 "field_counts")

    def __init__(self) -> None:
        from dataclasses import fields

        from shournal.record import CommandRecord, FileEvent

        self.record, self.event = CommandRecord, FileEvent
        names = tuple(f.name for f in fields(CommandRecord))
        self.record_values = operator.attrgetter(*names)
        self.event_values = operator.attrgetter(*(f.name for f in fields(FileEvent)))
        self.writes, self.reads = names.index("writes"), names.index("reads")
        # How many of the record's fields each format has (the newer, the
        # more: fields are only ever added at the end, with a default).
        self.field_counts = {1: len(names) - 1, 2: len(names)}


@functools.cache
def _layout() -> _Layout:
    return _Layout()


def _encode(rec: CommandRecord) -> bytes:
    layout = _layout()
    values = list(layout.record_values(rec))
    values[layout.writes] = [layout.event_values(e) for e in rec.writes]
    values[layout.reads] = [layout.event_values(e) for e in rec.reads]
    return marshal.dumps((_FORMAT, *values))


def _events(values: object) -> list[FileEvent]:
    if not isinstance(values, list):
        raise ValueError("events")
    event = _layout().event
    return [event(*v) for v in values]


def _decode(payload: bytes) -> CommandRecord:
    layout = _layout()
    value = marshal.loads(payload)
    if not isinstance(value, tuple) or not value or value[0] not in layout.field_counts:
        raise ValueError("unknown spool record format")
    values = list(value[1:])
    if len(values) != layout.field_counts[value[0]]:
        raise ValueError("spool record of the wrong length")
    values[layout.writes] = _events(values[layout.writes])
    values[layout.reads] = _events(values[layout.reads])
    return layout.record(*values)


def _records_from(
    fd: int, start: int, limit: int, until: int | None = None
) -> list[tuple[int, CommandRecord]]:
    """Up to `limit` whole records from offset `start` (those ending by
    `until`): (end offset, record), None for one that cannot be decoded."""
    out: list[tuple[int, CommandRecord]] = []
    for _off, end, payload in scan(fd, start):
        if until is not None and end > until:
            break
        try:
            rec = _decode(payload)
        except (ValueError, TypeError, EOFError, IndexError):
            rec = None
        out.append((end, rec))  # type: ignore[arg-type]
        if len(out) >= limit:
            break
    return out


def frame(rec: CommandRecord) -> bytes:
    return _frame_payload(_encode(rec))


def _frame_payload(payload: bytes) -> bytes:
    head = struct.pack("=I", len(payload))
    crc = zlib.crc32(payload, zlib.crc32(head))
    return FRAME.pack(MAGIC, len(payload), crc) + payload


def scan(fd: int, start: int) -> Iterator[tuple[int, int, bytes]]:
    """(offset, end offset, payload) of every intact frame from `start`;
    stops at the end or at the first frame that does not check out."""
    off = start
    while True:
        head = os.pread(fd, FRAME.size, off)
        if len(head) < FRAME.size:
            return
        magic, length, crc = FRAME.unpack(head)
        if magic != MAGIC or length > MAX_PAYLOAD:
            return
        payload = os.pread(fd, length, off + FRAME.size)
        if len(payload) != length or zlib.crc32(payload, zlib.crc32(head[4:8])) != crc:
            return
        end = off + FRAME.size + length
        yield off, end, payload
        off = end


def extent(fd: int, start: int) -> tuple[int, int]:
    """(number of intact frames from `start`, offset where they end)."""
    count, end = 0, start
    for frame_end in (e for _o, e, _p in scan(fd, start)):
        count, end = count + 1, frame_end
    return count, end


def _open_dir(directory: Path) -> None:
    # The data directory may be a link (the Docker edition's shared
    # /journal): one another user made, or may write to, is not used, as
    # the journal's (shournal.store.engine) -- nothing is created in it.
    if directory.parent.name == "spool" and len(directory.name) == KEY_LEN:
        # a journal's spool in <data dir>/spool, which is as private
        # (native/preload/start.c makes it so as well)
        _open_dir(directory.parent)
    elif directory.parent.exists():
        try:
            _paths.check_own_directory(directory.parent, follow_links=True, forbidden_mode=0o022)
        except _paths.UnsafeDirectory as exc:
            raise SpoolError(str(exc)) from None
    _paths.make_private_dir(directory)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise SpoolError(f"{directory} is not a private directory of yours (mode 0700)")


COMMITTED_SIZE = 64


def _committed_line(inode: int, offset: int) -> bytes:
    body = f"{inode} {offset}".encode()
    line = body + b" %08x" % zlib.crc32(body)
    return line.ljust(COMMITTED_SIZE - 1) + b"\n"


def _read_committed(path: Path, inode: int) -> int:
    """The committed offset into the records file `inode`; 0 when the file
    names another one, is missing or does not check out (then everything
    is replayed, each command looked up)."""
    try:
        fields = path.read_bytes().split()
        if len(fields) == 3:  # (two: a spool of an earlier version)
            if _committed_line(int(fields[0]), int(fields[1])).split() != fields:
                return 0
        elif len(fields) != 2:
            return 0
        ino, off = int(fields[0]), int(fields[1])
    except (OSError, ValueError):
        return 0
    return off if ino == inode and off >= 0 else 0


class Spool:
    """The spool of one journal key; only its daemon (holding its lock)
    opens it for writing.  Not thread-safe: the daemon serialises."""

    def __init__(self, directory: Path | None = None, records_dir: Path | None = None) -> None:
        """`records_dir`: where the records file and its committed offset
        are (a host's folder in a shared spool_dir: shared_records_dir),
        if not in `directory`."""
        self.dir = directory or spool_dir()
        _open_dir(self.dir)
        self.records_dir = records_dir or self.dir
        if records_dir is not None:
            _open_shared_dir(records_dir)
        self.path = self.records_dir / "records"
        self.committed_path = self.records_dir / "committed"
        self.torn_bytes = 0  # cut off at opening (a crash's torn tail)
        self._open()

    def _open(self) -> None:
        fd = os.open(
            self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            os.close(fd)
            raise SpoolError(f"{self.path} is not a regular file of yours")
        self.fd = fd
        self.inode = st.st_ino
        self.committed = min(_read_committed(self.committed_path, st.st_ino), st.st_size)
        _count, end = extent(fd, self.committed)
        if end < st.st_size:
            # A torn tail: cut it off, keep everything before it.
            self.torn_bytes += st.st_size - end
            os.ftruncate(fd, end)
            os.fsync(fd)
        self.end = end

    def close(self) -> None:
        os.close(self.fd)

    def append(self, recs: list[CommandRecord]) -> None:
        """Append and fsync (one fsync for the whole batch)."""
        data = b"".join(frame(r) for r in recs)
        try:
            write_all(self.fd, data)
            os.fsync(self.fd)
        except OSError:
            # Keep what was there: a partial frame would end the spool.
            os.ftruncate(self.fd, self.end)
            raise
        self.end += len(data)

    def pending(self, limit: int) -> list[tuple[int, CommandRecord]]:
        """Up to `limit` records not yet committed: (end offset, record).
        A record that cannot be decoded is skipped (kept in the file)."""
        return _records_from(self.fd, self.committed, limit, until=self.end)

    def backlog(self) -> int:
        """Bytes spooled but not yet in the journal."""
        return self.end - self.committed

    def take_confirmed(self) -> bool:
        """Commit what another host pushed from our records file in a
        shared spool_dir (its `pushed.<host>` confirmation); True if that
        moved the committed offset."""
        if self.records_dir == self.dir:
            return False
        offset = min(confirmed_offset(self.records_dir, self.inode), self.end)
        if offset <= self.committed:
            return False
        # only at the end of a frame of ours (a confirmation is a file on
        # shared storage: a wrong offset must not cut a record)
        for _off, end, _payload in scan(self.fd, self.committed):
            if end >= offset:
                if end != offset:
                    return False
                self.commit(offset)
                return True
        return False

    def commit(self, offset: int) -> None:
        """Everything up to `offset` is in the journal."""
        self.committed = offset
        if self.committed == self.end and self.end >= ROTATE_BYTES:
            self._rotate()
            return
        self._write_committed(self.inode, offset)

    def _write_committed(self, inode: int, offset: int) -> None:
        """In place (see the module's docstring): creating and renaming a
        file per batch cost more than the batch's other file work."""
        fd = os.open(
            self.committed_path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            line = _committed_line(inode, offset)
            if os.pwrite(fd, line, 0) != len(line):
                raise OSError(f"{self.committed_path}: short write")
        finally:
            os.close(fd)

    def _rotate(self) -> None:
        """Start an empty file.  The committed offset names the new file's
        inode before the file takes the name (a freed inode number is soon
        reused: the old "<inode> <offset>" could match the new file); a
        crash in between replays the old file, each command looked up."""
        tmp = self.records_dir / ".records.new"
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(
            tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        self._write_committed(inode, 0)
        os.replace(tmp, self.path)
        os.close(self.fd)
        self._open()


def backlog_of(directory: Path | None = None) -> tuple[int, int]:
    """(commands, bytes) spooled but not yet in the journal, read without
    the daemon (for `shournal doctor`); (0, 0) without a spool.  With a
    shared spool_dir: `directory` is the host's folder there
    (shared_records_dir)."""
    directory = directory or spool_dir()
    try:
        fd = os.open(directory / "records", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return 0, 0
    try:
        st = os.fstat(fd)
        start = min(_read_committed(directory / "committed", st.st_ino), st.st_size)
        count, end = extent(fd, start)
        return count, end - start
    finally:
        os.close(fd)


# -- the inbox ------------------------------------------------------------------
#
# A listener without the daemon (`shournal run`, a shell configured with the
# Python listener) that cannot store its command line (the journal is
# corrupt, of a newer shournal, locked, full, unreachable) leaves it in
# `<spool dir>/inbox/`, one framed record per file, written and fsynced
# before the file takes its name (so a file there is whole).  Whoever next
# stores to the journal -- the next such listener, or the daemon -- takes
# them: each file under flock (one taker at a time), looked up before it is
# stored (a taker that died between the commit and the unlink leaves it for
# the next, which must not store it twice), then unlinked.

INBOX = "inbox"


def inbox_dir(directory: Path | None = None) -> Path:
    return (directory or spool_dir()) / INBOX


def _write_file(directory: Path, name: str, data: bytes, durable: bool) -> Path:
    """`directory`/`name` with `data`, whole or not at all (a temporary name
    renamed); `durable`: fsynced, file and directory."""
    tmp = directory / f".{name}.tmp"
    with suppress(FileNotFoundError):
        os.unlink(tmp)  # a killed writer's
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with open(fd, "wb", closefd=False) as fh:
            fh.write(data)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    os.rename(tmp, directory / name)
    if durable:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return directory / name


def deposit(rec: CommandRecord, directory: Path | None = None) -> Path:
    """Leave `rec` in the inbox, durably; its path.  Raises OSError or
    SpoolError."""
    base = directory or spool_dir()
    _open_dir(base)
    inbox = inbox_dir(base)
    _open_dir(inbox)
    return _write_file(inbox, f"{time.time_ns()}-{os.getpid()}.rec", frame(rec), durable=True)


# -- command lines the store daemon is reading ---------------------------------
#
# The daemon takes a command line's control message (text, times, status)
# off the control socket when its events start; killed before the command
# line is spooled, it would take that message with it.  So it leaves the
# message in `<spool>/started/<forwarder pid>` until the command line is
# spooled: the forwarder, which still holds the control socket and the
# relay, hands them to the next daemon (or the standalone listener, which
# it becomes with exec, same pid), which finds the message here, reads
# the events the holder still has, and counts the rest as lost on the way
# (the holder's end-to-end count).  Not fsynced: it serves the forwarder,
# which a machine crash ends as well.

STARTED = "started"


def _started_dir(directory: Path | None) -> Path:
    return (directory or spool_dir()) / STARTED


# Forwarders whose file this process wrote or found (keep_started,
# take_started): forget_started removes only those, so that a line nothing
# was kept for costs no unlink.
_started_here: set[int] = set()

# Directories keep_started has checked (the daemon keeps one message per
# command line: the checks cost more than the write).  Checked again after
# any failure to write there.
_checked_started: set[Path] = set()


def keep_started(
    pid: int, cmd: CommandMessage, cwd: str, directory: Path | None = None
) -> None:
    base = directory or spool_dir()
    started = _started_dir(base)
    payload = marshal.dumps(
        (_FORMAT, cmd.return_value, cmd.start_ns, cmd.end_ns, cmd.session, cmd.text, cwd,
         cmd.uuid)
    )
    data = _frame_payload(payload)
    _started_here.add(pid)
    if started in _checked_started:
        try:
            _write_started(started / str(pid), data)
            return
        except OSError:
            _checked_started.discard(started)
    _open_dir(base)
    _open_dir(started)
    _write_started(started / str(pid), data)
    _checked_started.add(started)


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd`` (a write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_started(path: Path, data: bytes) -> None:
    """Written in place, not under a temporary name renamed: the frame's
    checksum tells a torn file (the daemon killed while writing it), which
    take_started reads as none, as it would a file never renamed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def take_started(pid: int, directory: Path | None = None) -> tuple[CommandMessage, str] | None:
    """The control message and working directory a killed daemon left for
    the forwarder `pid`, if any (left in place: see forget_started)."""
    try:
        fd = os.open(
            _started_dir(directory) / str(pid), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        )
    except OSError:
        return None
    _started_here.add(pid)
    try:
        frames = [payload for _o, _e, payload in scan(fd, 0)]
    finally:
        os.close(fd)
    try:
        fmt, ret, start, end, session, text, cwd, *rest = marshal.loads(frames[0])
        if fmt not in _layout().field_counts or len(rest) != fmt - 1:  # format 2 added the UUID
            return None
        uuid = rest[0] if rest else bytes(16)
        return CommandMessage(ret, start, end, session, text, uuid=uuid), cwd
    except (ValueError, TypeError, EOFError, IndexError):
        return None


def forget_started(pid: int, directory: Path | None = None) -> None:
    """Remove what keep_started wrote, or take_started found, for `pid`."""
    if pid not in _started_here:
        return
    _started_here.discard(pid)
    with suppress(OSError):
        os.unlink(_started_dir(directory) / str(pid))


def started_pids(directory: Path | None = None) -> list[int]:
    try:
        return [int(p.name) for p in _started_dir(directory).iterdir() if p.name.isdigit()]
    except OSError:
        return []


def inbox_count(directory: Path | None = None) -> int:
    try:
        return sum(1 for p in inbox_dir(directory).iterdir() if p.name.endswith(".rec"))
    except OSError:
        return 0


def take_inbox(store, directory: Path | None = None) -> int:
    """Store every command waiting in the inbox (Store `store`), oldest
    first; the number stored.  A file another taker holds is left to it;
    one that does not check out is left where it is (never guessed at).
    Store errors propagate: what is not stored stays."""
    try:
        names = sorted(p.name for p in inbox_dir(directory).iterdir() if p.name.endswith(".rec"))
    except OSError:
        return 0
    stored = 0
    for name in names:
        path = inbox_dir(directory) / name
        with _taken(path) as fd:
            if fd is None:
                continue
            records = [payload for _o, _e, payload in scan(fd, 0)]
            if len(records) != 1:
                continue
            try:
                rec = _decode(records[0])
            except (ValueError, TypeError, EOFError):
                continue
            if not store.has_command(rec):
                store.add_command(rec)
                stored += 1
            os.unlink(path)
    return stored


@contextmanager
def _taken(path: Path) -> Iterator[int | None]:
    """`path` opened and flock'ed for its one taker: None if it is gone,
    another taker holds it, or it was unlinked by the taker before us."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield None
            return
        yield None if os.fstat(fd).st_nlink == 0 else fd
    finally:
        os.close(fd)


# -- command lines' starts ------------------------------------------------------
#
# The shell leaves each command line's start (text, working directory, start
# time, session, and which processes record it) in `<spool>/starts/` before
# the line runs (native/preload/start.c write_start_file; the format is
# struct shournal_start_file in native/shournal_protocol.h, one frame as
# above).  Whoever stores the line removes it: the daemon once the line is
# in its spool (fsynced), a listener once the journal (or the inbox) has it.
# A start whose holder and listener (the helper, then the forwarder or the
# Python listener: one pid) are both gone -- killed, or a machine crash --
# has nobody left to store it: recover_starts stores it as incomplete.

STARTS = STARTS_DIR
# A temporary file (".<name>") of a writer killed before its rename is
# removed when it is older than this.
_STALE_TMP_SECONDS = 3600


def starts_dir(directory: Path | None = None) -> Path:
    return (directory or spool_dir()) / STARTS


def start_name(pid: int, session: bytes | None, start_ns: int) -> str:
    """The start file's name of the command line whose listener is `pid`
    (shournal_protocol.h)."""
    return f"{pid}-{(session or bytes(16)).hex()}-{start_ns}"


def forget_start(
    pid: int, session: bytes | None, start_ns: int, directory: Path | None = None
) -> None:
    """The line is stored (or not to be stored): its start goes."""
    with suppress(OSError):
        os.unlink(starts_dir(directory) / start_name(pid, session, start_ns))


class StartFile(_Value):
    """(A plain class with __slots__, not a dataclass: see shournal.data.)"""

    __slots__ = ("holder_pid", "holder_starttime", "listener_pid", "listener_starttime",
                 "start_ns", "session", "cwd", "text", "uuid")
    holder_pid: int
    holder_starttime: int
    listener_pid: int
    listener_starttime: int
    start_ns: int
    session: bytes
    cwd: str
    text: bytes
    uuid: bytes  # all zeros: none (format 1, or getrandom failed)

    def __init__(self, holder_pid: int, holder_starttime: int, listener_pid: int,
                 listener_starttime: int, start_ns: int, session: bytes, cwd: str, text: bytes,
                 uuid: bytes = bytes(16)) -> None:
        self.holder_pid = holder_pid
        self.holder_starttime = holder_starttime
        self.listener_pid = listener_pid
        self.listener_starttime = listener_starttime
        self.start_ns = start_ns
        self.session = session
        self.cwd = cwd
        self.text = text
        self.uuid = uuid


def _parse_start(fd: int) -> StartFile | None:
    from shournal.capture.protocol import (
        MAX_COMMAND_TEXT,
        START_FILE,
        START_FILE_1,
        START_FORMAT,
        cut_mark,
    )

    frames = [payload for _o, _e, payload in scan(fd, 0)]
    if len(frames) != 1 or len(frames[0]) < 4:
        return None
    payload = frames[0]
    (fmt,) = struct.unpack_from("=I", payload)
    # format 1: an older preload library's, without the uuid
    layout = START_FILE if fmt == START_FORMAT else START_FILE_1 if fmt == 1 else None
    if layout is None or len(payload) < layout.size:
        return None
    _fmt, hpid, lpid, cwd_len, hstart, lstart, start_ns, session, *uuid = layout.unpack_from(
        payload
    )
    if layout.size + cwd_len > len(payload):
        return None
    cwd = payload[layout.size : layout.size + cwd_len]
    text = payload[layout.size + cwd_len :]
    if len(text) > MAX_COMMAND_TEXT:
        text = text[:MAX_COMMAND_TEXT] + cut_mark(MAX_COMMAND_TEXT).encode()
    return StartFile(
        hpid, hstart, lpid, lstart, start_ns, session, os.fsdecode(cwd) or "/", text,
        uuid[0] if uuid else bytes(16),
    )


def read_start(path: Path) -> StartFile | None:
    """The start in `path`; None if it is not one (absent, torn)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return _parse_start(fd)
    finally:
        os.close(fd)


def find_start(pid: int, directory: Path | None = None) -> tuple[Path, StartFile] | None:
    """The start a shell left for the listener `pid`, if any (its listener
    got neither the shell's report nor the start through the holder)."""
    prefix = f"{pid}-"
    try:
        names = [n for n in os.listdir(starts_dir(directory)) if n.startswith(prefix)]
    except OSError:
        return None
    for name in sorted(names):
        path = starts_dir(directory) / name
        start = read_start(path)
        if start is not None and start.listener_pid == pid:
            return path, start
    return None


def _runs(pid: int, starttime: int) -> bool:
    """Does the process `pid` that started at `starttime` (field 22 of
    /proc/<pid>/stat; 0: unknown, any process of that pid counts) still
    run?  A zombie does not; a later process with the pid is not it."""
    if pid <= 0:
        return False
    fields = proc.stat_fields(pid)
    if not fields or fields[0] == b"Z":
        return False
    return starttime == 0 or (len(fields) > 19 and int(fields[19]) == starttime)


def recorder_gone(start: StartFile) -> bool:
    return not _runs(start.listener_pid, start.listener_starttime) and not _runs(
        start.holder_pid, start.holder_starttime
    )


def orphaned_starts(
    directory: Path | None = None, names: list[str] | None = None
) -> list[Path]:
    """Start files whose recorder is gone (cheap: no journal); removes
    temporary files left by killed writers, and files that do not check
    out once their recorder is gone.  `names`: the directory's listing,
    if the caller has just made it."""
    base = starts_dir(directory)
    if names is None:
        try:
            names = os.listdir(base)
        except OSError:
            return []
    out: list[Path] = []
    for name in names:
        path = base / name
        if name.startswith("."):
            with suppress(OSError):
                if time.time() - os.lstat(path).st_mtime > _STALE_TMP_SECONDS:
                    os.unlink(path)
            continue
        start = read_start(path)
        if start is None:
            pid = name.split("-", 1)[0]
            if pid.isdigit() and not _runs(int(pid), 0):
                # torn (a crash before the kernel wrote it back): nothing
                # in it can be stored
                with suppress(OSError):
                    os.unlink(path)
            continue
        if recorder_gone(start):
            out.append(path)
    return out


def recover_starts(store, username: str, hostname: str, admit, warn,
                   directory: Path | None = None, busy: Container[int] = frozenset()) -> int:
    """Store every start whose recorder is gone as an incomplete command
    (Store `store`), once; the number stored.  Only when the daemon's spool
    has no backlog (a line spooled but not yet in the journal would be
    missed by the lookup).  Each file under flock (one recoverer at a
    time; one unlinked meanwhile was taken), looked up first (a recorder
    killed between storing the line and removing its start stored it
    already).  `admit(text)`: None for a command the config ignores
    (dropped), else its text as stored and its redactions by kind
    (shournal.capture.listener.admit);
    `warn(start, message)`: the warning naming the command; `busy`: the
    listener pids of lines the caller (the daemon) is reading now, whose
    forwarder may be gone already.  Store errors propagate: what is not
    stored stays."""
    paths = orphaned_starts(directory)
    if not paths or backlog_of(directory)[0]:
        return 0
    from shournal.record import CommandRecord

    stored = 0
    for path in sorted(paths, key=lambda p: p.name.rsplit("-", 1)[-1]):
        with _taken(path) as fd:
            if fd is None:
                continue
            start = _parse_start(fd)
            if start is None or start.listener_pid in busy or not recorder_gone(start):
                continue
            text = start.text.decode("utf-8", errors="backslashreplace")
            admitted = admit(text) if text.strip() else None
            if admitted is not None:
                rec = CommandRecord(
                    text=admitted[0],
                    return_value=RETURN_VALUE_UNKNOWN,
                    start_ns=start.start_ns,
                    end_ns=start.start_ns,
                    working_dir=start.cwd,
                    username=username,
                    hostname=hostname,
                    session_uuid=start.session if any(start.session) else None,
                    uuid=start.uuid if any(start.uuid) else None,
                    hash_chunk_size=None,
                    hash_max_reads=None,
                    lost_events=1,
                    lost_reasons={"relay": 1},
                    incomplete=True,
                    redactions=admitted[1],
                )
                if not store.has_command(rec):
                    store.add_command(rec)
                    stored += 1
                    warn(start, "the recorder of this command line was killed while it ran: "
                         "stored from its start, without its end and file events "
                         "(event relay ended early)")
            os.unlink(path)
    return stored


# -- a shared spool_dir ----------------------------------------------------------
#
# `[store] spool_dir` names a folder on shared storage (docs/lab.md): each
# host appends to `<spool_dir>/<host>/<journal key>/records` (the rest of
# the spool -- starts, inbox -- stays local: it serves the host's own
# processes).  Any host that reaches the server pushes the other hosts'
# records too, reading them, never writing them: after the server
# confirmed a batch it leaves `pushed.<its host>` ("<inode> <offset>
# <crc>", as `committed`) beside the file, and only the writing host moves
# its own committed offset (and so empties the file) up to what such a
# confirmation names.  File locks on network file systems are not
# trusted: two hosts may push the same frames at once, and the command's
# UUID (ON CONFLICT DO NOTHING) keeps one.

PUSHED = "pushed."


def shared_records_dir(shared: str, host: str, key: str) -> Path:
    return Path(shared) / _safe_name(host) / key


def _safe_name(host: str) -> str:
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in host).lstrip(".")
    return name or "_"


def _open_shared_dir(directory: Path) -> None:
    """`<spool_dir>/<host>/<key>`: spool_dir must be the user's own folder,
    not writable by group or others (it is on shared storage: another
    user's folder could hold anything)."""
    root = directory.parent.parent
    try:
        _paths.check_own_directory(root, follow_links=True, forbidden_mode=0o022)
    except FileNotFoundError:
        _paths.make_private_dir(root)
    except _paths.UnsafeDirectory as exc:
        raise SpoolError(f"[store] spool_dir: {exc}") from None
    _paths.make_private_dir(directory)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise SpoolError(f"{directory} is not a directory of yours")


def others_records(shared: str, own: Path) -> list[Path]:
    """The other hosts' records files in the spool_dir `shared` (regular
    files of ours only)."""
    out: list[Path] = []
    try:
        hosts = sorted(os.listdir(shared))
    except OSError:
        return out
    for host in hosts:
        try:
            keys = sorted(os.listdir(Path(shared) / host))
        except OSError:
            continue
        for key in keys:
            path = Path(shared) / host / key / "records"
            if path.parent == own:
                continue
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                out.append(path)
    return out


def _pushed_marks(directory: Path) -> list[Path]:
    try:
        return [directory / n for n in os.listdir(directory) if n.startswith(PUSHED)]
    except OSError:
        return []


def confirmed_offset(directory: Path, inode: int) -> int:
    """The furthest offset into the records file `inode` that another host
    confirmed the server holds (0: none)."""
    return max((_read_committed(p, inode) for p in _pushed_marks(directory)), default=0)


def foreign_pending(path: Path, me: str, limit: int) -> tuple[int, list[tuple[int, CommandRecord]]]:
    """(inode, up to `limit` records of another host's records file `path`
    that neither its host committed nor we confirmed); undecodable ones
    come as None (skipped, confirmed with the rest)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        start = max(_read_committed(path.parent / "committed", st.st_ino),
                    _read_committed(path.parent / f"{PUSHED}{_safe_name(me)}", st.st_ino),
                    confirmed_offset(path.parent, st.st_ino))
        return st.st_ino, _records_from(fd, min(start, st.st_size), limit)
    finally:
        os.close(fd)


def confirm_pushed(path: Path, me: str, inode: int, offset: int) -> None:
    """Tell the writing host of `path` that the server holds its records
    up to `offset` (it commits them: Spool.take_confirmed)."""
    _write_file(path.parent, f"{PUSHED}{_safe_name(me)}", _committed_line(inode, offset),
                durable=False)


def foreign_backlog(shared: str, own: Path, me: str) -> int:
    """Commands in the other hosts' records files not pushed yet."""
    n = 0
    for path in others_records(shared, own):
        try:
            n += len(foreign_pending(path, me, 1 << 30)[1])
        except OSError:
            continue
    return n


def records_dir_of(shared: str) -> Path:
    """Where this host's records file of our journal is: in the spool, or
    in the shared spool_dir `shared` (the config's; empty: none)."""
    import socket

    if not shared:
        return spool_dir()
    return shared_records_dir(shared, socket.gethostname(), _paths.journal_key())
