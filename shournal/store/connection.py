"""The one interface every read of the journal runs over, and its two
implementations: :class:`SqliteReads` (the standard library's sqlite3,
no SQLAlchemy) for a SQLite journal, and :class:`AlchemyReads` (a
SQLAlchemy connection of :class:`shournal.store.db.Store`) for PostgreSQL
and for a SQLite journal the store had to open (to create or upgrade it).

The SQL of the readers (:mod:`shournal.store.reader`,
:mod:`shournal.store.stats`, :mod:`shournal.store.archived`) is text with
``:name`` placeholders, which both execute.  What differs between the
engines is normalised here and nowhere else: times (SQLite keeps UTC as
text, PostgreSQL as ``timestamptz``), case-sensitive patterns (SQLite's
GLOB, PostgreSQL's LIKE), case-insensitive ones (``ILIKE``), and binary
columns (``bytes`` from either).

Importing this module costs only the standard library: a SQLite journal
is read without SQLAlchemy (``shournal query`` start-up,
bench/cli_startup.py).
"""

from __future__ import annotations

import _thread
import os
import sqlite3
from contextlib import contextmanager
from datetime import UTC, datetime

from shournal.errors import StoreCorrupt, StoreError, StoreUnavailable

# Not typing.TYPE_CHECKING: every reading command imports this module,
# and typing costs it ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from sqlalchemy import Connection

    from shournal.store.db import Store

__all__ = [
    "BUSY_SECONDS",
    "READS_SCHEMA",
    "AlchemyReads",
    "NotAFile",
    "Reads",
    "SqliteReads",
    "SqliteSource",
    "StoreSource",
    "classify_sqlite",
    "connect_read_only",
    "sqlite_file",
    "sqlite_file_of",
]

# How long to wait for another process's lock, as the original does.
BUSY_SECONDS = 15

# The schema version whose tables the readers' SQL reads without the
# store: a SQLite journal of any other version is opened by the store
# (which upgrades an older one, or says it is too new).
# tests/unit/test_cli_fast_path.py fails when the migrations' SCHEMA_VERSION
# moves on without this being raised.
READS_SCHEMA = 12

# SQLite refuses a LIKE or GLOB pattern longer than this (in bytes,
# SQLITE_MAX_LIKE_PATTERN_LENGTH) with "pattern too complex".
SQLITE_MAX_PATTERN = 50_000


