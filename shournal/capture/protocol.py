"""Python side of native/shournal_protocol.h: every value and every
struct member's offset, size and signedness is checked against the
compiler by tests/unit/test_protocol.py."""

from __future__ import annotations

import os
import stat
import struct

from shournal.data import _Value

# Not typing.TYPE_CHECKING (~2 ms); socket is imported where a socket is
# used: readers of the constants (`shournal doctor`) do without it (~2 ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket

MSG_SETUP_DONE = 1
MSG_SETUP_FAIL = 2
MSG_COMMAND = 3
MSG_EVENTS = 4
MSG_FLUSH = 5
MSG_FLUSHED = 6
MSG_GO = 7
MSG_GO_ACK = 8
MSG_COMMAND_FD = 9
# Or'ed into COMMAND's and COMMAND_FD's type: the shell forked nothing
# while the line ran (shournal_protocol.h).
COMMAND_SHELL_ONLY = 0x100
# shell -> holder -> listener: the command line's start (see the header)
MSG_START = 14

FD_SOCKET = 3
FD_EVENTS = 4
FD_SPARE = 4  # setup --spare: a second namespace's control socket

MAX_FDS_PER_MSG = 253
MAX_EVENTS_MSG = 64 * 1024

REC_HASH = 1
REC_FD = 2
# the kernel's (<sys/fanotify.h>) values in shournal_record.mask
FAN_CLOSE_WRITE = 0x08
FAN_CLOSE_NOWRITE = 0x10

SYNC_TIMEOUT_MS = 250

SETUP_FD_ERROR = 1

MAX_COMMAND_LEN = 96 * 1024
MAX_COMMAND_TEXT = 16 * 1024 * 1024
MAX_START_TEXT = MAX_EVENTS_MSG - 64
MAX_FAIL_LEN = 512

# The runtime directory (see the header): marker suffixes and file names.
MARK_RUN = "run"
MARK_END = "end"
MARK_STORE = "store"
WARNINGS_FILE = "warnings"
SETUP_ARGS_FILE = "setup-args"
SETUP_ARGS_APPARATUS_FILE = "setup-args.apparatus"
APPARATUS_PATHS_FILE = "apparatus-paths"
# In the listener's environment: its config error was shown to the user
# already (by `shournal run`), so no warning is left for a shell.
CONFIG_REPORTED_VAR = "_SHOURNAL_CONFIG_REPORTED"

LISTENER_NICE = 10


class Layout(struct.Struct):
    """One struct of the header: its members in order, each a name and a
    :mod:`struct` format character (lower case: signed), packed in native
    byte order without padding (the header's structs have none)."""

    def __init__(self, c_name: str, *fields: tuple[str, str]) -> None:
        super().__init__("=" + "".join(fmt for _name, fmt in fields))
        self.c_name = c_name
        self.fields = fields

    def members(self) -> dict[str, tuple[int, int, bool]]:
        """Each member's offset, size and signedness."""
        out: dict[str, tuple[int, int, bool]] = {}
        offset = 0
        for name, fmt in self.fields:
            size = struct.calcsize("=" + fmt)
            out[name] = (offset, size, fmt[-1].islower() and fmt[-1] != "s")
            offset += size
        return out


SETUP_DONE = Layout(
    "shournal_setup_done",
    ("type", "I"), ("holder_pid", "i"), ("listener_pid", "i"), ("flags", "I"),
)  # fmt: skip
SETUP_FAIL = Layout("shournal_setup_fail", ("type", "I"), ("reserved", "I"))
COMMAND = Layout(
    "shournal_command",
    ("type", "I"), ("return_value", "i"), ("start_ns", "q"), ("end_ns", "q"),
    ("session", "16s"), ("uuid", "16s"),
)  # fmt: skip
# `lost` is the sum of the holder's reasons that follow it
EVENTS = Layout(
    "shournal_events",
    ("type", "I"), ("count", "I"), ("lost", "I"), ("seq", "I"), ("forwarded", "I"),
    ("nfds", "I"), ("hash_chunk", "I"), ("hash_reads", "I"), ("lost_overflow", "I"),
    ("lost_unreadable", "I"), ("lost_path", "I"), ("lost_reserved", "I"),
)  # fmt: skip
EVENTS_LOST = 2  # the field index of `lost`
EVENTS_LOST_BY_REASON = 8  # of lost_overflow; the holder's reasons follow
# The reasons the holder counts, in the order of its fields (names as in
# shournal.record.LOST_REASONS).
HOLDER_LOST_REASONS = ("overflow", "unreadable", "path")
# the path follows a record, padded to a multiple of 8
RECORD = Layout(
    "shournal_record",
    ("mask", "Q"), ("size", "Q"), ("mtime_ns", "q"), ("hash", "Q"), ("mode", "I"),
    ("uid", "I"), ("gid", "I"), ("pid", "i"), ("path_len", "H"), ("flags", "H"),
    ("reserved", "I"),
)  # fmt: skip
FLUSH = Layout("shournal_flush", ("type", "I"), ("seq", "I"))
GO = Layout("shournal_go", ("type", "I"), ("reserved", "I"))  # GO and GO_ACK

