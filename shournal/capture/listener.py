"""The per-command listener: reads fanotify events of one command line and
stores the finished command.

The setuid helper execs this program after dropping privileges for good,
with the control socket on fd 3 and the event relay on fd 4 (see
native/shournal_protocol.h).  The fanotify group itself stays in the
helper's holder process: it was made with CAP_SYS_ADMIN, so its event fds
are opened without permission checks, and this program is the user's code.
The holder relays only events of files the user may read (faccessat2 with
his ids and groups), as records of what fstat, readlink and the partial hash
said when it read the event (C, no Python on that path: see bench/README.md
for the price split); reads of possible scripts come with their fd, for
archiving.

Two ways to run this code.  In a shell, shournal-suid execs
native/shournal_forward.c, which hands fds 3 and 4 to the user's store
daemon (shournal.capture.daemon): it runs collect() below per command line, in a
thread, and spools the record before storing it -- no Python start-up per
command line.  Standalone (this module's main), for `shournal run` (which
waits for the command to be stored) and as the forwarder's fallback when
no daemon answers, it stores the one command line itself.  Either way the
work starts only when the command line has ended, or when the holder's
queue of records passes 24 MiB (shournal-suid --lazy-listener); while the
command runs we only receive (see Collector.take).

The permission rules in shournal.capture.filters then apply the original's
owner/group/other test against the real ids on top.
"""

from __future__ import annotations

import fcntl
import functools
import os
import select
import signal
import socket
import sys
import time
from contextlib import suppress
from typing import TYPE_CHECKING

from shournal import _paths, redact
from shournal.capture import protocol, setup_args
from shournal.capture.collector import Collector, rules_of

if TYPE_CHECKING:
    from collections.abc import Callable, Container
    from pathlib import Path
from shournal.data import RETURN_VALUE_UNKNOWN
from shournal.record import CommandRecord

