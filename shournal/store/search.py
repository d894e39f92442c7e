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

Read-only through the standard library's sqlite3
(:class:`shournal.store.connection.SqliteReads`, the views of
:mod:`shournal.store.reader`: importing SQLAlchemy alone costs more than
the screen's budget), SQLite journals only.

The query syntax and the answers' types: :mod:`shournal.search_query`.
"""

from __future__ import annotations

import os
import sqlite3
import time

from shournal.search_query import (
    MODES,
    SCOPES,
    Details,
    Hit,
    Scope,
    SearchQuery,
    like_literal,
    parse_query,
)
from shournal.store.connection import (
    BUSY_SECONDS,
    READS_SCHEMA,
    NotAFile,
    SqliteReads,
    connect_read_only,
    sqlite_file_of,
)
from shournal.store.reader import _COMMAND_SELECT, _attach_events, command_view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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
STEP_SECONDS = 0.008


_HIT_SELECT = (
    "SELECT c.id, c.text, c.return_value, c.start_time, c.end_time, wd.path, env.hostname "
    "FROM command c JOIN working_dir wd ON wd.id = c.cwd_id JOIN env ON env.id = c.env_id"
)

# A written (w) or read (r) file's name (basename) or, with a "/" in what
# is looked for, its whole path (only then is its directory joined).
_FILE_MATCH = {
    ("w", False): "EXISTS (SELECT 1 FROM write_event we WHERE we.command_id = c.id "
    "AND CAST(we.basename AS TEXT) LIKE {} ESCAPE '\\')",
    ("w", True): "EXISTS (SELECT 1 FROM write_event we JOIN directory d ON d.id = we.directory_id "
    "WHERE we.command_id = c.id AND CAST(d.path || we.basename AS TEXT) LIKE {} ESCAPE '\\')",
    ("r", False): "EXISTS (SELECT 1 FROM read_event re "
    "JOIN read_file rf ON rf.id = re.read_file_id "
    "WHERE re.command_id = c.id AND CAST(rf.basename AS TEXT) LIKE {} ESCAPE '\\')",
    ("r", True): "EXISTS (SELECT 1 FROM read_event re JOIN read_file rf ON rf.id = re.read_file_id "
    "JOIN directory d ON d.id = rf.directory_id "
    "WHERE re.command_id = c.id AND CAST(d.path || rf.basename AS TEXT) LIKE {} ESCAPE '\\')",
}


def _conditions(query: SearchQuery, scope: Scope) -> tuple[list[str], dict[str, Any]]:
    where: list[str] = []
    params: dict[str, Any] = {}

    def param(value: Any) -> str:
        name = f"p{len(params)}"
        params[name] = value
        return f":{name}"

    for pattern in query.text:
        where.append(f"c.text LIKE {param(pattern)} ESCAPE '\\'")
    for side, names in (("w", query.written), ("r", query.read)):
        for name in names:
            where.append(_FILE_MATCH[side, "/" in name].format(param(f"%{like_literal(name)}%")))
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


class _Unanswered(Exception):
    """The journal cannot be searched (why, for the message)."""


class _SearchReads(SqliteReads):
    """The reads of a search: after opening, a failing read is the
    journal's fault (locked past the busy timeout, damaged)."""

    def rows(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        try:
            return self._conn.execute(sql, params or {}).fetchall()
        except sqlite3.Error as e:
            from shournal.errors import StoreUnavailable

            raise StoreUnavailable(f"cannot search the journal: {e}") from None


class Searcher:
    """A read-only connection to a SQLite journal of the current schema
    (:data:`shournal.store.connection.READS_SCHEMA`) for the interactive
    search; see :func:`open_searcher`.
    """

    def __init__(self, path: str) -> None:
        """:raises _Unanswered: no such file, not a database, another
        schema version, or any error of SQLite."""
        if not os.path.exists(path):
            raise _Unanswered("no journal file")
        try:
            self._conn = connect_read_only(path, isolation_level=None, timeout=BUSY_SECONDS)
        except sqlite3.Error as e:
            raise _Unanswered(str(e)) from None
        try:
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_SECONDS * 1000}")
            rows = self._conn.execute("SELECT version FROM schema_version WHERE id = 1").fetchall()
        except sqlite3.Error as e:
            self.close()
            raise _Unanswered(str(e)) from None
        if [tuple(r) for r in rows] != [(READS_SCHEMA,)]:
            self.close()
            raise _Unanswered("another schema version")
        self._reads = _SearchReads(self._conn, path)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rows(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        return self._reads.rows(sql, params)

    def newest_id(self) -> int:
        """The largest command id (0: no command yet); where a search starts."""
        ((top,),) = self._rows("SELECT coalesce(max(id), 0) FROM command")
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
        where, params = _conditions(query, scope)
        sql = (
            f"{_HIT_SELECT} WHERE c.id < :below AND c.id >= :low"
            + "".join(f" AND {w}" for w in where)
            + " ORDER BY c.id DESC LIMIT :limit"
        )
        rows = self._rows(sql, {**params, "below": below, "low": low, "limit": limit})
        hits = [Hit(*r) for r in rows]
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
        """Up to ``limit`` matches, newest first, from ``below`` down (None:
        from the newest), and where to go on (0: done).  ``seconds``: stop
        after that much time with what was found (the caller goes on with
        the returned position).  ``window``: the first window's size (by
        default small when files are looked for: each command has many);
        windows grow while they are cheap and shrink when they are not."""
        if window is None:
            window = 64 if query.written or query.read else 2048
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
            window = max(64, min(int(rate * left), 1 << 20))
        return hits, start

    def details(
        self, command_id: int, *, neighbours: int = 3, max_files: int = 50
    ) -> Details | None:
        """The command with this id (None: no such command), its files
        (at most ``max_files`` of each side) and ``neighbours`` commands
        before and after it in its shell session."""
        rows = self._rows(f"{_COMMAND_SELECT} WHERE command.id = :id", {"id": command_id})
        if not rows:
            return None
        cmd = command_view(self._reads, rows[0])
        _attach_events(self._reads, [cmd], max_files)
        out = Details(cmd)
        ((session,),) = self._rows("SELECT session_id FROM command WHERE id = :id",
                                   {"id": command_id})  # fmt: skip
        if session is not None:
            near = {"session": session, "id": command_id, "n": neighbours}
            before = self._rows(
                "SELECT id, text FROM command WHERE session_id = :session AND id < :id "
                "ORDER BY id DESC LIMIT :n",
                near,
            )
            out.before = [(i, t) for i, t in reversed(before)]
            out.after = [
                (i, t)
                for i, t in self._rows(
                    "SELECT id, text FROM command WHERE session_id = :session AND id > :id "
                    "ORDER BY id LIMIT :n",
                    near,
                )
            ]
        return out

    def interrupt(self) -> None:
        """Stop a running statement (from another thread)."""
        self._conn.interrupt()


def open_searcher(url: str | None) -> Searcher:
    """The searcher of the journal ``url`` names (None: the default file).

    :raises shournal.store.StoreMissing: no journal yet.
    :raises shournal.store.StoreUnavailable: not a SQLite journal file, or
        it cannot be read as one of the current schema.
    """
    from shournal.errors import StoreMissing, StoreUnavailable

    try:
        path = sqlite_file_of(url)
    except NotAFile as e:
        raise StoreUnavailable(
            f"search needs a SQLite journal file ({e}); `shournal query` reads the others"
        ) from None
    if not os.path.exists(path):
        raise StoreMissing("no journal yet: nothing has been recorded")
    try:
        return Searcher(path)
    except _Unanswered as e:
        raise StoreUnavailable(f"{path}: cannot search this journal: {e}") from None
