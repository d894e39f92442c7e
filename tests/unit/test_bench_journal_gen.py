"""The benchmark's synthetic journal (bench/journal_gen.py) must stay a
journal that shournal reads: its bulk rows bypass the store's API, so a
schema change that the generator misses would make bench/query_perf.py
measure nonsense.  A small journal is generated and queried for real."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import journal_gen  # noqa: E402

from shournal.journal import Journal


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    db = tmp_path_factory.mktemp("gen") / "journal.sqlite"
    meta = journal_gen.ensure_journal(
        db, commands=400, events=4000, seed=7, probes=12, log=lambda _: None
    )
    return db, meta


def test_counts_are_exact(small: tuple[Path, dict]) -> None:
    db, meta = small
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM command").fetchone()[0] == 400
    events = sum(
        con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("write_event", "read_event")
    )
    assert events == 4000
    # Each read file version once, however many commands read it.
    read_files = con.execute("SELECT count(*) FROM read_file").fetchone()[0]
    assert read_files == meta["read_files"] < meta["reads"]
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    assert meta["commands"] == 400 and meta["file_events"] == 4000


def test_probes_found_by_library_and_cli(small: tuple[Path, dict]) -> None:
    db, meta = small
    assert len(meta["probes"]) >= 12
    assert journal_gen.validate(db, meta, samples=4) == []


def test_history_in_time_order(small: tuple[Path, dict]) -> None:
    db, _ = small
    with Journal.open(f"sqlite:///{db}", create=False) as store:
        last = store.find(history=5)
    con = sqlite3.connect(db)
    expected = [
        r[0]
        for r in con.execute("SELECT id FROM command ORDER BY start_time DESC, id DESC LIMIT 5")
    ]
    con.close()
    assert [c.id for c in last] == expected[::-1]
    assert all(a.start_time <= b.start_time for a, b in zip(last, last[1:], strict=False))


def test_cached_until_schema_changes(small: tuple[Path, dict], monkeypatch) -> None:
    db, meta = small
    calls: list[str] = []
    same = journal_gen.ensure_journal(db, 400, 4000, 7, 12, log=calls.append)
    assert calls == [] and same["seconds"] == meta["seconds"]
    monkeypatch.setattr(journal_gen, "schema_fingerprint", lambda: "changed")
    journal_gen.ensure_journal(db, 400, 4000, 7, 12, log=calls.append)
    assert calls and "generating" in calls[0]
