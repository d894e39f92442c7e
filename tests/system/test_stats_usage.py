"""`shournal stats`' usage sections on both engines (the `store` fixture):
files produced and consumed per bucket, biggest writers, most reused
inputs, most used programs; --period through the CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from synthetic import record
from typer.testing import CliRunner

from shournal.cli import app
from shournal.journal import Journal
from shournal.record import FileEvent
from shournal.store import Store

S = 10**9


def ev(path: bytes, size: int) -> FileEvent:
    return FileEvent(path=path, size=size, mtime_ns=1, mode=0o100644, hash=size + 1)


def _fill(s: Store, now: int) -> list[int]:
    return [
        s.add_command(record("python3 gen.py", start_ns=now - 3 * 86400 * S,
                             writes=[ev(b"/d/a.csv", 100), ev(b"/d/b.csv", 200)],
                             reads=[ev(b"/d/params.yaml", 5)])),
        s.add_command(record("./plot.sh a.csv", start_ns=now - 60 * S,
                             writes=[ev(b"/d/fig.png", 5000)],
                             reads=[ev(b"/d/a.csv", 100), ev(b"/d/params.yaml", 5)])),
        # another version of params.yaml: still the same input
        s.add_command(record("  /usr/bin/python3\tx.py", start_ns=now - 30 * S,
                             reads=[ev(b"/d/params.yaml", 6)])),
        s.add_command(record("python3 gen.py", start_ns=now - 20 * S,
                             writes=[ev(b"/d/a.csv", 100)])),
    ]  # fmt: skip


def test_usage_on_both_engines(store: Store) -> None:
    now = time.time_ns()
    ids = _fill(store, now)
    u = Journal(store).usage(top=3, bucket="day")
    assert (u.produced, u.written_bytes, u.consumed) == (3, 5400, 2)
    assert [(e.command_id, e.files, e.bytes) for e in u.writers_by_files] == [
        (ids[0], 2, 300), (ids[1], 1, 5000), (ids[3], 1, 100)]  # fmt: skip
    assert [e.command_id for e in u.writers_by_bytes] == [ids[1], ids[0], ids[3]]
    assert [(e.path, e.commands) for e in u.reused_inputs] == [
        (b"/d/params.yaml", 3), (b"/d/a.csv", 1)]  # fmt: skip
    assert [(e.program, e.commands) for e in u.programs] == [("python3", 3), ("plot.sh", 1)]
    assert sum(b.commands for b in u.series) == 4
    assert sum(b.written for b in u.series) == 4 and sum(b.read for b in u.series) == 4
    assert len(u.series) >= 2  # three days apart
    # a scope: the last hour only
    recent = Journal(store).usage(since="1h", top=3)
    assert (recent.produced, recent.consumed) == (2, 2)
    assert [e.command_id for e in recent.writers_by_files] == [ids[1], ids[3]]


def test_stats_period_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'j.sqlite'}"
    monkeypatch.setenv("SHOURNAL_DB_URL", url)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    now = time.time_ns()
    with Store(url) as s:
        _fill(s, now)
    res = CliRunner().invoke(app, ["stats", "--period", "today", "--output-format", "json"])
    assert res.exit_code == 0, res.stderr
    usage = json.loads(res.stdout)["usage"]
    assert usage["bucket"] == "hour"
    assert sum(b["commands"] for b in usage["series"]) == 3
    res = CliRunner().invoke(app, ["stats", "--period", "year"])
    assert res.exit_code == 0 and res.stdout.startswith("Files produced: ")
    assert "Most reused inputs" in res.stdout and "Most used programs" in res.stdout
    for bad in (["--period", "fortnight"], ["--period", "today", "--since", "1d"]):
        res = CliRunner().invoke(app, ["stats", *bad])
        assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
