"""The hishtory importer (shournal.importers.hishtory) on a JSON lines
export written as `hishtory export-json` writes it (one object per line,
data.HistoryEntry's JSON names, device_id and entry_id left out)."""

from __future__ import annotations

from pathlib import Path

import pytest
from import_samples import make_hishtory_export

from shournal.importers import ImportFailed, default_path, read_history
from shournal.importers.hishtory import rfc3339_ns


def test_entries_become_records(tmp_path: Path) -> None:
    records = read_history("hishtory", make_hishtory_export(tmp_path / "h.jsonl")).records
    # oldest first
    assert [r.text for r in records] == ["false", "python3 analyze.py data.csv"]
    failed, analyze = records
    assert failed.return_value == 1 and failed.working_dir == "/tmp"
    assert analyze.working_dir == "/home/ada/paper"  # ~ is home_directory
    assert (analyze.hostname, analyze.username) == ("lab1", "ada")
    assert analyze.start_ns == rfc3339_ns("2024-03-01T09:00:00.123456789Z")
    assert analyze.end_ns - analyze.start_ns == 5_376_543_211
    assert {r.imported_from for r in records} == {"hishtory"}
    assert analyze.session_uuid is None


def test_rfc3339() -> None:
    assert rfc3339_ns("1970-01-01T00:00:01.000000001Z") == 1_000_000_001
    assert rfc3339_ns("1970-01-01T01:00:00+01:00") == 0
    assert rfc3339_ns("0001-01-01T00:00:00Z") is None  # Go's zero time
    with pytest.raises(ValueError):
        rfc3339_ns("yesterday")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"#1700000000\nls\n", "line 1: not a hishtory JSON export: not a JSON object"),
        (b'{"command": "ls"}\n', "line 1: not a hishtory JSON export: time None"),
        (b'{"start_time": "2024-03-01T09:00:00Z"}\n', "no command"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_another_format_is_refused(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(data)
    with pytest.raises(ImportFailed, match=reason):
        read_history("hishtory", path)


def test_no_default_path() -> None:
    assert default_path("hishtory") is None
