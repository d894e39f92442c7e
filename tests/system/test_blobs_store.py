"""Archived apparatus content in the journal (shournal.store.blobs), on a
single-user PostgreSQL journal and on SQLite: the writer stores the blobs
a manifest names with it (PostgreSQL), readers on a host without them in
its file archive get them through the journal, deduplicated, collected by
a deletion; SQLite keeps the file archive alone.  Real store, real
PostgreSQL, real file archives ("hosts" are two data directories)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import text

from shournal.criteria import parse_criteria
from shournal.journal import Journal
from shournal.record import CommandRecord
from shournal.store import Store
from shournal.store.archive import Archive, ArchiveError, encode_manifest
from shournal.store.gc import delete_commands, plan_delete

T0 = 1_767_600_000 * 1_000_000_000


def _manifest(reads: list[tuple[str, str]]) -> bytes:
    return encode_manifest({
        "format": 1, "env": {}, "argv": ["true"],
        "reads": [[p, 10, T0, 0o100644, None, d, None] for p, d in reads],
        "writes": [], "not_archived": {},
    })  # fmt: skip


def _add(store: Store, name: str, start: int, manifest: bytes) -> int:
    return store.add_command(CommandRecord(
        text=name, return_value=0, start_ns=T0 + start, end_ns=T0 + start + 1,
        working_dir="/w", username="u", hostname="h", session_uuid=None,
        hash_chunk_size=256, hash_max_reads=3, reads=[], writes=[], apparatus=manifest,
    ))  # fmt: skip


def _blobs(store: Store) -> list[str]:
    with store.reading() as conn:
        return sorted(bytes(r[0]).hex() for r in conn.execute(
            text("SELECT digest FROM apparatus_blob")))  # fmt: skip


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'journal.sqlite'}"
    return str(request.getfixturevalue("pg_fresh_url"))


def test_content_travels_with_the_manifest_on_postgresql_only(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("XDG_DATA_HOME", str(host_a))
    arc_a = Archive(host_a / "shournal" / "archive")
    content = {name: os.urandom(500) + name.encode() for name in ("shared", "first", "second")}
    d = {name: arc_a.put(data)[0] for name, data in content.items()}
    never = "ab" * 16  # named, but in no archive
    with Store(url) as store:
        pg = store.dialect_name == "postgresql"
        first = _add(store, "first", 1, _manifest(
            [("/w/shared", d["shared"]), ("/w/first", d["first"]), ("/w/never", never)]))
        second = _add(store, "second", 2, _manifest(
            [("/w/same", d["shared"]), ("/w/second", d["second"])]))
        stored = _blobs(store)
        # one row per digest (shared is named twice); never is not stored
        assert stored == (sorted(d.values()) if pg else [])

        # host B: an empty file archive of its own
        monkeypatch.setenv("XDG_DATA_HOME", str(host_b))
        contents = Journal(store).apparatus_content()
        assert contents.local.root == host_b / "shournal" / "archive"
        if pg:
            assert contents.get(d["first"]) == content["first"]
            assert contents.unreadable([*d.values(), never]) == [never]
        else:
            with pytest.raises(ArchiveError, match="not readable"):
                contents.get(d["first"])
            assert sorted(contents.unreadable([*d.values(), never])) == sorted(
                [*d.values(), never])
        with pytest.raises(ArchiveError, match="not readable"):
            contents.get(never)

        # back on host A: its file archive serves whatever the table lacks
        monkeypatch.setenv("XDG_DATA_HOME", str(host_a))
        contents = Journal(store).apparatus_content()
        assert contents.get(d["first"]) == content["first"]
        assert contents.unreadable([*d.values(), never]) == [never]

        # deleting the first command frees what only it named
        plan = plan_delete(store, parse_criteria(command_id=[first]))
        assert plan.archive_blobs == 1  # "first": one blob, wherever its copies are
        result = delete_commands(store, parse_criteria(command_id=[first]))
        assert result.commands == 1
        assert result.archive_blobs == 1
        if pg:
            assert result.collected["apparatus_blob"] == 1
            assert _blobs(store) == sorted([d["shared"], d["second"]])
        else:
            assert "apparatus_blob" not in result.collected
        assert not arc_a.has(d["first"]) and arc_a.has(d["shared"])
        delete_commands(store, parse_criteria(command_id=[second]))
        assert _blobs(store) == []


def test_a_damaged_row_is_not_served(pg_fresh_url: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "a"))
    arc = Archive(tmp_path / "a" / "shournal" / "archive")
    digest = arc.put(b"the content\n" * 10)[0]
    with Store(pg_fresh_url) as store:
        _add(store, "one", 1, _manifest([("/w/f", digest)]))
        with store.writing() as conn:
            conn.execute(text("UPDATE apparatus_blob SET data = :d"), {"d": b"Rother content"})
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "b"))
        contents = Journal(store).apparatus_content()
        with pytest.raises(ArchiveError, match="not readable"):
            contents.get(digest)
