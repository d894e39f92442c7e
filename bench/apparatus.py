"""Price of recording a command with its apparatus (shournal.reproduce).

Two figures, on a small Python analysis (a script reading a CSV and a
config, writing a result; the interpreter, its modules and libraries are
read too):

* archive bytes after 1 and after 10 unchanged apparatus records (blobs
  in the archive, and the manifests in the journal): deduplication means
  10 repeats should store <= 1.1x the bytes of one;
* wall time of `shournal run --apparatus -- CMD` once its content is
  archived (a repeated record) vs `shournal run -- CMD`, the two
  alternating in random order, median over --reps pairs (target: <= +10%).
  This is the whole `shournal run`: set-up, the command, the listener
  storing it (run waits for it), which is where the apparatus work is;
* replay start-up: wall time of `shournal replay ID -o OUTDIR` (loading
  the experiment, materialising the archived inputs, bubblewrap, the
  verdicts) minus that of the bare command run the same way (runuser,
  no shournal), medians over --replay-reps.  `--replay-only` measures
  just this (after one apparatus record).

Runs as an unprivileged user (`--user`, default shournal-bench) through
runuser; needs root.  The shournal to use: `--cli` (default
$SHOURNAL_BIN or /usr/local/bin/shournal); SHOURNAL_SUID_PATH,
SHOURNAL_LISTENER and PYTHONPATH are passed on when set (a development
build: a setuid copy of the helper, the work tree's listener).

    .venv/bin/python bench/apparatus.py --reps 15
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    as_user,
    bench_home,
    children_cpu,
    cli_args,
    ensure_user,
    report_result,
    timed,
)

ANALYSIS = """\
import configparser, csv, json, statistics, sys
cfg = configparser.ConfigParser()
cfg.read(sys.argv[2])
scale = float(cfg["analysis"]["scale"])
with open(sys.argv[1]) as fh:
    values = [float(r["value"]) * scale for r in csv.DictReader(fh)]
with open("results.json", "w") as out:
    json.dump({"n": len(values), "mean": statistics.fmean(values)}, out)
"""
COMMAND = ["python3", "analysis.py", "data.csv", "config.ini"]
_CPU: list[float] = []  # CPU seconds (user + sys) of each run, descendants included


def _run(cli: str, home: Path, user: str, *opts: str) -> float:
    """Wall seconds of one `shournal run`; its CPU seconds (the command,
    helper, holder and listener: each is waited for by its parent) go to
    _CPU.  CPU is the steadier figure on a loaded machine."""
    cpu = children_cpu()
    elapsed, _ = timed([*as_user(user, home), cli, "run", *opts, "--", *COMMAND], home / "work")
    _CPU.append(children_cpu() - cpu)
    return elapsed


def _replay_figures(cli: str, home: Path, user: str, reps: int) -> dict[str, float]:
    db = home / ".local/share/shournal/journal.sqlite"
    with sqlite3.connect(db) as conn:
        cid = int(conn.execute("SELECT max(command_id) FROM apparatus").fetchone()[0])
    base = as_user(user, home)
    replay, bare = [], []
    for i in range(reps):
        out = home / f"replay-{i}"
        replay.append(timed([*base, cli, "replay", str(cid), "-o", str(out)], home / "work")[0])
        bare.append(timed([*base, *COMMAND], home / "work")[0])
    r, b = statistics.median(replay), statistics.median(bare)
    return {"median_replay_s": r, "median_bare_command_s": b, "replay_startup_s": r - b,
            "replay_reps": reps}


def _archive_bytes(home: Path) -> int:
    blobs = home / ".local/share/shournal/archive/blobs"
    return sum(p.stat().st_size for p in blobs.rglob("*") if p.is_file())


def _manifest_bytes(home: Path) -> int:
    db = home / ".local/share/shournal/journal.sqlite"
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT coalesce(sum(length(manifest)), 0) FROM apparatus")
                   .fetchone()[0])


def _fresh_home(uid: int, gid: int) -> Path:
    rows = "".join(f"r{i},{i * 0.5}\n" for i in range(2000))
    files = {
        "work/analysis.py": ANALYSIS,
        "work/config.ini": "[analysis]\nscale = 2\n",
        "work/data.csv": "name,value\n" + rows,
    }
    return bench_home("shournal-bench-apparatus-", uid, gid, files=files)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli_args(p, reps=15)
    p.add_argument("--replay-reps", type=int, default=7)
    p.add_argument("--replay-only", action="store_true")
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (runuser)")
    user = ensure_user(args.user)
    home = _fresh_home(user.uid, user.gid)
    if args.replay_only:
        try:
            _run(args.cli, home, args.user, "--apparatus")
            figures = _replay_figures(args.cli, home, args.user, args.replay_reps)
        finally:
            subprocess.run(["rm", "-rf", str(home)], check=False)
        report_result(args, "apparatus-replay", figures)
        return 0
    try:
        _run(args.cli, home, args.user, "--apparatus")
        one = (_archive_bytes(home), _manifest_bytes(home))
        for _ in range(9):
            _run(args.cli, home, args.user, "--apparatus")
        ten = (_archive_bytes(home), _manifest_bytes(home))
        _run(args.cli, home, args.user)  # warm-up of the plain variant
        times: dict[str, list[float]] = {"plain_record": [], "apparatus_record": []}
        cpu: dict[str, list[float]] = {"plain_record": [], "apparatus_record": []}
        ratios, cpu_ratios = [], []
        for _ in range(args.reps):
            pair, pair_cpu = {}, {}
            order = ["plain_record", "apparatus_record"]
            random.shuffle(order)
            for v in order:
                opts = ("--apparatus",) if v == "apparatus_record" else ()
                pair[v] = _run(args.cli, home, args.user, *opts)
                pair_cpu[v] = _CPU[-1]
                times[v].append(pair[v])
                cpu[v].append(pair_cpu[v])
            ratios.append(pair["apparatus_record"] / pair["plain_record"])
            cpu_ratios.append(pair_cpu["apparatus_record"] / pair_cpu["plain_record"])
        replay = _replay_figures(args.cli, home, args.user, args.replay_reps)
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)
    result = {
        "archive_bytes_1_run": one[0], "manifest_bytes_1_run": one[1],
        "archive_bytes_10_runs": ten[0], "manifest_bytes_10_runs": ten[1],
        "bytes_ratio_10_vs_1": (ten[0] + ten[1]) / (one[0] + one[1]),
        "median_s": {k: statistics.median(v) for k, v in times.items()},
        "median_ratio_apparatus_vs_plain": statistics.median(ratios),
        "median_cpu_s": {k: statistics.median(v) for k, v in cpu.items()},
        "median_cpu_ratio_apparatus_vs_plain": statistics.median(cpu_ratios),
        **replay,
        "loadavg": os.getloadavg(),
        "reps": args.reps,
    }
    report_result(args, "apparatus", result, times=times, cpu=cpu, ratios=ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
