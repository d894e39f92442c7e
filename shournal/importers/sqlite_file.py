"""Reading another program's SQLite database (atuin's history.db, the
original shournal's database.db) without changing it: opened read-only,
every error of SQLite one line of :class:`ImportFailed`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from shournal.importers import ImportFailed

_HEADER = b"SQLite format 3\x00"


@contextmanager
def opened(path: Path, what: str) -> Iterator[sqlite3.Connection]:
    """``path`` read-only; ImportFailed when it is no SQLite database, is
    damaged or cannot be read (``what`` names the expected kind)."""
    with open(path, "rb") as f:  # OSError: the caller says which
        header = f.read(len(_HEADER))
    if header != _HEADER:
        raise ImportFailed(f"{path}: not {what}: not a SQLite database")
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:
        raise ImportFailed(f"{path}: cannot open {what}: {e}") from None
    try:
        try:
            # A cut-off or damaged file: found here, before anything is read.
            problems = [r[0] for r in conn.execute("PRAGMA quick_check")]
        except sqlite3.Error as e:
            raise ImportFailed(f"{path}: damaged {what}: {e}") from None
        if problems != ["ok"]:
            raise ImportFailed(f"{path}: damaged {what}: {problems[0]}")
        try:
            yield conn
        except sqlite3.Error as e:
            raise ImportFailed(f"{path}: cannot read {what}: {e}") from None
    finally:
        conn.close()


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info('{table}')")}
