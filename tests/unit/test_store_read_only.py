"""Store(read_only=True), what every CLI reader opens: SQLite ``mode=ro``,
nothing on disk changed, an older schema upgraded only when writable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import select, text
from synthetic import record

from shournal.query.find import find_commands
from shournal.store import Store, StoreError
from shournal.store import models as m
from shournal.store.migrations import SCHEMA_VERSION


def test_a_read_only_store_reads_and_never_writes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    with Store(url) as s:
        s.add_command(record("echo kept"))
    before = (tmp_path / "journal.sqlite").read_bytes()
    with Store(url, create=False, read_only=True) as s:
        assert [c.text for c in find_commands(s)] == ["echo kept"]
        with pytest.raises(StoreError, match="readonly"):
            s.add_command(record("echo new"))
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
        assert [c.text for c in find_commands(s)] == ["old"]
        with s.reading() as conn:
            assert conn.execute(select(m.SchemaVersion.version)).scalar_one() == SCHEMA_VERSION
