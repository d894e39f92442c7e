"""Each schema migration, from a journal of the version before it.

A journal of schema N-1 is made from its DDL as that version's models
created it (tests/data/schema/, written by its generate.py from git
history), given a few rows, and lifted by migration N alone; the test
checks the rows and the new structure.  Then every old version is opened
by :class:`Store`, which must upgrade it to exactly the structure of a new
journal.  On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, inspect, text

from shournal.journal import Journal
from shournal.record import CommandRecord
from shournal.store import Store
from shournal.store import models as m
from shournal.store.engine import Database
from shournal.store.migrations import MIGRATIONS, SCHEMA_VERSION

SCHEMAS = Path(__file__).resolve().parent.parent / "data" / "schema"
OLD_VERSIONS = range(MIGRATIONS[0].version - 1, SCHEMA_VERSION)

HASH_OUT = (0x1122334455667788).to_bytes(8, "little")
HASH_LIB = (0x0102030405060708).to_bytes(8, "little")
SCRIPT = b"#!/bin/sh\necho hi\n"
DIGEST = b"\x07" * 16
UUID = b"\x01" * 16
MODE = 0o100644  # the common mode (stored as NULL from schema 3 on)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'journal.sqlite'}"
    return request.getfixturevalue("pg_fresh_url")


def _statements(version: int, dialect: str) -> list[str]:
    ddl = (SCHEMAS / f"v{version}.{dialect}.sql").read_text()
    code = "\n".join(line for line in ddl.splitlines() if not line.startswith("--"))
    return [s.strip() for s in code.split(";\n") if s.strip()]


def _x(conn: Connection, sql: str, **params: Any) -> None:
    conn.execute(text(sql), params)


def _seed(conn: Connection, version: int) -> None:
    """Two commands of a schema-`version` journal: the first wrote
    /w/out and read /usr/lib/libc.so and /w/run.sh (archived), the
    second read libc.so again and ran in another directory."""
    pg = conn.dialect.name == "postgresql"
    t0, t1 = (f"2023-11-14 22:13:2{i}.123456" + ("+00" if pg else "") for i in (0, 1))
    _x(conn, "INSERT INTO env (id, hostname, username) VALUES (1, 'h', 'u')")
    _x(conn, "INSERT INTO shell_session (id, uuid) VALUES (1, :u)", u=UUID)
    _x(conn, "INSERT INTO hash_setting (id, chunk_size, max_reads) VALUES (1, 4096, 3)")
    _x(conn, "INSERT INTO content (id, algorithm, digest, data) VALUES (1, 'x', :d, :s)",
       d=DIGEST, s=SCRIPT)  # fmt: skip
    common = ("return_value, start_time, end_time, session_id, env_id, hash_setting_id, "
              "dropped_writes, dropped_reads, lost_events")  # fmt: skip
    values = "0, :t0, :t1, 1, 1, 1, 0, 0, 0"
    if version < 3:
        _x(conn, "INSERT INTO directory (id, path) VALUES (1, :a), (2, :b)",
           a=b"/w/", b=b"/usr/lib/")  # fmt: skip
        _x(conn, f"INSERT INTO command (id, text, working_dir, {common}) VALUES "
           f"(1, 'make', '/home/u/src', {values}), (2, 'cat', '/tmp', {values})", t0=t0, t1=t1)
        cols = ("id, command_id, kind, directory_id, basename, size, mtime_ns, hash, mode, "
                "content_id")
        _x(conn, f"INSERT INTO file_event ({cols}) VALUES "
           f"(1, 1, {m.KIND_WRITE}, 1, :out, 1000, 5, :ho, {MODE}, NULL), "
           f"(2, 1, {m.KIND_READ}, 2, :lib, 99, 6, :hl, {MODE}, NULL), "
           f"(3, 1, {m.KIND_READ}, 1, :sh, 18, 7, :ho, 493, 1), "
           f"(4, 2, {m.KIND_READ}, 2, :lib, 99, 6, :hl, {MODE}, NULL)",
           out=b"out", lib=b"libc.so", sh=b"run.sh", ho=HASH_OUT, hl=HASH_LIB)  # fmt: skip
    else:
        _x(conn, "INSERT INTO directory (id, path, path_hash) VALUES (1, :a, :ha), (2, :b, :hb)",
           a=b"/w/", ha=m.path_hash(b"/w/"),
           b=b"/usr/lib/", hb=m.path_hash(b"/usr/lib/"))  # fmt: skip
        _x(conn, "INSERT INTO working_dir (id, path) VALUES (1, '/home/u/src'), (2, '/tmp')")
        _x(conn, f"INSERT INTO command (id, text, cwd_id, {common}) VALUES "
           f"(1, 'make', 1, {values}), (2, 'cat', 2, {values})", t0=t0, t1=t1)
        cols = "directory_id, basename, size, mtime_ns, hash, mode"
        _x(conn, f"INSERT INTO write_event (id, command_id, {cols}) VALUES "
           "(1, 1, 1, :out, 1000, 5, :ho, NULL)", out=b"out", ho=HASH_OUT)
        _x(conn, f"INSERT INTO read_file (id, {cols}, content_id) VALUES "
           "(2, 2, :lib, 99, 6, :hl, NULL, NULL), (3, 1, :sh, 18, 7, :ho, 493, 1)",
           lib=b"libc.so", sh=b"run.sh", ho=HASH_OUT, hl=HASH_LIB)  # fmt: skip
        _x(conn, "INSERT INTO read_event (command_id, read_file_id) VALUES (1, 2), (1, 3), (2, 2)")
    if version >= 4:
        _x(conn, "INSERT INTO apparatus (command_id, manifest) VALUES (1, :m)", m=b"{}")
    if pg:  # explicit ids do not advance the id sequences
        for table in ("env", "shell_session", "hash_setting", "content", "directory", "command",
                      "file_event" if version < 3 else "write_event",
                      *(() if version < 3 else ("read_file", "working_dir"))):  # fmt: skip
            _x(conn, f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
               f"(SELECT max(id) FROM {table}))")  # fmt: skip


@pytest.fixture
def journal_at(db_url: str) -> Iterator[Any]:
    """make(version): the journal at `db_url`, of schema `version`, seeded;
    opened without any look at its schema."""
    opened: list[Database] = []

    def make(version: int) -> Database:
        db = Database(db_url)
        opened.append(db)
        with db.writing() as conn:
            for statement in _statements(version, db.dialect_name):
                conn.exec_driver_sql(statement)
            _x(conn, "INSERT INTO schema_version (id, version) VALUES (1, :v)", v=version)
            _seed(conn, version)
        return db

    yield make
    for db in opened:
        db.close()


def _migrated(journal_at: Any, version: int) -> tuple[Database, dict[str, Any]]:
    """A journal of schema version - 1 lifted by migration `version` alone,
    and its structure, checked to hold all of schema `version`'s."""
    db = journal_at(version - 1)
    [step] = [s for s in MIGRATIONS if s.version == version]
    with db.writing() as conn:
        step.upgrade(conn)
    with db.reading() as conn:
        structure = _structure(conn)
    _contains(structure, _expected(version))
    return db, structure


