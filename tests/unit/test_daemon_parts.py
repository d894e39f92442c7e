"""Small parts of the store daemon's per-command-line path, on real
sockets, files and a SQLite journal: the liveness probe a shell makes at
every command line is answered without a thread, the control message kept
for a killed daemon's successor is read back whole or not at all, and a
spool batch is stored in one transaction."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from shournal.capture import spool
from shournal.capture.daemon import _is_probe
from shournal.capture.protocol import CommandMessage
from shournal.record import CommandRecord, FileEvent
from shournal.store import Store


def test_a_connection_closed_before_sending_is_a_probe():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    b.close()
    try:
        assert _is_probe(a)
    finally:
        a.close()


def test_a_connection_with_a_message_or_none_yet_is_served():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        assert not _is_probe(a)  # nothing sent yet: the forwarder may be slow
        b.send(b"x" * 16)
        assert not _is_probe(a)
        assert a.recv(64) == b"x" * 16  # only peeked: the message is still there
    finally:
        a.close()
        b.close()


def test_kept_start_reads_back_and_a_torn_one_reads_as_none(tmp_path: Path):
    cmd = CommandMessage(0, 1, 2, b"\1" * 16, b"echo hi")
    spool.keep_started(4242, cmd, "/work", tmp_path)
    got = spool.take_started(4242, tmp_path)
    assert got is not None and got[0].text == b"echo hi" and got[1] == "/work"
    path = tmp_path / spool.STARTED / "4242"
    os.truncate(path, path.stat().st_size - 3)  # killed while writing it
    assert spool.take_started(4242, tmp_path) is None
    spool.keep_started(4242, cmd, "/elsewhere", tmp_path)  # rewritten whole
    got = spool.take_started(4242, tmp_path)
    assert got is not None and got[1] == "/elsewhere"


def _rec(text: str, start: int) -> CommandRecord:
    return CommandRecord(
        text=text, return_value=0, start_ns=start, end_ns=start + 1, working_dir="/w",
        username="u", hostname="h", session_uuid=b"\2" * 16, hash_chunk_size=256,
        hash_max_reads=3,
        writes=[FileEvent(path=b"/w/" + text.encode(), size=1, mtime_ns=start, mode=0o100644,
                          hash=7)],
    )


def test_a_batch_is_stored_in_one_transaction_and_a_replay_skips_stored(tmp_path: Path):
    """The daemon's store thread: add_commands stores a spool batch at
    once; after a crash (skip_stored) the commands already in the journal
    are left out, so each is stored once."""
    store = Store(f"sqlite:///{tmp_path}/j.sqlite")
    try:
        one, two, three = (_rec(t, 10**18 + i) for i, t in enumerate(["a", "b", "c"]))
        assert store.add_commands([one, two]) == 2
        assert store.add_commands([one, two, three], skip_stored=True) == 1
        with store.reading() as conn:
            texts = sorted(r[0] for r in conn.exec_driver_sql("SELECT text FROM command"))
            writes = conn.exec_driver_sql("SELECT count(*) FROM write_event").scalar()
        assert texts == ["a", "b", "c"] and writes == 3
        insert, calls = store.writer._insert, []

        def failing_second(conn, rec, prepared, *rest):
            calls.append(rec.text)
            if len(calls) == 2:
                raise RuntimeError("the journal failed half-way")
            return insert(conn, rec, prepared, *rest)

        store.writer._insert = failing_second  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            store.add_commands([_rec("d", 10**18 + 8), _rec("e", 10**18 + 9)])
        assert calls == ["d", "e"]
        with store.reading() as conn:  # all or none: "d" was rolled back
            assert conn.exec_driver_sql("SELECT count(*) FROM command").scalar() == 3
    finally:
        store.close()


def test_a_batch_mixing_sessions_directories_and_hosts_stores_each_commands_own(
    tmp_path: Path,
):
    """A batch's lines mostly share their host, directory and session (the
    batch looks them up once); those that do not get their own."""
    from dataclasses import replace

    store = Store(f"sqlite:///{tmp_path}/j.sqlite")
    base = _rec("a", 10**18)
    variants = [
        base,
        replace(base, text="b", start_ns=10**18 + 1, working_dir="/other"),
        replace(base, text="c", start_ns=10**18 + 2, session_uuid=b"\3" * 16),
        replace(base, text="d", start_ns=10**18 + 3, hostname="h2"),
        replace(base, text="e", start_ns=10**18 + 4, session_uuid=None, hash_chunk_size=None,
                hash_max_reads=None),
        replace(base, text="f", start_ns=10**18 + 5),
    ]
    try:
        assert store.add_commands(variants) == len(variants)
        with store.reading() as conn:
            rows = conn.exec_driver_sql(
                "SELECT c.text, w.path, e.hostname, s.uuid, c.hash_setting_id FROM command c "
                "JOIN working_dir w ON w.id = c.cwd_id JOIN env e ON e.id = c.env_id "
                "LEFT JOIN shell_session s ON s.id = c.session_id ORDER BY c.text"
            ).fetchall()
    finally:
        store.close()
    got = {r[0]: (r[1], r[2], bytes(r[3]) if r[3] is not None else None, r[4] is not None)
           for r in rows}
    assert got == {
        v.text: (v.working_dir, v.hostname, v.session_uuid, v.hash_chunk_size is not None)
        for v in variants
    }


def test_a_line_that_came_alone_is_stored_at_once_and_lines_close_together_wait():
    """The store thread's wait before storing (Daemon._defer): none for a
    line handed over alone (typed), _QUIET for lines following each other
    (a script, a paste) or while another line is being read."""
    from types import SimpleNamespace

    from shournal.capture import daemon

    now = time.monotonic()

    def state(alone: bool, active: int) -> SimpleNamespace:
        return SimpleNamespace(_spooled_at=now, _draining=0, last_activity=now, _alone=alone,
                               active=active)

    assert daemon.Daemon._defer(state(True, 1)) == 0.0
    assert daemon.Daemon._defer(state(False, 1)) > daemon._QUIET / 2
    assert daemon.Daemon._defer(state(True, 2)) > daemon._QUIET / 2


def _holder(sock: socket.socket) -> None:
    """The holder's side of the relay: each FLUSH answered with FLUSHED."""
    from shournal.capture import protocol

    while True:
        data = sock.recv(64)
        if not data:
            return
        _type, seq = protocol.FLUSH.unpack(data)
        sock.send(protocol.EVENTS.pack(protocol.MSG_FLUSHED, 0, 0, seq, 0, 0, 0, 0, 0, 0, 0, 0))


