"""Pool the runs of several result files of one workload and summarize
them as one run of all their repetitions.

Cold copies of 14 s scatter by +-1.5 s and warm builds of 55 s by +-10%
between repetitions, so a target of 2-3 points needs more repetitions
than one benchmark run of reasonable length gives.  Runs of the same code
made at different times can be pooled: every repetition keeps its own
plain, full and floor runs (the ratios and the paired gap are taken inside
a repetition), only the repetition numbers are made unique.

    .venv/bin/python bench/pool.py bench/results/copy_tree-A.json \\
        bench/results/copy_tree-B.json --cache cold

Needs no root and runs nothing; prints the same table as the workload
scripts (and --json writes the pooled summaries).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as c  # noqa: E402


def pooled_runs(files: list[Path]) -> list[dict]:
    runs: list[dict] = []
    offset = 0
    for f in files:
        data = json.loads(f.read_text())
        reps = [r for r in data["runs"] if r.get("rep", -1) >= 0]
        for r in reps:
            runs.append({**r, "rep": r["rep"] + offset})
        offset += max((r["rep"] for r in reps), default=-1) + 1
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("files", nargs="+", type=Path, help="result files of one workload")
    p.add_argument("--cache", default="cold,warm", help="cache modes to summarize")
    p.add_argument("--json", type=Path, help="write the pooled summaries here")
    args = p.parse_args(argv)
    names = {json.loads(f.read_text()).get("benchmark") for f in args.files}
    if len(names) != 1:
        p.error(f"the files are of different workloads: {sorted(map(str, names))}")
    runs = pooled_runs(args.files)
    summaries = [
        c.summarize(runs, cache)
        for cache in args.cache.split(",")
        if any(r["cache"] == cache for r in runs)
    ]
    c.print_table(f"{names.pop()}: {len(args.files)} result files pooled", summaries)
    if args.json:
        args.json.write_text(json.dumps({"files": [str(f) for f in args.files],
                                         "summaries": summaries}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
