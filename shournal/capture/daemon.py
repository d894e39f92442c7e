"""The per-user store daemon: takes every command line of its user from the
forwarders, spools each finished one durably, and stores the spool in the
journal.

Why a daemon: a Python listener per command line cost ~0.27 s of CPU each
(interpreter and SQLAlchemy start-up), stalled pasted lines and busy
shells, and lost the command when the journal was locked for long, full or
corrupt.  Now shournal-suid execs native/shournal_forward.c as the
listener: it hands the control socket and the relay (fds 3 and 4) to this
daemon over `<runtime dir>/daemon.<key>.sock` (starting the daemon if none
runs), and waits, as a blocked C process, until the daemon says the
command line is spooled: its markers (`<pid>.run/.end/.store`, named
after the forwarder) keep meaning "being recorded" to the shell and to
`shournal query`, and a forwarder that outlives a killed daemon leaves a
marker of a dead process, which the shell reports.

Each command line gets a thread running the listener's own code
(shournal.capture.listener.collect: the blocking relay flushes and grace sleeps
need no rewrite as a state machine, and a thread costs far less than the
work).  A finished command line goes to the spool (shournal.capture.spool; one
fsync per batch of command lines finishing together) before the forwarder
is told, and the store thread writes the spool to the journal, retrying
while the journal is locked, full, corrupt or unreachable, with one
warning per condition (naming the command) -- the command is never lost
to a store failure.

One daemon per journal of a user: which journal a command line belongs to
is decided by the shell's environment that the journal's resolution reads
(shournal._paths.journal_key: SHOURNAL_DB_URL, XDG_CONFIG_HOME,
XDG_DATA_HOME, HOME), and the forwarder hands it to the daemon of that
key, `<runtime dir>/daemon.<key>.sock`; the shell starts that daemon with
that environment, so it resolves the journal, its config and its spool
(`<data dir>/spool/<key>`) as the line's own programs do -- and never
takes another key's lines.  It holds flock on `<runtime
dir>/daemon.<key>.lock`; a second one of the key exits at once.  It exits
after `[store] daemon_idle_seconds`
without a command line, once the spool is drained: it first removes its
socket's name (new forwarders start a new daemon, which waits for the
lock only through their retries), then takes what was already queued on
the socket.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import signal
import socket
import struct
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

from shournal import _paths
from shournal.capture import listener, protocol
from shournal.capture.spool import (
    confirm_pushed,
    find_start,
    foreign_backlog,
    foreign_pending,
    forget_start,
    forget_started,
    orphaned_starts,
    others_records,
    records_dir_of,
    started_pids,
    starts_dir,
    take_inbox,
)
from shournal.capture.spool import inbox_count as spool_inbox_count
from shournal.capture.sync_state import SyncState, write_state
from shournal.errors import journal_condition
from shournal.record import CommandRecord

# Commands stored per journal batch (the committed offset is written once
# per batch), unless the journal takes more in one transaction
# (Store.batch_size: PostgreSQL, where each transaction waits for the server).
_BATCH = 64
# Retry delays while the journal is unusable: doubled after each failed
# attempt, up to _RETRY_MAX for a journal file (a lock or a full disk
# clears in seconds) and _RETRY_MAX_SERVER for a database server (an
# outage lasts minutes, and every host of a lab retries against the one
# server).  `shournal sync` asks for an attempt at once.
_RETRY_FIRST = 0.5
_RETRY_MAX = 10.0
_RETRY_MAX_SERVER = 60.0
# Storing waits until no command line has been handed over or finished for
# _QUIET seconds (at most _DEFER_MAX after the oldest unstored one was
# spooled): command lines arriving together (a script, a paste, a busy
# shell: they follow each other within tens of milliseconds; typed ones
# come seconds apart) then do not compete with the journal's writes for
# the CPU (the store daemon shares the machine with the shells it serves),
# and are stored in one go -- one transaction for many lines.
_QUIET = 0.15
_DEFER_MAX = 1.0
# How often the accept loop looks at the idle time once it is up, while
# lines are still read or stored.  Before that it sleeps until the idle
# time is up: waiting for the next typed line, it does not wake (on a VM
# each timed wake costs ~0.1 ms of CPU).
_TICK = 1.0
_CWD_MAX = 4096
# How often the daemon looks for starts of command lines whose recorder
# (holder and forwarder) died while the daemon ran: every _STARTS_CHECK
# seconds while there are starts on disk (lines running); once none are
# left, at the next command line handed over (its worker looks, if the
# last look is _STARTS_CHECK old), a drain (`shournal query`), or after
# _STARTS_IDLE_CHECK -- a daemon waiting for the next typed line does not
# wake every 2 s for an empty directory.
_STARTS_CHECK = 2.0
_STARTS_IDLE_CHECK = 60.0
# How often the daemon looks for other hosts' commands in a shared
# spool_dir (and at once when `shournal sync` asks).
_SHARED_CHECK = 30.0
# The push's state beside the spool (sync_state.py) is written at once
# when what it says changes -- the cause, since when, the backlog -- and
# otherwise, after a successful push, at most every _STATE_REFRESH seconds
# and when the daemon exits: a file made and renamed per typed line cost
# ~0.5 ms of CPU, a sixth of the daemon's part of the line.  The time of
# the last successful push in the file then lags by that much at most
# while the daemon runs; `shournal sync` and `shournal doctor` ask a
# running daemon for it.
_STATE_REFRESH = 30.0


class Daemon:
    def __init__(self, rundir: Path, sock: socket.socket) -> None:
        from shournal.capture.spool import Spool

        self.rundir = rundir
        self.sock = sock
        self.key = _paths.journal_key()  # our environment does not change
        self.cfg = listener.load_listener_config()
        self._cfg_path = _paths.config_file()  # our environment does not change
        self._cfg_stamp = self._config_stamp()
        listener._write_setup_args(self.cfg)
        # A shared spool_dir (spool.py): taken from the config at the
        # start; a change takes effect with the next daemon.
        self.host = socket.gethostname()
        self.shared = self.cfg.store.spool_dir or None
        self.spool = Spool(records_dir=records_dir_of(self.shared) if self.shared else None)
        self._foreign_due = 0.0  # when to look at the other hosts' spools next
        self._foreign_passes = 0  # looks at them done so far (sync waits for the next)
        mutex = threading.RLock()
        self.lock = threading.Condition(mutex)
        # What the store thread waits on: woken only when it has something
        # new to do (a first command in the spool, a drain, the stop), not
        # by every command line's comings and goings (each wake a thread
        # switch and a turn of its loop).
        self._store_wake = threading.Condition(mutex)
        self.active = 0  # command lines being collected
        # Connections are served by worker threads kept for the next one
        # (a thread's start and end cost about as much as the rest of a
        # short command line's Python): _start hands them over here.
        self._work: queue.SimpleQueue[socket.socket] = queue.SimpleQueue()
        self._idle_workers = 0
        self.last_activity = time.monotonic()
        self.stopping = False
        self.error: str | None = None  # the journal's current condition
        self._error_since: float | None = None  # when it began (time.time())
        self._last_push: float | None = None  # the last successful push (time.time())
        # What the state file says (cause, since, backlog, last push), and
        # when it is due again unchanged (see _STATE_REFRESH).
        self._state_written: tuple[object, ...] | None = None
        self._state_due = 0.0
        # Store attempts: the number of the last one started, of the last
        # one failed; a sync waits for the outcome of one started after its
        # request, which a pending sync (_sync_wanted) starts without the
        # backoff's wait.
        self._attempt = 0
        self._failed_attempt = 0
        self._sync_wanted = False
        # The shells (session ids; None: a line without one) warned about
        # the current condition: one warning per shell and per condition.
        self._warned: set[bytes | None] = set()
        self.stored = 0
        self.lost = 0
        self.probes = 0  # connections that only asked whether we are up
        self._alone = False  # the latest hand-over came alone (_start)
        # After a start (a crash may have come between a journal commit and
        # the committed offset) and after a failed attempt, each spooled
        # command is looked up in the journal before it is stored.
        self.verify = self.spool.backlog() > 0
        if self.spool.torn_bytes:
            listener._warn(
                f"the spool ended in a torn record ({self.spool.torn_bytes} bytes, "
                "a crash while it was written): that command line was not recorded"
            )
        self._forget_dead_started()
        # Starts of lines whose recorder died (spool.recover_starts): looked
        # for at once, then as _STARTS_CHECK says.
        self._starts_checked = -_STARTS_IDLE_CHECK
        self._starts_period = _STARTS_CHECK
        self._reading: set[int] = set()  # listener pids of the lines being read
        self._queue: list[tuple[CommandRecord, _Waiter]] = []
        self._spooled_at: float | None = None  # oldest unstored one's
        self._draining = 0  # callers of drain(): store at once
        # The spool's writer: spool_record's appends and the store thread's
        # commit (which may replace the file) exclude each other.
        self._spool_lock = threading.Lock()
        self._writing = False
        # Whoever stores holds _storing and uses _journal (opened on first
        # use): the store thread, or a worker looking for orphaned starts
        # (_look_for_orphaned_starts).
        self._storing = threading.Lock()
        self._journal = None
        # The journal's URL (None: the default file; "" not resolved yet),
        # and the changes of the config's [store] url noticed since: the
        # lines spooled before a change (up to (inode, offset) of the
        # spool) still go to the journal they ended with.
        self._url: str | None = ""
        self._url_changes: list[tuple[int, int, str | None]] = []
        with suppress(Exception):  # (unreadable: said when the store opens)
            from shournal.location import resolve_url

            self._url = resolve_url(config=self.cfg)
        self.store_thread = threading.Thread(target=self._store_loop, daemon=True)

    def _forget_dead_started(self) -> None:
        """Control messages a killed daemon left for forwarders that are
        gone too (killed as well): nobody can resume those command lines."""
        from shournal.capture.spool import take_started

        for pid in started_pids(self.spool.dir):
            try:
                os.kill(pid, 0)
                continue
            except ProcessLookupError:
                pass
            except PermissionError:
                pass  # a reused pid
            started = take_started(pid, self.spool.dir)
            forget_started(pid, self.spool.dir)
            if started is not None and find_start(pid, self.spool.dir) is None:
                # (with its start on disk, the line is stored from there:
                # _recover_starts, which says so)
                cmd, _cwd = started
                listener._warn_about(
                    cmd, "the store daemon and the recorder were killed while they read "
                    "this command line: it was not recorded"
                )

    # -- config -------------------------------------------------------------

    def _config_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self._cfg_path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_ino

    def config(self):
        """The config, re-read when its file changed: a change takes effect
        from the next command line on, as with a listener per line."""
        stamp = self._config_stamp()
        if stamp != self._cfg_stamp:
            self._cfg_stamp = stamp
            self.cfg = listener.load_listener_config()
            listener._write_setup_args(self.cfg)
            self._note_url(self.cfg)
        return self.cfg

    def _note_url(self, cfg) -> None:
        """After a config change: a new [store] url takes the lines spooled
        from now on (as it does every reader's from now on)."""
        from shournal.location import resolve_url

        try:
            url = resolve_url(config=cfg)
        except Exception:  # noqa: BLE001 - the store says it when it opens
            return
        with self._spool_lock, self.lock:
            last = self._url_changes[-1][2] if self._url_changes else self._url
            if last != "" and url != last:
                self._url_changes.append((self.spool.inode, self.spool.end, url))

    # -- serving ------------------------------------------------------------

    def serve(self) -> int:
        self.store_thread.start()
        while True:
            with self.lock:
                idle_end = self.last_activity + self.cfg.store.daemon_idle_seconds
            self.sock.settimeout(max(idle_end - time.monotonic(), _TICK))
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                with self.lock:
                    quiet = (
                        self.active == 0
                        and self.spool.backlog() == 0
                        and time.monotonic() - self.last_activity
                        >= self.cfg.store.daemon_idle_seconds
                    )
                if quiet:
                    break
                continue
            except InterruptedError:
                continue
            except OSError:
                # Out of descriptors or memory: the forwarder waits and
                # retries its connect; try again shortly.
                time.sleep(0.1)
                continue
            self._start(conn)
        self._shut_down()
        return 0

    def _start(self, conn: socket.socket) -> None:
        with self.lock:
            before, self.last_activity = self.last_activity, time.monotonic()
        if _is_probe(conn):
            conn.close()
            self.probes += 1
            return
        with self.lock:
            # Nothing else going on for _QUIET: a typed line, which nothing
            # follows closely; its store need not wait (see _defer).
            self._alone = self.active == 0 and self.last_activity - before >= _QUIET
            self.active += 1
            idle = self._idle_workers > 0
            if idle:
                self._idle_workers -= 1
        self._work.put(conn)
        if not idle:
            threading.Thread(target=self._worker, daemon=True).start()

    def _worker(self) -> None:
        while True:
            self._connection(self._work.get())
            with self.lock:
                self._idle_workers += 1

    def _shut_down(self) -> None:
        # New forwarders must not queue up on a socket nobody accepts: the
        # name goes first, then what is queued already is taken.
        with suppress(OSError):
            os.unlink(self.rundir / (protocol.DAEMON_SOCKET % self.key))
        self.sock.setblocking(False)
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            conn.setblocking(True)
            self._start(conn)
        self.sock.close()
        with self.lock:
            while self.active or self.spool.backlog():
                if not self.lock.wait(_RETRY_MAX) and self.error:
                    break  # the journal is unusable: the spool keeps it
            self.stopping = True
            self.lock.notify_all()
            self._store_wake.notify_all()
        # the state file's time of the last push, if it lags (_STATE_REFRESH)
        if self._storing.acquire(timeout=_RETRY_MAX):
            try:
                self._write_state(final=True)
            finally:
                self._storing.release()

    def _connection(self, conn: socket.socket) -> None:
        try:
            self._handle(conn)
        except Exception as exc:  # noqa: BLE001 - a failure is one warning line
            listener._warn(f"store daemon: {exc}".splitlines()[0])
        finally:
            conn.close()
            with self.lock:
                self.active -= 1
                self.last_activity = time.monotonic()
                self.lock.notify_all()

    def _handle(self, conn: socket.socket) -> None:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            return
        data, fds, _flags, _ = socket.recv_fds(
            conn, protocol.DAEMON_MSG.size + _CWD_MAX, 2, socket.MSG_CMSG_CLOEXEC
        )
        if len(data) < protocol.DAEMON_MSG.size:
            for fd in fds:
                os.close(fd)
            return
        mtype, pid, arg, _ = protocol.DAEMON_MSG.unpack_from(data)
        if mtype == protocol.MSG_FORWARD and len(fds) == 2:
            cwd = os.fsdecode(data[protocol.DAEMON_MSG.size :]) or "/"
            switch = not arg & protocol.FORWARD_BY_HELPER
            self._forwarded(conn, pid, cwd, fds[0], fds[1], switch)
            return
        for fd in fds:
            os.close(fd)
        if mtype == protocol.MSG_DRAIN:
            left = self.drain(arg / 1000)
            conn.send(protocol.DAEMON_MSG.pack(protocol.MSG_DRAINED, os.getpid(), left, 0))
        elif mtype == protocol.MSG_SYNC:
            left = self.sync(arg / 1000)
            text = json.dumps(self.sync_state(left).as_dict()).encode()
            conn.send(protocol.DAEMON_MSG.pack(protocol.MSG_DRAINED, os.getpid(), left, 0) + text)
        elif mtype == protocol.MSG_STATUS:
            text = json.dumps(self.status()).encode()
            conn.send(protocol.DAEMON_MSG.pack(protocol.MSG_STATUS, os.getpid(), 0, 0) + text)

    def _forwarded(self, conn: socket.socket, pid: int, cwd: str, ctl: int, relay: int,
                   shell_switch: bool = True) -> None:
        try:
            # (what the forwarder sends, from our own user: see Relay)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, fileno=ctl)
        except OSError:
            os.close(ctl)
            os.close(relay)
            raise
        with self.lock:
            self._reading.add(pid)  # its start is not to be recovered meanwhile
        try:
            rec = listener.collect(
                sock, listener.Relay(relay, checked=True), self.config(), cwd, pid,
                self.spool.dir, self.rundir, shell_switch,
            )
            if rec is not None and self.spool_record(rec):
                forget_start(pid, rec.session_uuid, rec.start_ns, self.spool.dir)
                if self.error is not None:
                    self._warn_waiting(rec)
        finally:
            with self.lock:
                self._reading.discard(pid)
        forget_started(pid, self.spool.dir)
        listener._remove_markers(pid, self.rundir)
        with suppress(OSError):
            conn.send(protocol.DAEMON_MSG.pack(protocol.MSG_SPOOLED, os.getpid(), 0, 0))
        self._look_for_orphaned_starts()

    # -- spooling -----------------------------------------------------------

    def spool_record(self, rec: CommandRecord) -> bool:
        """Append to the spool; command lines finishing together share one
        write and fsync (the first one in writes for all).  False: neither
        spooled nor stored."""
        me = _Waiter()
        with self.lock:
            self._queue.append((rec, me))
            leader = not self._writing
            self._writing = True
        while leader:
            with self.lock:
                batch, self._queue = self._queue, []
                if not batch:
                    self._writing = False
                    break
            err: OSError | None = None
            # Not under self.lock: the fsync takes milliseconds, in which
            # the other command lines go on (and queue for the next write).
            with self._spool_lock:
                try:
                    self.spool.append([r for r, _ in batch])
                except OSError as exc:
                    err = exc
            with self.lock:
                if err is None and self._spooled_at is None:
                    self._spooled_at = time.monotonic()
                    self._store_wake.notify()  # it waits for a first one
            for _, w in batch:
                w.done(err)
        if me.wait() is not None:
            # The spool itself failed (its disk is full): store directly.
            return self._store_direct(rec, me.error)
        return True

    def _look_for_orphaned_starts(self, until: float | None = None) -> None:
        """In a worker: the look for starts whose recorder died, if the last
        one is _STARTS_CHECK old and nothing is waiting to be stored
        (recover_starts needs the spool drained) -- unless the store thread
        is storing.  `until` (a drain): now, whatever the last one's age,
        after what is being stored, if that is over by then."""
        if until is None:
            if time.monotonic() - self._starts_checked < _STARTS_CHECK:
                return
            taken = self._storing.acquire(blocking=False)
        else:
            taken = self._storing.acquire(timeout=max(until - time.monotonic(), 0.0))
        if not taken:
            return
        try:
            with self.lock:
                drained = self.spool.backlog() == 0
            if drained:
                self._recover_starts()
        finally:
            self._storing.release()

    def _store_direct(self, rec: CommandRecord, why: OSError | None) -> bool:
        try:
            listener.store_record(rec, self.cfg)
        except Exception as exc:  # noqa: BLE001
            with self.lock:
                self.lost += 1
            listener._warn(
                f"command not recorded (spool: {why.strerror if why else '?'}; journal: "
                f"{str(exc).splitlines()[0]}): {listener.short_command(rec.text)}",
                rec.session_uuid,
            )
            return False
        return True

    # -- storing ------------------------------------------------------------

    def _store_loop(self) -> None:
        while True:
            try:
                self._store_until_stopped()
                return
            except Exception as exc:  # noqa: BLE001 - the spool keeps the commands
                listener._warn(f"store daemon: {exc}".splitlines()[0])
                self.verify = True
                time.sleep(_RETRY_MAX)

    def _store_until_stopped(self) -> None:
        with self._storing:
            self._adopt_old_spool()
        delay = _RETRY_FIRST
        while True:
            with self.lock:
                while not self.stopping:
                    if self.spool.backlog() == 0:
                        due = self._starts_checked + self._starts_period - time.monotonic()
                        if self.shared:
                            due = min(due, self._foreign_due - time.monotonic())
                        if due <= 0:
                            break
                        self._store_wake.wait(due)
                        continue
                    wait = self._defer()
                    if wait <= 0:
                        break
                    self._store_wake.wait(wait)
                backlog = self.spool.backlog()
                if backlog == 0 and self.stopping:
                    break
            with self._storing:
                if backlog == 0:
                    if self.shared and time.monotonic() >= self._foreign_due:
                        self._push_foreign()
                    self._recover_starts()
                    continue
                ok = self._store_batch()
            if ok:
                delay = _RETRY_FIRST
                continue
            with self.lock:
                if self.stopping:
                    break
                if not self._sync_wanted:
                    self._store_wake.wait(delay)  # (a drain or sync wakes it at once)
            delay = min(delay * 2, _RETRY_MAX_SERVER if self._to_server() else _RETRY_MAX)
        with self._storing:
            if self._journal is not None:
                self._journal.close()
                self._journal = None

    def _push_foreign(self) -> bool:
        """Push the other hosts' records in the shared spool_dir, batch by
        batch, each confirmed to its writer after the journal took it
        (spool.py; the caller holds _storing).  False: the journal failed."""
        assert self.shared is not None
        self._attempt_starts()
        pushed = False
        try:
            for path in others_records(self.shared, self.spool.records_dir):
                while True:
                    try:
                        inode, batch = foreign_pending(path, self.host, self._batch_size())
                    except OSError:
                        break
                    if not batch:
                        break
                    try:
                        if self._journal is None:
                            self._journal = self._open_store()
                        recs = [rec for _end, rec in batch if rec is not None]
                        n = self._journal.add_commands(recs, skip_stored=True)
                    except Exception as exc:  # noqa: BLE001 - retried at the next look
                        self._drop_journal()
                        # (no shell here to tell: their shells run elsewhere)
                        self._journal_failed(exc, [])
                        return False
                    pushed = True
                    with self.lock:
                        self.stored += n
                        self._last_push = time.time()
                    try:
                        confirm_pushed(path, self.host, inode, batch[-1][0])
                    except OSError:
                        break  # pushed again at the next look (and kept once)
        finally:
            with self.lock:
                self._foreign_due = time.monotonic() + _SHARED_CHECK
                self._foreign_passes += 1
                self.lock.notify_all()
        if pushed:
            with self.lock:
                recovered, self.error = self.error is not None, None
                if recovered:
                    self._error_since = None
                    self._warned.clear()
            self._write_state(pushed=True)
        return True

    def _store_batch(self) -> bool:
        """Store the spool's next batch in the journal (the caller holds
        _storing); False: the journal failed (warned once per condition),
        the batch stays in the spool."""
        self._attempt_starts()
        if self.shared:
            # what another host pushed for us (its confirmation)
            with self._spool_lock, self.lock:
                with suppress(OSError):
                    self.spool.take_confirmed()
                if self.spool.backlog() == 0:
                    self._spooled_at = None
                    self.lock.notify_all()
                    return True
        with self.lock:
            backlog = self.spool.backlog()
            batch = self.spool.pending(self._batch_size()) if backlog else []
            limit = self._url_limit()
            if limit is not None:  # the lines of the journal before the change first
                batch = [(end, rec) for end, rec in batch if end <= limit]
        if not batch:
            # a backlog without records cannot be (the spool checked them):
            # retried later rather than at once
            return not backlog
        try:
            if self._journal is None:
                self._journal = self._open_store()
            recs = [rec for _end, rec in batch if rec is not None]
            self.lost += len(batch) - len(recs)
            # (with a shared spool_dir another host may have pushed them)
            self.stored += self._journal.add_commands(
                recs, skip_stored=self.verify or self.shared is not None)
            # what listeners without the daemon could not store
            if spool_inbox_count(self.spool.dir):
                self.stored += take_inbox(self._journal, self.spool.dir)
        except Exception as exc:  # noqa: BLE001 - retried; one warning per condition
            self.verify = True
            self._drop_journal()
            self._journal_failed(exc, batch)
            return False
        self.verify = False
        with self._spool_lock:
            try:
                self.spool.commit(batch[-1][0])
            except OSError:
                # Only the committed offset was not written: a restart
                # looks the commands up before storing them again.
                pass
        with self.lock:
            recovered = self.error is not None
            if recovered:
                self.error = None
                self._error_since = None
                self._warned.clear()
            if self.spool.backlog() == 0:
                self._spooled_at = None
            self._last_push = time.time()
            self.lock.notify_all()
        self._write_state(pushed=True)
        return True

    def _attempt_starts(self) -> None:
        with self.lock:
            self._attempt += 1
            self._sync_wanted = False

    def _to_server(self) -> bool:
        """The journal is on a database server (not a file)."""
        url = self._url
        return bool(url) and not str(url).startswith("sqlite")

    def _write_state(self, pushed: bool = False, final: bool = False) -> None:
        """The push's state beside the spool (shournal.capture.sync_state),
        for `shournal sync` and `shournal doctor` (a journal file has
        none: its failures are the store check's).  `pushed`: after a
        successful push, written only if what it says changed or it is
        due (_STATE_REFRESH); `final`: at the exit, only if it lags.  The
        caller holds _storing (one writer of the file at a time)."""
        if not self._to_server():
            return
        with self.lock:
            state = SyncState(self.error, self._error_since, 0, self._last_push)
            # (the commands waiting, without reading the spool's files when
            # its bytes say: none)
            none_waiting = not self.shared and self.spool.backlog() == 0
        state.backlog = 0 if none_waiting else self.spool_count()
        says = (state.cause, state.since, state.backlog, state.last_push)
        if self._state_written is not None:
            if final and says == self._state_written:
                return
            if (pushed and says[:3] == self._state_written[:3]
                    and time.monotonic() < self._state_due):
                return
        elif final:
            return  # (no push was tried)
        try:
            write_state(self.spool.dir, state)
        except OSError:
            return  # (tried again at the next push)
        self._state_written = says
        self._state_due = time.monotonic() + _STATE_REFRESH

    def _url_limit(self) -> int | None:
        """Take the config's URL changes whose earlier lines are all stored
        (the caller holds _storing and the lock); the spool offset up to
        which the journal open now takes lines, None: all."""
        while self._url_changes:
            inode, at, url = self._url_changes[0]
            if inode == self.spool.inode and self.spool.committed < at:
                return at
            self._url_changes.pop(0)
            self._drop_journal()
            self._url = url
        return None

    def _batch_size(self) -> int:
        """Commands per journal batch (the journal's once it is open)."""
        size = self._journal.batch_size if self._journal is not None else None
        return max(size or _BATCH, _BATCH)

    def _open_store(self):
        from shournal.location import resolve_url
        from shournal.store import Store

        if self._url == "":
            self._url = resolve_url(config=self.cfg)
        store = Store(self._url)
        for note in store.notes:
            listener._warn(note)
        try:
            listener._share(store, self.cfg)
        except BaseException:
            store.close()
            raise
        return store

    def _recover_starts(self) -> None:
        """Store the lines whose recorder died while they ran, from their
        starts on disk (the spool is drained: see spool.recover_starts;
        the caller holds _storing).  The journal is opened only when there
        is one; a failure leaves them for the next check."""
        self._starts_checked = time.monotonic()
        try:
            names = os.listdir(starts_dir(self.spool.dir))
        except OSError:
            names = []
        # ("." names: starts still being written, or left by a killed writer)
        present = any(not name.startswith(".") for name in names)
        self._starts_period = _STARTS_CHECK if present else _STARTS_IDLE_CHECK
        if not names or not orphaned_starts(self.spool.dir, names):
            return
        with self.lock:
            self._url_limit()  # (the spool is drained: every change is due)
        try:
            if self._journal is None:
                self._journal = self._open_store()
            n = listener.recover_starts(self._journal, self.cfg, self._reading)
            with self.lock:
                self.stored += n
        except Exception as exc:  # noqa: BLE001 - retried at the next check
            self._journal_failed(exc, [])
            self._drop_journal()

    def _adopt_old_spool(self) -> None:
        """The spool of a shournal of one daemon per user, in
        `<data dir>/spool` itself (records, inbox, starts): stored, each
        looked up first, by the daemon of the data directory's default
        journal -- the one daemon of then served the shells of the default
        environment, unless one with another journal had started it, which
        nothing on disk tells.  At each start: shells that loaded the
        earlier library still leave their lines' starts there.  (The
        caller holds _storing; a failure leaves them for the next start.)"""
        from shournal.capture.spool import STARTS, Spool, inbox_count

        old = self.spool.dir.parent
        if self._url is not None or old.name != "spool":
            return
        has_records = (old / "records").exists()
        has_starts = any(not n.startswith(".") for n in _listdir(old / STARTS))
        if not (has_records or has_starts or inbox_count(old)):
            return
        try:
            if self._journal is None:
                self._journal = self._open_store()
            n = 0
            if has_records:
                spool = Spool(old)
                try:
                    while batch := spool.pending(_BATCH):
                        recs = [rec for _end, rec in batch if rec is not None]
                        n += self._journal.add_commands(recs, skip_stored=True)
                        spool.commit(batch[-1][0])
                finally:
                    spool.close()
                for name in ("records", "committed"):
                    with suppress(FileNotFoundError):
                        os.unlink(old / name)
            n += take_inbox(self._journal, old)
            n += listener.recover_starts(self._journal, self.cfg, self._reading, old)
            with self.lock:
                self.stored += n
        except Exception as exc:  # noqa: BLE001 - left for the next start
            self._drop_journal()
            listener._warn(f"store daemon: the spool of an earlier shournal in {old} is kept: "
                           f"{exc}".splitlines()[0])

    def _drop_journal(self) -> None:
        """After a failure (the caller holds _storing): the next attempt
        opens the journal anew."""
        if self._journal is not None:
            with suppress(Exception):
                self._journal.close()
            self._journal = None

    def _defer(self) -> float:
        """How long the store thread should still wait before storing
        (under the lock): see _QUIET.  Not at all for a line that came
        alone and is the only one being read (its own, spooling it): a
        wait would only wake the thread once more (on a VM a timed wake
        costs ~0.1 ms of CPU); the first line of a burst is then stored
        on its own, the rest together."""
        now = time.monotonic()
        since = self._spooled_at if self._spooled_at is not None else now
        if self._draining or (self._alone and self.active <= 1):
            return 0.0
        return min(self.last_activity + _QUIET, since + _DEFER_MAX) - now

    def _journal_failed(self, exc: BaseException, batch) -> None:
        condition = journal_condition(exc)
        with self.lock:
            self._failed_attempt = self._attempt
            if condition != self.error:
                self.error = condition
                self._error_since = time.time()
                self._warned.clear()
            self.lock.notify_all()
        self._write_state()
        # Each shell whose commands wait is told once per condition, at its
        # next prompt, naming its first waiting command; a shell whose
        # lines come later is told when the first of them is spooled
        # (_warn_waiting).
        firsts: dict[bytes | None, CommandRecord] = {}
        for _end, rec in batch:
            if rec is not None:
                firsts.setdefault(rec.session_uuid, rec)
        for rec in firsts.values():
            self._warn_waiting(rec)
        if not firsts:  # (no command of a shell here: to any shell, once)
            with self.lock:
                if self.error is None or None in self._warned:
                    return
                self._warned.add(None)
            listener._warn(f"{condition}; {self.spool_count()} command(s) kept in the spool")

    def _warn_waiting(self, rec: CommandRecord) -> None:
        """Tell the shell of `rec` that its commands wait in the spool, once
        per condition of the journal."""
        with self.lock:
            condition = self.error
            if condition is None or rec.session_uuid in self._warned:
                return
            self._warned.add(rec.session_uuid)
        n = self.spool_count()
        how = "pushed once it is usable (shournal sync)" if self._to_server() else (
            "stored once it is usable")
        listener._warn(
            f"{condition}; {n} command(s) kept in the spool, {how}: "
            f"{listener.short_command(rec.text)}",
            rec.session_uuid,
        )

    def spool_count(self) -> int:
        from shournal.capture.spool import backlog_of

        n = backlog_of(self.spool.records_dir)[0]
        if self.shared:
            n += foreign_backlog(self.shared, self.spool.records_dir, self.host)
        return n

    def drain(self, timeout: float) -> int:
        """Wait (bounded) until everything spooled so far is stored; the
        number of commands still waiting."""
        deadline = time.monotonic() + timeout
        with self.lock:
            target = self.spool.end
            self._draining += 1
            self._store_wake.notify()
            try:
                while self.spool.committed < target and self.spool.end != 0:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.lock.wait(left)
            finally:
                self._draining -= 1
            drained = self.spool.committed >= target or self.spool.backlog() == 0
        if not drained:
            return self.spool_count()
        # a line whose recorder died is in the journal for the query too
        self._look_for_orphaned_starts(until=deadline)
        return 0

    def sync(self, timeout: float) -> int:
        """Push now (`shournal sync`): wait (bounded) until everything
        spooled so far is stored, or an attempt made meanwhile failed; the
        number of commands still waiting."""
        deadline = time.monotonic() + timeout
        with self.lock:
            target = self.spool.end
            first = self._attempt + 1  # (one under way may have begun before the request)
            passes = self._foreign_passes
            self._foreign_due = 0.0
            self._sync_wanted = True
            self._draining += 1
            self._store_wake.notify()
            try:
                while (((self.spool.committed < target and self.spool.end != 0)
                        or (self.shared and self._foreign_passes == passes))
                       and self._failed_attempt < first):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.lock.wait(left)
            finally:
                self._draining -= 1
        return self.spool_count()

    def sync_state(self, backlog: int) -> SyncState:
        with self.lock:
            return SyncState(self.error, self._error_since, backlog, self._last_push,
                             time.time(), os.getpid())

    def status(self) -> dict[str, object]:
        with self.lock:
            return {
                "pid": os.getpid(),
                "key": self.key,
                "journal": self._location(),
                "active": self.active,
                "backlog_bytes": self.spool.backlog(),
                "stored": self.stored,
                "lost": self.lost,
                "probes": self.probes,
                "error": self.error,
                "last_push": self._last_push,
            }


    def _location(self) -> str:
        """The journal we store into: a file, or the URL without password."""
        from shournal.location import resolve_url

        try:
            url = resolve_url(config=self.cfg)
        except Exception as exc:  # noqa: BLE001 - said as it is
            return f"? ({str(exc).splitlines()[0]})"
        if url is None:
            return _paths.default_db_file()
        if url.startswith("sqlite:///"):
            return url.removeprefix("sqlite:///").split("?", 1)[0] or ":memory:"
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(url)
        except ValueError:
            return "? (not a URL)"
        if parts.password is not None:  # as the store shows it
            host = parts.netloc.rpartition("@")[2]
            parts = parts._replace(netloc=f"{parts.username}:***@{host}")
        return parts.geturl()


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _is_probe(conn: socket.socket) -> bool:
    """A connection closed before it sent anything: a shell asking whether
    a daemon is up (ensure_daemon in native/preload/daemon.c: once, then
    again only after the daemon it found has exited).  Answered by the
    accept alone, without a thread (its start and stack cost more than the
    rest of the probe).  A forwarder's message is usually there already;
    one that is not yet gets its thread."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class _Waiter:
    def __init__(self) -> None:
        self._event = threading.Event()
        self.error: OSError | None = None

    def done(self, error: OSError | None) -> None:
        self.error = error
        self._event.set()

    def wait(self) -> OSError | None:
        self._event.wait()
        return self.error


# -- start-up -----------------------------------------------------------------


def take_lock(rundir: Path) -> int | None:
    """The daemon lock of our journal key (held until exit), or None if
    another daemon holds it.  Taking it rewrites the file: the shell (ensure_daemon
    in native/preload/daemon.c) sees from that that its start of a daemon is
    over."""
    fd = os.open(
        rundir / (protocol.DAEMON_LOCK % _paths.journal_key()),
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def bind(rundir: Path) -> socket.socket:
    path = rundir / (protocol.DAEMON_SOCKET % _paths.journal_key())
    with suppress(FileNotFoundError):
        os.unlink(path)  # a dead daemon's: we hold the lock
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    old = os.umask(0o077)
    try:
        sock.bind(os.fspath(path))
    finally:
        os.umask(old)
    sock.listen(128)
    return sock


def main() -> int:
    # Started detached by a forwarder (its own session); a SIGHUP of a
    # stopped orphaned process group must not kill it.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        rundir = _paths.private_runtime_dir()
        lock = take_lock(rundir)
    except OSError as exc:
        print(f"shournal: store daemon: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if lock is None:
        return 0  # another daemon serves this journal
    os.chdir("/")
    listener._raise_nofile()
    try:
        sock = bind(rundir)
        daemon = Daemon(rundir, sock)
    except Exception as exc:  # noqa: BLE001
        listener._warn(f"store daemon failed to start: {exc}".splitlines()[0])
        return 1
    return daemon.serve()


if __name__ == "__main__":
    sys.exit(main())
