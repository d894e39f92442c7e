"""The push's state, beside the spool: why the journal (a lab server) does
not take commands now, since when, how many wait, and when a push last
succeeded.

The store daemon writes `<spool>/sync-state.json` (whole, under a
temporary name renamed) when a push fails and after a successful push to
a database server that changes what it says (the time of the last push
alone: at most every daemon._STATE_REFRESH seconds, and at the daemon's
exit); `shournal sync` and `shournal doctor` read it.  It
holds causes (shournal.errors.server_condition and journal_condition),
never a URL, so never a password.  A file that does not check out reads
as no state.
"""

from __future__ import annotations

import os
import time

from shournal.capture.spool import write_all
from shournal.data import _Value

# Not typing.TYPE_CHECKING: importing typing costs ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

STATE_FILE = "sync-state.json"
# A cause longer than this is cut (it is shown on one line).
_CAUSE_MAX = 300


class SyncState(_Value):
    """(A plain class with __slots__, not a dataclass: see shournal.data.)"""

    __slots__ = ("cause", "since", "backlog", "last_push", "updated", "pid")
    cause: str | None  # None: the last attempt succeeded
    since: float | None  # when the cause began (seconds since the epoch)
    backlog: int  # commands waiting (this host's spool and, with spool_dir, others')
    last_push: float | None  # the last successful push
    updated: float
    pid: int  # the daemon that wrote it

    def __init__(self, cause: str | None = None, since: float | None = None, backlog: int = 0,
                 last_push: float | None = None, updated: float = 0.0, pid: int = 0) -> None:
        self.cause = cause
        self.since = since
        self.backlog = backlog
        self.last_push = last_push
        self.updated = updated
        self.pid = pid

    def as_dict(self) -> dict[str, object]:
        """The fields by name, as the state file and the daemon's answer
        to `shournal sync` hold them."""
        return {name: getattr(self, name) for name in self.__slots__}


def write_state(directory: Path, state: SyncState) -> None:
    """Raises OSError (the caller goes on: the state is a report)."""
    state.updated = time.time()
    state.pid = os.getpid()
    import json

    data = json.dumps(state.as_dict()).encode()
    tmp = directory / f".{STATE_FILE}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, directory / STATE_FILE)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def read_state(directory: Path) -> SyncState | None:
    try:
        fd = os.open(directory / STATE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.read(fd, 1 << 16)
    except OSError:
        return None
    finally:
        os.close(fd)
    import json  # (only for a state file: ~1 ms of every `shournal doctor`)

    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    cause = value.get("cause")
    cause = (
        "".join(c if c.isprintable() else "?" for c in cause)[:_CAUSE_MAX]
        if isinstance(cause, str) else None
    )  # fmt: skip
    backlog = value.get("backlog")
    return SyncState(
        cause=cause,
        since=_number(value.get("since")),
        backlog=backlog if isinstance(backlog, int) and backlog >= 0 else 0,
        last_push=_number(value.get("last_push")),
        updated=_number(value.get("updated")) or 0.0,
        pid=value["pid"] if isinstance(value.get("pid"), int) else 0,
    )


def when(stamp: float | None) -> str:
    """A time of the state, as shown to people (UTC, to the second)."""
    if stamp is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp))
