"""Storing command lines: the inserts of a command and its file events,
the find-or-insert of the rows they share (hosts, directories, sessions,
read file versions, archived contents), and has_command.

A command with a UUID (CommandRecord.uuid) is inserted with ON CONFLICT DO
NOTHING: when the journal holds it already (a batch sent again after its
COMMIT's reply was lost, two hosts pushing one shared spool), nothing of it
is stored again.  One without (imported, or recorded by an older shournal)
is looked up by has_command instead.

Deleting is :mod:`shournal.store.gc`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Table, bindparam, select
from sqlalchemy import exc as sa_exc
from sqlalchemy.sql.dml import Insert

from shournal.data import LOST_REASONS, ns_to_datetime
from shournal.errors import StoreError
from shournal.hashing import content_digest
from shournal.record import CommandRecord, FileEvent
from shournal.store import models as m
from shournal.store.archive import Archive
from shournal.store.blobs import keeps_blobs, upload
from shournal.store.engine import Database
from shournal.store.lab import SHARE_TABLE
from shournal.store.precompiled import Precompiled

# Serialises the find-or-insert of directories and read files on
# PostgreSQL (an arbitrary constant that only shournal uses: "shou"), per
# owner in a lab store: there each owner's rows are unique and seen by its
# writer apart from everyone else's (shournal.store.lab), so one owner's
# writers need not wait for another's -- nor learn from the wait that a
# colleague is writing.  Elsewhere every writer takes the same lock.
_PG_FIND_OR_INSERT_LOCK_CALL = (
    f"pg_advisory_xact_lock(1936224117, CASE WHEN to_regclass('{SHARE_TABLE}') IS NULL "
    "THEN 0 ELSE hashtext(current_user::text) END)"
)
_PG_FIND_OR_INSERT_LOCK = f"SELECT {_PG_FIND_OR_INSERT_LOCK_CALL}"

# Keeps IN (...) lists far below every backend's bound-parameter limit.
_IN_BATCH = 500

# The most command lines stored in one PostgreSQL transaction (one COMMIT,
# and its wait for the server, per batch); SQLite's batches are the
# caller's (shournal.capture.daemon).
PG_BATCH = 500

# The keys of the precompiled INSERTs of a command with a UUID (see
# _insert_command) and, on PostgreSQL, without one (_returning_command_insert).
_COMMAND_IF_NEW = "command-if-new"
_COMMAND = "command"

# PostgreSQL's SQLSTATE of a foreign key violation.
_FOREIGN_KEY_VIOLATION = "23503"

# Writer._kept_ids is emptied beyond this many combinations (each shell
# session adds one).
_KEPT_IDS_MAX = 1000


class _KeptIdGone(Exception):
    """A row whose id Writer._kept_ids held was deleted (see _store_part)."""


def _raise_if_kept_id_gone(e: sa_exc.IntegrityError, reused: bool) -> None:
    """A foreign key violation in a transaction that used kept ids: one of
    them was collected since (see Writer._store_part)."""
    if reused and getattr(e.orig, "sqlstate", None) == _FOREIGN_KEY_VIOLATION:
        raise _KeptIdGone from None


def _dimension_key(wanted: Sequence[tuple[type[m.Base], dict[str, Any]]]) -> tuple[Any, ...]:
    """What Writer._kept_ids knows the ids of `wanted` by."""
    return tuple((model.__name__, *sorted(values.items())) for model, values in wanted)


_DIMENSION_LOOKUPS: dict[tuple[tuple[type[m.Base], tuple[str, ...]], ...], Any] = {}


def _dimension_lookup(
    wanted: Sequence[tuple[type[m.Base], dict[str, Any]]],
) -> tuple[Any, dict[str, Any]]:
    """Writer._dimension_ids' SELECT and its parameters: one statement per
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



