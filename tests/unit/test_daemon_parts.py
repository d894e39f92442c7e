"""Small parts of the store daemon's per-command-line path, on real
sockets and files: the liveness probe a shell makes at every command line
is answered without a thread, and the control message kept for a killed
daemon's successor is read back whole or not at all."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from shournal.capture import spool
from shournal.capture.daemon import _is_probe
from shournal.capture.protocol import CommandMessage


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