def _line(monkeypatch, tmp_path: Path, stays_open: float) -> tuple[list, object]:
    """One command line through listener.listen(): its control message,
    then its end `stays_open` seconds later.  (What on_command got, the
    command listen returned.)"""
    import threading
    import time

    from shournal.capture import listener, protocol
    from shournal.capture.collector import Collector
    from shournal.config import load_config

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    # (listen() renices its process once the line has ended: not pytest's,
    # whose later children -- the system tests' helpers -- would inherit it)
    monkeypatch.setattr(os, "setpriority", lambda *_args: None)
    ctl, ctl_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    relay, relay_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    holder = threading.Thread(target=_holder, args=(relay_peer,), daemon=True)
    holder.start()
    cfg = load_config(path=None, create=False, defaults_only=True)
    kept: list = []
    ctl_peer.send(
        protocol.COMMAND.pack(protocol.MSG_COMMAND, 0, 1, 2, bytes(16), bytes(16)) + b"true"
    )
    closer = threading.Timer(stays_open, ctl_peer.close)
    closer.start()
    t0 = time.monotonic()
    command = listener.listen(ctl, listener.Relay(relay.detach()), Collector(cfg, 0, frozenset()),
                              kept.append)
    assert time.monotonic() - t0 >= stays_open
    # (the holder thread's recv ends with the shutdown: closing the socket
    # under it would give it EBADF, or a reused fd)
    relay_peer.shutdown(socket.SHUT_RDWR)
    holder.join(timeout=10)
    relay_peer.close()
    ctl.close()
    return kept, command


