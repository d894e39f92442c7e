"""bench/pool.py: runs of several result files summarized as one run.  A
repetition must stay whole (its plain, full and floor runs are compared
with each other), and repetitions of different files must not merge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import pool  # noqa: E402


def result_file(path: Path, benchmark: str, reps: list[tuple[float, float, float]]) -> Path:
    """A result file of `reps` warm repetitions of (plain, full, floor) seconds."""
    runs = [
        {"variant": v, "rep": i, "cache": "warm", "inner_s": t, "total_s": t, "valid": True}
        for i, times in enumerate(reps)
        for v, t in zip(("plain", "full", "floor"), times, strict=True)
    ]
    path.write_text(json.dumps({"benchmark": benchmark, "runs": runs}))
    return path


def test_pooled_repetitions_stay_whole_and_distinct(tmp_path: Path) -> None:
    a = result_file(tmp_path / "a.json", "copy_tree", [(10, 11, 10), (10, 11, 10)])
    b = result_file(tmp_path / "b.json", "copy_tree", [(20, 20, 20), (20, 20, 20), (20, 20, 20)])
    runs = pool.pooled_runs([a, b])
    assert sorted({r["rep"] for r in runs}) == [0, 1, 2, 3, 4]
    out = tmp_path / "pooled.json"
    assert pool.main([str(a), str(b), "--cache", "warm", "--json", str(out)]) == 0
    (s,) = json.loads(out.read_text())["summaries"]
    assert s["reps"] == 5
    # per repetition: +10% twice, 0% three times -> median 0%, paired gaps likewise
    assert sorted(round((r - 1) * 100, 6) for r in s["full_ratios"]) == [0, 0, 0, 10, 10]
    assert s["paired_gap_pp"] == 0


def test_files_of_different_workloads_are_refused(tmp_path: Path) -> None:
    a = result_file(tmp_path / "a.json", "copy_tree", [(10, 11, 10)])
    b = result_file(tmp_path / "b.json", "make_elfutils", [(10, 11, 10)])
    res = subprocess.run([sys.executable, str(BENCH / "pool.py"), str(a), str(b)],
                         capture_output=True, text=True)
    assert res.returncode == 2
    assert "different workloads" in res.stderr
    assert "Traceback" not in res.stderr
