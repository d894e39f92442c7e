"""Samples for the `shournal import` tests: an atuin history.db built with
atuin's own migrations (tests/data/atuin-history-schema), and a hishtory
JSON lines export."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
ATUIN_SCHEMA = DATA / "atuin-history-schema"
ORIGINAL_V2_2 = DATA / "original-shournal-v2.2"

# (id, timestamp ns, duration ns, exit, command, cwd, session, hostname, deleted_at)
ATUIN_ROWS = [
    ("0190e0a1b2c37d4e8f90a1b2c3d4e5f6", 1_700_000_000_123_456_789, 2_500_000_000, 0,
     "make figures", "/home/ada/paper", "0190e0a0f00d7a1b8c2d3e4f5a6b7c8d", "lab1:ada", None),
    ("0190e0a1b2c37d4e8f90a1b2c3d4e5f7", 1_700_000_100_000_000_000, 1_000_000, 2,
     "ls /nonexistent", "/home/ada", "0190e0a0f00d7a1b8c2d3e4f5a6b7c8d", "lab1:ada", None),
    ("0190e0a1b2c37d4e8f90a1b2c3d4e5f8", 1_700_000_200_000_000_000, 5_000_000, 0,
     "export TOKEN=deleted", "/home/ada", "0190e0a0f00d7a1b8c2d3e4f5a6b7c8d", "lab1:ada",
     1_700_000_300_000_000_000),
    ("0190e0a1b2c37d4e8f90a1b2c3d4e5f9", 1_700_000_400_000_000_000, -1, -1,
     "echo 你好", "/srv", "not-a-uuid", "laptop:bob", None),
]


def make_atuin_db(path: Path, rows: list[tuple[object, ...]] = ATUIN_ROWS) -> Path:
    conn = sqlite3.connect(path)
    try:
        for migration in sorted(ATUIN_SCHEMA.glob("*.sql")):
            conn.executescript(migration.read_text())
        conn.executemany(
            "INSERT INTO history (id, timestamp, duration, exit, command, cwd, session, "
            "hostname, deleted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.commit()
    finally:
        conn.close()
    return path


HISHTORY_ENTRIES = [
    {"local_username": "ada", "hostname": "lab1", "command": "python3 analyze.py data.csv",
     "current_working_directory": "~/paper", "home_directory": "/home/ada", "exit_code": 0,
     "start_time": "2024-03-01T10:00:00.123456789+01:00",
     "end_time": "2024-03-01T10:00:05.5+01:00", "custom_columns": None},
    {"local_username": "ada", "hostname": "lab1", "command": "false",
     "current_working_directory": "/tmp", "home_directory": "/home/ada", "exit_code": 1,
     "start_time": "2024-03-01T09:00:00Z", "end_time": "2024-03-01T09:00:00.001Z",
     "custom_columns": []},
]


def make_hishtory_export(path: Path, entries: list[dict[str, object]] = HISHTORY_ENTRIES) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path
