"""Opening the journal, creating its schema, and storing commands."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Table,
    bindparam,
    create_engine,
    event,
    inspect,
    select,
    text,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.sql.dml import Insert

from shournal import _paths
from shournal.capture.hashing import content_digest
from shournal.capture.record import LOST_REASONS, CommandRecord, FileEvent
from shournal.store import models as m
from shournal.store.errors import (
    SchemaTooNew,
    StoreCorrupt,
    StoreError,
    StoreMissing,
    StoreUnavailable,
)
from shournal.store.lab import OWN_ROWS_ONLY
from shournal.store.light import BUSY_SECONDS as _BUSY_SECONDS
from shournal.store.precompiled import Precompiled


def _v1_content_index(conn: Connection) -> None:
    # (hash) -> (hash, size): see the note in models.py.  Same statements on
    # SQLite and PostgreSQL.  Version 3 drops file_event altogether.
    conn.execute(text("DROP INDEX IF EXISTS ix_file_event_hash"))
    conn.execute(
        text("CREATE INDEX IF NOT EXISTS ix_file_event_hash_size ON file_event (hash, size)")
    )


# The identity of a read file version (the unique key of read_file).
_READ_KEY = ("hash", "size", "mtime_ns", "directory_id", "basename", "mode")


def _v2_split_events(conn: Connection) -> None:
    """file_event -> write_event + deduplicated read_file + read_event.

    Ids survive: a write keeps its event id, and a read file version takes
    the smallest id of the read events it replaces, so an id printed before
    the upgrade (``shournal restore --file-id``) still names the same file.
    """
    # First: on SQLite the old directory table is renamed, which would
    # retarget the references of tables created before.
    old_directory = _directory_by_hash(conn)
    new = [
        m.WorkingDir.__table__,
        m.WriteEvent.__table__,
        m.ReadFile.__table__,
        m.ReadEvent.__table__,
    ]
    m.Base.metadata.create_all(conn, tables=new, checkfirst=True)  # type: ignore[arg-type]
    _cwd_to_table(conn)
    for ix in m.Command.__table__.indexes:
        ix.create(conn, checkfirst=True)
    if "file_event" in inspect(conn).get_table_names():
        _split_file_events(conn)
    if old_directory is not None:
        # Nothing refers to it any more (file_event is gone).
        conn.execute(text(f"DROP TABLE {old_directory}"))
    # The common mode is stored as NULL (models.FileMode).
    for table in ("write_event", "read_file"):
        conn.execute(text(f"UPDATE {table} SET mode = NULL WHERE mode = {m.COMMON_MODE}"))


def _split_file_events(conn: Connection) -> None:
    cols = "directory_id, basename, size, mtime_ns, hash, mode"
    conn.execute(
        text(
            f"INSERT INTO write_event (id, command_id, {cols}) "
            f"SELECT id, command_id, {cols} FROM file_event WHERE kind = {m.KIND_WRITE}"
        )
    )
    conn.execute(
        text(
            f"INSERT INTO read_file (id, {cols}, content_id) "
            f"SELECT min(id), {cols}, max(content_id) FROM file_event "
            f"WHERE kind = {m.KIND_READ} GROUP BY {cols}"
        )
    )
    same = " AND ".join(f"r.{c} = e.{c}" for c in _READ_KEY)
    conn.execute(
        text(
            "INSERT INTO read_event (command_id, read_file_id) "
            f"SELECT DISTINCT e.command_id, r.id FROM file_event e JOIN read_file r ON {same} "
            f"WHERE e.kind = {m.KIND_READ}"
        )
    )
    conn.execute(text("DROP TABLE file_event"))
    if conn.dialect.name == "postgresql":
        # Explicit ids do not advance the id sequences.
        for table in ("write_event", "read_file"):
            conn.execute(
                text(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"coalesce((SELECT max(id) FROM {table}), 0) + 1, false)"
                )
            )


def _directory_by_hash(conn: Connection) -> str | None:
    """directory: unique index on path -> non-unique index on path_hash
    (see models.py), ids kept.

    SQLite cannot drop a UNIQUE constraint: the table is renamed (the
    references of file_event follow it) and rebuilt under its name; the
    caller drops the returned old table once nothing refers to it.
    PostgreSQL alters the table in place.
    """
    columns = {c["name"] for c in inspect(conn).get_columns("directory")}
    if "path_hash" in columns:
        return None
    table: Table = m.Directory.__table__  # type: ignore[assignment]
    if conn.dialect.name == "sqlite":
        old = "directory_v2"
        conn.execute(text(f"ALTER TABLE directory RENAME TO {old}"))
        table.create(conn)
        rows = conn.execute(text(f"SELECT id, path FROM {old}")).all()
        if rows:
            conn.exec_driver_sql(
                "INSERT INTO directory (id, path, path_hash) VALUES (?, ?, ?)",
                [(id_, bytes(path), m.path_hash(bytes(path))) for id_, path in rows],
            )
        return old
    conn.execute(text("ALTER TABLE directory ADD COLUMN path_hash BIGINT"))
    rows = conn.execute(text("SELECT id, path FROM directory")).all()
    if rows:
        conn.exec_driver_sql(
            "UPDATE directory SET path_hash = %s WHERE id = %s",
            [(m.path_hash(bytes(path)), id_) for id_, path in rows],
        )
    conn.execute(text("ALTER TABLE directory ALTER COLUMN path_hash SET NOT NULL"))
    for unique in inspect(conn).get_unique_constraints("directory"):
        conn.execute(text(f'ALTER TABLE directory DROP CONSTRAINT "{unique["name"]}"'))
    for ix in table.indexes:
        ix.create(conn)
    return None


def _cwd_to_table(conn: Connection) -> None:
    """command.working_dir (text) -> command.cwd_id -> working_dir (path).

    The stored texts move as they are (they went through SafeText once).
    The added column stays nullable on SQLite (ALTER TABLE cannot add a NOT
    NULL reference there); every row gets its id here and every writer
    sets it.
    """
    columns = {c["name"] for c in inspect(conn).get_columns("command")}
    if "working_dir" not in columns:
        return
    if "cwd_id" not in columns:
        id_type = "INTEGER" if conn.dialect.name == "sqlite" else "BIGINT"
        conn.execute(
            text(
                f"ALTER TABLE command ADD COLUMN cwd_id {id_type} "
                "CONSTRAINT fk_command_cwd_id_working_dir REFERENCES working_dir (id)"
            )
        )
    # WHERE true: SQLite would parse ON CONFLICT as a join constraint.
    conn.execute(
        text(
            "INSERT INTO working_dir (path) SELECT DISTINCT working_dir FROM command "
            "WHERE true ON CONFLICT DO NOTHING"
        )
    )
    conn.execute(
        text(
            "UPDATE command SET cwd_id = "
            "(SELECT w.id FROM working_dir w WHERE w.path = command.working_dir)"
        )
    )
    if conn.dialect.name == "postgresql":
        conn.execute(text("ALTER TABLE command ALTER COLUMN cwd_id SET NOT NULL"))
    # Schema 3 before the cwd moved had this index; SQLite cannot drop an
    # indexed column.
    conn.execute(text("DROP INDEX IF EXISTS ix_command_working_dir"))
    conn.execute(text("ALTER TABLE command DROP COLUMN working_dir"))


def _v3_apparatus(conn: Connection) -> None:
    m.Base.metadata.create_all(
        conn, tables=[m.Apparatus.__table__], checkfirst=True  # type: ignore[list-item]
    )


def _v4_derived_from(conn: Connection) -> None:
    columns = {c["name"] for c in inspect(conn).get_columns("apparatus")}
    if "derived_from" not in columns:
        id_type = "INTEGER" if conn.dialect.name == "sqlite" else "BIGINT"
        conn.execute(text(f"ALTER TABLE apparatus ADD COLUMN derived_from {id_type}"))


def _v5_lost_reasons(conn: Connection) -> None:
    """command.lost_<reason>: the lost events by reason (0 in older rows,
    whose reasons were not recorded)."""
    columns = {c["name"] for c in inspect(conn).get_columns("command")}
    for reason in LOST_REASONS:
        if f"lost_{reason}" not in columns:
            conn.execute(
                text(f"ALTER TABLE command ADD COLUMN lost_{reason} INTEGER NOT NULL DEFAULT 0")
            )


def _v6_incomplete(conn: Connection) -> None:
    """command.incomplete (false in older rows: they were all complete)."""
    columns = {c["name"] for c in inspect(conn).get_columns("command")}
    if "incomplete" not in columns:
        conn.execute(
            text("ALTER TABLE command ADD COLUMN incomplete BOOLEAN NOT NULL DEFAULT false")
        )


# Ordered upgrade steps: _MIGRATIONS[v] lifts a journal from version v to
# v + 1 inside the schema transaction.  Each must be idempotent.
_MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _v1_content_index,
    2: _v2_split_events,
    3: _v3_apparatus,
    4: _v4_derived_from,
    5: _v5_lost_reasons,
    6: _v6_incomplete,
}

# Serialises schema creation between processes on PostgreSQL (an arbitrary
# constant that only shournal uses: "shournal" in ASCII).
_PG_SCHEMA_LOCK = 0x73686F75726E616C
# Serialises the find-or-insert of directories and read files ("shournaR").
_PG_FIND_OR_INSERT_LOCK = 0x73686F75726E6152

# Keeps IN (...) lists far below every backend's bound-parameter limit.
_IN_BATCH = 500

_NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs"})

# mountinfo writes blanks and backslashes in mount points as \ooo.
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def _ns_to_datetime(ns: int) -> datetime:
    seconds, rest = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest // 1000)


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
_PRIVATE_MARK = 1


def journal_paths(database: str, folder: str | None) -> list[str]:
    """A SQLite journal's folder (the default journal's: ours; the folder
    of a journal the user named is the user's business) and files."""
    return ([folder] if folder else []) + [database, f"{database}-wal", f"{database}-shm"]


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
    journal says so, :meth:`Store._mark_private`) is refused with the fix:
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
    """The mark of :meth:`Store._mark_private` (asked only of a journal
    found open: a connection of its own costs)."""
    try:
        conn = sqlite3.connect(database, timeout=_BUSY_SECONDS)
    except sqlite3.Error:
        return False
    try:
        return bool(conn.execute("PRAGMA user_version").fetchone()[0] & _PRIVATE_MARK)
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