def _structure(conn: Connection) -> dict[str, Any]:
    """Tables with their columns, indexes (name: columns) and unique
    constraints, by name."""
    found = inspect(conn)
    out = {}
    for table in sorted(found.get_table_names()):
        indexes = {
            ix["name"]: tuple(ix["column_names"])
            for ix in found.get_indexes(table)
            if not ix.get("duplicates_constraint")  # (PostgreSQL: a unique key's own)
        }
        uniques = {tuple(u["column_names"]) for u in found.get_unique_constraints(table)}
        out[table] = (
            sorted(c["name"] for c in found.get_columns(table)),
            indexes,
            uniques,
        )
    return out


def _expected(version: int) -> dict[str, Any]:
    """The structure of a new journal of schema `version`."""
    engine = create_engine("sqlite://")
    with engine.begin() as conn:
        if version == SCHEMA_VERSION:
            m.Base.metadata.create_all(conn)
        else:
            for statement in _statements(version, "sqlite"):
                conn.exec_driver_sql(statement)
        return _structure(conn)


def _contains(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Every table, column, index and unique key of `want` is in `got`
    (a later schema's additions to a table a migration creates from the
    current models may be there too)."""
    assert set(want) <= set(got)
    for table, (columns, indexes, uniques) in want.items():
        g_columns, g_indexes, g_uniques = got[table]
        assert set(columns) <= set(g_columns), table
        assert indexes.items() <= g_indexes.items(), table
        assert uniques <= g_uniques, table


def _rows(db: Database, sql: str) -> list[tuple[Any, ...]]:
    with db.reading() as conn:
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r)
                for r in conn.execute(text(sql))]  # fmt: skip


def test_the_migrations_lift_one_version_each_in_order() -> None:
    assert [s.version for s in MIGRATIONS] == list(range(2, SCHEMA_VERSION + 1))
    # a fixture for every version a migration starts from
    for version in OLD_VERSIONS:
        for dialect in ("sqlite", "postgresql"):
            assert (SCHEMAS / f"v{version}.{dialect}.sql").is_file()


def test_2_content_index_by_size(journal_at: Any) -> None:
    db, structure = _migrated(journal_at, 2)
    assert "ix_file_event_hash" not in structure["file_event"][1]
    assert _rows(db, "SELECT id, kind, size FROM file_event ORDER BY id") == [
        (1, 0, 1000), (2, 1, 99), (3, 1, 18), (4, 1, 99)
    ]


def test_3_split_events(journal_at: Any) -> None:
    db, structure = _migrated(journal_at, 3)
    assert "file_event" not in structure
    assert "working_dir" not in structure["command"][0]
    assert structure["directory"][2] == set()  # no unique path any more
    # A write keeps its id; a read file version takes the smallest id of
    # the read events it replaces; the common mode is NULL.
    assert _rows(db, "SELECT id, command_id, basename, mode FROM write_event") == [
        (1, 1, b"out", None)
    ]
    assert _rows(db, "SELECT id, basename, mode, content_id FROM read_file ORDER BY id") == [
        (2, b"libc.so", None, None), (3, b"run.sh", 493, 1)
    ]
    assert _rows(db, "SELECT command_id, read_file_id FROM read_event ORDER BY 1, 2") == [
        (1, 2), (1, 3), (2, 2)
    ]
    assert _rows(
        db, "SELECT c.text, w.path FROM command c JOIN working_dir w ON w.id = c.cwd_id "
        "ORDER BY c.id"
    ) == [("make", "/home/u/src"), ("cat", "/tmp")]
    assert _rows(db, "SELECT path, path_hash FROM directory ORDER BY id") == [
        (b"/w/", m.path_hash(b"/w/")), (b"/usr/lib/", m.path_hash(b"/usr/lib/"))
    ]
    if db.dialect_name == "postgresql":  # the id sequences moved past the kept ids
        for table, cols, top in (("write_event", "command_id, directory_id, basename", 1),
                                 ("read_file", "directory_id, basename", 3)):  # fmt: skip
            with db.writing() as conn:
                values = "1, 1, 'x'" if table == "write_event" else "1, 'x'"
                new = conn.execute(text(
                    f"INSERT INTO {table} ({cols}, size, mtime_ns, hash) "
                    f"VALUES ({values}, 0, 0, '') RETURNING id"
                )).scalar_one()  # fmt: skip
            assert new == top + 1


def test_4_apparatus(journal_at: Any) -> None:
    db, _ = _migrated(journal_at, 4)
    assert _rows(db, "SELECT count(*) FROM apparatus") == [(0,)]
    assert _rows(db, "SELECT id, text FROM command ORDER BY id") == [(1, "make"), (2, "cat")]


def test_5_derived_from(journal_at: Any) -> None:
    db, _ = _migrated(journal_at, 5)
    assert _rows(db, "SELECT command_id, manifest, derived_from FROM apparatus") == [
        (1, b"{}", None)
    ]


def test_6_lost_reasons(journal_at: Any) -> None:
    db, _ = _migrated(journal_at, 6)
    # not recorded before: nothing by reason
    assert _rows(
        db, "SELECT id, lost_overflow, lost_unreadable, lost_path, lost_relay FROM command "
        "ORDER BY id"
    ) == [(1, 0, 0, 0, 0), (2, 0, 0, 0, 0)]


def test_7_incomplete(journal_at: Any) -> None:
    db, _ = _migrated(journal_at, 7)
    # every older command was complete
    assert _rows(db, "SELECT id, incomplete FROM command ORDER BY id") in (
        [(1, False), (2, False)], [(1, 0), (2, 0)]
    )


def test_8_notes_and_tags(journal_at: Any) -> None:
    db, structure = _migrated(journal_at, 8)
    assert {"command_note", "tag", "command_tag"} <= set(structure)
    assert _rows(db, "SELECT count(*) FROM command_tag") == [(0,)]
    assert _rows(db, "SELECT id FROM command ORDER BY id") == [(1,), (2,)]


def test_9_imported(journal_at: Any) -> None:
    db, structure = _migrated(journal_at, 9)
    # every older command was recorded, none imported
    assert _rows(db, "SELECT id, imported_from, import_key FROM command ORDER BY id") == [
        (1, None, None), (2, None, None)]
    assert "ix_command_import_key" in structure["command"][1]


def test_10_redaction(journal_at: Any) -> None:
    db, structure = _migrated(journal_at, 10)
    assert "redaction" in structure
    # older commands were not counted: no rows
    assert _rows(db, "SELECT count(*) FROM redaction") == [(0,)]


def test_11_command_uuid(journal_at: Any) -> None:
    db, structure = _migrated(journal_at, 11)
    # stored before commands carried a UUID: NULL, which never conflicts
    assert _rows(db, "SELECT id, uuid FROM command ORDER BY id") == [(1, None), (2, None)]
    assert "ix_command_uuid" in structure["command"][1]
    with db.writing() as conn:
        _x(conn, "UPDATE command SET uuid = :u WHERE id = 1", u=b"\x05" * 16)
    with pytest.raises(Exception, match="(?i)unique"), db.writing() as conn:
        _x(conn, "UPDATE command SET uuid = :u WHERE id = 2", u=b"\x05" * 16)


@pytest.mark.parametrize("version", OLD_VERSIONS)
def test_opening_upgrades_to_exactly_a_new_journal(
    journal_at: Any, db_url: str, version: int
) -> None:
    """Store runs the migrations from `version` on; the result has the
    structure of a new journal (nullability and constraint names aside:
    SQLite cannot alter those), the old commands, and takes new ones."""
    journal_at(version).close()
    for _ in range(2):  # the second open finds the current schema
        with Store(db_url, create=False) as s:
            with s.reading() as conn:
                got = _structure(conn)
                stored = conn.execute(text("SELECT version FROM schema_version")).scalar_one()
            assert stored == SCHEMA_VERSION
            assert got == _expected(SCHEMA_VERSION)
            commands = Journal(s).find()
            assert [(c.id, c.text, c.working_dir) for c in commands] == [
                (1, "make", "/home/u/src"), (2, "cat", "/tmp")
            ]
            assert [w.path for w in commands[0].writes] == [b"/w/out"]
            assert sorted(r.path for r in commands[0].reads) == [b"/usr/lib/libc.so", b"/w/run.sh"]
            assert [r.path for r in commands[1].reads] == [b"/usr/lib/libc.so"]
    with Store(db_url) as s:
        new = s.add_command(
            CommandRecord(text="new", return_value=0, start_ns=2 * 10**18, end_ns=2 * 10**18,
                          working_dir="/tmp", username="u", hostname="h", session_uuid=UUID,
                          hash_chunk_size=4096, hash_max_reads=3)  # fmt: skip
        )
        assert new == 3
        assert [c.text for c in Journal(s).find()] == ["make", "cat", "new"]
