"""Journal.open(read_only=True, create=True), what every CLI reader opens: SQLite ``mode=ro``,
nothing on disk changed, an older schema upgraded only when writable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import select, text
from synthetic import record

from shournal.errors import StoreError
from shournal.journal import Journal
from shournal.store import Store
from shournal.store import models as m
from shournal.store.migrations import SCHEMA_VERSION


def test_a_read_only_store_reads_and_never_writes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    with Journal.open(url, create=True) as s:
        s.add(record("echo kept"))
    before = (tmp_path / "journal.sqlite").read_bytes()
    with Journal.open(url, create=False, read_only=True) as s:
        assert [c.text for c in s.find()] == ["echo kept"]
        with pytest.raises(StoreError, match="readonly"):
            s.add(record("echo new"))
    assert (tmp_path / "journal.sqlite").read_bytes() == before


def test_an_older_writable_journal_is_still_upgraded_by_a_reader(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    with Store(url) as s:
        s.add_command(record("old"))
        with s.writing() as conn:
            conn.execute(text("ALTER TABLE command DROP COLUMN incomplete"))
            conn.execute(m.SchemaVersion.__table__.update().values(version=6))
    assert os.access(tmp_path / "journal.sqlite", os.W_OK)
    with Store(url, create=False, read_only=True) as s:
        assert [c.text for c in Journal(s).find()] == ["old"]
        with s.reading() as conn:
            assert conn.execute(select(m.SchemaVersion.version)).scalar_one() == SCHEMA_VERSION
