"""The journal's schema on opening: a new journal is created at
:data:`~shournal.store.migrations.SCHEMA_VERSION` from the models, an
older one upgraded through :data:`~shournal.store.migrations.MIGRATIONS`,
a newer one refused."""

from __future__ import annotations

from sqlalchemy import Connection, inspect, select, text

from shournal.errors import SchemaTooNew, StoreCorrupt, StoreMissing, StoreUnavailable
from shournal.store import models as m
from shournal.store.engine import Database
from shournal.store.lab import SHARE_TABLE
from shournal.store.migrations import PG_SCHEMA_LOCK, SCHEMA_VERSION, upgrade


def read_version(conn: Connection, where: str) -> int | None:
    """The stored schema version; None for an empty database."""
    names = set(inspect(conn).get_table_names())
    if m.SchemaVersion.__tablename__ not in names:
        ours = names & set(m.Base.metadata.tables)
        if ours:
            raise StoreCorrupt(
                f"{where} has tables named like shournal's ({', '.join(sorted(ours))}) "
                "but no schema version: not a shournal journal"
            )
        return None
    version = conn.execute(
        select(m.SchemaVersion.version).where(m.SchemaVersion.id == 1)
    ).scalar_one_or_none()
    if version is None:
        raise StoreCorrupt(f"{where}: the schema version row is missing")
    return version


def _check_not_newer(version: int, where: str) -> None:
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"the journal {where} has schema version {version}, newer than this "
            f"shournal supports ({SCHEMA_VERSION}); upgrade shournal"
        )


def is_lab_store(db: Database) -> bool:
    """Whether `db` is a lab store (shournal.store.lab), whose schema only
    its administrator changes."""
    if db.dialect_name != "postgresql":
        return False
    with db.reading() as conn:
        return conn.execute(text("SELECT to_regclass(:t)"), {"t": SHARE_TABLE}).scalar() is not None


def ensure_schema(db: Database) -> None:
    """Make `db`'s schema the current one: create it (unless `db` was
    opened not to create), upgrade it, or refuse it.

    :raises SchemaTooNew: a newer shournal wrote it.
    :raises StoreMissing: there is none and `db` may not create one.
    :raises StoreUnavailable: it is older, and read-only.
    :raises StoreCorrupt: it is not a shournal journal.
    """
    where = db.location
    with db.reading() as conn:
        version = read_version(conn, where)
    if version is not None:
        _check_not_newer(version, where)
        if version == SCHEMA_VERSION:
            return
        if is_lab_store(db):
            # Its users own none of the tables; the administrator upgrades it.
            raise StoreUnavailable(
                f"the lab store {where} has schema version {version}, older than this "
                f"shournal's ({SCHEMA_VERSION}): ask its administrator to run "
                "`shournal server init` to upgrade it"
            )
        if db.read_only and not db.writable_again():
            raise StoreUnavailable(
                f"the journal {where} has schema version {version}, older than "
                f"this shournal's ({SCHEMA_VERSION}), and cannot be written to upgrade it"
            )
    elif not db.create:
        raise StoreMissing(f"no journal in {where} yet")
    # Create or upgrade under the write lock, re-reading the version
    # there: another shell may have done the work meanwhile.
    with db.writing() as conn:
        if db.dialect_name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_SCHEMA_LOCK})
        version = read_version(conn, where)
        if version is None:
            m.Base.metadata.create_all(conn)
            conn.execute(m.SchemaVersion.__table__.insert(), {"id": 1, "version": SCHEMA_VERSION})
            return
        _check_not_newer(version, where)
        upgrade(conn, version, where)