# (Batching like the original -- sleep after a small batch so events queue
# up -- happens in the holder, which reads the fanotify group.)
# After EOF, closes that raced the socket's release may still arrive.
_GRACE_FLUSHES = 2
_GRACE_SLEEP = 0.01
# How long a flush waits for the holder while it sends nothing: its answer
# comes after everything it queued before (up to QUEUE_MAX in
# shournal_holder.c), which a listener starved of CPU (it runs niced, see
# protocol.LISTENER_NICE) may take long to read; only the holder's silence
# means it is gone or hung.  _FLUSH_MAX bounds a flush in all (a holder
# kept busy by processes still writing in the namespace).
_FLUSH_TIMEOUT = 10.0
_FLUSH_MAX = 300.0
_RELAY_BUFSIZE = protocol.EVENTS.size + protocol.MAX_EVENTS_MSG
def _raise_nofile() -> None:
    """Reads of script candidates arrive with their fd (up to 253 per
    message) and are kept until settled (up to _PENDING_FDS): a login's
    soft limit of 1024 is tight for a burst."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


class Relay:
    """Our end of the holder's event relay (fd 4)."""

    def __init__(self, fd: int, checked: bool = False) -> None:
        # `checked`: the caller knows `fd` is the relay (the store daemon:
        # from its own user's forwarder), which spares the three system
        # calls that find a socket's family, type and protocol.
        self.sock = (
            socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, fileno=fd)
            if checked
            else socket.socket(fileno=fd)
        )
        self.sock.setblocking(False)
        self.seq = 0
        self.flushed = 0
        self.forwarded = 0
        self.messages = 0
        self.closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def pump(self, collector: Collector) -> int:
        """Handle every message waiting; return the number of events."""
        total = 0
        while not self.closed:
            try:
                data, fds, _flags, _ = socket.recv_fds(
                    self.sock, _RELAY_BUFSIZE, protocol.MAX_FDS_PER_MSG, socket.MSG_CMSG_CLOEXEC
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
            self.messages += 1
            total += self._handle(data, fds, collector)
        return total

    def _handle(self, data: bytes, fds: list[int], collector: Collector) -> int:
        if len(data) < protocol.EVENTS.size:
            for fd in fds:
                os.close(fd)
            return 0
        fields = protocol.EVENTS.unpack_from(data)
        mtype, count, _lost, seq, forwarded, nfds, chunk, reads = fields[:8]
        by_reason = fields[protocol.EVENTS_LOST_BY_REASON :]
        for reason, n in zip(protocol.HOLDER_LOST_REASONS, by_reason, strict=False):
            collector.lose(reason, n)
        collector.hash_settings = (chunk, reads) if chunk else None
        self.forwarded = forwarded
        if mtype == protocol.MSG_FLUSHED:
            self.flushed = seq
        if mtype == protocol.MSG_START:
            collector.start = protocol.start_message(data[protocol.EVENTS.size :])
        if mtype != protocol.MSG_EVENTS:
            for fd in fds:
                os.close(fd)
            return 0
        if len(fds) < nfds:  # MSG_CTRUNC: we ran out of descriptors
            collector.lose("relay", nfds - len(fds))
        collector.take(data[protocol.EVENTS.size :], count, fds)
        return count

    def missing(self, collector: Collector) -> int:
        """Records the holder sent that never arrived (end-to-end count:
        whatever happened on the way, it is not silent)."""
        collector.settle()
        return (self.forwarded - collector.received) & 0xFFFFFFFF

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
        start = time.monotonic()
        deadline = start + _FLUSH_TIMEOUT
        while self.flushed != self.seq and not self.closed:
            left = min(deadline, start + _FLUSH_MAX) - time.monotonic()
            # Past the deadline too, one look: a listener that got no CPU
            # for that long finds the answer waiting.
            if poller.poll(max(left, 0.0) * 1000):
                before = self.messages
                self.pump(collector)
                if self.messages != before and time.monotonic() < start + _FLUSH_MAX:
                    deadline = time.monotonic() + _FLUSH_TIMEOUT  # it still sends
                    continue
            if left <= 0:
                break
        return self.flushed == self.seq

    def close(self) -> None:
        self.sock.close()


# Files in the runtime dir are never opened through a link, nor created
# over one (O_CREAT with O_NOFOLLOW fails on a link; rename replaces it).
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


# A warning about one shell's command line goes to that shell only:
# `<rundir>/warnings.<session as 32 hex digits>`; others (a config error, the
# daemon failing) to `<rundir>/warnings`, which the first shell to prompt
# shows.  Must match show_listener_warnings() in native/preload/warnings.c.
WARNINGS = protocol.WARNINGS_FILE
# How long a command's text may be in a warning line.
WARN_COMMAND_WIDTH = 60


def short_command(text: str, width: int = WARN_COMMAND_WIDTH) -> str:
    """A command's text for a warning line: one line, shortened, control
    characters escaped (it goes to a terminal)."""
    from shournal.terminal import printable

    line = printable(" ".join(text.split()))
    return line if len(line) <= width else line[: width - 1] + "…"


def _warn(message: str, session: bytes | None = None) -> None:
    """Leave one line for the shell to show at its next prompt: the shell
    of `session` (a command line's session id), or any shell."""
    name = WARNINGS
    if session and any(session):
        name = f"{WARNINGS}.{session.hex()}"
    try:
        append_warning(_paths.private_runtime_dir() / name, message.replace("\n", " ") + "\n")
    except OSError:
        pass


def append_warning(path: Path, line: str) -> None:
    """Append `line` to the warnings file `path` under the lock the shell
    takes before it takes the file (see show_warnings_file in the preload
    library).  A file the shell took between our open and our lock is no
    longer at `path`: write to a new one, or the line would go to a file
    already read and removed."""
    data = line.encode("utf-8")
    for _attempt in range(8):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            _lock_briefly(fd)
            held = os.fstat(fd)
            try:
                named = os.lstat(path)
            except FileNotFoundError:
                continue
            if (named.st_ino, named.st_dev) != (held.st_ino, held.st_dev):
                continue
            os.write(fd, data)
            return
        finally:
            os.close(fd)


def _lock_briefly(fd: int) -> None:
    """flock(LOCK_EX), waiting at most about a second: a shell holds it
    only while it takes the file; past that (a shell stopped just then),
    the line is written without it rather than never."""
    for _ in range(100):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(0.01)


def _warn_about(command: protocol.CommandMessage | None, message: str) -> None:
    """A warning about `command` (None: not known yet), to its shell, naming it."""
    if command is None:
        _warn(message)
        return
    text = command.text.decode("utf-8", errors="backslashreplace")
    _warn(f"{message}: {short_command(text)}", command.session)


def _write_setup_args(cfg) -> None:
    """Leave the helper options for the shell's next command line (with
    the apparatus's per-directory options when it has paths)."""
    try:
        path = _paths.private_runtime_dir() / protocol.SETUP_ARGS_FILE
    except OSError:
        return
    if cfg.apparatus.paths or apparatus_paths_left(path):
        from shournal.capture import apparatus

        with suppress(OSError):
            apparatus.write_apparatus_args(cfg)
    setup_args.write_options(cfg, path)


def apparatus_paths_left(setup_args_file: Path) -> bool:
    return os.path.lexists(setup_args_file.parent / protocol.APPARATUS_PATHS_FILE)


def _mark_drained(pid: int | None = None, rundir: Path | None = None) -> None:
    """`<pid>.end` -> `<pid>.store`: every event is read, the next command
    line may start (the shell waits for this); storing follows.  `pid`: the
    process the markers are named after (default: this one; the store
    daemon passes its forwarder's, and its runtime directory, checked once
    at its start)."""
    pid = os.getpid() if pid is None else pid
    try:
        rundir = rundir or _paths.private_runtime_dir(create=False)
        os.rename(rundir / f"{pid}.{protocol.MARK_END}", rundir / f"{pid}.{protocol.MARK_STORE}")
    except OSError:
        pass


def _remove_markers(pid: int | None = None, rundir: Path | None = None) -> None:
    try:
        rundir = rundir or _paths.private_runtime_dir(create=False)
    except OSError:
        return
    pid = os.getpid() if pid is None else pid
    # (one marker, renamed along: .run -> .end -> .store, usually the last)
    for suffix in (protocol.MARK_STORE, protocol.MARK_END, protocol.MARK_RUN):
        try:
            os.unlink(f"{rundir}/{pid}.{suffix}")
            return
        except OSError:
            pass


def listen(
    sock: socket.socket,
    relay: Relay,
    collector: Collector,
    on_command: Callable[[protocol.CommandMessage], None] | None = None,
) -> protocol.CommandMessage | None:
    """Collect events until every process of the command line has exited
    (`on_command`: called with the control message once the line has stayed
    open _KEEP_AFTER seconds past it -- background processes still run)."""
    poller = select.poll()
    poller.register(relay.fileno(), select.POLLIN)
    poller.register(sock.fileno(), select.POLLIN)
    command: protocol.CommandMessage | None = None
    command_seen = 0.0
    eof_at = 0.0
    unkept: protocol.CommandMessage | None = None
    while True:
        timeout = None
        if unkept is not None:
            left = command_seen + _KEEP_AFTER - time.monotonic()
            if left <= 0 and on_command is not None:
                on_command(unkept)
                unkept = None
            else:
                timeout = max(1, int(left * 1000) + 1)
        ready = dict(poller.poll(timeout))
        if not ready:
            continue
        # Always take events first: the last ones must not be lost.
        relay.pump(collector)
        if relay.closed and relay.fileno() in ready:
            poller.unregister(relay.fileno())
        if sock.fileno() in ready:
            data, msg = protocol.recv_command(sock)
            if not data:
                eof_at = time.monotonic()
                break
            if msg is not None:
                command, command_seen = msg, time.monotonic()
                if on_command is not None:
                    unkept = msg
    # The command line has ended: what is left (the last events, settling
    # the kept ones, storing) yields to whatever the user runs next.  (A
    # listener started at the end of its command line already is at this
    # nice value: protocol.LISTENER_NICE.)
    with suppress(OSError):
        now = os.getpriority(os.PRIO_PROCESS, 0)
        if now < protocol.LISTENER_NICE:
            os.setpriority(os.PRIO_PROCESS, 0, protocol.LISTENER_NICE)
    complete = relay.flush(collector)
    # (A line where the shell forked nothing has no close that could race:
    # the shell's own closes came before its report.)
    for _ in range(0 if command is not None and command.shell_only else _GRACE_FLUSHES):
        time.sleep(_GRACE_SLEEP)
        complete = relay.flush(collector) and complete
    collector.settle()
    if not complete:
        # the holder died (or was killed): we cannot know what we missed
        collector.lose("relay")
        if command is None and collector.start is None:
            collector.relay_unreported = True
        else:
            _warn_about(command or collector.start, RELAY_ENDED_EARLY)
    else:
        collector.lose("relay", relay.missing(collector))
    eof_ns = time.time_ns() - int((time.monotonic() - eof_at) * 1e9)
    collector.eof_ns = eof_ns
    if command is not None and command_seen and eof_at - command_seen > 0.2:
        # Background processes kept the command line open past the prompt.
        command.end_ns = max(command.end_ns, eof_ns)
    if command is None and collector.start is not None:
        # No prompt reported the end (`exec`, a hangup): the line ended
        # when its last process did, with an unknown status.
        command = collector.start
        command.end_ns = max(eof_ns, command.start_ns)
    return command


# The store daemon keeps a command line's control message on disk for a
# successor (spool.keep_started) only when the line is still open this long
# after it: most lines end with their prompt, and a file written and removed
# per line costs the filesystem more than the rest of the line.  A daemon
# killed within this time leaves the line to be stored from its start on
# disk, as incomplete.
_KEEP_AFTER = 0.05

RELAY_ENDED_EARLY = "event relay ended early: file events of this command may be missing"


@functools.cache
def _username(uid: int) -> str:
    """(Cached: the store daemon asks once per command line.)"""
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def build_record(cwd: str, cmd: protocol.CommandMessage, collector: Collector) -> CommandRecord:
    hashed = collector.hash_settings
    # (the manifest first: building it redacts the apparatus's environment,
    # whose counts join the scripts')
    manifest = getattr(collector, "manifest", None)
    redactions = redact.add_counts(dict(collector.redactions), getattr(collector, "redacted", {}))
    return CommandRecord(
        text=cmd.text.decode("utf-8", errors="backslashreplace"),
        return_value=cmd.return_value,
        start_ns=cmd.start_ns,
        end_ns=max(cmd.end_ns, cmd.start_ns),
        working_dir=cwd,
        username=_username(os.getuid()),
        hostname=socket.gethostname(),
        session_uuid=cmd.session if any(cmd.session) else None,
        uuid=cmd.record_uuid(),
        hash_chunk_size=hashed[0] if hashed else None,
        hash_max_reads=hashed[1] if hashed else None,
        writes=list(collector.writes.values()),
        reads=list(collector.reads.values()),
        dropped_writes=collector.dropped_writes,
        dropped_reads=collector.dropped_reads,
        lost_events=sum(collector.lost.values()),
        apparatus=manifest,
        derived_from=getattr(collector, "derived_from", None),
        lost_reasons=dict(collector.lost),
        incomplete=cmd.incomplete,
        redactions=redactions,
    )


def _ignored(cfg, text: str) -> bool:
    return rules_of(cfg).ignore.matches_line(text)


def admit(cfg, text: str) -> tuple[str, dict[str, int]] | None:
    """The one gate of a command line's text on its way into a record
    (built here, or from a start on disk): None when the config ignores
    it (matched as typed), else the text with its secrets replaced by
    their markers (shournal.redact, the built-in patterns and the
    config's) and how many of each kind."""
    if _ignored(cfg, text):
        return None
    return redact.redact_text(text, redact.patterns_for(cfg.redact.patterns))


# Exit status of the listener when its command line could not be stored
# now and waits in the spool's inbox (1: not recorded at all).
# shournal.capture.runner tells the user; a shell's user gets a warning.
EXIT_KEPT = 3


def store_record(rec: CommandRecord, cfg) -> int:
    """Store `rec`, then whatever earlier listeners left in the spool's
    inbox (shournal.capture.spool.deposit) now that the journal takes commands."""
    from shournal.capture import spool
    from shournal.location import resolve_url
    from shournal.store import Store

    with Store(resolve_url(config=cfg), create=True) as store:
        for note in store.notes:
            _warn(note)
        _share(store, cfg)
        command_id = store.add_command(rec)
        if spool.inbox_count():
            try:
                spool.take_inbox(store)
            except Exception as exc:  # noqa: BLE001 - they stay for the next taker
                _warn(f"commands waiting in the spool not stored yet: {exc}".splitlines()[0])
        try:
            if not _daemon_runs():  # (it recovers them, knowing what it reads now)
                recover_starts(store, cfg)
        except Exception as exc:  # noqa: BLE001 - they stay for the next one
            _warn(f"command lines of killed recorders not stored yet: {exc}".splitlines()[0])
        return command_id


def _share(store, cfg) -> None:
    """Apply [store] share_with to a lab store (shournal.store.lab); what
    cannot be shared is said, and the command is stored all the same."""
    from shournal.store.lab import apply_sharing

    for note in apply_sharing(store, cfg.store.share_with):
        _warn(note)


def _daemon_runs() -> bool:
    """Does the store daemon of our journal (the pid in its lock file) run?"""
    try:
        rundir = _paths.private_runtime_dir(create=False)
        pid = int((rundir / (protocol.DAEMON_LOCK % _paths.journal_key())).read_text().split()[0])
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"daemon" in fh.read()
    except (OSError, ValueError, IndexError):
        return False


def recover_starts(store, cfg, busy: Container[int] = frozenset(),
                   directory: Path | None = None) -> int:
    """Store the command lines whose recorder was killed while they ran
    from their starts on disk (shournal.capture.spool.recover_starts; in
    the spool `directory`, default ours)."""
    from shournal.capture import spool

    def warn(start, message: str) -> None:
        text = start.text.decode("utf-8", errors="backslashreplace")
        _warn(f"{message}: {short_command(text)}", start.session)

    return spool.recover_starts(
        store, _username(os.getuid()), socket.gethostname(), lambda text: admit(cfg, text),
        warn, directory, busy
    )


def keep_record(rec: CommandRecord, exc: BaseException) -> int:
    """The journal did not take `rec` (`exc`): leave it in the spool's
    inbox for the next one that stores.  The exit status for the listener:
    EXIT_KEPT, or 1 when even that failed.  A shell's command line gets a
    warning at its prompt; `shournal run` (no session) says it itself."""
    from shournal.capture import spool
    from shournal.errors import journal_condition

    condition = journal_condition(exc)
    try:
        spool.deposit(rec)
    except (OSError, spool.SpoolError) as err:
        _warn(
            f"command not stored ({condition}; spool: {err}): {short_command(rec.text)}",
            rec.session_uuid,
        )
        return 1
    if rec.session_uuid is not None:
        _warn(
            f"{condition}; the command is kept in the spool, stored once it is usable: "
            f"{short_command(rec.text)}",
            rec.session_uuid,
        )
    return EXIT_KEPT


def load_listener_config():
    """The config, or the defaults (with one warning) when it is invalid."""
    from shournal.config import ConfigError, load_config

    try:
        return load_config()
    except ConfigError as exc:
        if os.environ.get(protocol.CONFIG_REPORTED_VAR) != "1":  # (`shournal run` said it)
            _warn(f"config error, using defaults: {exc}")
        return load_config(path=None, create=False, defaults_only=True)


def collect(
    sock: socket.socket,
    relay: Relay,
    cfg,
    cwd: str,
    pid: int | None = None,
    spool_dir: Path | None = None,
    rundir: Path | None = None,
    shell_switch: bool = True,
) -> CommandRecord | None:
    """Everything of one command line up to the record to store: its events
    until every process has exited, then the policy.  None: nothing to
    store (no text, or an ignored command).  Shared by this listener and
    the store daemon (shournal.capture.daemon), which passes the `pid` its
    forwarder's markers are named after, and its spool and runtime
    directories (found and checked once, not per command line).
    `shell_switch` False: the shell did not record this line with its
    apparatus (the helper handed it over itself), so the forwarder's
    environment is not read for the switch."""
    gids = frozenset(os.getgroups()) | {os.getgid()}
    # The one hook of the apparatus recorder (a plain Collector unless the
    # command is recorded with its apparatus).
    from shournal.capture import apparatus, spool

    collector = apparatus.collector(cfg, os.getuid(), gids, pid, cwd, shell_switch)
    forwarder = os.getpid() if pid is None else pid

    def keep(cmd: protocol.CommandMessage) -> None:
        # (the daemon only: see shournal.capture.spool.keep_started)
        try:
            spool.keep_started(forwarder, cmd, cwd, spool_dir)
        except (OSError, spool.SpoolError):
            pass  # only a kill of the daemon now would lose the command line

    command = listen(sock, relay, collector, keep if pid is not None else None)
    relay.close()  # the holder exits: nothing we do from here is observed
    sock.close()
    if command is None:
        # A daemon killed while it read this command line took its control
        # message; it left it for us.  The events it had are lost on the
        # way: counted (the holder's end-to-end count) and said.
        started = spool.take_started(forwarder, spool_dir)
        if started is not None:
            command, cwd = started
            lost = sum(collector.lost.values())
            _warn_about(
                command,
                f"the store daemon was killed while it read this command line: "
                f"{lost} file event(s) lost",
            )
    if command is None:
        # Neither the shell's report nor the start through the holder (it
        # was killed, then the line ended without a prompt): the start the
        # shell left on disk.
        found = spool.find_start(forwarder, spool_dir)
        if found is not None:
            _path, start = found
            command = protocol.CommandMessage(
                RETURN_VALUE_UNKNOWN,
                start.start_ns,
                max(collector.eof_ns, start.start_ns),
                start.session,
                start.text,
                incomplete=True,
                uuid=start.uuid,
            )
            cwd = start.cwd
            if collector.relay_unreported:
                _warn_about(command, RELAY_ENDED_EARLY)
    # Drained only now: a warning above is in place before the shell's next
    # prompt, which waits for this mark, and is shown there.
    _mark_drained(pid, rundir)
    if command is None or not command.text.strip():
        spool.forget_started(forwarder, spool_dir)
        if command is not None:
            spool.forget_start(forwarder, command.session, command.start_ns, spool_dir)
        return None
    rec = build_record(cwd, command, collector)
    admitted = admit(cfg, rec.text)
    if admitted is None:
        spool.forget_started(forwarder, spool_dir)
        spool.forget_start(forwarder, command.session, command.start_ns, spool_dir)
        return None
    rec.text = admitted[0]
    redact.add_counts(rec.redactions, admitted[1])
    return rec


def run(sock: socket.socket, relay: Relay) -> int:
    # A lazily started listener (shournal-suid --lazy-listener) waited in
    # "/" and got the command line's working directory in SHOURNAL_CWD.
    cwd = os.environ.pop("SHOURNAL_CWD", "")
    if not cwd:
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = os.environ.get("PWD", "/")
    os.chdir("/")  # never keep a mount busy for the command's lifetime

    cfg = load_listener_config()
    _write_setup_args(cfg)
    from shournal.capture.spool import forget_start, forget_started

    rec = collect(sock, relay, cfg, cwd)
    if rec is None:
        _remove_markers()
        return 0
    try:
        store_record(rec, cfg)
    except Exception as exc:  # noqa: BLE001 - the journal's failure: kept, or one warning
        status = keep_record(rec, exc)
        forget_started(os.getpid())
        if status == EXIT_KEPT:  # (else its start stays, to be stored from)
            forget_start(os.getpid(), rec.session_uuid, rec.start_ns)
        _remove_markers()
        return status
    forget_started(os.getpid())
    forget_start(os.getpid(), rec.session_uuid, rec.start_ns)
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