def _sqlite_time_text(moment: datetime) -> str:
    """An aware datetime as SQLAlchemy's SQLite DATETIME stores it (naive
    UTC text with microseconds: lexical order is time order)."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


class Reads:
    """A connection inside one read transaction, as the readers use it."""

    dialect: str = "sqlite"

    def rows(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Every row of ``sql`` (``:name`` placeholders) as tuples."""
        raise NotImplementedError

    def first(self, sql: str, params: dict[str, Any] | None = None) -> Any:
        """The first row of ``sql``, or None."""
        rows = self.rows(sql + " LIMIT 1", params)
        return rows[0] if rows else None

    # Whether prefetching does anything here (a SQLite file read by sqlite3).
    can_prefetch = False

    @contextmanager
    def prefetching(self, statements: list[tuple[str, dict[str, Any]]]) -> Iterator[None]:
        """Run ``statements`` at once, their rows unused, while the block
        runs: the pages they read come into the page cache as the
        transaction needs them, so on a journal not read lately its reads
        wait on the disk side by side, not one after another.  A hint:
        nothing happens when it fails, or where the journal is not a
        SQLite file."""
        yield

    def only_own_rows(self) -> None:
        """Narrow this transaction to its user's own rows in a lab store
        (:mod:`shournal.store.lab`): what a user deletes is found among
        them.  Nothing to narrow elsewhere."""

    # -- the dialect's differences -------------------------------------------------

    def time_param(self, moment: datetime) -> Any:
        """An aware datetime as a parameter compared with a time column."""
        if self.dialect == "sqlite":
            return _sqlite_time_text(moment)
        return moment

    def time(self, value: Any) -> datetime | None:
        """A time column's value as an aware UTC datetime."""
        if value is None:
            return None
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def case_pattern(self, column: str, raw: bool) -> str:
        """SQL comparing ``column`` with the case-sensitive pattern
        ``:{placeholder}`` (see :meth:`pattern`); ``raw``: a binary column."""
        if self.dialect == "sqlite":
            # GLOB (case-sensitive) matches text only: a BLOB operand never
            # matches, so paths are compared as the text their bytes spell.
            return f"CAST({column} AS TEXT) GLOB" if raw else f"{column} GLOB"
        # PostgreSQL: LIKE is case-sensitive and its default escape is the
        # backslash, for text and bytea alike.
        return f"{column} LIKE"

    def nocase_pattern(self, column: str, placeholder: str) -> str:
        """``column`` matched case-insensitively against a LIKE pattern
        whose only wildcard is ``%``."""
        if self.dialect == "sqlite":
            return f"lower({column}) LIKE lower(:{placeholder}) ESCAPE '\\'"
        return f"{column} ILIKE :{placeholder} ESCAPE '\\'"

    def like_nocase(self, expr: str, raw: bool = False) -> str:
        """SQL matching ``expr`` against a LIKE pattern (``%`` and ``_``
        wildcards, ``\\`` escapes) that follows it, ASCII letters in
        either case (SQLite's LIKE; ILIKE); ``raw``: a binary column, its
        pattern's literal parts made by :meth:`raw_text`."""
        if self.dialect == "sqlite":
            return f"CAST({expr} AS TEXT) LIKE" if raw else f"{expr} LIKE"
        # bytea has no ILIKE: its escape text (bytes >= 0x80 and NUL as
        # \ooo, the backslash doubled, the rest as they are) has one
        return f"encode({expr}, 'escape') ILIKE" if raw else f"{expr} ILIKE"

    def raw_text(self, text: str) -> str:
        """``text`` as :meth:`like_nocase` sees a binary column that holds
        its bytes (the file system's encoding)."""
        if self.dialect == "sqlite":
            return text
        return "".join(
            f"\\{b:03o}" if b == 0 or b >= 0x80 else "\\\\" if b == 0x5C else chr(b)
            for b in os.fsencode(text)
        )

    def pattern(self, like: str, *, case: bool, raw: bool) -> Any:
        """The parameter of a LIKE pattern whose only wildcard is ``%``
        (``_`` and ``\\`` escaped) for :meth:`case_pattern` (``case``) or
        :meth:`nocase_pattern`.

        :raises shournal.data.CriteriaError: SQLite would refuse it."""
        if case and self.dialect == "sqlite":
            value = _glob_pattern(like)
        else:
            value = _escape_like(like)
        size = len(value.encode("utf-8", "surrogateescape"))
        if self.dialect == "sqlite" and size > SQLITE_MAX_PATTERN:
            from shournal.data import CriteriaError

            raise CriteriaError(
                f"search pattern too long ({size} bytes; SQLite takes at most {SQLITE_MAX_PATTERN})"
            )
        if case and raw and self.dialect != "sqlite":
            return os.fsencode(value)
        return value


def _escape_like(pattern: str) -> str:
    """Only ``%`` stays a wildcard: ``_`` is common in file and command names."""
    return pattern.replace("\\", "\\\\").replace("_", "\\_")


def _glob_pattern(pattern: str) -> str:
    """A LIKE pattern whose only wildcard is ``%`` as a SQLite GLOB pattern
    (GLOB is case-sensitive, unlike SQLite's LIKE)."""
    out = []
    for ch in pattern:
        if ch == "%":
            out.append("*")
        elif ch in "*?[":
            out.append(f"[{ch}]")
        else:
            out.append(ch)
    return "".join(out)


def classify_sqlite(exc: BaseException, where: str) -> StoreError:
    """An error of SQLite as the store's (:mod:`shournal.errors`)."""
    lines = str(exc).strip().splitlines()
    reason = lines[0] if lines else type(exc).__name__
    if getattr(exc, "sqlite_errorname", "") in {"SQLITE_NOTADB", "SQLITE_CORRUPT"}:
        return StoreCorrupt(f"{where} is not a usable database: {reason}")
    if isinstance(exc, sqlite3.OperationalError | OSError):
        return StoreUnavailable(f"cannot use the journal {where}: {reason}")
    return StoreError(f"journal {where}: {reason}")


