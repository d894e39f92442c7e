"""The journal's numbered schema migrations, oldest first.

``MIGRATIONS[i]`` lifts a journal to schema ``MIGRATIONS[i].version``
from the version before, inside the schema transaction
(:func:`shournal.store.schema.ensure_schema`); a fresh journal is created
at :data:`SCHEMA_VERSION` from the models directly.  Adding one: write
its function below the last, append ``Migration(version, function)`` to
:data:`MIGRATIONS`, change the models to the new structure, and test it
from the previous version (docs/development.md, "Changing the schema").

Each step is idempotent (it may meet tables an earlier step created from
the current models) and runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from sqlalchemy import Connection, Table, inspect, text

from shournal.data import LOST_REASONS
from shournal.store import models as m


def content_index_by_size(conn: Connection) -> None:
    """Schema 2: the content index became (hash, size) (was (hash)); see
    docs/design.md, "Schema notes".  Schema 3 drops file_event altogether."""
    conn.execute(text("DROP INDEX IF EXISTS ix_file_event_hash"))
    conn.execute(
        text("CREATE INDEX IF NOT EXISTS ix_file_event_hash_size ON file_event (hash, size)")
    )


def split_events(conn: Connection) -> None:
    """Schema 3: file_event -> write_event + deduplicated read_file +
    read_event; command.working_dir text -> cwd_id (table working_dir);
    indexes on command (session_id) and (cwd_id); directory found by
    path_hash (non-unique index) instead of a unique index on path; the
    common mode stored as NULL.

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
    _command_indexes(conn)
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
    same = " AND ".join(f"r.{c} = e.{c}" for c in m.READ_FILE_KEY)
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


def apparatus(conn: Connection) -> None:
    """Schema 4: table apparatus (the manifest of a command recorded with
    its apparatus, shournal.reproduce)."""
    m.Base.metadata.create_all(
        conn, tables=[m.Apparatus.__table__], checkfirst=True  # type: ignore[list-item]
    )


def derived_from(conn: Connection) -> None:
    """Schema 5: apparatus.derived_from (the command a `shournal rerun`
    derives from)."""
    columns = {c["name"] for c in inspect(conn).get_columns("apparatus")}
    if "derived_from" not in columns:
        id_type = "INTEGER" if conn.dialect.name == "sqlite" else "BIGINT"
        conn.execute(text(f"ALTER TABLE apparatus ADD COLUMN derived_from {id_type}"))


def lost_reasons(conn: Connection) -> None:
    """Schema 6: command.lost_overflow, lost_unreadable, lost_path,
    lost_relay, the lost events by reason (0 in older rows, whose reasons
    were not recorded)."""
    columns = {c["name"] for c in inspect(conn).get_columns("command")}
    for reason in LOST_REASONS:
        if f"lost_{reason}" not in columns:
            conn.execute(
                text(f"ALTER TABLE command ADD COLUMN lost_{reason} INTEGER NOT NULL DEFAULT 0")
            )


def incomplete(conn: Connection) -> None:
    """Schema 7: command.incomplete, stored from its start when the shell
    never reported the end (false in older rows: they were all complete)."""
    columns = {c["name"] for c in inspect(conn).get_columns("command")}
    if "incomplete" not in columns:
        conn.execute(
            text("ALTER TABLE command ADD COLUMN incomplete BOOLEAN NOT NULL DEFAULT false")
        )


def notes_and_tags(conn: Connection) -> None:
    """Schema 8: tables command_note, tag and command_tag (a user's note and
    tags on a command: shournal note / shournal tag); none in older journals."""
    tables = [m.Base.metadata.tables[name] for name in m.LABEL_TABLES]
    m.Base.metadata.create_all(conn, tables=tables, checkfirst=True)


def imported(conn: Connection) -> None:
    """Schema 9: command.imported_from and command.import_key (NULL in older
    rows: all were recorded), with the unique index on import_key."""
    columns = {c["name"] for c in inspect(conn).get_columns("command")}
    blob = "BLOB" if conn.dialect.name == "sqlite" else "BYTEA"
    for name, kind in (("imported_from", "TEXT"), ("import_key", blob)):
        if name not in columns:
            conn.execute(text(f"ALTER TABLE command ADD COLUMN {name} {kind}"))
    _command_indexes(conn)


def _command_indexes(conn: Connection) -> None:
    """The command table's indexes over the columns it has at this step of
    the upgrade (later steps add the others)."""
    columns = {c["name"] for c in inspect(conn).get_columns("command")}
    for ix in m.Command.__table__.indexes:
        if {c.name for c in ix.columns} <= columns:
            ix.create(conn, checkfirst=True)


def redaction(conn: Connection) -> None:
    """Schema 10: table redaction (no rows for older commands: what was
    redacted in them, if anything, was not counted)."""
    m.Base.metadata.create_all(
        conn, tables=[m.Redaction.__table__], checkfirst=True  # type: ignore[list-item]
    )


def command_uuid(conn: Connection) -> None:
    """Schema 11: command.uuid (NULL in older rows: they were stored before
    commands carried one), with its unique index."""
    columns = {c["name"] for c in inspect(conn).get_columns("command")}
    if "uuid" not in columns:
        blob = "BLOB" if conn.dialect.name == "sqlite" else "BYTEA"
        conn.execute(text(f"ALTER TABLE command ADD COLUMN uuid {blob}"))
    _command_indexes(conn)


class Migration(NamedTuple):
    version: int  # the schema version it lifts a journal to (from the one before)
    upgrade: Callable[[Connection], None]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, content_index_by_size),
    Migration(3, split_events),
    Migration(4, apparatus),
    Migration(5, derived_from),
    Migration(6, lost_reasons),
    Migration(7, incomplete),
    Migration(8, notes_and_tags),
    Migration(9, imported),
    Migration(10, redaction),
    Migration(11, command_uuid),
)

# The version of a journal this shournal creates, and to which it upgrades
# an older one (tests/system/test_migrations.py holds MIGRATIONS to
# 2, 3, ... in order).
SCHEMA_VERSION = MIGRATIONS[-1].version