# The store daemon (see shournal.capture.daemon)
# one daemon per journal: "%s" is the journal key (shournal._paths.journal_key)
DAEMON_SOCKET = "daemon.%s.sock"
DAEMON_LOCK = "daemon.%s.lock"
KEY_LEN = 16
MSG_FORWARD = 9
MSG_SPOOLED = 10
MSG_DRAIN = 11
MSG_DRAINED = 12
MSG_STATUS = 13
MSG_SYNC = 14  # push now: answered with MSG_DRAINED and the push's state (JSON)
FORWARD_BY_HELPER = 1  # FORWARD's arg: see shournal_protocol.h
DAEMON_MSG = Layout(
    "shournal_daemon_msg", ("type", "I"), ("pid", "i"), ("arg", "I"), ("reserved", "I")
)
# A command line's start on disk (shournal.capture.spool: start files)
STARTS_DIR = "starts"
START_FORMAT = 2
START_FILE = Layout(
    "shournal_start_file",
    ("format", "I"), ("holder_pid", "i"), ("listener_pid", "i"), ("cwd_len", "I"),
    ("holder_starttime", "Q"), ("listener_starttime", "Q"), ("start_ns", "q"),
    ("session", "16s"), ("uuid", "16s"),
)  # fmt: skip
# Format 1 (an older preload library's, still read): without the uuid.
START_FILE_1 = struct.Struct("=" + "".join(f for _n, f in START_FILE.fields[:-1]))
LAYOUTS = (
    SETUP_DONE, SETUP_FAIL, COMMAND, EVENTS, RECORD, FLUSH, GO, DAEMON_MSG, START_FILE,
)  # fmt: skip


class ProtocolError(RuntimeError):
    pass


# Plain classes with __slots__ (shournal.data._Value), not dataclasses:
# see shournal.data.


class SetupDone(_Value):
    __slots__ = ("holder_pid", "listener_pid", "flags", "root_fd", "ns_fd", "sync_fd")
    holder_pid: int
    listener_pid: int
    flags: int
    root_fd: int  # the namespace's "/" (O_PATH)
    ns_fd: int  # keeps the namespace alive; useless for joining without privilege
    sync_fd: int  # to the holder: see SYNC in native/shournal_protocol.h

    def __init__(self, holder_pid: int, listener_pid: int, flags: int, root_fd: int,
                 ns_fd: int, sync_fd: int) -> None:
        self.holder_pid = holder_pid
        self.listener_pid = listener_pid
        self.flags = flags
        self.root_fd = root_fd
        self.ns_fd = ns_fd
        self.sync_fd = sync_fd


class CommandMessage(_Value):
    __slots__ = ("return_value", "start_ns", "end_ns", "session", "text", "incomplete",
                 "shell_only", "uuid")
    return_value: int
    start_ns: int
    end_ns: int
    session: bytes
    text: bytes
    # From START only: the shell never reported the line's end (it exec'd
    # a program, was hung up or died); the end is when its last process
    # exited, the exit status is unknown.
    incomplete: bool
    # The shell forked nothing while the line ran (COMMAND_SHELL_ONLY).
    shell_only: bool
    # The command line's UUID (shournal.record.CommandRecord.uuid); all
    # zeros: none.
    uuid: bytes

    def __init__(self, return_value: int, start_ns: int, end_ns: int, session: bytes,
                 text: bytes, incomplete: bool = False, shell_only: bool = False,
                 uuid: bytes = bytes(16)) -> None:
        self.return_value = return_value
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.session = session
        self.text = text
        self.incomplete = incomplete
        self.shell_only = shell_only
        self.uuid = uuid

    def record_uuid(self) -> bytes | None:
        """The UUID as a CommandRecord carries it."""
        return self.uuid if any(self.uuid) else None


def recv_setup(sock: socket.socket) -> SetupDone:
    """Wait for the helper's answer; raise ProtocolError with its reason."""
    import socket

    data, fds, _flags, _addr = socket.recv_fds(sock, SETUP_DONE.size + MAX_FAIL_LEN + 8, 3)
    if (
        len(data) >= SETUP_DONE.size
        and SETUP_DONE.unpack_from(data)[0] == MSG_SETUP_DONE
        and len(fds) == 3
    ):
        _t, holder, listener, flags = SETUP_DONE.unpack_from(data)
        return SetupDone(holder, listener, flags, fds[0], fds[1], fds[2])
    for fd in fds:
        os.close(fd)
    if len(data) >= SETUP_FAIL.size and SETUP_FAIL.unpack_from(data)[0] == MSG_SETUP_FAIL:
        raise ProtocolError(data[SETUP_FAIL.size :].decode(errors="replace"))
    if not data:
        raise ProtocolError("helper exited without answering")
    raise ProtocolError("bad answer from helper")


