"""The listener's side of the relay (native/shournal_protocol.h), fed over a
real socketpair with messages laid out as the holder sends them: record
parsing, fds of script candidates, and the end-to-end count that turns any
loss on the way into lost events instead of silence."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from shournal.capture import listener as listener_mod
from shournal.capture import protocol
from shournal.capture.collector import Collector
from shournal.capture.listener import Relay
from shournal.capture.protocol import FAN_CLOSE_NOWRITE, FAN_CLOSE_WRITE
from shournal.config import load_config
from shournal.hashing import partial_xxh64_bytes


def record(path: bytes, mask: int, size: int, *, hsh: int | None = None, fd: bool = False,
           mode: int = 0o100644, uid: int | None = None) -> bytes:
    flags = (protocol.REC_HASH if hsh is not None else 0) | (protocol.REC_FD if fd else 0)
    head = protocol.RECORD.pack(mask, size, 1_700_000_000_000_000_000, hsh or 0, mode,
                                os.getuid() if uid is None else uid, os.getgid(), 1234,
                                len(path), flags, 0)
    return head + path + b"\0" * (-len(path) % 8)


def events(records: list[bytes], forwarded: int, *, lost: tuple[int, int, int] = (0, 0, 0),
           nfds: int = 0, mtype: int = protocol.MSG_EVENTS, seq: int = 0,
           count: int | None = None) -> bytes:
    """An EVENTS message; `lost`: the holder's counts by reason
    (protocol.HOLDER_LOST_REASONS)."""
    n = len(records) if count is None else count
    return protocol.EVENTS.pack(mtype, n, sum(lost), seq, forwarded, nfds, 256, 3, *lost,
                                0) + b"".join(records)


@pytest.fixture
def pair():
    ours, holder = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    relay = Relay(ours.detach())
    yield relay, holder
    relay.close()
    holder.close()


@pytest.fixture
def collector(tmp_path, monkeypatch) -> Collector:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    cfg = load_config(path=None, create=False, defaults_only=True)
    return Collector(cfg, os.getuid(), frozenset(os.getgroups()) | {os.getgid()})


def test_records_become_events(pair, collector, tmp_path):
    relay, holder = pair
    home = Path.home().as_posix().encode()
    odd = home + b"/dir with space/\xff\nname"  # any bytes, padded to 8
    recs = [
        record(home + b"/out.csv", FAN_CLOSE_WRITE, 10, hsh=42),
        record(odd, FAN_CLOSE_WRITE, 0),
        record(home + b"/.hidden/file", FAN_CLOSE_WRITE, 5, hsh=7),
    ]
    holder.send(events(recs, forwarded=3))
    assert relay.pump(collector) == 3
    assert relay.missing(collector) == 0 and collector.received == 3
    assert collector.writes[home + b"/out.csv"].hash == 42
    assert collector.writes[odd].hash is None  # no REC_HASH: empty file
    assert home + b"/.hidden/file" not in collector.writes  # the config's hidden rule


def test_script_candidate_is_archived_from_its_fd(pair, collector, tmp_path):
    relay, holder = pair
    script = Path.home() / "shournal-test-script.sh"
    body = b"echo archived\n"
    path = os.fsencode(script)
    # the file need not exist by that path any more: the fd is what counts
    fd = os.memfd_create("script")
    os.write(fd, body)
    try:
        rec = record(path, FAN_CLOSE_NOWRITE, len(body), hsh=partial_xxh64_bytes(body), fd=True)
        socket.send_fds(holder, [events([rec], forwarded=1, nfds=1)], [fd])
        relay.pump(collector)
    finally:
        os.close(fd)
    collector.settle()
    assert collector.reads[path].content == body
    assert collector.archived == 1


def test_changed_script_is_not_archived(pair, collector):
    relay, holder = pair
    path = os.fsencode(Path.home() / "changed.sh")
    fd = os.memfd_create("script")
    os.write(fd, b"echo new content\n")
    try:
        rec = record(path, FAN_CLOSE_NOWRITE, 17, hsh=partial_xxh64_bytes(b"echo old content\n"),
                     fd=True)
        socket.send_fds(holder, [events([rec], forwarded=1, nfds=1)], [fd])
        relay.pump(collector)
    finally:
        os.close(fd)
    collector.settle()
    assert collector.reads[path].content is None  # read, but not what the command read


def test_missing_records_are_counted_not_silent(pair, collector):
    relay, holder = pair
    home = Path.home().as_posix().encode()
    holder.send(events([record(home + b"/a", FAN_CLOSE_WRITE, 1, hsh=1)], forwarded=1))
    # two records vanished on the way; the flush answer carries the count
    holder.send(events([], forwarded=3, mtype=protocol.MSG_FLUSHED, seq=1, lost=(4, 2, 1)))
    relay.pump(collector)
    assert relay.flushed == 1
    assert relay.missing(collector) == 2
    # the holder's own losses, by reason
    assert collector.lost == {"overflow": 4, "unreadable": 2, "path": 1}
    assert collector.hash_settings == (256, 3)


def test_truncated_message_is_counted(pair, collector):
    relay, holder = pair
    home = Path.home().as_posix().encode()
    rec = record(home + b"/a", FAN_CLOSE_WRITE, 1, hsh=1)
    holder.send(events([rec[:20]], forwarded=1, count=1))  # garbage length
    relay.pump(collector)
    assert collector.received == 0 and relay.missing(collector) == 1


def test_unreadable_by_mode_is_dropped(pair, collector):
    relay, holder = pair
    home = Path.home().as_posix().encode()
    other = os.getuid() + 1
    holder.send(events([record(home + b"/theirs", FAN_CLOSE_WRITE, 1, hsh=1, mode=0o100600,
                               uid=other)], forwarded=1))
    relay.pump(collector)
    collector.settle()
    assert collector.writes == {}  # the original's owner/group/other test
    assert relay.missing(collector) == 0


def test_records_wait_until_settled_and_keep_their_order(pair, collector):
    """While the command runs the listener only receives (no Python work
    competes with the command); settle() then applies the records in the
    order the holder read them: the last close of a path wins."""
    relay, holder = pair
    out = Path.home().as_posix().encode() + b"/out.csv"
    holder.send(events([record(out, FAN_CLOSE_WRITE, 1, hsh=1)], forwarded=1))
    holder.send(events([record(out, FAN_CLOSE_WRITE, 2, hsh=2)], forwarded=2))
    assert relay.pump(collector) == 2
    assert collector.writes == {} and collector.received == 0  # kept, not handled
    assert relay.missing(collector) == 0  # settles first
    assert collector.writes[out].size == 2 and collector.writes[out].hash == 2


def test_kept_fds_are_bounded(pair, collector, monkeypatch):
    """Script candidates' fds are not hoarded while the command runs: past
    the bound, the kept messages are handled (and their fds closed)."""
    import shournal.capture.collector as collector_module

    monkeypatch.setattr(collector_module, "_PENDING_FDS", 2)
    relay, holder = pair
    home = Path.home().as_posix().encode()
    fds = [os.memfd_create(f"s{i}") for i in range(3)]
    try:
        for i, fd in enumerate(fds):
            rec = record(home + b"/s%d.sh" % i, FAN_CLOSE_NOWRITE, 0, fd=True)
            socket.send_fds(holder, [events([rec], forwarded=i + 1, nfds=1)], [fd])
        relay.pump(collector)
    finally:
        for fd in fds:
            os.close(fd)
    assert collector.received == 3  # the third fd crossed the bound
    assert collector._pending == [] and collector._pending_fds == 0


def start(text: bytes) -> bytes:
    """A START as the holder relays it: the shell's message, padded to 8."""
    body = protocol.COMMAND.pack(
        protocol.MSG_START, 2**31 - 1, 10**18, 0, b"s" * 16, b"u" * 16
    ) + text
    return events([], forwarded=0, mtype=protocol.MSG_START) + body + b"\0" * (-len(body) % 8)