_DIMENSION_LOOKUPS: dict[tuple[tuple[type[m.Base], tuple[str, ...]], ...], Any] = {}


def _dimension_lookup(
    wanted: Sequence[tuple[type[m.Base], dict[str, Any]]],
) -> tuple[Any, dict[str, Any]]:
    """Store._dimension_ids' SELECT and its parameters: one statement per
    combination of tables and columns, built once (building it per command
    line cost more than running it)."""
    shape = tuple((model, tuple(values)) for model, values in wanted)
    stmt = _DIMENSION_LOOKUPS.get(shape)
    if stmt is None:
        lookups = []
        for i, (model, keys) in enumerate(shape):
            table: Table = model.__table__  # type: ignore[assignment]
            where = [table.c[k] == bindparam(f"d{i}_{k}") for k in keys]
            lookups.append(select(table.c.id).where(*where).scalar_subquery())
        stmt = _DIMENSION_LOOKUPS[shape] = select(*lookups)
    params = {f"d{i}_{k}": v for i, (_m, values) in enumerate(wanted) for k, v in values.items()}
    return stmt, params


class Store:
    """The journal.  ``url`` is a SQLAlchemy URL; None means the default
    SQLite file in the user's data directory.

    ``create=False`` (for readers) raises StoreMissing instead of creating
    a journal that does not exist yet, so that a query changes nothing.
    ``read_only`` (readers): a SQLite journal is opened ``mode=ro`` and
    nothing on disk is changed (no journal mode set, no upgrade unless the
    journal is writable), so a read-only file, directory or mount is
    browsable; writes then fail as a read-only journal's.

    :raises StoreError: see :mod:`shournal.store.errors`.
    """

    def __init__(
        self, url: str | None = None, *, create: bool = True, read_only: bool = False
    ) -> None:
        self._create = create
        self._read_only = read_only
        # SQLite: the connection write transactions use, kept between them
        # (a pool checkout per command line costs ~0.15 ms of CPU); another
        # thread writing meanwhile takes a connection of its own.
        self._writer: Connection | None = None
        self._writer_lock = threading.Lock()
        # SQLite: the statements every command line runs (see precompiled)
        self._precompiled: dict[object, Precompiled] = {}
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
        # (qmark: SQLite's driver; PostgreSQL keeps SQLAlchemy's execution,
        # its transactions cost a round trip to the server each anyway)
        self._precompile = self.dialect_name == "sqlite"
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
        private = self.dialect_name == "sqlite" and create and database and database != ":memory:"
        if self.dialect_name == "sqlite" and not create and database and database != ":memory:":
            if not os.path.exists(database):
                raise StoreMissing(f"no journal at {database} yet")
        if private:
            self.notes = _make_private(database, folder)
        self._parsed = parsed
        self._make_engine()
        try:
            self._ensure_schema()
            if private:
                self._mark_private()
        except BaseException:
            self.engine.dispose()
            raise

    def _mark_private(self) -> None:
        """Note in the journal that its files were private here (see
        :func:`_make_private`): from now on a journal opened to others
        again is refused, not fixed behind its owner's back."""
        with self.reading() as conn:
            if conn.exec_driver_sql("PRAGMA user_version").scalar_one() & _PRIVATE_MARK:
                return
        with self.writing() as conn:
            version = conn.exec_driver_sql("PRAGMA user_version").scalar_one()
            conn.exec_driver_sql(f"PRAGMA user_version={int(version) | _PRIVATE_MARK}")

    # -- connection setup ---------------------------------------------------

    def _make_engine(self) -> None:
        parsed = self._parsed
        database = parsed.database
        kw: dict[str, Any] = {}
        on_file = self.dialect_name == "sqlite" and database not in (None, "", ":memory:")
        if self._read_only and on_file:
            from shournal.store.light import connect_read_only

            # (the driver's own arguments, as SQLAlchemy passes them)
            kw["creator"] = lambda: connect_read_only(database, check_same_thread=False)
        else:
            self._read_only = False
        try:
            self.engine: Engine = create_engine(parsed, **kw)
        except (sa_exc.SQLAlchemyError, ImportError) as e:
            raise StoreUnavailable(
                f"cannot use the journal {self._where}: {_one_line(e)}"
            ) from None
        if self.dialect_name == "sqlite":
            self._setup_sqlite(database)

    def _writable_again(self) -> bool:
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
    def writing(self) -> Iterator[Connection]:
        """A connection inside one write transaction: all or nothing."""
        if self.dialect_name != "sqlite":
            with self._translated(), self.engine.connect() as raw:
                conn = raw.execution_options(shournal_write=True)
                with conn.begin():
                    # A lab store's writer sees only its own rows (see
                    # shournal.store.lab); elsewhere the setting is unused.
                    conn.exec_driver_sql(OWN_ROWS_ONLY)
                    yield conn
            return
        with self._translated(), self._write_connection() as conn, _driver_transaction(conn):
            yield conn

    @contextmanager
    def _write_connection(self) -> Iterator[Connection]:
        if not self._writer_lock.acquire(blocking=False):
            with self.engine.connect() as raw:
                yield raw.execution_options(shournal_write=True)
            return
        try:
            if self._writer is None:
                self._writer = self.engine.connect().execution_options(shournal_write=True)
            yield self._writer
        finally:
            self._writer_lock.release()

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

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema -------------------------------------------------------------

    def _read_version(self, conn: Connection) -> int | None:
        """The stored schema version; None for an empty database."""
        names = set(inspect(conn).get_table_names())
        if m.SchemaVersion.__tablename__ not in names:
            ours = names & set(m.Base.metadata.tables)
            if ours:
                raise StoreCorrupt(
                    f"{self._where} has tables named like shournal's ({', '.join(sorted(ours))}) "
                    "but no schema version: not a shournal journal"
                )
            return None
        version = conn.execute(
            select(m.SchemaVersion.version).where(m.SchemaVersion.id == 1)
        ).scalar_one_or_none()
        if version is None:
            raise StoreCorrupt(f"{self._where}: the schema version row is missing")
        return version

    def _check_not_newer(self, version: int) -> None:
        if version > m.SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the journal {self._where} has schema version {version}, newer than this "
                f"shournal supports ({m.SCHEMA_VERSION}); upgrade shournal"
            )

    def _ensure_schema(self) -> None:
        with self.reading() as conn:
            version = self._read_version(conn)
        if version is not None:
            self._check_not_newer(version)
            if version == m.SCHEMA_VERSION:
                return
            if self._read_only and not self._writable_again():
                raise StoreUnavailable(
                    f"the journal {self._where} has schema version {version}, older than "
                    f"this shournal's ({m.SCHEMA_VERSION}), and cannot be written to upgrade it"
                )
        elif not self._create:
            raise StoreMissing(f"no journal in {self._where} yet")
        # Create or upgrade under the write lock, re-reading the version
        # there: another shell may have done the work meanwhile.
        with self.writing() as conn:
            if self.dialect_name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_SCHEMA_LOCK})
            version = self._read_version(conn)
            if version is None:
                m.Base.metadata.create_all(conn)
                conn.execute(
                    m.SchemaVersion.__table__.insert(), {"id": 1, "version": m.SCHEMA_VERSION}
                )
                return
            self._check_not_newer(version)
            while version < m.SCHEMA_VERSION:
                step = _MIGRATIONS.get(version)
                if step is None:
                    raise StoreCorrupt(
                        f"{self._where}: no upgrade path from schema version {version}"
                    )
                step(conn)
                version += 1
            conn.execute(
                m.SchemaVersion.__table__.update()
                .where(m.SchemaVersion.id == 1)
                .values(version=version)
            )

    # -- writing ------------------------------------------------------------

    def _insert_ignore(self, table: Table) -> Insert:
        if self.dialect_name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(table).on_conflict_do_nothing()
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing()

    def _get_or_create(self, conn: Connection, model: type[m.Base], **values: Any) -> int:
        table: Table = model.__table__  # type: ignore[assignment]
        conn.execute(self._insert_ignore(table), values)
        where = [table.c[k] == v for k, v in values.items()]
        return conn.execute(select(table.c.id).where(*where)).scalar_one()

    def _dimension_ids(
        self,
        conn: Connection,
        wanted: Sequence[tuple[type[m.Base], dict[str, Any]]],
        known: dict[tuple[Any, ...], dict[type[m.Base], int]] | None = None,
    ) -> dict[type[m.Base], int]:
        """The ids of a command's rows in small tables (its host and user,
        directory, session, hash setting), inserting those not there yet.
        They almost always exist: one SELECT of them all (a statement costs
        far more CPU in SQLAlchemy and the driver than in the database),
        then _get_or_create for the missing ones.  `known`: what earlier
        commands of the same transaction found (a batch's lines mostly
        share them all).  Never cached across transactions: `shournal
        delete` collects unreferenced rows, and a freed id may be given to
        another row."""
        key = tuple((model.__name__, *sorted(values.items())) for model, values in wanted)
        if known is not None and key in known:
            return known[key]
        stmt, params = _dimension_lookup(wanted)
        if self._precompile:
            row = self._driver_run(conn, stmt, lambda: stmt, params).fetchone()
        else:
            row = conn.execute(stmt, params).one()
        ids: dict[type[m.Base], int] = {}
        for (model, values), found in zip(wanted, row, strict=True):
            ids[model] = found if found is not None else self._get_or_create(conn, model, **values)
        if known is not None:
            known[key] = ids
        return ids

    def _driver_run(
        self, conn: Connection, key: object, make: Callable[[], Any], values: dict[str, Any]
    ) -> sqlite3.Cursor:
        """SQLite: run the statement `make` builds (once per `key`, a
        long-lived object; an insert with the columns of `values`) in
        `conn`'s transaction on the driver's cursor -- see
        shournal.store.precompiled."""
        pre = self._precompiled.get(key)
        if pre is None:
            stmt = make()
            columns = list(values) if isinstance(stmt, Insert) else None
            pre = self._precompiled[key] = Precompiled(stmt, self.engine.dialect, columns)
        cursor: sqlite3.Cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        return pre.run(cursor, values)

    def _ids_for(
        self, conn: Connection, table: Table, key: str, rows: Sequence[dict[str, Any]]
    ) -> dict[Any, int]:
        """Insert the deduplicated ``rows`` (ignoring existing ones) and map
        each row's ``key`` value to its id."""
        if not rows:
            return {}
        conn.execute(self._insert_ignore(table), list(rows))
        ids: dict[Any, int] = {}
        keys = [r[key] for r in rows]
        column = table.c[key]
        for start in range(0, len(keys), _IN_BATCH):
            batch = keys[start : start + _IN_BATCH]
            for id_, value in conn.execute(select(table.c.id, column).where(column.in_(batch))):
                ids[bytes(value) if isinstance(value, memoryview) else value] = id_
        return ids

    def add_command(self, rec: CommandRecord) -> int:
        """Store one finished command line and all its file events in one
        transaction; return the new command id."""
        prepared = self._prepare(rec)
        with self.writing() as conn:
            return self._insert(conn, rec, prepared)

    def add_commands(self, recs: Sequence[CommandRecord], skip_stored: bool = False) -> int:
        """Store several command lines (the store daemon's batches); with
        `skip_stored`, those has_command finds are left out.  The number
        stored.  SQLite: in one transaction, all or none (one connection,
        BEGIN and COMMIT for all: ~0.2 of a short command's ~0.7 ms); on
        PostgreSQL each in its own, as add_command, whose key order keeps
        concurrent writers free of deadlocks only within one command."""
        if self.dialect_name != "sqlite":
            stored = 0
            for rec in recs:
                if not (skip_stored and self.has_command(rec)):
                    self.add_command(rec)
                    stored += 1
            return stored
        prepared = [self._prepare(rec) for rec in recs]
        stored = 0
        with self.writing() as conn:
            known: dict[tuple[Any, ...], dict[type[m.Base], int]] = {}
            for rec, prep in zip(recs, prepared, strict=True):
                if skip_stored and self._holds(conn, rec):
                    continue
                self._insert(conn, rec, prep, known)
                stored += 1
        return stored

    def _prepare(self, rec: CommandRecord) -> tuple[Any, ...]:
        """What add_command computes in Python before its transaction (the
        write lock is held only for the inserts)."""
        _validate(rec)
        write_split = [m.split_path(ev.path) for ev in rec.writes]
        # One row per distinct read file version.  Sorted (by path first, so
        # that new read files get ids in path order): concurrent PostgreSQL
        # transactions then lock new unique keys in the same order and
        # cannot deadlock.
        reads: dict[tuple[Any, ...], FileEvent] = {}
        for ev in rec.reads:
            key = (ev.path, ev.size, ev.mtime_ns, m.hash_to_bytes(ev.hash), ev.mode)
            known = reads.get(key)
            if known is None or (known.content is None and ev.content is not None):
                reads[key] = ev
        read_keys = sorted(reads)
        read_split = [m.split_path(k[0]) for k in read_keys]
        dir_paths = sorted({d for d, _ in (*write_split, *read_split)})
        digests: dict[tuple[Any, ...], bytes] = {}
        content_rows: dict[bytes, dict[str, Any]] = {}
        for key in read_keys:
            content = reads[key].content
            if content is not None:
                digest = content_digest(content)
                digests[key] = digest
                content_rows.setdefault(
                    digest,
                    {"algorithm": m.CONTENT_DIGEST_ALGORITHM, "digest": digest, "data": content},
                )
        wanted: list[tuple[type[m.Base], dict[str, Any]]] = [
            (m.Env, {"hostname": rec.hostname, "username": rec.username}),
            (m.WorkingDir, {"path": rec.working_dir}),
        ]
        if rec.hash_chunk_size is not None and rec.hash_max_reads is not None:
            hashing = {"chunk_size": rec.hash_chunk_size, "max_reads": rec.hash_max_reads}
            wanted.append((m.HashSetting, hashing))
        if rec.session_uuid is not None:
            wanted.append((m.ShellSession, {"uuid": rec.session_uuid}))
        return write_split, reads, read_keys, read_split, dir_paths, digests, content_rows, wanted

    def _insert(
        self,
        conn: Connection,
        rec: CommandRecord,
        prepared: tuple[Any, ...],
        known: dict[tuple[Any, ...], dict[type[m.Base], int]] | None = None,
    ) -> int:
        """The inserts of one command line (prepared by _prepare) in `conn`'s
        transaction; its new id (`known`: see _dimension_ids)."""
        (write_split, reads, read_keys, read_split, dir_paths, digests, content_rows,
         wanted) = prepared
        ids = self._dimension_ids(conn, wanted, known)
        env_id, cwd_id = ids[m.Env], ids[m.WorkingDir]
        hash_setting_id = ids.get(m.HashSetting)
        session_id = ids.get(m.ShellSession)
        row = {
            "text": rec.text,
            "return_value": rec.return_value,
            "start_time": _ns_to_datetime(rec.start_ns),
            "end_time": _ns_to_datetime(rec.end_ns),
            "cwd_id": cwd_id,
            "session_id": session_id,
            "env_id": env_id,
            "hash_setting_id": hash_setting_id,
            "dropped_writes": rec.dropped_writes,
            "dropped_reads": rec.dropped_reads,
            "lost_events": rec.lost_events,
            **{f"lost_{r}": rec.lost_reasons.get(r, 0) for r in LOST_REASONS},
            "incomplete": rec.incomplete,
        }
        command_table: Table = m.Command.__table__  # type: ignore[assignment]
        if self._precompile:
            cursor = self._driver_run(conn, command_table, command_table.insert, row)
            command_id = int(cursor.lastrowid)
        else:
            result = conn.execute(command_table.insert(), row)
            command_id = int(result.inserted_primary_key[0])
        # Content first: its insert may wait for another writer's
        # uncommitted row of the same digest, which must never happen
        # while holding the find-or-insert lock that the other writer
        # may be waiting for (the directories may take it).
        content_ids = self._ids_for(
            conn,
            m.Content.__table__,  # type: ignore[arg-type]
            "digest",
            [content_rows[d] for d in sorted(content_rows)],
        )
        dir_ids = self._directory_ids(conn, dir_paths)
        if rec.writes:
            conn.execute(
                m.WriteEvent.__table__.insert(),
                [
                    {
                        "command_id": command_id,
                        "directory_id": dir_ids[directory],
                        "basename": base,
                        "size": ev.size,
                        "mtime_ns": ev.mtime_ns,
                        "hash": m.hash_to_bytes(ev.hash),
                        "mode": ev.mode,
                    }
                    for ev, (directory, base) in zip(rec.writes, write_split, strict=True)
                ],
            )
        if read_keys:
            rows = []
            for key, (directory, base) in zip(read_keys, read_split, strict=True):
                digest = digests.get(key)
                rows.append(
                    {
                        "hash": key[3],
                        "size": key[1],
                        "mtime_ns": key[2],
                        "directory_id": dir_ids[directory],
                        "basename": base,
                        "mode": key[4],
                        "content_id": None if digest is None else content_ids[digest],
                    }
                )
            file_ids = self._read_file_ids(conn, rows)
            conn.execute(
                m.ReadEvent.__table__.insert(),
                [{"command_id": command_id, "read_file_id": i} for i in sorted(file_ids)],
            )
        if rec.apparatus is not None:
            conn.execute(
                m.Apparatus.__table__.insert(),
                {"command_id": command_id, "manifest": rec.apparatus,
                 "derived_from": rec.derived_from},
            )
        return command_id

    def _lock_find_or_insert(self, conn: Connection) -> None:
        """Exclude other writers from the find-or-insert of directories and
        read files until this transaction ends.  SQLite's write transaction
        (BEGIN IMMEDIATE) already does; PostgreSQL takes an advisory
        transaction lock (taking it again is harmless)."""
        if self.dialect_name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_FIND_OR_INSERT_LOCK})

    def _directory_ids(self, conn: Connection, paths: list[bytes]) -> dict[bytes, int]:
        """Find or insert the directories ``paths`` (distinct, sorted: new
        ones get ids in path order); map each to its id.

        directory has no unique constraint (see models.py): it is looked up
        by ``path_hash`` and the path compared, and only a writer holding
        the find-or-insert lock inserts.  Most directories of a command are
        known already, so the lock is taken only when some are missing, and
        those are looked up again under it.
        """
        if not paths:
            return {}
        hashes = {p: m.path_hash(p) for p in paths}
        ids = _lookup_directories(conn, hashes, paths)
        missing = [p for p in paths if p not in ids]
        if missing and self.dialect_name == "postgresql":
            self._lock_find_or_insert(conn)
            ids.update(_lookup_directories(conn, hashes, missing))
            missing = [p for p in missing if p not in ids]
        if missing:
            conn.execute(
                m.Directory.__table__.insert(),
                [{"path": p, "path_hash": hashes[p]} for p in missing],
            )
            ids.update(_lookup_directories(conn, hashes, missing))
        if len(ids) != len(paths):
            raise StoreError("a directory vanished while it was being stored")
        return ids

    def _read_file_ids(self, conn: Connection, rows: list[dict[str, Any]]) -> list[int]:
        """Find or insert the read file versions ``rows`` (distinct, in path
        order); return their ids.

        read_file has no unique constraint (see models.py): writers are
        serialised instead, so that two never insert the same version.  On
        SQLite the write transaction (BEGIN IMMEDIATE) already excludes
        every other writer; on PostgreSQL a transaction-scoped advisory lock
        does, from here to the commit.  A version stored without its
        content gets the content of a later read that archived it.
        """
        self._lock_find_or_insert(conn)
        table: Table = m.ReadFile.__table__  # type: ignore[assignment]
        found = _lookup_read_files(conn, rows, range(len(rows)))
        missing = [i for i in range(len(rows)) if i not in found]
        if missing:
            conn.execute(table.insert(), [rows[i] for i in missing])
            found.update(_lookup_read_files(conn, rows, missing))
        if len(found) != len(rows):
            raise StoreError("a read file version vanished while it was being stored")
        update = [
            {"rid": id_, "cid": rows[i]["content_id"]}
            for i, (id_, content_id) in found.items()
            if content_id is None and rows[i]["content_id"] is not None
        ]
        if update:
            conn.execute(
                table.update()
                .where(table.c.id == bindparam("rid"), table.c.content_id.is_(None))
                .values(content_id=bindparam("cid")),
                update,
            )
        return [found[i][0] for i in range(len(rows))]

    def has_command(self, rec: CommandRecord) -> bool:
        """Whether the journal already holds `rec` (same start time, text,
        session and working directory): the store daemon asks before it
        stores a spooled command whose earlier attempt may have committed
        (shournal.capture.spool), so that each is stored exactly once."""
        with self.reading() as conn:
            self.only_own_rows(conn)
            return self._holds(conn, rec)

    def _holds(self, conn: Connection, rec: CommandRecord) -> bool:
        """has_command in `conn`'s transaction."""
        cmd: Table = m.Command.__table__  # type: ignore[assignment]
        cwd: Table = m.WorkingDir.__table__  # type: ignore[assignment]
        sess: Table = m.ShellSession.__table__  # type: ignore[assignment]
        query = (
            select(cmd.c.id)
            .select_from(cmd.join(cwd, cmd.c.cwd_id == cwd.c.id))
            .where(
                cmd.c.start_time == _ns_to_datetime(rec.start_ns),
                cmd.c.text == m.safe_text(rec.text),
                cwd.c.path == m.safe_text(rec.working_dir),
            )
        )
        if rec.session_uuid is None:
            query = query.where(cmd.c.session_id.is_(None))
        else:
            query = query.where(
                cmd.c.session_id.in_(select(sess.c.id).where(sess.c.uuid == rec.session_uuid))
            )
        return conn.execute(query.limit(1)).first() is not None