def test_a_line_that_ends_with_its_prompt_is_not_kept_on_disk(monkeypatch, tmp_path: Path):
    """The daemon keeps a control message for a successor
    (spool.keep_started) only for a line still open after it: a file
    written and removed per line costs more than the rest of the line."""
    kept, command = _line(monkeypatch, tmp_path, 0.0)
    assert kept == [] and command is not None and command.text == b"true"


def test_a_line_still_open_after_its_prompt_is_kept_on_disk(monkeypatch, tmp_path: Path):
    from shournal.capture import listener

    kept, command = _line(monkeypatch, tmp_path, listener._KEEP_AFTER + 0.3)
    assert [k.text for k in kept] == [b"true"] and command is not None


def test_a_spooled_record_is_encoded_as_its_astuple(tmp_path: Path):
    """The spool's format is the record's dataclasses.astuple (its events as
    tuples), written without astuple's deep copy."""
    import marshal
    from dataclasses import astuple

    rec = _rec("make", 5)
    rec.writes = [FileEvent(b"/w/a", 3, 4, 0o100644, 99)]
    rec.reads = [FileEvent(b"/r/s.sh", 1, 2, 0o100755, None, b"echo")]
    rec.lost_reasons = {"relay": 2}
    rec.apparatus = b"manifest"
    # (compared as values: marshal's bytes depend on objects' reference counts)
    assert marshal.loads(spool._encode(rec)) == (spool._FORMAT, *astuple(rec))
    assert spool._decode(spool._encode(rec)) == rec


