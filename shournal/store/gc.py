"""Deleting commands from the journal and collecting what they leave behind:
the library behind ``shournal delete``.

Everything happens in one write transaction, in bulk SQL: the doomed
command ids go into a temporary table, their events and rows are deleted
with a handful of statements, and the rows only they referenced (read file
versions no other command read, then directories, archived contents,
sessions, env and hash-setting rows) are
removed after one scan proves nothing else points at them.  A failure
anywhere rolls back everything.  The deleted commands' apparatus
manifests go with them; the archived blobs only they named are removed
once the transaction has committed (:mod:`shournal.store.archive_gc`).

SQLAlchemy is imported only when a deletion actually runs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from shournal.data import Criteria
from shournal.deletion import (
    NO_CRITERIA,
    CommandSummary,
    DeleteError,
    DeletePlan,
    DeleteResult,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from shournal.store.archive_gc import Collection as BlobCollection
    from shournal.store.connection import Reads
    from shournal.store.db import Store


# -- SQL ------------------------------------------------------------------------

_IN_BATCH = 500

# Negative: KiB, as SQLite's cache_size pragma takes it (256 MiB).
_SQLITE_BULK_CACHE_KIB = -262144

# Temporary tables of one deletion (names are shournal's own; they live only
# inside the transaction).
_DOOMED = "shournal_gc_doomed"
_ALLOWED = "shournal_gc_allowed"

# The doomed commands' read file versions (as a subquery on read_event).
_DOOMED_READS = (
    "SELECT f.{col} FROM read_event e JOIN read_file f ON f.id = e.read_file_id "
    "WHERE e.command_id IN ({doomed})"
)

# What may become garbage, in collection order (read files before the
# directories and contents they reference): (parent table, the (child
# table, referencing column) pairs that keep a row alive, the candidates:
# what the doomed commands referenced, before their rows go).
_COLLECTED: tuple[tuple[str, tuple[tuple[str, str], ...], str], ...] = (
    (
        "read_file",
        (("read_event", "read_file_id"),),
        "SELECT read_file_id FROM read_event WHERE command_id IN ({doomed})",
    ),
    (
        "directory",
        (("write_event", "directory_id"), ("read_file", "directory_id")),
        "SELECT directory_id FROM write_event WHERE command_id IN ({doomed}) UNION "
        + _DOOMED_READS.format(col="directory_id", doomed="{doomed}"),
    ),
    (
        "content",
        (("read_file", "content_id"),),
        _DOOMED_READS.format(col="content_id", doomed="{doomed}") + " AND f.content_id IS NOT NULL",
    ),
    (
        "tag",
        (("command_tag", "tag_id"),),
        "SELECT tag_id FROM command_tag WHERE command_id IN ({doomed})",
    ),
    (
        "working_dir",
        (("command", "cwd_id"),),
        "SELECT cwd_id FROM command WHERE id IN ({doomed})",
    ),
    (
        "shell_session",
        (("command", "session_id"),),
        "SELECT session_id FROM command WHERE id IN ({doomed}) AND session_id IS NOT NULL",
    ),
    ("env", (("command", "env_id"),), "SELECT env_id FROM command WHERE id IN ({doomed})"),
    (
        "hash_setting",
        (("command", "hash_setting_id"),),
        "SELECT hash_setting_id FROM command WHERE id IN ({doomed}) "
        "AND hash_setting_id IS NOT NULL",
    ),
)

# Referencing columns that have an index of their own (leading column):
# foreign-key checks on them need no temporary index.
_INDEXED = frozenset(
    {("read_event", "read_file_id"), ("command", "session_id"), ("command", "cwd_id")}
)

# Locked on PostgreSQL in the listener's insertion order (see
# Store.add_command), so that a concurrent store waits instead of
# deadlocking or reusing a row that is about to disappear.
# Above this many rows to collect from one table, a temporary index beats
# one scan of the referencing table per row (PostgreSQL without the
# privilege to skip foreign-key triggers).
_PG_INDEX_FROM = 8

_PG_LOCK_ORDER = (
    "env, hash_setting, shell_session, working_dir, content, directory, read_file"
)


def plan_delete(store: Store, criteria: Criteria) -> DeletePlan:
    """The commands (oldest first) and the number of file events that
    :func:`delete_commands` would remove; reads only.

    :raises shournal.store.StoreError: the journal cannot be read.
    """
    from shournal.store.connection import AlchemyReads

    if criteria.is_empty():
        raise DeleteError(NO_CRITERIA)
    with store.reading() as conn:
        reads = AlchemyReads(conn)
        # what delete_commands will find: the user's own rows only
        reads.only_own_rows()
        return plan_delete_conn(reads, criteria)


def plan_delete_conn(conn: Reads, criteria: Criteria) -> DeletePlan:
    """:func:`plan_delete` inside an open read transaction (narrowed to the
    user's own rows in a lab store: :meth:`Reads.only_own_rows`)."""
    from shournal.store.blobs import unused
    from shournal.store.reader import matching_ids

    if criteria.is_empty():
        raise DeleteError(NO_CRITERIA)
    ids, params = matching_ids(conn, criteria)
    rows = conn.rows(
        "SELECT command.id, command.start_time, working_dir.path, command.text FROM command "
        "JOIN working_dir ON working_dir.id = command.cwd_id "
        f"WHERE command.id IN ({ids}) ORDER BY command.start_time, command.id",
        params,
    )
    events = sum(
        conn.rows(f"SELECT count(*) FROM {t} WHERE command_id IN ({ids})", params)[0][0]
        for t in ("write_event", "read_event")
    )
    doomed = {r[0] for r in rows}
    named = conn.first(f"SELECT command_id FROM apparatus WHERE command_id IN ({ids})", params)
    found = _unreferenced_blobs(
        (bytes(manifest), cid in doomed)
        for cid, manifest in (
            conn.rows("SELECT command_id, manifest FROM apparatus") if named else ()
        )
    )
    # A PostgreSQL journal's copies in the server too (one blob per
    # digest, wherever its copies are; their bytes all freed).
    server = unused(conn, doomed) if named else {}
    return DeletePlan(
        [CommandSummary(r[0], conn.time(r[1]), r[2], r[3]) for r in rows],
        int(events), len(found.blobs.keys() | server.keys()),
        found.size + sum(server.values()),
    )  # fmt: skip


def _unreferenced_blobs(rows: Iterable[tuple[bytes, bool]]) -> BlobCollection:
    from shournal.store.archive import Archive
    from shournal.store.archive_gc import unreferenced

    return unreferenced(rows, Archive())


@contextmanager
def _bulk_writing(store: Store) -> Iterator[Connection]:
    """A write transaction suited to bulk deletes.

    SQLite checks each deleted parent row against its children, and
    write_event and read_file have no index on directory_id or content_id: with foreign
    keys on, collecting 10^4 directories would scan the events 10^4 times.
    We prove orphans ourselves, and BEGIN IMMEDIATE keeps every other
    writer out, so the checks are switched off for this transaction (the
    pragma cannot change inside one).
    """
    if store.dialect_name != "sqlite":
        with store.writing() as conn:
            yield conn
        return
    with store._translated(), store.engine.connect() as raw:  # noqa: SLF001
        dbapi = raw.connection.dbapi_connection
        assert dbapi is not None
        dbapi.execute("PRAGMA foreign_keys=OFF")
        # Deleting 10^6 events updates the random-order hash index all over
        # the file; with SQLite's default 2 MB page cache that is mostly
        # cache misses (measured: 3x slower).
        (default_cache,) = dbapi.execute("PRAGMA cache_size").fetchone()
        dbapi.execute(f"PRAGMA cache_size={_SQLITE_BULK_CACHE_KIB}")
        try:
            conn = raw.execution_options(shournal_write=True)
            with conn.begin():
                yield conn
        finally:
            try:
                dbapi.execute("PRAGMA foreign_keys=ON")
                dbapi.execute(f"PRAGMA cache_size={int(default_cache)}")
            except Exception:
                # Never hand a connection without foreign keys back to the pool.
                raw.invalidate()
                raise


def _pg_prepare(conn: Connection) -> bool:
    from sqlalchemy import exc as sa_exc
    from sqlalchemy import text

    conn.execute(text(f"LOCK TABLE {_PG_LOCK_ORDER} IN SHARE ROW EXCLUSIVE MODE"))
    # Without indexes on the referencing columns, PostgreSQL's foreign-key
    # triggers scan write_event and read_file once per deleted directory.  Our own scan
    # already proved the rows unreferenced and the locks keep new
    # references out, so skip the triggers when allowed (superuser or
    # granted); otherwise they run, correct but slower.
    savepoint = conn.begin_nested()
    try:
        conn.execute(text("SET LOCAL session_replication_role = replica"))
    except sa_exc.DBAPIError:
        savepoint.rollback()
        return False
    savepoint.commit()
    return True


def _pg_try_index(conn: Connection, child: str, col: str) -> str | None:
    """Index ``child.col`` for this transaction only, so that the foreign-key
    triggers look rows up instead of scanning (measured: 50k commands with
    1000 directories and 2500 archived files took 180 s without).  Needs
    ownership of the table; never visible to others (dropped before
    commit)."""
    from sqlalchemy import exc as sa_exc
    from sqlalchemy import text

    name = f"shournal_gc_ix_{child}_{col}"
    savepoint = conn.begin_nested()
    try:
        conn.execute(text(f"CREATE INDEX {name} ON {child} ({col})"))
    except sa_exc.DBAPIError:
        savepoint.rollback()
        return None
    savepoint.commit()
    return name


def _temp_table(
    conn: Connection, name: str, fill: str | tuple[str, dict[str, Any]] | None = None
) -> int:
    """Create temporary table ``name`` (one id column) filled by ``fill``;
    return the number of rows."""
    from sqlalchemy import text

    id_type = "INTEGER" if conn.dialect.name == "sqlite" else "BIGINT"
    conn.execute(text(f"CREATE TEMPORARY TABLE {name} (id {id_type} PRIMARY KEY)"))
    if fill is None:
        return 0
    sql, params = (fill, {}) if isinstance(fill, str) else fill
    return conn.execute(text(f"INSERT INTO {name} (id) {sql}"), params).rowcount


def delete_commands(
    store: Store,
    criteria: Criteria,
    *,
    only_ids: Collection[int] | None = None,
    spool_waiting: Callable[[], bool] = lambda: False,
) -> DeleteResult:
    """Delete the commands matching ``criteria`` with their file events, and
    garbage-collect the directories, archived contents, sessions, env and
    hash-setting rows that nothing references any more.  One transaction:
    on any error nothing changes.

    ``only_ids``: delete only those of the matching commands whose id is in
    it (the set the user confirmed after :func:`plan_delete`).
    ``spool_waiting``: whether commands wait in the recorder's spool (their
    apparatus manifests are not stored yet, so no archived blob is collected).

    :raises DeleteError: the criteria are empty.
    :raises shournal.store.StoreError: the journal cannot be written.
    """
    from sqlalchemy import column, insert, table, text

    from shournal.store.blobs import collect as collect_server_blobs
    from shournal.store.blobs import keeps_blobs
    from shournal.store.connection import AlchemyReads
    from shournal.store.reader import matching_ids

    if criteria.is_empty():
        raise DeleteError(NO_CRITERIA)
    result = DeleteResult()
    created: list[str] = []
    with _bulk_writing(store) as conn:
        triggers_off = conn.dialect.name != "postgresql" or _pg_prepare(conn)
        indexes: list[str] = []
        sql, params = matching_ids(AlchemyReads(conn), criteria)
        if only_ids is not None:
            allowed = table(_ALLOWED, column("id"))
            _temp_table(conn, _ALLOWED)
            created.append(_ALLOWED)
            ids = sorted(set(only_ids))
            for start in range(0, len(ids), _IN_BATCH):
                rows = [{"id": i} for i in ids[start : start + _IN_BATCH]]
                conn.execute(insert(allowed), rows)
            sql = f"SELECT id FROM ({sql}) AS matching WHERE id IN (SELECT id FROM {_ALLOWED})"
        _temp_table(conn, _DOOMED, (sql, params))
        created.append(_DOOMED)
        doomed = f"SELECT id FROM {_DOOMED}"

        # Candidates for collection: what the doomed rows referenced.
        candidates: dict[str, int] = {}
        for parent, _children, source in _COLLECTED:
            name = f"shournal_gc_cand_{parent}"
            candidates[parent] = _temp_table(
                conn, name, f"SELECT DISTINCT * FROM ({source.format(doomed=doomed)}) AS c"
            )
            created.append(name)

        # Before the manifests go: the blobs only the doomed ones name
        # (every manifest is read only when a doomed command has one).
        named = conn.execute(
            text(f"SELECT 1 FROM apparatus WHERE command_id IN ({doomed}) LIMIT 1")
        ).first()
        blobs = _unreferenced_blobs(
            (manifest, bool(is_doomed))
            for manifest, is_doomed in (
                conn.execute(
                    text(
                        f"SELECT a.manifest, d.id IS NOT NULL FROM apparatus a "
                        f"LEFT JOIN {_DOOMED} d ON d.id = a.command_id"
                    )
                )
                if named
                else ()
            )
        )
        # (Foreign-key actions are off here: the cascade would not run.)
        conn.execute(text(f"DELETE FROM apparatus WHERE command_id IN ({doomed})"))
        for table in ("command_note", "command_tag"):
            conn.execute(text(f"DELETE FROM {table} WHERE command_id IN ({doomed})"))
        conn.execute(text(f"DELETE FROM redaction WHERE command_id IN ({doomed})"))
        result.events = sum(
            conn.execute(text(f"DELETE FROM {t} WHERE command_id IN ({doomed})")).rowcount
            for t in ("write_event", "read_event")
        )
        result.commands = conn.execute(text(f"DELETE FROM command WHERE id IN ({doomed})")).rowcount
        server_blobs: dict[str, int] | str | None = None
        if named and keeps_blobs(conn.dialect.name):
            # In this transaction: the journal's blobs go with the last
            # manifest naming them, or not at all.
            server_blobs = collect_server_blobs(conn)

        for parent, children, _source in _COLLECTED:
            result.collected[parent] = 0
            if not candidates[parent]:
                continue
            cand, live = f"shournal_gc_cand_{parent}", f"shournal_gc_live_{parent}"
            # One scan of each child table finds the candidates still in
            # use (most of these columns have no index: a per-row check
            # would rescan).
            _temp_table(
                conn,
                live,
                " UNION ".join(
                    f"SELECT DISTINCT {col} FROM {child} WHERE {col} IN (SELECT id FROM {cand})"
                    for child, col in children
                ),
            )
            created.append(live)
            if not triggers_off and candidates[parent] > _PG_INDEX_FROM:
                for child, col in children:
                    if (child, col) in _INDEXED:
                        continue
                    ix = _pg_try_index(conn, child, col)
                    if ix is not None:
                        indexes.append(ix)
            result.collected[parent] = conn.execute(
                text(
                    f"DELETE FROM {parent} WHERE id IN "
                    f"(SELECT id FROM {cand} EXCEPT SELECT id FROM {live})"
                )
            ).rowcount
        # Temporary tables outlive the transaction on a pooled connection.
        for name in reversed(created):
            conn.execute(text(f"DROP TABLE {name}"))
        for name in indexes:
            conn.execute(text(f"DROP INDEX {name}"))
    local: dict[str, int] = {}
    if blobs.blobs or blobs.kept_because:
        local = _collect_blobs(store, blobs, result, spool_waiting)
    if isinstance(server_blobs, str):
        result.archive_kept = f"the journal's archived blobs kept: {server_blobs}"
    elif server_blobs is not None:
        # one blob per digest, wherever its copies were
        result.collected["apparatus_blob"] = len(server_blobs)
        result.archive_blobs = len(local.keys() | server_blobs.keys())
        result.archive_bytes += sum(server_blobs.values())
    return result


def _collect_blobs(
    store: Store, found: BlobCollection, result: DeleteResult, spool_waiting: Callable[[], bool]
) -> dict[str, int]:
    """Remove the blobs the deletion left unreferenced (it has committed:
    a failure here is reported in ``result``, never undoes it); those
    removed (digest -> bytes)."""
    from shournal.store.archive import Archive, ArchiveError
    from shournal.store.archive_gc import collect

    try:
        done = collect(store, found, Archive(), spool_waiting)
    except ArchiveError as exc:
        result.archive_kept = str(exc)
        return {}
    result.archive_blobs, result.archive_bytes = len(done.blobs), done.size
    if done.kept_because:
        result.archive_kept = (f"{len(found.blobs)} archived blobs ({found.size} bytes) kept: "
                               f"{done.kept_because}")
    return done.blobs


__all__ = [
    "NO_CRITERIA",
    "CommandSummary",
    "DeleteError",
    "DeletePlan",
    "DeleteResult",
    "delete_commands",
    "plan_delete",
]
