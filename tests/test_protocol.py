"""native/shournal_protocol.h and shournal/protocol.py must agree: compile
the header and compare every size and value."""

from __future__ import annotations

import subprocess
from pathlib import Path

from shournal import protocol
from shournal.query import RETURN_VALUE_UNKNOWN

NATIVE = Path(__file__).resolve().parent.parent / "native"

PROGRAM = r"""
#include <stdio.h>
#include <stddef.h>
#include "shournal_protocol.h"
#define V(x) printf(#x " %ld\n", (long)(x))
int main(void) {
    V(SHOURNAL_MSG_SETUP_DONE); V(SHOURNAL_MSG_SETUP_FAIL); V(SHOURNAL_MSG_COMMAND);
    V(SHOURNAL_MSG_EVENTS); V(SHOURNAL_MSG_FLUSH); V(SHOURNAL_MSG_FLUSHED);
    V(SHOURNAL_MSG_GO); V(SHOURNAL_MSG_GO_ACK); V(sizeof(struct shournal_go));
    V(SHOURNAL_MSG_COMMAND_FD); V(SHOURNAL_MAX_COMMAND_TEXT);
    V(SHOURNAL_FD_SOCKET); V(SHOURNAL_FD_EVENTS); V(SHOURNAL_MAX_FDS_PER_MSG);
    V(SHOURNAL_MAX_EVENTS_MSG); V(SHOURNAL_REC_HASH); V(SHOURNAL_REC_FD);
    V(SHOURNAL_SYNC_TIMEOUT_MS); V(SHOURNAL_RETURN_VALUE_UNKNOWN);
    V(SHOURNAL_SETUP_FD_ERROR); V(SHOURNAL_MAX_COMMAND_LEN); V(SHOURNAL_MAX_FAIL_LEN);
    V(sizeof(struct shournal_setup_done)); V(sizeof(struct shournal_setup_fail));
    V(sizeof(struct shournal_command)); V(sizeof(struct shournal_events));
    V(sizeof(struct shournal_record)); V(sizeof(struct shournal_flush));
    V(SHOURNAL_MSG_FORWARD); V(SHOURNAL_MSG_SPOOLED); V(SHOURNAL_MSG_DRAIN);
    V(SHOURNAL_MSG_DRAINED); V(SHOURNAL_MSG_STATUS); V(sizeof(struct shournal_daemon_msg));
    V(offsetof(struct shournal_events, lost));
    V(offsetof(struct shournal_events, lost_overflow));
    V(offsetof(struct shournal_events, lost_unreadable));
    V(offsetof(struct shournal_events, lost_path));
    return 0;
}
"""


def test_header_and_python_agree(tmp_path):
    src = tmp_path / "p.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "p"
    subprocess.run(["cc", "-Wall", "-Werror", "-I", str(NATIVE), "-o", str(exe), str(src)],
                   check=True)
    out = subprocess.check_output([str(exe)], text=True)
    got = dict(line.rsplit(" ", 1) for line in out.splitlines())
    by_reason = protocol.EVENTS_LOST_BY_REASON
    want = {
        "SHOURNAL_MSG_SETUP_DONE": protocol.MSG_SETUP_DONE,
        "SHOURNAL_MSG_SETUP_FAIL": protocol.MSG_SETUP_FAIL,
        "SHOURNAL_MSG_COMMAND": protocol.MSG_COMMAND,
        "SHOURNAL_MSG_EVENTS": protocol.MSG_EVENTS,
        "SHOURNAL_MSG_FLUSH": protocol.MSG_FLUSH,
        "SHOURNAL_MSG_FLUSHED": protocol.MSG_FLUSHED,
        "SHOURNAL_MSG_GO": protocol.MSG_GO,
        "SHOURNAL_MSG_GO_ACK": protocol.MSG_GO_ACK,
        "SHOURNAL_MSG_COMMAND_FD": protocol.MSG_COMMAND_FD,
        "SHOURNAL_MAX_COMMAND_TEXT": protocol.MAX_COMMAND_TEXT,
        "sizeof(struct shournal_go)": protocol.GO.size,
        "SHOURNAL_FD_SOCKET": protocol.FD_SOCKET,
        "SHOURNAL_FD_EVENTS": protocol.FD_EVENTS,
        "SHOURNAL_MAX_FDS_PER_MSG": protocol.MAX_FDS_PER_MSG,
        "SHOURNAL_MAX_EVENTS_MSG": protocol.MAX_EVENTS_MSG,
        "SHOURNAL_REC_HASH": protocol.REC_HASH,
        "SHOURNAL_REC_FD": protocol.REC_FD,
        "SHOURNAL_SYNC_TIMEOUT_MS": protocol.SYNC_TIMEOUT_MS,
        "SHOURNAL_RETURN_VALUE_UNKNOWN": RETURN_VALUE_UNKNOWN,
        "SHOURNAL_SETUP_FD_ERROR": protocol.SETUP_FD_ERROR,
        "SHOURNAL_MAX_COMMAND_LEN": protocol.MAX_COMMAND_LEN,
        "SHOURNAL_MAX_FAIL_LEN": protocol.MAX_FAIL_LEN,
        "sizeof(struct shournal_setup_done)": protocol.SETUP_DONE.size,
        "sizeof(struct shournal_setup_fail)": protocol.SETUP_FAIL.size,
        "sizeof(struct shournal_command)": protocol.COMMAND.size,
        "sizeof(struct shournal_events)": protocol.EVENTS.size,
        "sizeof(struct shournal_record)": protocol.RECORD.size,
        "sizeof(struct shournal_flush)": protocol.FLUSH.size,
        "SHOURNAL_MSG_FORWARD": protocol.MSG_FORWARD,
        "SHOURNAL_MSG_SPOOLED": protocol.MSG_SPOOLED,
        "SHOURNAL_MSG_DRAIN": protocol.MSG_DRAIN,
        "SHOURNAL_MSG_DRAINED": protocol.MSG_DRAINED,
        "SHOURNAL_MSG_STATUS": protocol.MSG_STATUS,
        "sizeof(struct shournal_daemon_msg)": protocol.DAEMON_MSG.size,
        # the Python side unpacks the lost counters by position
        "offsetof(struct shournal_events, lost)": 4 * protocol.EVENTS_LOST,
        "offsetof(struct shournal_events, lost_overflow)": 4 * by_reason,
        "offsetof(struct shournal_events, lost_unreadable)": 4 * (by_reason + 1),
        "offsetof(struct shournal_events, lost_path)": 4 * (by_reason + 2),
    }
    assert {k: int(v) for k, v in got.items()} == want


def test_long_command_text_travels_whole_and_a_too_long_one_is_marked():
    import socket

    for size, want_cut in ((100 * 1024, False), (protocol.MAX_COMMAND_TEXT + 10, True)):
        text = (b"abcdefghijklmnopqrstuvwxyz" * (size // 26 + 1))[:size]
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with a, b:
            sent = protocol.CommandMessage(7, 1, 2, bytes(16), text)
            protocol.send_command(a, sent)
            data, got = protocol.recv_command(b)
        assert got is not None and got.return_value == 7
        if want_cut:
            mark = protocol.CUT_MARK.encode()
            assert got.text == text[: protocol.MAX_COMMAND_TEXT] + mark
        else:
            assert got.text == text
