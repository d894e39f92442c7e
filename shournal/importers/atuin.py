"""atuin's history database (``~/.local/share/atuin/history.db``, SQLite).

Its ``history`` table: ``id`` (atuin's own id of the entry, the identity
here), ``timestamp`` and ``duration`` in nanoseconds, ``exit``,
``command``, ``cwd``, ``session`` (a UUID in hex), ``hostname`` as
``host:user``, and ``deleted_at`` (not NULL: the user deleted the entry;
skipped).  atuin writes -1 for an unknown duration or exit status.  Only
those columns are read: atuin's later columns (``author``, ``shell``...)
change nothing here.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from shournal.data import RETURN_VALUE_UNKNOWN
from shournal.importers import History, ImportFailed, home, identity
from shournal.importers.entries import check_time
from shournal.importers.sqlite_file import columns, opened
from shournal.record import CommandRecord

KIND = "atuin"
WHAT = "an atuin history database"

_NEEDED = {"id", "timestamp", "duration", "exit", "command", "cwd", "session", "hostname"}
_UNKNOWN = -1


def default_path() -> Path:
    data = os.environ.get("XDG_DATA_HOME") or str(home() / ".local" / "share")
    return Path(data) / "atuin" / "history.db"


def session_bytes(session: str) -> bytes:
    """atuin's session id as the 16 raw bytes shournal stores; an id that
    is no UUID gets 16 bytes derived from it (the same every time)."""
    try:
        return uuid.UUID(session).bytes
    except ValueError:
        return identity.key("atuin-session", session)


def read(path: Path) -> History:
    with opened(path, WHAT) as conn:
        have = columns(conn, "history")
        missing = sorted(_NEEDED - have)
        if missing:
            raise ImportFailed(
                f"{path}: not {WHAT}: no table history with {', '.join(missing)}"
            )
        alive = "WHERE deleted_at IS NULL" if "deleted_at" in have else ""
        rows = conn.execute(
            "SELECT id, timestamp, duration, exit, command, cwd, session, hostname "
            f"FROM history {alive} ORDER BY timestamp, id"
        ).fetchall()
    records = []
    for id_, ts, duration, exit_, command, cwd, session, hostname in rows:
        if not isinstance(ts, int) or not isinstance(command, str):
            raise ImportFailed(f"{path}: not {WHAT}: entry {id_!r} has no time or command")
        check_time(ts, f"{path}: entry {id_}")
        host, _, user = str(hostname).partition(":")
        known = isinstance(duration, int) and duration >= 0
        records.append(
            CommandRecord(
                text=command,
                return_value=exit_ if isinstance(exit_, int) and exit_ != _UNKNOWN
                else RETURN_VALUE_UNKNOWN,
                start_ns=ts,
                end_ns=ts + duration if known else ts,
                working_dir=str(cwd),
                username=user,
                hostname=host,
                session_uuid=session_bytes(str(session)) if session else None,
                hash_chunk_size=None,
                hash_max_reads=None,
                imported_from=KIND,
                import_key=identity.key(KIND, str(id_)),
            )
        )
    return History(records)
