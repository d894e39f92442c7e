"""The atuin importer (shournal.importers.atuin) on a history.db built with
atuin's own migrations (tests/import_samples.py)."""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest
from import_samples import ATUIN_ROWS, make_atuin_db

from shournal.data import RETURN_VALUE_UNKNOWN
from shournal.importers import ImportFailed, identity, read_history


def test_rows_become_records(tmp_path: Path) -> None:
    records = read_history("atuin", make_atuin_db(tmp_path / "history.db")).records
    # the deleted row is skipped
    assert [r.text for r in records] == ["make figures", "ls /nonexistent", "echo 你好"]
    first, failed, other = records
    assert first.start_ns == 1_700_000_000_123_456_789
    assert first.end_ns - first.start_ns == 2_500_000_000
    assert (first.hostname, first.username, first.working_dir) == ("lab1", "ada", "/home/ada/paper")
    assert first.session_uuid == uuid.UUID("0190e0a0f00d7a1b8c2d3e4f5a6b7c8d").bytes
    assert failed.return_value == 2 and failed.session_uuid == first.session_uuid
    # -1: unknown exit status and duration
    assert other.return_value == RETURN_VALUE_UNKNOWN and other.end_ns == other.start_ns
    assert (other.hostname, other.username) == ("laptop", "bob")
    assert other.session_uuid is not None and len(other.session_uuid) == 16
    assert first.import_key == identity.key("atuin", ATUIN_ROWS[0][0])
    assert {r.imported_from for r in records} == {"atuin"}


def test_a_truncated_database_is_refused(tmp_path: Path) -> None:
    db = make_atuin_db(tmp_path / "history.db")
    data = db.read_bytes()
    cut = tmp_path / "cut.db"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ImportFailed, match=f"^{cut}: damaged an atuin history database"):
        read_history("atuin", cut)


def test_another_database_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE history (id TEXT, command TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(ImportFailed, match="not an atuin history database: no table history"):
        read_history("atuin", other)


def test_a_text_file_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "history.db"
    text.write_text("ls\n")
    with pytest.raises(ImportFailed, match="not a SQLite database"):
        read_history("atuin", text)


def test_the_database_is_not_changed(tmp_path: Path) -> None:
    db = make_atuin_db(tmp_path / "history.db")
    copy = shutil.copy(db, tmp_path / "copy.db")
    read_history("atuin", db)
    assert db.read_bytes() == Path(copy).read_bytes()