def _placeholder(conn: Connection) -> str:
    """The driver's own placeholder (sqlite3: ?, psycopg: %s) for
    exec_driver_sql: SQLAlchemy's text() costs more than the query for
    thousands of parameters."""
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


def _lookup_directories(
    conn: Connection, hashes: dict[bytes, int], which: Sequence[bytes]
) -> dict[bytes, int]:
    """{path: id} of the stored directories among ``which`` (the oldest if
    there were several); ``hashes`` maps each path to its path_hash.  One
    index seek per distinct hash; rows of colliding paths are filtered out
    by comparing the path."""
    wanted = set(which)
    distinct = sorted({hashes[p] for p in which})
    mark = _placeholder(conn)
    found: dict[bytes, int] = {}
    for start in range(0, len(distinct), _IN_BATCH):
        batch = distinct[start : start + _IN_BATCH]
        sql = (
            "SELECT id, path FROM directory "
            f"WHERE path_hash IN ({', '.join([mark] * len(batch))}) ORDER BY id"
        )
        for id_, path in conn.exec_driver_sql(sql, tuple(batch)):
            path = bytes(path)
            if path in wanted:
                found.setdefault(path, id_)
    return found


def _lookup_read_files(
    conn: Connection, rows: list[dict[str, Any]], which: Sequence[int]
) -> dict[int, tuple[int, int | None]]:
    """{index in ``rows``: (id, content_id)} of the stored versions equal to
    ``rows[i]`` for i in ``which`` (the oldest if there were several).

    A join with a VALUES list: both backends seek the (hash, size,
    mtime_ns) index once per row (SQLite would scan the table for a
    row-value IN list).
    """
    cols = ", ".join(_READ_KEY)
    # The parameters are the values as given; a stored NULL mode means
    # COMMON_MODE (models.FileMode).
    same = " AND ".join(
        f"coalesce(r.mode, {m.COMMON_MODE}) = v.mode" if c == "mode" else f"r.{c} = v.{c}"
        for c in _READ_KEY
    )
    mark = _placeholder(conn)
    row_marks = "(" + ", ".join([mark] * (1 + len(_READ_KEY))) + ")"
    found: dict[int, tuple[int, int | None]] = {}
    for start in range(0, len(which), _IN_BATCH):
        batch = which[start : start + _IN_BATCH]
        params: list[Any] = []
        for i in batch:
            params.append(i)
            params.extend(rows[i][c] for c in _READ_KEY)
        sql = (
            f"WITH v (i, {cols}) AS (VALUES {', '.join([row_marks] * len(batch))}) "
            f"SELECT v.i, r.id, r.content_id FROM v JOIN read_file r ON {same} ORDER BY r.id"
        )
        for i, id_, content_id in conn.exec_driver_sql(sql, tuple(params)):
            found.setdefault(i, (id_, content_id))
    return found


def _validate(rec: CommandRecord) -> None:
    """Reject records that would fail half-way through the transaction."""
    if rec.session_uuid is not None and len(rec.session_uuid) != 16:
        raise ValueError("session_uuid must be 16 raw bytes")
    for ev in (*rec.writes, *rec.reads):
        if ev.hash is not None and not 0 <= ev.hash < 2**64:
            raise ValueError(f"hash {ev.hash} is not an unsigned 64-bit value")
        if not 0 <= ev.size < 2**63 or not -(2**63) <= ev.mtime_ns < 2**63:
            raise ValueError(f"size or mtime of {ev.path!r} out of the 64-bit range")
        if not 0 <= ev.mode < 2**31:
            raise ValueError(f"mode {ev.mode} of {ev.path!r} out of range")
