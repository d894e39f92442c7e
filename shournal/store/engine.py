"""The journal's database connection: a URL made an engine, SQLite's
pragmas and journal mode, the privacy of a SQLite journal's files, read
and write transactions, and the driver's errors made the store's
(:mod:`shournal.errors`), in one place.

:class:`Database` knows no table: the schema (:mod:`shournal.store.schema`)
and the writer (:mod:`shournal.store.writer`) work through its
:meth:`Database.reading` and :meth:`Database.writing`.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Self, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from shournal import _paths
from shournal.errors import (
    StoreCorrupt,
    StoreError,
    StoreMissing,
    StoreUnavailable,
)
from shournal.store.connection import BUSY_SECONDS as _BUSY_SECONDS
from shournal.store.connection import journal_paths as journal_paths
from shournal.store.lab import OWN_ROWS_ONLY

T = TypeVar("T")

_NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs"})

# mountinfo writes blanks and backslashes in mount points as \ooo.
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def _fs_type(path: Path, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """File-system type of the mount holding ``path``."""
    try:
        target = os.path.realpath(path)
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.readlines()
    except OSError:
        return None
    best, best_type = "", None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount = _OCTAL_ESCAPE.sub(lambda e: chr(int(e.group(1), 8)), fields[4])
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, best_type = mount, right.split()[0]
    return best_type


# PRAGMA user_version bit: this journal's files were private (0600, its
# folder 0700) when a writer last opened it.
PRIVATE_MARK = 1


def journal_open_to_others(url: str | None) -> list[tuple[str, int]]:
    """(path, st_mode) of the SQLite journal ``url`` names (None: the
    default one) and of its folder, where group or others may read them
    (``shournal doctor``)."""
    if url is None:
        database = _paths.default_db_file()
        return _paths.open_to_others(journal_paths(database, os.path.dirname(database)))
    try:
        parsed = make_url(url)
    except sa_exc.ArgumentError:
        return []
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return []
    return _paths.open_to_others(journal_paths(parsed.database, None))


def _make_private(database: str, folder: str | None) -> list[str]:
    """Create the journal file 0600 if absent (SQLite gives its -wal and
    -shm the journal's mode), and deal with a journal that group or
    others may read: an older shournal's (0644 in a 0755 folder) is made
    private once, with a note returned; one that was private before (the
    journal says so, :meth:`Database.mark_private`) is refused with the fix:
    its owner opened it again, and the spool keeps the commands.

    :raises StoreUnavailable: it is open to others and was private before.
    """
    with suppress(OSError):  # (a missing folder: SQLite says it better)
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600))
    paths = journal_paths(database, folder)
    found = _paths.open_to_others(paths[:-2])
    if found and _was_private(database):
        _scratch_private(paths)
        path, mode = found[0]
        what = "folder" if path == folder else "file"
        raise StoreUnavailable(
            f"the journal {what} {path} is open to group or others (mode "
            f"{mode & 0o7777:04o}); fix: {_paths.private_fix(path, mode)}")
    done = []
    for path, mode in found:
        try:
            os.chmod(path, mode & 0o700)
        except OSError as e:
            raise StoreUnavailable(
                f"cannot make the journal's {path} private: {e.strerror}; "
                f"fix: {_paths.private_fix(path, mode)}") from None
        done.append(f"{path} {mode & 0o7777:04o} -> {mode & 0o700:04o}")
    _scratch_private(paths)
    if not done:
        return []
    # one line: a shell shows one line per warning
    return [f"made the journal private, as it is from now on ({', '.join(done)}): "
            "other users could read it"]


def _scratch_private(paths: list[str]) -> None:
    """-wal and -shm: SQLite's scratch, made with the journal's mode of
    the moment (a reader of the open journal made them so): follow it."""
    for path, mode in _paths.open_to_others(paths[-2:]):
        with suppress(OSError):
            os.chmod(path, mode & 0o700)


def _was_private(database: str) -> bool:
    """The mark of :meth:`Database.mark_private` (asked only of a journal
    found open: a connection of its own costs)."""
    try:
        conn = sqlite3.connect(database, timeout=_BUSY_SECONDS)
    except sqlite3.Error:
        return False
    try:
        return bool(conn.execute("PRAGMA user_version").fetchone()[0] & PRIVATE_MARK)
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _set_journal_mode(cur: sqlite3.Cursor, mode: str) -> None:
    """Switch the journal mode unless it is already set (it persists in the
    file).  Switching ignores busy_timeout: when two shells open a new
    journal at once, one gets "database is locked" at once, so retry."""
    deadline = time.monotonic() + _BUSY_SECONDS
    while True:
        if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() == mode:
            return
        try:
            cur.execute(f"PRAGMA journal_mode={mode}")
            return
        except sqlite3.OperationalError as e:
            if getattr(e, "sqlite_errorname", "") != "SQLITE_BUSY" or time.monotonic() > deadline:
                raise
        time.sleep(0.02)


@contextmanager
def _driver_transaction(conn: Connection) -> Iterator[None]:
    """SQLite's write transaction, begun and ended on the driver: a command
    line whose statements all run there (shournal.store.precompiled) needs
    no SQLAlchemy transaction around them; one that also runs statements
    through SQLAlchemy gets one inside this (the begin event does not begin
    again), which ends it."""
    dbapi: sqlite3.Connection = conn.connection.driver_connection  # type: ignore[assignment]
    dbapi.execute("BEGIN IMMEDIATE")
    try:
        yield
        if conn.in_transaction():
            conn.commit()
        else:
            dbapi.commit()
    except BaseException:
        with suppress(sa_exc.SQLAlchemyError, sqlite3.Error):
            if conn.in_transaction():
                conn.rollback()
            if dbapi.in_transaction:
                dbapi.rollback()
        if dbapi.in_transaction:
            # never left open for the next transaction
            conn.invalidate()
        raise


def _one_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    return lines[0] if lines else type(orig).__name__


def _classify(exc: BaseException, where: str) -> StoreError:
    orig = getattr(exc, "orig", None) or exc
    reason = _one_line(exc)
    if getattr(orig, "sqlite_errorname", "") in {"SQLITE_NOTADB", "SQLITE_CORRUPT"}:
        return StoreCorrupt(f"{where} is not a usable database: {reason}")
    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError | OSError) or isinstance(
        orig, sqlite3.OperationalError
    ):
        return StoreUnavailable(f"cannot use the journal {where}: {reason}")
    return StoreError(f"journal {where}: {reason}")



class Database:
    """The journal's database, schema unseen.  ``url`` is a SQLAlchemy
    URL; None means the default SQLite file in the user's data directory.

    ``create=False`` (for readers) raises StoreMissing instead of creating
    a SQLite journal file that does not exist yet, so that a query changes
    nothing.
    ``read_only`` (readers): a SQLite journal is opened ``mode=ro`` and
    nothing on disk is changed (no journal mode set, no upgrade unless the
    journal is writable), so a read-only file, directory or mount is
    browsable; writes then fail as a read-only journal's.

    :raises StoreError: see :mod:`shournal.errors`.
    """

    def __init__(
        self, url: str | None = None, *, create: bool = True, read_only: bool = False
    ) -> None:
        self.create = create
        self._read_only = read_only
        # The connection write transactions use (_write_connection).
        self._writer: Connection | None = None
        self._writer_lock = threading.Lock()
        # What opening changed that its owner should hear of (one line each).
        self.notes: list[str] = []
        folder: str | None = None
        if url is None:
            path = _paths.default_db_path()
            folder = str(path.parent)
            if create:
                try:
                    _paths.make_private_dir(path.parent)
                except OSError as e:
                    raise StoreUnavailable(f"cannot create {path.parent}: {e.strerror}") from None
            # Another user who made it first (e.g. in the Docker edition's
            # shared /journal) would read, or forge, this user's journal.
            try:
                _paths.check_own_directory(path.parent, follow_links=True, forbidden_mode=0o022)
            except FileNotFoundError:
                pass  # a reader finds no journal below
            except _paths.UnsafeDirectory as e:
                raise StoreUnavailable(f"journal directory {e}") from None
            except OSError as e:
                raise StoreUnavailable(f"cannot use {path.parent}: {e.strerror}") from None
            url = f"sqlite:///{path}"
        try:
            parsed = make_url(url)
        except sa_exc.ArgumentError:
            # Not echoed: a URL may carry a password.
            raise StoreUnavailable(
                "invalid database URL (check SHOURNAL_DB_URL or [store] url)"
            ) from None
        self.dialect_name = parsed.get_backend_name()
        if self.dialect_name not in ("sqlite", "postgresql"):
            raise StoreUnavailable(
                f"unsupported database backend {self.dialect_name!r} (use sqlite or postgresql)"
            )
        self._where = (
            (parsed.database or ":memory:")
            if self.dialect_name == "sqlite"
            else parsed.render_as_string(hide_password=True)
        )
        database = parsed.database
        # (marked so once the schema is there: mark_private)
        self.private = bool(
            self.dialect_name == "sqlite" and create and database and database != ":memory:"
        )
        if self.dialect_name == "sqlite" and not create and database and database != ":memory:":
            if not os.path.exists(database):
                raise StoreMissing(f"no journal at {database} yet")
        if self.private and database:
            self.notes = _make_private(database, folder)
        self._parsed = parsed
        self._make_engine()

    def mark_private(self) -> None:
        """Note in the journal that its files were private here (see
        :func:`_make_private`): from now on a journal opened to others
        again is refused, not fixed behind its owner's back."""
        with self.reading() as conn:
            if conn.exec_driver_sql("PRAGMA user_version").scalar_one() & PRIVATE_MARK:
                return
        with self.writing() as conn:
            version = conn.exec_driver_sql("PRAGMA user_version").scalar_one()
            conn.exec_driver_sql(f"PRAGMA user_version={int(version) | PRIVATE_MARK}")

    # -- connection setup ---------------------------------------------------

    def _make_engine(self) -> None:
        parsed = self._parsed
        database = parsed.database
        kw: dict[str, Any] = {}
        on_file = self.dialect_name == "sqlite" and database not in (None, "", ":memory:")
        if self._read_only and on_file:
            from shournal.store.connection import connect_read_only

            # (the driver's own arguments, as SQLAlchemy passes them)
            kw["creator"] = lambda: connect_read_only(database, check_same_thread=False)
        else:
            self._read_only = False
        if self.dialect_name == "postgresql":
            kw["connect_args"] = _server_timeouts(parsed)
        try:
            self.engine: Engine = create_engine(parsed, **kw)
        except (sa_exc.SQLAlchemyError, ImportError) as e:
            raise StoreUnavailable(
                f"cannot use the journal {self._where}: {_one_line(e)}"
            ) from None
        if self.dialect_name == "sqlite":
            self._setup_sqlite(database)

    @property
    def read_only(self) -> bool:
        """Opened ``mode=ro`` (a SQLite journal on a file only)."""
        return self._read_only

    def writable_again(self) -> bool:
        """A read-only SQLite store whose journal the user may write: open
        it read-write instead (to upgrade its schema); False if he may not."""
        database = self._parsed.database or ""
        if not (
            os.access(database, os.W_OK) and os.access(os.path.dirname(database) or ".", os.W_OK)
        ):
            return False
        self.engine.dispose()
        self._read_only = False
        self._make_engine()
        return True

    def _setup_sqlite(self, database: str | None) -> None:
        journal_mode: str | None = None
        if database and database != ":memory:" and not self._read_only:
            journal_mode = "wal"
            # WAL needs shared memory that network file systems cannot provide.
            if _fs_type(Path(database).parent) in _NETWORK_FS:
                journal_mode = "delete"

        @event.listens_for(self.engine, "connect")
        def _pragmas(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
            # Our own BEGIN (below) instead of the driver's implicit one, so
            # that writers can take the lock up front (BEGIN IMMEDIATE).
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            try:
                cur.execute(f"PRAGMA busy_timeout={_BUSY_SECONDS * 1000}")
                cur.execute("PRAGMA foreign_keys=ON")
                if journal_mode is not None:
                    _set_journal_mode(cur, journal_mode)
                cur.execute("PRAGMA synchronous=NORMAL")
            finally:
                cur.close()

        @event.listens_for(self.engine, "begin")
        def _begin(conn: Connection) -> None:
            # A deferred transaction that later writes can fail at once with
            # SQLITE_BUSY when another process committed in between;
            # IMMEDIATE waits for the lock via busy_timeout instead.
            dbapi_conn: sqlite3.Connection = conn.connection.driver_connection  # type: ignore[assignment]
            if dbapi_conn.in_transaction:
                return  # a write transaction begun on the driver (_driver_transaction)
            immediate = conn.get_execution_options().get("shournal_write", False)
            # on the driver's cursor: an execution through SQLAlchemy costs
            # more CPU than the statement (see shournal.store.precompiled)
            dbapi_conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except (sa_exc.SQLAlchemyError, sqlite3.Error, OSError) as e:
            raise _classify(e, self._where) from None

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection inside one read transaction (a consistent snapshot)."""
        with self._translated(), self.engine.connect() as conn, conn.begin():
            yield conn

    def only_own_rows(self, conn: Connection) -> None:
        """Narrow `conn`'s transaction to the rows of its own user in a lab
        store (shournal.store.lab), as every write transaction is: what
        a user changes or deletes is found among his own rows, never a
        colleague's shared ones.  A no-op on SQLite."""
        if self.dialect_name == "postgresql":
            conn.exec_driver_sql(OWN_ROWS_ONLY)

    @contextmanager
    def writing(self, also: str | None = None) -> Iterator[Connection]:
        """A connection inside one write transaction: all or nothing.
        `also`: an SQL expression the server evaluates first thing in the
        transaction, in its first statement (PostgreSQL; a round trip
        fewer), e.g. the writer's lock; ignored on SQLite."""
        if self.dialect_name != "sqlite":
            with self._translated(), self._write_connection() as conn, conn.begin():
                # A lab store's writer sees only its own rows (see
                # shournal.store.lab); elsewhere the setting is unused.
                first = OWN_ROWS_ONLY if also is None else f"{OWN_ROWS_ONLY}, {also}"
                # The writer's connection is the driver's autocommit one
                # (_write_connection): its transaction begins in its first
                # statement (the driver's own BEGIN would be a round trip
                # of its own) and the commit or rollback ends it.
                # (on the driver: SQLAlchemy's work around an execution
                # costs more CPU than the statement, see store.precompiled)
                dbapi = conn.connection.driver_connection
                self.driver_call(lambda: dbapi.execute(f"BEGIN; {first}"), first)  # type: ignore[union-attr]
                yield conn
            return
        with self._translated(), self._write_connection() as conn, _driver_transaction(conn):
            yield conn

    @contextmanager
    def writing_at_once(self, also: str | None = None) -> Iterator[AtOnce]:
        """PostgreSQL: a write transaction whose statements are collected
        (AtOnce.add) and sent to the server in one message with its BEGIN,
        `also` (see writing) and COMMIT (AtOnce.send): one round trip in
        all, where writing() takes one per statement and one to commit.
        For statements none of which needs another's result (a typed
        line's INSERT, its small tables' ids known); all or nothing."""
        if self.dialect_name == "sqlite":
            raise ValueError("writing_at_once is PostgreSQL's")
        first = OWN_ROWS_ONLY if also is None else f"{OWN_ROWS_ONLY}, {also}"
        with self._translated(), self._write_connection() as conn:
            yield AtOnce(self, conn.connection.driver_connection, first)

    @contextmanager
    def _write_connection(self) -> Iterator[Connection]:
        """The connection write transactions use, kept between them (a
        pool checkout per command line costs ~0.15 ms of CPU); another
        thread writing meanwhile takes one of its own.  On PostgreSQL it
        is in the driver's autocommit mode (see writing), and one that
        failed is closed: the next transaction takes a new one."""
        if not self._writer_lock.acquire(blocking=False):
            with self.engine.connect() as raw:
                with self._dropped_on_failure(raw):
                    yield self._as_writer(raw)
            return
        try:
            if self._writer is None:
                self._writer = self._as_writer(self.engine.connect())
            with self._dropped_on_failure(self._writer):
                yield self._writer
        except BaseException:
            if self.dialect_name != "sqlite":
                writer, self._writer = self._writer, None
                if writer is not None:
                    with suppress(sa_exc.SQLAlchemyError):
                        writer.close()
            raise
        finally:
            self._writer_lock.release()

    @contextmanager
    def _dropped_on_failure(self, conn: Connection) -> Iterator[None]:
        """PostgreSQL: a writer's connection whose transaction failed is not
        handed back to the pool (statements run on the driver may have
        broken it unseen by SQLAlchemy); the next write takes a new one."""
        try:
            yield
        except BaseException:
            if self.dialect_name != "sqlite":
                with suppress(sa_exc.SQLAlchemyError):
                    conn.invalidate()
            raise

    def driver_call(self, call: Callable[[], T], sql: str) -> T:
        """`call`, a statement run on the driver's own connection or cursor
        (PostgreSQL), its failure raised as SQLAlchemy's for `sql`: the
        store classifies it as every other (_classify)."""
        dbapi = self.engine.dialect.loaded_dbapi
        try:
            return call()
        except dbapi.Error as e:
            raise sa_exc.DBAPIError.instance(sql, None, e, dbapi.Error,
                                             hide_parameters=True) from e  # fmt: skip

    def _as_writer(self, raw: Connection) -> Connection:
        if self.dialect_name == "sqlite":
            return raw.execution_options(shournal_write=True)
        # (SQLAlchemy sets the driver's autocommit back when the connection
        # returns to the pool: a reader never gets it)
        return raw.execution_options(shournal_write=True, isolation_level="AUTOCOMMIT")

    @property
    def location(self) -> str:
        """The SQLite file, or the URL without its password."""
        return self._where

    def close(self) -> None:
        with self._writer_lock:
            if self._writer is not None:
                writer, self._writer = self._writer, None
                with suppress(sa_exc.SQLAlchemyError, sqlite3.Error):
                    writer.close()
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema -------------------------------------------------------------


class AtOnce:
    """The statements of one write transaction, sent in one message (see
    Database.writing_at_once)."""

    def __init__(self, db: Database, dbapi: Any, first: str) -> None:
        import psycopg

        self._db = db
        self._first = first
        # psycopg's client-side binding: the values are put in the SQL with
        # the adapters its server-side binding uses (so a row is the same
        # either way), for a text of several statements sent at once
        self._cursor = psycopg.ClientCursor(dbapi)
        self._statements: list[str] = []

    def add(self, sql: str, params: Mapping[str, Any]) -> None:
        """A statement (pyformat `sql`, as SQLAlchemy compiles it for
        psycopg) with its values."""
        cursor = self._cursor
        self._statements.append(self._db.driver_call(lambda: cursor.mogrify(sql, params), sql))

    def send(self) -> list[int]:
        """Send the transaction and commit it; the number of rows each
        statement returned or changed, in order.  A failure is raised as
        SQLAlchemy's (and nothing was stored)."""
        cursor = self._cursor
        text = ";\n".join(("BEGIN", self._first, *self._statements, "COMMIT"))
        self._db.driver_call(lambda: cursor.execute(text), self._first)
        cursor.nextset()  # (past BEGIN's result to the first statement's)
        counts = []
        for _ in self._statements:
            cursor.nextset()
            counts.append(cursor.rowcount)
        return counts


# A server that stops answering (its link cut, its host gone) must fail a
# push within seconds, not after the kernel's TCP retries (minutes to a
# quarter of an hour): the spool keeps the commands and the store daemon
# tries again.  Each applies unless the URL or the environment sets it.
SERVER_CONNECT_TIMEOUT_SECONDS = 10
SERVER_TCP_USER_TIMEOUT_MS = 20_000
SERVER_KEEPALIVES_IDLE_SECONDS = 10


def _server_timeouts(parsed) -> dict[str, Any]:
    query = parsed.query
    args: dict[str, Any] = {}
    if "connect_timeout" not in query and "PGCONNECT_TIMEOUT" not in os.environ:
        args["connect_timeout"] = SERVER_CONNECT_TIMEOUT_SECONDS
    if "tcp_user_timeout" not in query:
        args["tcp_user_timeout"] = SERVER_TCP_USER_TIMEOUT_MS
    if "keepalives_idle" not in query:
        args["keepalives"] = 1
        args["keepalives_idle"] = SERVER_KEEPALIVES_IDLE_SECONDS
        args["keepalives_interval"] = 5
        args["keepalives_count"] = 3
    return args