class SqliteReads(Reads):
    """:class:`Reads` over a sqlite3 connection."""

    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection, where: str, path: str | None = None) -> None:
        self._conn = conn
        self._where = where
        self._path = path  # the file, for prefetch's own connections
        self.can_prefetch = path is not None

    def rows(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        try:
            if params is not None and len(params) > _NAMED_MAX:
                text, names = _positional(sql)
                return self._conn.execute(text, [params[n] for n in names]).fetchall()
            return self._conn.execute(sql, params or {}).fetchall()
        except sqlite3.Error as e:
            raise classify_sqlite(e, self._where) from None


    @contextmanager
    def prefetching(self, statements: list[tuple[str, dict[str, Any]]]) -> Iterator[None]:
        if self._path is None or len(statements) < 2:
            yield
            return
        import threading

        path = self._path

        def run(text: str, values: list[Any]) -> None:
            # Only calls that let go of the interpreter's lock (the threads
            # then wait on the disk side by side, not on each other).
            try:
                conn = connect_read_only(path)
                try:
                    conn.execute(text, values).fetchall()
                finally:
                    conn.close()
            except (sqlite3.Error, OSError):
                pass  # a hint only: the transaction's own read says what is wrong

        work = []
        for sql, params in statements:
            text, names = _positional(sql, keep=False)  # run once
            work.append((text, [params[n] for n in names]))
        # Each on a connection of its own (a snapshot of its own: only the
        # page cache is shared with the transaction, never a row).
        threads = [threading.Thread(target=run, args=w, daemon=True) for w in work]
        for t in threads:
            t.start()
        try:
            yield
        finally:
            for t in threads:
                t.join()


# sqlite3 binds named parameters by asking SQLite each one's name, a search
# of the statement's list of names: time quadratic in their number (a
# lineage level's lookup has hundreds).  Statements with more are run with
# positional ones.
_NAMED_MAX = 32
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
_POSITIONAL: dict[str, tuple[str, tuple[str, ...]]] = {}


def _positional(sql: str, *, keep: bool = True) -> tuple[str, tuple[str, ...]]:
    """``sql`` with its ``:name`` parameters as ``?``, and their names in
    order (the store's statements have no ``:`` in a literal; no regular
    expression: importing re costs `lineage` its start-up); kept for the
    statement's next run unless ``keep`` is False."""
    hit = _POSITIONAL.get(sql)
    if hit is None:
        pieces = sql.split(":")
        out = [pieces[0]]
        names: list[str] = []
        for piece in pieces[1:]:
            rest = piece.lstrip(_NAME_CHARS)
            end = len(piece) - len(rest)
            before = out[-1][-1:]
            if end and not piece[0].isdigit() and not (before.isalnum() or before in ("_", ":")):
                names.append(piece[:end])
                out.append("?" + rest)
            else:
                out.append(":" + piece)
        hit = ("".join(out), tuple(names))
        if keep and len(_POSITIONAL) < 64:
            _POSITIONAL[sql] = hit
    return hit


class AlchemyReads(Reads):
    """:class:`Reads` over a SQLAlchemy connection (its errors are the
    store's: :meth:`shournal.store.engine.Database.reading` translates)."""

    def __init__(self, conn: Connection) -> None:
        from sqlalchemy import text

        self._conn = conn
        self._text = text
        self.dialect = conn.dialect.name

    def rows(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        return [tuple(r) for r in self._conn.execute(self._text(sql), params or {})]

    def only_own_rows(self) -> None:
        if self.dialect == "postgresql":
            from shournal.store.lab import OWN_ROWS_ONLY

            self._conn.exec_driver_sql(OWN_ROWS_ONLY)


# What a file: URI's path keeps as it is (urllib.parse.quote's safe set).
_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def _uri_path(path: str) -> str:
    """``path`` percent-encoded for a file: URI (the bytes of its name)."""
    return "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in os.fsencode(path))


def connect_read_only(path: str, **kw: object) -> sqlite3.Connection:
    """A connection to the SQLite file `path` that changes nothing on disk
    (``mode=ro``): a reader needs no write permission on the journal.

    A WAL journal whose ``-shm`` file is missing and cannot be made (a
    read-only directory or mount: an archived journal) cannot be opened so;
    it is opened ``immutable`` then.  Nobody can be writing it: a writer
    would have made the ``-shm`` file, which stays while it is open.

    A journal the user may write is opened read-write with ``query_only``
    instead: a read-only connection cannot remove the ``-wal`` and ``-shm``
    files it makes (SQLite's last writable connection does), so every
    read would leave them behind.

    :raises sqlite3.Error: it cannot be opened or read.
    """
    full = os.path.abspath(path)
    if os.access(full, os.W_OK) and os.access(os.path.dirname(full), os.W_OK):
        conn = sqlite3.connect(f"file:{_uri_path(full)}?mode=rw", uri=True, **kw)  # type: ignore[arg-type]
        try:
            conn.execute("PRAGMA query_only=ON")
        except sqlite3.Error:
            conn.close()
            raise
        return conn
    uri = f"file:{_uri_path(full)}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, **kw)  # type: ignore[arg-type]
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
        if os.access(os.path.dirname(os.path.abspath(path)), os.W_OK) or os.path.exists(
            path + "-shm"
        ):
            raise
    return sqlite3.connect(uri + "&immutable=1", uri=True, **kw)  # type: ignore[arg-type]


def journal_paths(database: str, folder: str | None) -> list[str]:
    """A SQLite journal's folder (the default journal's: ours; the folder
    of a journal the user named is the user's business) and files."""
    return ([folder] if folder else []) + [database, f"{database}-wal", f"{database}-shm"]


class NotAFile(Exception):
    """Only the store can open this journal (:func:`sqlite_file_of`)."""


def sqlite_file_of(url: str | None) -> str:
    """The SQLite file of the journal ``url`` names
    (:func:`shournal.location.resolve_url`; None: the default one), as
    :class:`shournal.store.db.Store` would open it.

    :raises NotAFile: only the store can tell (it says why): not a plain
        ``sqlite:///FILE`` URL, or the default journal's directory is
        missing or not safe to use.
    """
    if url is None:
        from shournal import _paths

        path = _paths.default_db_file()
        try:
            _paths.check_own_directory(
                os.path.dirname(path), follow_links=True, forbidden_mode=0o022
            )
        except FileNotFoundError:
            raise NotAFile("no journal directory") from None
        except (_paths.UnsafeDirectory, OSError):
            raise NotAFile("journal directory not usable") from None
        return path
    prefix = "sqlite:///"
    rest = url[len(prefix) :] if url.startswith(prefix) else ""
    # Query strings, escapes and in-memory databases: SQLAlchemy's URL
    # parser decides what they mean.
    if not rest or any(ch in rest for ch in "?%#") or rest == ":memory:":
        raise NotAFile("not a plain SQLite file URL")
    return rest


def sqlite_file(url: str | None) -> str | None:
    """:func:`sqlite_file_of`, None where it raises."""
    try:
        return sqlite_file_of(url)
    except NotAFile:
        return None


class _Source:
    """Where a journal's reads come from: one read transaction at a time."""

    location: str

    def reading(self) -> Any:
        """A context manager: one read transaction's :class:`Reads`."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class SqliteSource(_Source):
    """A SQLite journal of :data:`READS_SCHEMA` read through sqlite3 alone,
    changing nothing on disk (:func:`connect_read_only`)."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self._conn = conn
        self.location = path
        # One connection: a thread reading waits for another's transaction.
        self._lock = _thread.allocate_lock()

    @classmethod
    def open(cls, path: str) -> SqliteSource | None:
        """The journal at ``path``, or None when the store must open it:
        no such file, another schema version, or any error of SQLite (the
        store then upgrades it, or gives the error its user must see)."""
        if not os.path.exists(path):
            return None
        try:
            conn = connect_read_only(path, isolation_level=None, timeout=BUSY_SECONDS,
                                     check_same_thread=False)  # fmt: skip
        except sqlite3.Error:
            return None
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_SECONDS * 1000}")
            rows = conn.execute("SELECT version FROM schema_version WHERE id = 1").fetchall()
        except sqlite3.Error:
            rows = []
        if [tuple(r) for r in rows] != [(READS_SCHEMA,)]:
            conn.close()
            return None
        return cls(conn, path)

    @contextmanager
    def reading(self) -> Iterator[Reads]:
        with self._lock:
            reads = SqliteReads(self._conn, self.location, self.location)
            reads.rows("BEGIN")
            try:
                yield reads
            finally:
                if self._conn.in_transaction:
                    try:
                        self._conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass

    def close(self) -> None:
        self._conn.close()


class StoreSource(_Source):
    """A journal the store opened (PostgreSQL; a SQLite journal it had to
    create or upgrade), read through its SQLAlchemy connections."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.location = store.location

    @contextmanager
    def reading(self) -> Iterator[Reads]:
        with self.store.reading() as conn:
            yield AlchemyReads(conn)

    def close(self) -> None:
        self.store.close()