def test_start_is_kept_for_a_line_whose_end_never_comes(pair, collector):
    relay, holder = pair
    holder.send(start(b"echo one > f; exec bash"))
    holder.send(events([record(b"/tmp/f", FAN_CLOSE_WRITE, 4)], forwarded=1))
    relay.pump(collector)
    got = collector.start
    assert got is not None and got.incomplete
    assert (got.text, got.start_ns, got.session) == (b"echo one > f; exec bash", 10**18, b"s" * 16)
    assert got.uuid == b"u" * 16  # the finished record's, made where the line started
    assert got.return_value == 2**31 - 1
    assert relay.missing(collector) == 0  # a START is no record


def test_start_beyond_its_limit_is_marked_cut(pair, collector):
    relay, holder = pair
    holder.send(start(b"x" * (protocol.MAX_START_TEXT + 1)))
    relay.pump(collector)
    assert collector.start is not None
    mark = protocol.cut_mark(protocol.MAX_START_TEXT).encode()
    assert collector.start.text == b"x" * protocol.MAX_START_TEXT + mark


def _slow_holder(holder: socket.socket, home: bytes, n: int, gap: float) -> None:
    """A holder whose queue reaches the listener slowly (a starved
    listener reads it slowly): `n` messages `gap` seconds apart, then the
    flush's answer."""
    for i in range(n):
        time.sleep(gap)
        holder.send(events([record(home + b"/f%d" % i, FAN_CLOSE_WRITE, 1, hsh=i + 1)],
                           forwarded=i + 1))
    holder.send(events([], forwarded=n, mtype=protocol.MSG_FLUSHED, seq=1))


def test_a_flush_waits_while_the_holder_still_sends(pair, collector, monkeypatch):
    """The bound is on the holder's silence, not on the whole flush: a
    holder that still sends what it queued (a listener that reads slowly,
    e.g. at its nice value on a busy machine) is waited for, however long
    that takes in all."""
    monkeypatch.setattr(listener_mod, "_FLUSH_TIMEOUT", 1.0)
    relay, holder = pair
    home = Path.home().as_posix().encode()
    n, gap = 25, 0.1  # 2.5 s in all, 0.1 s between messages
    sender = threading.Thread(target=_slow_holder, args=(holder, home, n, gap))
    sender.start()
    try:
        assert relay.flush(collector)
    finally:
        sender.join()
    assert relay.missing(collector) == 0 and collector.received == n


def test_a_flush_gives_up_on_a_silent_holder(pair, collector, monkeypatch):
    monkeypatch.setattr(listener_mod, "_FLUSH_TIMEOUT", 0.3)
    relay, _holder = pair
    assert not relay.flush(collector)


def test_a_flush_finds_the_answer_that_waited_past_the_deadline(pair, collector, monkeypatch):
    """The listener got no CPU from its FLUSH until past the deadline (a
    busy machine, its nice value): the holder's answer, waiting in the
    socket, still counts."""
    relay, holder = pair
    holder.send(events([], forwarded=0, mtype=protocol.MSG_FLUSHED, seq=1))
    clock = iter([0.0] + [1000.0] * 100)
    monkeypatch.setattr(listener_mod.time, "monotonic", lambda: next(clock))
    assert relay.flush(collector)
