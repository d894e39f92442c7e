"""Waiting for commands that are still being stored, before a query reads
the journal: the listeners' markers in the runtime directory, and the
store daemon's spool.

Standard library only until a runtime directory exists: `shournal query`
runs this on its fast path (:mod:`shournal.cli._fast`).
"""

from __future__ import annotations

import os
import sys
import time

from shournal import _paths

__all__ = ["wait_for_pending"]

_POLL_SECONDS = 0.02



def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, belongs to someone else
        return True
    return True


def _count_pending(directory: str) -> int:
    # Imported here, where a runtime directory exists: protocol (socket,
    # struct, dataclasses) costs a query ~5 ms.
    from shournal.capture import protocol

    # Listener markers in the runtime dir: <pid>.run while the command
    # runs, <pid>.end once the shell saw it finish, <pid>.store once every
    # event is read and the record is being written.  All are removed
    # after the commit.
    markers = (protocol.MARK_RUN, protocol.MARK_END, protocol.MARK_STORE)
    pending_markers = (protocol.MARK_END, protocol.MARK_STORE)
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    pending = 0
    for name in names:
        stem, _, suffix = name.partition(".")
        if suffix not in markers or not stem.isdigit():
            continue
        if not _alive(int(stem)):
            # A listener that died will never remove its marker.
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass
            continue
        if suffix in pending_markers:
            pending += 1
    return pending


def wait_for_pending(timeout: float = 3.0) -> int:
    """Wait until no finished command is still being stored (``<pid>.end``
    or ``<pid>.store`` markers of live listeners in the runtime dir), at
    most ``timeout`` seconds; return how many are still pending.  Commands
    still running (``<pid>.run``) are not waited for: the query itself may
    be one.  A runtime dir that is not the user's own is not read (anybody
    could have put markers there): one line on stderr says so."""
    try:
        directory = _paths.private_runtime_dir_text(create=False)
    except _paths.UnsafeDirectory as e:
        print(f"shournal: {e}", file=sys.stderr)
        return 0
    except OSError:
        return 0
    deadline = time.monotonic() + max(timeout, 0.0)
    while True:
        pending = _count_pending(directory)
        if pending == 0 or time.monotonic() >= deadline:
            return pending + _drain_daemon(directory, deadline)
        time.sleep(_POLL_SECONDS)


def _drain_daemon(directory: str, deadline: float) -> int:
    """Commands spooled by the store daemon (shournal.capture.daemon) but not yet in
    the journal, after asking it to store them within the time left."""
    from shournal.capture import protocol, spool

    left_ms = max(int((deadline - time.monotonic()) * 1000), 0)
    answer = protocol.daemon_request(directory, protocol.MSG_DRAIN, left_ms, left_ms / 1000 + 1)
    if answer is not None:
        return answer[0]
    # No daemon runs: what it left is stored when the next one starts.
    return spool.backlog_of()[0]
