"""`shournal sync`: ask the store daemon of our journal to push its spool
now, starting it when none runs.

The daemon pushes, never this process: the daemon holds the spool's lock
and is its only writer (it shortens the file after the journal confirmed
the commands), so a second pusher would need a lock of its own around
every append and commit, for no gain -- a daemon starts in a fraction of
a second, stores what it finds at once, and keeps retrying (with its
backoff) after we are gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from shournal import _paths
from shournal.capture import protocol
from shournal.capture.spool import backlog_of, foreign_backlog, records_dir_of, spool_dir
from shournal.capture.sync_state import SyncState, read_state

# How long a started daemon may take to answer (a cold Python start on a
# busy host takes seconds).
_START_SECONDS = 20.0
_POLL_SECONDS = 0.05


class SyncFailed(Exception):
    """No daemon could be asked (one line, ready for "shournal: ")."""


def _start_daemon() -> None:
    """Detached, as the shell starts it (shournal_forward.c spawn_daemon):
    its own session, no descriptors of ours."""
    path = os.environ.get("SHOURNAL_DAEMON", "")
    argv = [path] if path and os.access(path, os.X_OK) else [
        sys.executable, "-m", "shournal.capture.daemon"]
    subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True, cwd="/",
    )  # fmt: skip


def _ask(rundir: str, timeout: float) -> tuple[int, SyncState] | None:
    ms = max(int(timeout * 1000), 0)
    answer = protocol.daemon_request(rundir, protocol.MSG_SYNC, ms, timeout + 5)
    if answer is None:
        return None
    left, text = answer
    state = SyncState()
    try:
        value = json.loads(text)
        if isinstance(value, dict):
            state = SyncState(**{k: value[k] for k in
                                 ("cause", "since", "backlog", "last_push", "updated", "pid")
                                 if k in value})
    except (ValueError, TypeError):
        pass
    state.backlog = left
    return left, state


def waiting_commands() -> int:
    """Commands waiting for a push, read without the daemon: in our spool
    and, with a shared spool_dir, every host's there."""
    import socket

    from shournal.config import load_config

    shared = load_config().store.spool_dir
    own = records_dir_of(shared)
    n = backlog_of(own)[0]
    if shared:
        n += foreign_backlog(shared, own, socket.gethostname())
    return n


def push_now(timeout: float) -> SyncState:
    """The push's state after asking the daemon to push (waiting at most
    `timeout` seconds for it).  Without a daemon and with nothing to push,
    the state the last daemon left.  Raises SyncFailed."""
    try:
        rundir = _paths.private_runtime_dir_text()
    except (OSError, _paths.UnsafeDirectory) as exc:
        raise SyncFailed(f"no store daemon can run: {exc}") from None
    answer = _ask(rundir, timeout)
    if answer is not None:
        return answer[1]
    waiting = waiting_commands()
    if not waiting:
        state = read_state(spool_dir()) or SyncState()
        state.backlog = 0
        return state
    _start_daemon()
    deadline = time.monotonic() + _START_SECONDS
    while time.monotonic() < deadline:
        if protocol.daemon_request(rundir, protocol.MSG_STATUS, timeout=1.0) is not None:
            answer = _ask(rundir, timeout)
            if answer is not None:
                return answer[1]
        time.sleep(_POLL_SECONDS)
    raise SyncFailed(f"the store daemon did not start within {_START_SECONDS:.0f} s; "
                     f"{waiting} command(s) wait in the spool")
