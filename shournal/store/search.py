"""The reads of `shournal search` (the interactive search): its query
syntax and the SQL that answers it, page by page, newest first.

The search is typed: every keystroke asks again, so no question may scan a
whole journal of a million commands before the screen changes.  A search
walks the command ids downwards in windows (:meth:`Searcher.step`): each
window is one indexed range of the command table, its matches come back at
once, and the caller (the screen) asks for the next window only while
nobody types and while it still needs matches to fill the list.  No index
can answer ``LIKE '%x%'``; the windows make its cost proportional to what is
shown, not to the journal.

Both engines, through the one reader interface of
:mod:`shournal.store.connection`: a SQLite journal of the current schema
is read through the standard library's sqlite3 (importing SQLAlchemy alone
costs more than the screen's budget), any other journal (PostgreSQL, a lab
store: its row-level security shows only the rows the user may read)
through the store's SQLAlchemy connections.  The engines' differences
(case-insensitive patterns, binary file names, times) are the
connection's.

The query syntax and the answers' types: :mod:`shournal.search_query`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import contextmanager

from shournal.errors import StoreError, StoreMissing, StoreUnavailable
from shournal.search_query import (
    MODES,
    SCOPES,
    Details,
    Hit,
    Scope,
    SearchQuery,
    like_literal,
    parse_query,
    rank,
)
from shournal.store.connection import (
    BUSY_SECONDS,
    READS_SCHEMA,
    NotAFile,
    Reads,
    SqliteSource,
    StoreSource,
    connect_read_only,
    sqlite_file_of,
)
from shournal.store.reader import _COMMAND_SELECT, _attach_events, command_view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from shournal.store.connection import _Source

__all__ = [
    "MODES",
    "SCOPES",
    "Hit",
    "Scope",
    "SearchQuery",
    "Searcher",
    "open_searcher",
    "parse_query",
]

# How long one step of a search (one window, one SQL statement) should take.
STEP_SECONDS = 0.004
# The first window when nothing is known of the pace yet: command text is
# matched at a few million rows a second, a file's name costs a join per
# event (tens of events a command).  Small enough that a first step stays
# within STEP_SECONDS on a slow machine; the next ones are sized from it.
FIRST_WINDOW_TEXT = 1024
FIRST_WINDOW_FILES = 32
# Windows never grow past this (a step cannot be interrupted).
MAX_WINDOW = 1 << 20


_HIT_SELECT = (
    "SELECT c.id, c.text, c.return_value, c.start_time, c.end_time, wd.path, env.hostname "
    "FROM command c JOIN working_dir wd ON wd.id = c.cwd_id JOIN env ON env.id = c.env_id"
)

# A written (w) or read (r) file's name (basename) or, with a "/" in what
# is looked for, its whole path (only then is its directory joined); {}:
# the engine's case-insensitive match of the expression that follows.
_FILE_MATCH = {
    ("w", False): ("EXISTS (SELECT 1 FROM write_event we WHERE we.command_id = c.id AND {})",
                   "we.basename"),
    ("w", True): ("EXISTS (SELECT 1 FROM write_event we JOIN directory d ON d.id = we.directory_id "
                  "WHERE we.command_id = c.id AND {})", "d.path || we.basename"),
    ("r", False): ("EXISTS (SELECT 1 FROM read_event re "
                   "JOIN read_file rf ON rf.id = re.read_file_id "
                   "WHERE re.command_id = c.id AND {})", "rf.basename"),
    ("r", True): ("EXISTS (SELECT 1 FROM read_event re "
                  "JOIN read_file rf ON rf.id = re.read_file_id "
                  "JOIN directory d ON d.id = rf.directory_id "
                  "WHERE re.command_id = c.id AND {})", "d.path || rf.basename"),
}  # fmt: skip


def _conditions(
    reads: Reads, query: SearchQuery, scope: Scope
) -> tuple[list[str], dict[str, Any]]:
    where: list[str] = []
    params: dict[str, Any] = {}

    def param(value: Any) -> str:
        name = f"p{len(params)}"
        params[name] = value
        return f":{name}"

    for pattern in query.text:
        where.append(f"{reads.like_nocase('c.text')} {param(pattern)} ESCAPE '\\'")
    for side, names in (("w", query.written), ("r", query.read)):
        for name in names:
            sql, expr = _FILE_MATCH[side, "/" in name]
            like = param(f"%{like_literal(reads.raw_text(name))}%")
            where.append(sql.format(f"{reads.like_nocase(expr, raw=True)} {like} ESCAPE '\\'"))
    if scope.kind == "host":
        where.append(f"c.env_id IN (SELECT id FROM env WHERE hostname = {param(scope.value)})")
    elif scope.kind == "session":
        where.append(
            f"c.session_id = (SELECT id FROM shell_session WHERE uuid = {param(scope.value)})"
        )
    elif scope.kind == "directory":
        where.append(f"c.cwd_id = (SELECT id FROM working_dir WHERE path = {param(scope.value)})")
    elif scope.kind == "repository":
        assert isinstance(scope.value, str)
        root = scope.value.rstrip("/") or "/"
        where.append(
            f"c.cwd_id IN (SELECT id FROM working_dir WHERE path = {param(root)} "
            f"OR path LIKE {param(like_literal(root.rstrip('/')) + '/%')} ESCAPE '\\')"
        )
    elif scope.kind != "all":
        raise ValueError(f"unknown filter {scope.kind!r}")
    return where, params


def step_sql(reads: Reads, query: SearchQuery, scope: Scope) -> tuple[str, dict[str, Any]]:
    """The SQL of one window (:meth:`Searcher.step`; placeholders
    ``:below``, ``:low``, ``:limit`` besides the returned parameters).
    Every plan of it reads the command table by its id range (or an index
    of it with the range), never the whole table: tests/unit/test_search.py
    checks with EXPLAIN QUERY PLAN."""
    where, params = _conditions(reads, query, scope)
    sql = (
        f"{_HIT_SELECT} WHERE c.id < :below AND c.id >= :low"
        + "".join(f" AND {w}" for w in where)
        + " ORDER BY c.id DESC LIMIT :limit"
    )
    return sql, params


class _Unanswered(Exception):
    """The journal cannot be searched (why, for the message)."""


class Searcher:
    """Read-only searches of a journal (its reads: a
    :class:`shournal.store.connection._Source`, one read transaction per
    step); see :func:`open_searcher`."""

    def __init__(self, source: _Source) -> None:
        self._source = source

    @classmethod
    def sqlite(cls, path: str) -> Searcher:
        """A SQLite journal of the current schema
        (:data:`shournal.store.connection.READS_SCHEMA`), through sqlite3.

        :raises _Unanswered: no such file, not a database, another
            schema version, or any error of SQLite."""
        if not os.path.exists(path):
            raise _Unanswered("no journal file")
        try:
            conn = connect_read_only(path, isolation_level=None, timeout=BUSY_SECONDS)
        except sqlite3.Error as e:
            raise _Unanswered(str(e)) from None
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_SECONDS * 1000}")
            rows = conn.execute("SELECT version FROM schema_version WHERE id = 1").fetchall()
        except sqlite3.Error as e:
            conn.close()
            raise _Unanswered(str(e)) from None
        if [tuple(r) for r in rows] != [(READS_SCHEMA,)]:
            conn.close()
            raise _Unanswered("another schema version")
        return cls(SqliteSource(conn, path))

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _reading(self) -> Iterator[Reads]:
        """One read transaction; a failing read is the journal's fault
        (locked past the busy timeout, damaged, the server gone)."""
        try:
            with self._source.reading() as reads:
                yield reads
        except StoreMissing:
            raise
        except StoreError as e:
            raise StoreUnavailable(f"cannot search the journal: {e}") from None

    def newest_id(self) -> int:
        """The largest command id (0: no command yet); where a search starts."""
        with self._reading() as reads:
            ((top,),) = reads.rows("SELECT coalesce(max(id), 0) FROM command")
        return int(top)

    def step(
        self,
        query: SearchQuery,
        scope: Scope,
        below: int,
        *,
        window: int,
        limit: int,
    ) -> tuple[list[Hit], int]:
        """The matches (newest first, at most ``limit``) among the commands
        with ids in ``[below - window, below)``, and where the next step
        starts (0: the journal is done).  With ``limit`` reached first, the
        next step starts just below the last match."""
        low = max(0, below - window)
        with self._reading() as reads:
            sql, params = step_sql(reads, query, scope)
            rows = reads.rows(sql, {**params, "below": below, "low": low, "limit": limit})
            hits = [
                Hit(i, text, rv, reads.time(start), reads.time(end), cwd, host)  # type: ignore[arg-type]
                for i, text, rv, start, end, cwd, host in rows
            ]
        if len(hits) == limit:
            return hits, hits[-1].id
        return hits, low

    def search(
        self,
        query: SearchQuery,
        scope: Scope,
        *,
        below: int | None = None,
        limit: int = 200,
        seconds: float | None = None,
        window: int | None = None,
    ) -> tuple[list[Hit], int]:
        """Up to ``limit`` matches from ``below`` down (None: from the
        newest), and where to go on (0: done).  Newest first; in fuzzy mode
        the best matches first (:func:`shournal.search_query.rank`: these
        matches among themselves).  ``seconds``: stop after that much time
        with what was found (the caller goes on with the returned
        position).  ``window``: the first window's size (by default small:
        :data:`FIRST_WINDOW_TEXT`, :data:`FIRST_WINDOW_FILES`); windows
        grow while they are cheap and shrink when they are not."""
        if window is None:
            window = FIRST_WINDOW_FILES if query.written or query.read else FIRST_WINDOW_TEXT
        start = self.newest_id() + 1 if below is None else below
        hits: list[Hit] = []
        deadline = None if seconds is None else time.monotonic() + seconds
        while start > 0 and len(hits) < limit:
            t0 = time.monotonic()
            found, next_start = self.step(
                query, scope, start, window=window, limit=limit - len(hits)
            )
            hits += found
            now = time.monotonic()
            # the next window: what this one's pace does in the time left
            # (at most STEP_SECONDS: a step cannot be interrupted)
            rate = (start - next_start) / max(now - t0, 1e-5)
            left = STEP_SECONDS if deadline is None else min(STEP_SECONDS, deadline - now)
            start = next_start
            if left <= 0:
                break
            window = max(16, min(int(rate * left), MAX_WINDOW))
        return rank(hits, query), start

    def details(
        self, command_id: int, *, neighbours: int = 3, max_files: int = 50
    ) -> Details | None:
        """The command with this id (None: no such command), its files
        (at most ``max_files`` of each side) and ``neighbours`` commands
        before and after it in its shell session."""
        with self._reading() as reads:
            rows = reads.rows(f"{_COMMAND_SELECT} WHERE command.id = :id", {"id": command_id})
            if not rows:
                return None
            cmd = command_view(reads, rows[0])
            _attach_events(reads, [cmd], max_files)
            out = Details(cmd)
            ((session,),) = reads.rows("SELECT session_id FROM command WHERE id = :id",
                                       {"id": command_id})  # fmt: skip
            if session is not None:
                near = {"session": session, "id": command_id, "n": neighbours}
                before = reads.rows(
                    "SELECT id, text FROM command WHERE session_id = :session AND id < :id "
                    "ORDER BY id DESC LIMIT :n",
                    near,
                )
                out.before = [(i, t) for i, t in reversed(before)]
                out.after = [
                    (i, t)
                    for i, t in reads.rows(
                        "SELECT id, text FROM command WHERE session_id = :session AND id > :id "
                        "ORDER BY id LIMIT :n",
                        near,
                    )
                ]
        return out


def open_searcher(url: str | None) -> Searcher:
    """The searcher of the journal ``url`` names (None: the default file):
    a SQLite journal file through sqlite3, any other through the store.

    :raises shournal.store.StoreMissing: no journal yet.
    :raises shournal.store.StoreUnavailable: a SQLite journal file that
        cannot be read as one of the current schema; the store's errors
        (:mod:`shournal.errors`) for any other journal.
    """
    try:
        path = sqlite_file_of(url)
    except NotAFile:
        from shournal.store.db import Store

        return Searcher(StoreSource(Store(url, create=False, read_only=True)))
    if not os.path.exists(path):
        raise StoreMissing("no journal yet: nothing has been recorded")
    try:
        return Searcher.sqlite(path)
    except _Unanswered as e:
        raise StoreUnavailable(f"{path}: cannot search this journal: {e}") from None
