"""`shournal server import`: moving a single-user journal in (shournal.moving).

Sources are journals of every older schema, made from their DDL
(tests/data/schema) with the rows of tests/system/test_migrations.py,
a current one, and one on PostgreSQL; a journal recorded by real shells
moves into the lab store in tests/system/test_lab.py.  Each command is
stored once however often, and however overlapping, the source is
imported; bad sources are one line, status 2, and nothing written."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from test_migrations import OLD_VERSIONS, SCRIPT, UUID, _seed, _statements

from shournal.journal import Journal
from shournal.store.migrations import SCHEMA_VERSION


def make_journal(url: str, version: int) -> None:
    """A journal of schema `version` at `url` with the two seeded commands
    (and, from schema 8 on, a note and a tag on the first)."""
    engine = create_engine(url)
    with engine.begin() as conn:
        dialect = conn.dialect.name
        for statement in _statements(version, dialect) if version < SCHEMA_VERSION else []:
            conn.exec_driver_sql(statement)
        if version < SCHEMA_VERSION:
            conn.execute(text("INSERT INTO schema_version (id, version) VALUES (1, :v)"),
                         {"v": version})  # fmt: skip
    engine.dispose()
    if version == SCHEMA_VERSION:
        Journal.open(url, create=True).close()
    engine = create_engine(url)
    with engine.begin() as conn:
        _seed(conn, min(version, 9))
        if version >= 8:
            conn.execute(text("INSERT INTO command_note (command_id, text) VALUES (1, 'why')"))
            conn.execute(text("INSERT INTO tag (id, name) VALUES (1, 'paper')"))
            conn.execute(text("INSERT INTO command_tag (command_id, tag_id) VALUES (1, 1)"))
        if version >= 5:  # cat was derived from make (shournal rerun)
            conn.execute(text("INSERT INTO apparatus (command_id, manifest, derived_from) "
                              "VALUES (2, :m, 1)"), {"m": b"x"})
        if version >= 10:
            conn.execute(text(
                "INSERT INTO redaction (command_id, kind, count) VALUES (1, 'aws-access-key', 2)"))
    engine.dispose()


def env_for(tmp_path: Path, target: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local/share"), "SHOURNAL_DB_URL": target}  # fmt: skip


def server_import(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shournal", "server", "import", *argv],
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_moved(target: str, version: int) -> dict[str, int]:
    """The two seeded commands, with everything they had, by text -> id."""
    with Journal.open(target) as j:
        found = {c.text: c for c in j.find()}
        assert sorted(found) == ["cat", "make"]
        make, cat = found["make"], found["cat"]
        assert (make.working_dir, cat.working_dir) == ("/home/u/src", "/tmp")
        assert (make.username, make.hostname, make.session_uuid) == ("u", "h", UUID)
        assert make.imported_from == "journal"
        assert [w.path for w in make.writes] == [b"/w/out"]
        assert sorted(r.path for r in make.reads) == [b"/usr/lib/libc.so", b"/w/run.sh"]
        (script,) = [r for r in make.reads if r.path == b"/w/run.sh"]
        assert script.content_id is not None and j.content(script.content_id) == SCRIPT
        assert [r.path for r in cat.reads] == [b"/usr/lib/libc.so"]
        assert (make.hash_chunk_size, make.hash_max_reads) == (4096, 3)
        if version >= 4:
            assert j.apparatus_manifest(make.id) == b"{}"
        if version >= 8:
            assert make.note == "why" and make.tags == ["paper"]
        return {"make": make.id, "cat": cat.id}


@pytest.mark.parametrize("version", [*OLD_VERSIONS, SCHEMA_VERSION])
def test_a_journal_of_any_schema_moves_in_once(tmp_path: Path, version: int) -> None:
    source = tmp_path / "old.sqlite"
    make_journal(f"sqlite:///{source}", version)
    before = digest(source)
    # the target already holds a command of its own: ids differ from the source's
    target = f"sqlite:///{tmp_path / 'new.sqlite'}"
    make_journal(target, SCHEMA_VERSION)
    env = env_for(tmp_path, target)
    dry = server_import(env, str(source), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("would move 2 commands, skipped 0 already stored, from ")
    res = server_import(env, str(source), "--map", str(tmp_path / "map.tsv"))
    assert res.returncode == 0, res.stderr
    assert res.stdout == (f"moved 2 commands, skipped 0 already stored, from {source} "
                          f"into {tmp_path / 'new.sqlite'}\n")  # fmt: skip
    with Journal.open(target) as j:
        moved = {c.text: c.id for c in j.find() if c.imported_from == "journal"}
    assert sorted(moved) == ["cat", "make"]
    lines = (tmp_path / "map.tsv").read_text().splitlines()
    assert lines[0] == f"# shournal server import of {source}: old id, new id"
    assert lines[1:] == [f"1\t{moved['make']}", f"2\t{moved['cat']}"]
    assert moved["make"] != 1  # the target's own commands came first
    again = server_import(env, str(source))
    assert again.stdout.startswith("moved 0 commands, skipped 2 already stored"), again
    assert digest(source) == before  # the source is only read
    with Journal.open(target) as j:
        assert len(j.find()) == 4
        labelled = j.commands([moved["make"]])[moved["make"]]
        assert [w.path for w in labelled.writes] == [b"/w/out"]
        (script,) = [r for r in labelled.reads if r.path == b"/w/run.sh"]
        assert script.content_id is not None and j.content(script.content_id) == SCRIPT
        assert (labelled.username, labelled.session_uuid) == ("u", UUID)
        if version >= 8:
            assert labelled.note == "why" and labelled.tags == ["paper"]
        if version >= 4:
            assert j.apparatus_manifest(moved["make"]) == b"{}"
        if version >= 5:
            assert j.commands([moved["cat"]])[moved["cat"]].derived_from == moved["make"]
        if version >= 10:
            counts = j.redactions_of([moved["make"], moved["cat"]])
            assert counts == {moved["make"]: {"aws-access-key": 2}}


def test_an_overlapping_copy_stores_only_what_is_new(tmp_path: Path) -> None:
    early = tmp_path / "early.sqlite"
    make_journal(f"sqlite:///{early}", 9)
    later = tmp_path / "later.sqlite"
    shutil.copyfile(early, later)
    engine = create_engine(f"sqlite:///{later}")
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO command (text, cwd_id, return_value, start_time, end_time, session_id, "
            "env_id, hash_setting_id, dropped_writes, dropped_reads, lost_events) "
            "SELECT 'make install', cwd_id, 0, '2023-11-15 08:00:00.000000', "
            "'2023-11-15 08:00:01.000000', session_id, env_id, hash_setting_id, 0, 0, 0 "
            "FROM command WHERE id = 1"))  # fmt: skip
    engine.dispose()
    target = f"sqlite:///{tmp_path / 'new.sqlite'}"
    env = env_for(tmp_path, target)
    assert server_import(env, str(early)).stdout.startswith("moved 2 commands, skipped 0")
    res = server_import(env, str(later))
    assert res.stdout.startswith("moved 1 command, skipped 2 already stored"), res
    with Journal.open(target) as j:
        assert sorted(c.text for c in j.find()) == ["cat", "make", "make install"]


def test_ids_printed_before_can_be_translated_after_the_move(tmp_path: Path) -> None:
    """Moved without --map, the import says how to get the old ids; the map
    written by a second run lists the commands moved by the first."""
    source = tmp_path / "old.sqlite"
    make_journal(f"sqlite:///{source}", SCHEMA_VERSION)
    target = f"sqlite:///{tmp_path / 'new.sqlite'}"
    make_journal(target, SCHEMA_VERSION)
    env = env_for(tmp_path, target)
    res = server_import(env, str(source))
    assert res.returncode == 0, res.stderr
    assert "--map FILE writes each one's old and new id" in res.stderr
    again = server_import(env, str(source), "--map", str(tmp_path / "map.tsv"))
    assert again.stdout.startswith("moved 0 commands, skipped 2 already stored"), again
    assert "--map FILE" not in again.stderr
    with Journal.open(target) as j:
        moved = {c.text: c.id for c in j.find() if c.imported_from == "journal"}
    lines = (tmp_path / "map.tsv").read_text().splitlines()
    assert lines[1:] == [f"1\t{moved['make']}", f"2\t{moved['cat']}"]


@pytest.mark.pg
def test_a_postgresql_journal_moves_in(pg_fresh_url: str, tmp_path: Path) -> None:
    make_journal(pg_fresh_url, 9)
    target = f"sqlite:///{tmp_path / 'new.sqlite'}"
    env = env_for(tmp_path, target)
    res = server_import(env, pg_fresh_url)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("moved 2 commands, skipped 0 already stored, from postgresql")
    check_moved(target, SCHEMA_VERSION)


def test_what_is_not_a_journal_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    good = tmp_path / "good.sqlite"
    make_journal(f"sqlite:///{good}", 9)
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    newer = tmp_path / "newer.sqlite"
    shutil.copyfile(good, newer)
    engine = create_engine(f"sqlite:///{newer}")
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE schema_version SET version = {SCHEMA_VERSION + 1}"))
    engine.dispose()
    wrong_type = tmp_path / "wrong-type.sqlite"  # text where the schema has bytes
    shutil.copyfile(good, wrong_type)
    engine = create_engine(f"sqlite:///{wrong_type}")
    with engine.begin() as conn:
        conn.execute(text("UPDATE apparatus SET manifest = 'text'"))
    engine.dispose()
    noise = tmp_path / "noise.bin"
    noise.write_bytes(os.urandom(4096))
    empty = tmp_path / "empty.sqlite"
    create_engine(f"sqlite:///{empty}").connect().exec_driver_sql("CREATE TABLE t (x)").close()
    target = tmp_path / "new.sqlite"
    env = env_for(tmp_path, f"sqlite:///{target}")
    cases = {
        tmp_path / "missing.sqlite": "no such file",
        tmp_path: "not a file",
        noise: "not a shournal journal: not a SQLite database",
        cut: "damaged a shournal journal",
        newer: f"has schema version {SCHEMA_VERSION + 1}, newer than this shournal supports",
        empty: "not a shournal journal: it holds no journal",
        wrong_type: "damaged a shournal journal: ",
    }
    for path, why in cases.items():
        res = server_import(env, str(path), "--map", str(tmp_path / "map.tsv"))
        assert res.returncode == 2, (path, res)
        assert res.stdout == "" and len(res.stderr.splitlines()) == 1, (path, res)
        assert res.stderr.startswith(f"shournal: {path}") and why in res.stderr, (path, res)
    assert not target.exists() and not (tmp_path / "map.tsv").exists()
    res = server_import(env_for(tmp_path, f"sqlite:///{good}"), str(good))
    assert res.returncode == 2, res
    assert res.stderr == f"shournal: {good} is the journal you write: nothing to move\n"