def test_a_shared_spool_is_pushed_by_others_and_shortened_only_by_its_writer(tmp_path: Path):
    """spool_dir: the writer appends to <shared>/<host>/<key>/records; another
    host reads what is not committed nor confirmed, confirms a batch
    (pushed.<host>), and only the writer commits up to that."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    own = spool.shared_records_dir(str(shared), "node1", "k" * 16)
    writer = spool.Spool(tmp_path / "local", records_dir=own)
    writer.append([_rec(f"c{i}", i) for i in range(5)])
    assert spool.foreign_backlog(str(shared), shared / "login1" / ("k" * 16), "login1") == 5
    (path,) = spool.others_records(str(shared), shared / "login1" / ("k" * 16))
    inode, batch = spool.foreign_pending(path, "login1", 3)
    assert [rec.text for _end, rec in batch] == ["c0", "c1", "c2"]
    assert spool.backlog_of(own)[0] == 5
    spool.confirm_pushed(path, "login1", inode, batch[-1][0])
    # the pusher goes on after what it confirmed; so does any other host
    assert [r.text for _e, r in spool.foreign_pending(path, "login1", 10)[1]] == ["c3", "c4"]
    assert [r.text for _e, r in spool.foreign_pending(path, "login2", 10)[1]] == ["c3", "c4"]
    assert spool.backlog_of(own)[0] == 5  # the file is the writer's
    assert writer.take_confirmed()
    assert spool.backlog_of(own)[0] == 2 and not writer.take_confirmed()
    # the writer's own spool is not another host's
    assert spool.others_records(str(shared), own) == []
    writer.close()


def test_a_shared_spool_dir_open_to_others_is_refused(tmp_path: Path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(spool.SpoolError, match="spool_dir"):
        spool.Spool(tmp_path / "local",
                    records_dir=spool.shared_records_dir(str(shared), "h", "k" * 16))


def test_a_spool_frame_of_format_1_is_read_without_uuid(tmp_path: Path):
    """A spool an older shournal wrote (format 1: no uuid, the record's
    last field) is stored after an upgrade, each record with uuid None; a
    payload of the wrong length for its format is not a record."""
    import marshal
    from dataclasses import astuple

    rec = _rec("make", 5)
    rec.uuid = bytes(range(16))
    assert spool._decode(spool._encode(rec)).uuid == bytes(range(16))
    old = marshal.dumps((1, *astuple(rec)[:-1]))
    s = spool.Spool(tmp_path)
    os.write(s.fd, spool._frame_payload(old))
    s.end = os.fstat(s.fd).st_size
    ((_end, got),) = s.pending(10)
    s.close()
    assert got.uuid is None and got.text == "make" and got.writes == rec.writes
    for wrong in ((1, *astuple(rec)), (2, *astuple(rec)[:-1]), (3, *astuple(rec))):
        with pytest.raises(ValueError):
            spool._decode(marshal.dumps(wrong))


def test_a_kept_start_of_format_1_is_read_without_uuid(tmp_path: Path):
    import marshal

    cmd = CommandMessage(0, 1, 2, b"\1" * 16, b"echo hi", uuid=b"\3" * 16)
    spool.keep_started(4243, cmd, "/work", tmp_path)
    got = spool.take_started(4243, tmp_path)
    assert got is not None and got[0].uuid == b"\3" * 16
    (tmp_path / spool.STARTED / "4243").write_bytes(
        spool._frame_payload(marshal.dumps((1, 0, 1, 2, b"\1" * 16, b"echo old", "/w")))
    )
    got = spool.take_started(4243, tmp_path)
    assert got is not None and got[0].text == b"echo old" and got[0].uuid == bytes(16)


def test_a_confirmation_inside_a_record_commits_nothing(tmp_path: Path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    own = spool.shared_records_dir(str(shared), "node1", "k" * 16)
    writer = spool.Spool(tmp_path / "local", records_dir=own)
    writer.append([_rec(f"c{i}", i) for i in range(3)])
    first_end = writer.pending(1)[0][0]
    spool.confirm_pushed(own / "records", "login1", writer.inode, first_end - 1)
    assert not writer.take_confirmed() and writer.committed == 0
    spool.confirm_pushed(own / "records", "login1", writer.inode, first_end)
    assert writer.take_confirmed() and writer.committed == first_end
    writer.close()


def test_the_push_state_is_written_when_it_changes_else_when_due_and_at_the_exit(
        monkeypatch, tmp_path: Path):
    """Daemon._write_state: a failure and a recovery are written at once,
    a push that changes nothing the state says but its time only when
    _STATE_REFRESH has passed since the last write, and the exit writes
    the time of the last push if the file lags."""
    import threading
    from types import SimpleNamespace

    from shournal.capture import daemon

    written: list[tuple] = []
    waiting = [0]  # the spool's bytes not stored
    monkeypatch.setattr(daemon, "write_state", lambda _dir, st: written.append(
        (st.cause, st.backlog, st.last_push)))
    d = SimpleNamespace(
        lock=threading.RLock(), error=None, _error_since=None, _last_push=None, shared=None,
        spool=SimpleNamespace(dir=tmp_path, backlog=lambda: waiting[0]), _state_written=None,
        _state_due=0.0, _to_server=lambda: True, spool_count=lambda: 3,
    )

    def push(at: float, **kw: bool) -> None:
        d._last_push = at
        daemon.Daemon._write_state(d, **kw)

    daemon.Daemon._write_state(d, final=True)  # no push tried: nothing to say
    assert written == []
    push(1.0, pushed=True)
    push(2.0, pushed=True)
    push(3.0, pushed=True)
    assert written == [(None, 0, 1.0)]
    d.error, d._error_since, waiting[0] = "the server is down", 4.0, 300
    daemon.Daemon._write_state(d)  # a failure, the spool's 3 commands kept
    assert written[-1] == ("the server is down", 3, 3.0)
    d.error = d._error_since = None
    waiting[0] = 0
    push(5.0, pushed=True)  # recovered
    push(6.0, pushed=True)
    assert written[-1] == (None, 0, 5.0) and len(written) == 3
    d._state_due = time.monotonic() - 1  # _STATE_REFRESH has passed
    push(7.0, pushed=True)
    push(8.0, pushed=True)
    assert written[-1] == (None, 0, 7.0) and len(written) == 4
    daemon.Daemon._write_state(d, final=True)
    assert written[-1] == (None, 0, 8.0)
    daemon.Daemon._write_state(d, final=True)  # (the file says it already)
    assert len(written) == 5