def send_command(sock: socket.socket, msg: CommandMessage) -> None:
    """COMMAND, or COMMAND_FD with the text in a memfd when it is longer."""
    head = (msg.return_value, msg.start_ns, msg.end_ns, msg.session, msg.uuid)
    if len(msg.text) <= MAX_COMMAND_LEN:
        sock.send(COMMAND.pack(MSG_COMMAND, *head) + msg.text)
        return
    fd = os.memfd_create("shournal-command", os.MFD_CLOEXEC)
    try:
        with open(fd, "wb", closefd=False) as fh:
            fh.write(msg.text[: MAX_COMMAND_TEXT + 1])
        import socket

        socket.send_fds(sock, [COMMAND.pack(MSG_COMMAND_FD, *head)], [fd])
    finally:
        os.close(fd)


def cut_mark(limit: int) -> str:
    """What a command text cut at `limit` bytes ends with."""
    return f"\n[shournal: command line cut at {limit} bytes]"


CUT_MARK = cut_mark(MAX_COMMAND_TEXT)


def _text_from_fd(fd: int) -> bytes:
    """At most MAX_COMMAND_TEXT bytes of a COMMAND_FD's memfd, marked when
    there was more."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return b""
    parts: list[bytes] = []
    got = 0
    while got <= MAX_COMMAND_TEXT:
        chunk = os.pread(fd, MAX_COMMAND_TEXT + 1 - got, got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    text = b"".join(parts)
    if len(text) > MAX_COMMAND_TEXT:
        text = text[:MAX_COMMAND_TEXT] + CUT_MARK.encode()
    return text


def start_message(payload: bytes) -> CommandMessage | None:
    """The shell's START as the holder relays it (after the relay header):
    the command line's start, its text cut visibly beyond MAX_START_TEXT
    bytes; None if it is not one."""
    if len(payload) < COMMAND.size:
        return None
    mtype, ret, start, _end, session, uuid = COMMAND.unpack_from(payload)
    if mtype != MSG_START:
        return None
    text = payload[COMMAND.size :].rstrip(b"\0")  # padding: the text has no NUL
    if len(text) > MAX_START_TEXT:
        text = text[:MAX_START_TEXT] + cut_mark(MAX_START_TEXT).encode()
    return CommandMessage(ret, start, 0, session, text, incomplete=True, uuid=uuid)


def recv_command(sock: socket.socket) -> tuple[bytes, CommandMessage | None]:
    """One message of the control socket: (its data, the command if it is
    one).  Empty data: EOF.  Any fd that came with it is closed."""
    import socket

    data, fds, _flags, _addr = socket.recv_fds(
        sock, COMMAND.size + MAX_COMMAND_LEN + 1, 1, socket.MSG_CMSG_CLOEXEC
    )
    try:
        if len(data) < COMMAND.size:
            return data, None
        mtype, ret, start, end, session, uuid = COMMAND.unpack_from(data)
        shell_only = bool(mtype & COMMAND_SHELL_ONLY)
        mtype &= ~COMMAND_SHELL_ONLY
        if mtype == MSG_COMMAND:
            text = data[COMMAND.size :]
        elif mtype == MSG_COMMAND_FD and len(fds) == 1:
            text = _text_from_fd(fds[0])
        else:
            return data, None
        return data, CommandMessage(
            ret, start, end, session, text, shell_only=shell_only, uuid=uuid
        )
    finally:
        for fd in fds:
            os.close(fd)


def daemon_request(
    rundir: str | os.PathLike[str], mtype: int, arg: int = 0, timeout: float = 5.0,
    key: str | None = None,
) -> tuple[int, bytes] | None:
    """Ask the store daemon of our journal (or of the journal key `key`)
    (MSG_DRAIN, MSG_STATUS): the answer's `arg` and the text after it, or
    None when no daemon answers."""
    import socket

    from shournal import _paths

    path = os.path.join(rundir, DAEMON_SOCKET % (key or _paths.journal_key()))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.send(DAEMON_MSG.pack(mtype, os.getpid(), arg, 0))
            data = s.recv(DAEMON_MSG.size + 65536)
    except OSError:
        return None
    if len(data) < DAEMON_MSG.size:
        return None
    _t, _pid, value, _ = DAEMON_MSG.unpack_from(data)
    return value, data[DAEMON_MSG.size :]