class Writer:
    """What stores command lines in the journal `db` (its schema current:
    :class:`shournal.store.db.Store` makes it so)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.dialect_name = db.dialect_name
        # SQLite: the statements every command line runs, compiled once and
        # run on the driver's cursor.  PostgreSQL: only the command's
        # INSERT (_insert_command), the one statement of a typed line
        # besides the transaction's first (Database.writing); the rest, met
        # once per shell or for lines with files, keep SQLAlchemy's
        # execution.
        self._precompile = db.dialect_name == "sqlite"
        self._precompiled: dict[object, Precompiled] = {}
        # Where the apparatus content a manifest names is taken from, for a
        # journal that keeps it (shournal.store.blobs); made when needed.
        self._archive: Archive | None = None
        # Contents stored manifests name that this host's archive did not
        # have (so not stored with them), since this writer began; readers
        # name their files as not readable.
        self.blobs_not_stored = 0
        # Taken first thing in each write transaction (see
        # _lock_find_or_insert), in the statement that begins it: a round
        # trip to the server costs the writer more CPU than the statement.
        self._first_lock = _PG_FIND_OR_INSERT_LOCK_CALL if db.dialect_name == "postgresql" else None
        # PostgreSQL: the ids of the small tables' rows (see _dimension_ids)
        # that add_commands found or made, kept across its transactions (one
        # SELECT fewer per command line; _store_part).  Not on SQLite: there
        # a collected row's id may be given to a new row.
        self._kept_ids: dict[tuple[Any, ...], dict[type[m.Base], int]] | None = (
            {} if db.dialect_name == "postgresql" else None
        )

    @property
    def batch_size(self) -> int | None:
        """See Store.batch_size."""
        return None if self.dialect_name == "sqlite" else PG_BATCH

    def insert_ignore(self, table: Table) -> Insert:
        """An INSERT that leaves a row whose key exists as it is."""
        if self.dialect_name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(table).on_conflict_do_nothing()
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing()

    def _get_or_create(self, conn: Connection, model: type[m.Base], **values: Any) -> int:
        table: Table = model.__table__  # type: ignore[assignment]
        conn.execute(self.insert_ignore(table), values)
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
        commands found (a batch's lines mostly share them all): of the
        same transaction, or on PostgreSQL of earlier ones too, checked by
        the foreign keys (`shournal delete` collects unreferenced rows;
        see _store_part)."""
        key = _dimension_key(wanted)
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
    ) -> Any:
        """Run the statement `make` builds (once per `key`, a long-lived
        object; an insert with the columns of `values`) in `conn`'s
        transaction on the driver's cursor -- see shournal.store.precompiled.
        The driver's cursor; a failure on PostgreSQL is raised as
        SQLAlchemy's (SQLite's driver errors are the store's own)."""
        pre = self._compiled(key, make, values)
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        if self.dialect_name == "sqlite":
            return pre.run(cursor, values)
        return self._db.driver_call(lambda: pre.run(cursor, values), pre.sql)

    def _compiled(
        self, key: object, make: Callable[[], Any], values: dict[str, Any]
    ) -> Precompiled:
        """The statement `make` builds, compiled once per `key` (see
        _driver_run)."""
        pre = self._precompiled.get(key)
        if pre is None:
            stmt = make()
            columns = list(values) if isinstance(stmt, Insert) else None
            pre = self._precompiled[key] = Precompiled(stmt, self._db.engine.dialect, columns)
        return pre

    def _ids_for(
        self, conn: Connection, table: Table, key: str, rows: Sequence[dict[str, Any]]
    ) -> dict[Any, int]:
        """Insert the deduplicated ``rows`` (ignoring existing ones) and map
        each row's ``key`` value to its id."""
        if not rows:
            return {}
        conn.execute(self.insert_ignore(table), list(rows))
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
        transaction; return its command id (the stored one's, when a command
        with its UUID is in the journal already: then nothing is stored)."""
        prepared = self._prepare(rec)
        with self._db.writing(also=self._first_lock) as conn:
            command_id = self._insert(conn, rec, prepared)
            return command_id if command_id is not None else self._id_of_uuid(conn, rec)

    def add_commands(self, recs: Sequence[CommandRecord], skip_stored: bool = False) -> int:
        """Store several command lines (the store daemon's batches); the
        number stored.  A command whose UUID the journal holds is left out;
        with `skip_stored`, so is one without a UUID that has_command finds.
        In one transaction, all or none (SQLite: one connection, BEGIN and
        COMMIT for all, ~0.2 of a short command's ~0.7 ms); on PostgreSQL in
        transactions of at most PG_BATCH commands each."""
        size = self.batch_size or len(recs)
        stored = 0
        for start in range(0, len(recs), max(size, 1)):
            part = recs[start : start + size]
            prepared = [self._prepare(rec) for rec in part]
            stored += self._store_part(part, prepared, skip_stored)
        return stored

    def _store_part(
        self, part: Sequence[CommandRecord], prepared: list[tuple[Any, ...]], skip_stored: bool
    ) -> int:
        """add_commands' transaction of `part`; the number stored.  On
        PostgreSQL with the ids of earlier transactions (self._kept_ids): a
        row of them that `shournal delete` collected since fails the
        command's foreign key, and the transaction is run again with every
        id looked up."""
        while True:
            kept = self._kept_ids
            reused = bool(kept)
            known: dict[tuple[Any, ...], dict[type[m.Base], int]] = {} if kept is None else kept
            try:
                stored = self._at_once(part, prepared, skip_stored, known) if reused else None
                if stored is None:
                    with self._db.writing(also=self._first_lock) as conn:
                        try:
                            stored = 0
                            for rec, prep in zip(part, prepared, strict=True):
                                if skip_stored and rec.uuid is None and self._holds(conn, rec):
                                    continue
                                if self._insert(conn, rec, prep, known) is not None:
                                    stored += 1
                        except sa_exc.IntegrityError as e:
                            _raise_if_kept_id_gone(e, reused)
                            raise
            except _KeptIdGone:
                known.clear()
                continue
            except BaseException:
                # (ids made in the transaction rolled back are gone too)
                known.clear()
                raise
            if len(known) > _KEPT_IDS_MAX:
                known.clear()
            return stored

    def _at_once(
        self,
        part: Sequence[CommandRecord],
        prepared: list[tuple[Any, ...]],
        skip_stored: bool,
        known: dict[tuple[Any, ...], dict[type[m.Base], int]],
    ) -> int | None:
        """PostgreSQL: store `part` in one round trip to the server
        (Database.writing_at_once) if each of its lines is a command row
        alone -- no file events, apparatus or redactions (a typed line's
        usual case), the ids of its small tables known from an earlier
        transaction, nothing to look up first -- the number stored; None
        (nothing done) otherwise.  Each INSERT as in _insert_command; a
        kept id a delete collected since fails the foreign key as there."""
        rows = []
        for rec, prep in zip(part, prepared, strict=True):
            ids = known.get(_dimension_key(prep[-1]))  # (its `wanted`: see _prepare)
            if (ids is None or rec.writes or rec.reads or rec.apparatus is not None
                    or rec.redactions or (skip_stored and rec.uuid is None)):  # fmt: skip
                return None
            rows.append(self._command_row(rec, ids))
        with self._db.writing_at_once(also=self._first_lock) as tx:
            for row in rows:
                pre = self._compiled(*self._returning_command_insert(row), row)
                tx.add(pre.sql, pre.parameters(row))
            try:
                return sum(tx.send())
            except sa_exc.IntegrityError as e:
                _raise_if_kept_id_gone(e, True)
                raise

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
    ) -> int | None:
        """The inserts of one command line (prepared by _prepare) in `conn`'s
        transaction; its new id, None if the journal holds its UUID already
        (then nothing was inserted: its events are not stored twice).
        `known`: see _dimension_ids."""
        (write_split, reads, read_keys, read_split, dir_paths, digests, content_rows,
         wanted) = prepared
        ids = self._dimension_ids(conn, wanted, known)
        command_id = self._insert_command(conn, self._command_row(rec, ids))
        if command_id is None:
            return None
        content_ids = self._ids_for(
            conn,
            m.Content.__table__,  # type: ignore[arg-type]
            "digest",
            [content_rows[d] for d in sorted(content_rows)],
        )
        if rec.apparatus is not None and keeps_blobs(self.dialect_name):
            # (before the directories' lock, as the content above)
            if self._archive is None:
                self._archive = Archive()
            self.blobs_not_stored += len(upload(conn, rec.apparatus, self._archive))
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
        if rec.redactions:
            conn.execute(
                m.Redaction.__table__.insert(),
                [{"command_id": command_id, "kind": k, "count": n}
                 for k, n in sorted(rec.redactions.items()) if n],
            )
        return command_id

    @staticmethod
    def _command_row(rec: CommandRecord, ids: dict[type[m.Base], int]) -> dict[str, Any]:
        """The command table's row of `rec`, its small tables' ids `ids`."""
        return {
            "text": rec.text,
            "return_value": rec.return_value,
            "start_time": ns_to_datetime(rec.start_ns),
            "end_time": ns_to_datetime(rec.end_ns),
            "cwd_id": ids[m.WorkingDir],
            "session_id": ids.get(m.ShellSession),
            "env_id": ids[m.Env],
            "hash_setting_id": ids.get(m.HashSetting),
            "dropped_writes": rec.dropped_writes,
            "dropped_reads": rec.dropped_reads,
            "lost_events": rec.lost_events,
            **{f"lost_{r}": rec.lost_reasons.get(r, 0) for r in LOST_REASONS},
            "incomplete": rec.incomplete,
            "imported_from": rec.imported_from,
            "import_key": rec.import_key,
            "uuid": rec.uuid,
        }

    def _insert_command(self, conn: Connection, row: dict[str, Any]) -> int | None:
        """Insert the command row `row`; its id, or None when it has a UUID
        the journal holds already.  ON CONFLICT without a target: the same
        statement meets the unique index on (uuid) of a journal and on
        (owner, uuid) of a lab store (shournal.store.lab); a recorded
        command conflicts on nothing else (import_key is NULL, ids are the
        database's)."""
        table: Table = m.Command.__table__  # type: ignore[assignment]
        if row["uuid"] is None:
            if self._precompile:
                return int(self._driver_run(conn, table, table.insert, row).lastrowid)
            return int(conn.execute(table.insert(), row).inserted_primary_key[0])
        if self._precompile:
            cursor = self._driver_run(
                conn, _COMMAND_IF_NEW, lambda: self.insert_ignore(table), row
            )
            # (lastrowid is left as it was when nothing was inserted)
            return int(cursor.lastrowid) if cursor.rowcount == 1 else None
        # (PostgreSQL: on the driver's cursor too, as SQLite's above)
        found = self._driver_run(conn, *self._returning_command_insert(row), row).fetchone()
        return None if found is None else int(found[0])

    def _returning_command_insert(self, row: dict[str, Any]) -> tuple[str, Callable[[], Insert]]:
        """PostgreSQL: the INSERT of the command row `row` that returns its
        id, as the key of its precompiled statement and what builds it;
        with a UUID it leaves a stored command alone (see _insert_command).
        The one builder of each key, for _insert_command and _at_once."""
        table: Table = m.Command.__table__  # type: ignore[assignment]
        if row["uuid"] is None:
            return _COMMAND, lambda: table.insert().returning(table.c.id)
        return _COMMAND_IF_NEW, lambda: self.insert_ignore(table).returning(table.c.id)

    def _id_of_uuid(self, conn: Connection, rec: CommandRecord) -> int:
        """The id of the stored command with `rec`'s UUID (among the
        writer's own rows in a lab store)."""
        cmd: Table = m.Command.__table__  # type: ignore[assignment]
        return int(conn.execute(select(cmd.c.id).where(cmd.c.uuid == rec.uuid)).scalar_one())

    def _lock_find_or_insert(self, conn: Connection) -> None:
        """Exclude other writers from the find-or-insert of directories and
        read files until this transaction ends.  SQLite's write transaction
        (BEGIN IMMEDIATE) already does; PostgreSQL takes an advisory
        transaction lock (taking it again is harmless).  The writer takes it
        first thing in each of its transactions: one that holds it never
        waits for the uncommitted rows of another that waits for it (the
        same new working directory, session, content or UUID, met in
        another order by a batch's later command)."""
        if self.dialect_name == "postgresql":
            conn.exec_driver_sql(_PG_FIND_OR_INSERT_LOCK)

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

    def add_imported(
        self, recs: Sequence[CommandRecord], *, dry_run: bool = False
    ) -> tuple[int, int]:
        """Store commands brought in by `shournal import` (each with its
        ``import_key``), leaving out those whose key is stored already: one
        transaction on either backend, all or nothing.  (stored, skipped);
        ``dry_run``: only count them, store nothing."""
        if any(rec.import_key is None for rec in recs):
            raise ValueError("an imported command needs its import_key")
        keys = [bytes(rec.import_key or b"") for rec in recs]
        # What is stored already, looked up before the write lock is taken
        # (and again under it: another import may have stored some since).
        with self._db.reading() as conn:
            present = self._stored_keys(conn, keys)
        new = [i for i, k in enumerate(keys) if k not in present]
        if dry_run:
            return len(new), len(recs) - len(new)
        prepared = {i: self._prepare(recs[i]) for i in new}
        stored = 0
        with self._db.writing(also=self._first_lock) as conn:
            present = self._stored_keys(conn, [keys[i] for i in new])
            known: dict[tuple[Any, ...], dict[type[m.Base], int]] = {}
            for i in new:
                if keys[i] in present:
                    continue
                present.add(keys[i])
                self._insert(conn, recs[i], prepared[i], known)
                stored += 1
        return stored, len(recs) - stored

    def imported_ids(self, keys: Sequence[bytes]) -> dict[bytes, int]:
        """The ids of the user's own commands stored with these import
        keys (those not stored are left out)."""
        cmd: Table = m.Command.__table__  # type: ignore[assignment]
        found: dict[bytes, int] = {}
        with self._db.reading() as conn:
            self._db.only_own_rows(conn)
            for start in range(0, len(keys), _IN_BATCH):
                batch = list(keys[start : start + _IN_BATCH])
                found.update(
                    (bytes(k), int(i))
                    for k, i in conn.execute(
                        select(cmd.c.import_key, cmd.c.id).where(
                            m.IMPORTED, cmd.c.import_key.in_(batch)
                        )
                    )
                )
        return found

    def _stored_keys(self, conn: Connection, keys: Sequence[bytes]) -> set[bytes]:
        """Those of the import keys ``keys`` that the journal holds."""
        cmd: Table = m.Command.__table__  # type: ignore[assignment]
        found: set[bytes] = set()
        for start in range(0, len(keys), _IN_BATCH):
            batch = keys[start : start + _IN_BATCH]
            found.update(
                bytes(k)
                for (k,) in conn.execute(
                    select(cmd.c.import_key).where(m.IMPORTED, cmd.c.import_key.in_(batch))
                )
            )
        return found

    def has_command(self, rec: CommandRecord) -> bool:
        """Whether the journal already holds `rec`: one with its UUID, or
        without one, with the same start time, text, session and working
        directory.  Asked before storing a command whose earlier attempt
        may have committed (shournal.capture.spool), so that each is
        stored exactly once."""
        with self._db.reading() as conn:
            self._db.only_own_rows(conn)
            return self._holds(conn, rec)

    def _holds(self, conn: Connection, rec: CommandRecord) -> bool:
        """has_command in `conn`'s transaction."""
        cmd: Table = m.Command.__table__  # type: ignore[assignment]
        if rec.uuid is not None:
            query = select(cmd.c.id).where(cmd.c.uuid == rec.uuid)
            return conn.execute(query.limit(1)).first() is not None
        cwd: Table = m.WorkingDir.__table__  # type: ignore[assignment]
        sess: Table = m.ShellSession.__table__  # type: ignore[assignment]
        query = (
            select(cmd.c.id)
            .select_from(cmd.join(cwd, cmd.c.cwd_id == cwd.c.id))
            .where(
                cmd.c.start_time == ns_to_datetime(rec.start_ns),
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
    cols = ", ".join(m.READ_FILE_KEY)
    # The parameters are the values as given; a stored NULL mode means
    # COMMON_MODE (models.FileMode).
    same = " AND ".join(
        f"coalesce(r.mode, {m.COMMON_MODE}) = v.mode" if c == "mode" else f"r.{c} = v.{c}"
        for c in m.READ_FILE_KEY
    )
    mark = _placeholder(conn)
    row_marks = "(" + ", ".join([mark] * (1 + len(m.READ_FILE_KEY))) + ")"
    found: dict[int, tuple[int, int | None]] = {}
    for start in range(0, len(which), _IN_BATCH):
        batch = which[start : start + _IN_BATCH]
        params: list[Any] = []
        for i in batch:
            params.append(i)
            params.extend(rows[i][c] for c in m.READ_FILE_KEY)
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
    if rec.uuid is not None and len(rec.uuid) != 16:
        raise ValueError("uuid must be 16 raw bytes")
    for ev in (*rec.writes, *rec.reads):
        if ev.hash is not None and not 0 <= ev.hash < 2**64:
            raise ValueError(f"hash {ev.hash} is not an unsigned 64-bit value")
        if not 0 <= ev.size < 2**63 or not -(2**63) <= ev.mtime_ns < 2**63:
            raise ValueError(f"size or mtime of {ev.path!r} out of the 64-bit range")
        if not 0 <= ev.mode < 2**31:
            raise ValueError(f"mode {ev.mode} of {ev.path!r} out of range")
