"""Storage: journal bytes per stored file event, on workload 1.

Runs the monitored `cp -a` of the linux-source-6.1 tree (warm cache) into a
fresh SQLite journal, then a second copy (to another destination) into
the same journal.  Reported: the journal's size (journal.sqlite plus any
-wal, after a checkpoint) divided by the stored file events after the
first command, the growth per event of the second command (directories
are deduplicated, so a new command in known directories is cheaper per
event), and the size of each table and index (SQLite's dbstat).

Target (issue): at most 100 bytes per file event.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as c  # noqa: E402
import copy_tree  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--user", default=c.DEFAULT_USER)
    p.add_argument("--nofile", type=int, default=None, help="soft RLIMIT_NOFILE (see README)")
    p.add_argument("--no-reads", action="store_true", help="store only the writes")
    p.add_argument("--workspace", choices=("loop", "dir"), default="loop")
    c.results_args(p)
    args = p.parse_args(argv)
    t_start = time.time()
    user, work = c.bench_user(args)
    tree = copy_tree.ensure_tree(work, user)
    nfiles = copy_tree.count_files(tree)
    read_includes = ["$HOME"] if args.no_reads else ["$HOME", str(tree)]
    bench = c.Bench(user, work, "storage", read_includes=read_includes, nofile=args.nofile)
    data_home = c.user_dir(bench.state / "data.storage", user, 0o700)
    shutil.rmtree(data_home / "shournal", ignore_errors=True)
    db = data_home / "shournal" / "journal.sqlite"
    env = bench.base_env(data_home)
    steps = []
    for i in (1, 2):
        dst = work / f"storage-dst{i}"
        subprocess.run(["rm", "-rf", str(dst)], check=True)
        c.sync()
        argv = [c.SHOURNAL, "run", "--", "cp", "-a", str(tree), str(dst)]
        t0 = time.perf_counter()
        c.sh(bench.as_user(argv, env, work))
        elapsed = time.perf_counter() - t0
        js = c.journal_stats(db, {f"writes_below_dst{i}": (0, str(dst))})
        js["total_s"] = elapsed
        steps.append(js)
        c.log(f"command {i}: {js['file_events']} events in journal, {js['bytes']} bytes")
        subprocess.run(["rm", "-rf", str(dst)], check=True)
    first, second = steps
    marginal_events = second["file_events"] - first["file_events"]
    marginal = (second["bytes"] - first["bytes"]) / marginal_events if marginal_events else None
    ok = (
        second["commands"] == 2
        and second["lost_events"] == 0
        and second["dropped_writes"] == 0
        and second["dropped_reads"] == 0
        and first["writes_below_dst1"] == nfiles
        and second["writes_below_dst2"] == nfiles
    )
    print(f"\n== storage: `shournal run -- cp -a` of {nfiles} files "
          f"({'writes only' if args.no_reads else 'writes + reads'} stored) ==")
    print(f"{'':34} {'events':>8} {'bytes':>11} {'B/event':>8}")
    print(f"{'journal after command 1':34} {first['file_events']:>8} {first['bytes']:>11} "
          f"{first['bytes_per_event']:>8.1f}")
    print(f"{'journal after command 2':34} {second['file_events']:>8} {second['bytes']:>11} "
          f"{second['bytes_per_event']:>8.1f}")
    print(f"{'growth by command 2':34} {marginal_events:>8} "
          f"{second['bytes'] - first['bytes']:>11} {marginal:>8.1f}")
    print("size by table/index after command 1 (dbstat), bytes per event:")
    for name, size in first.get("bytes_by_object", {}).items():
        print(f"  {name:40} {size:>10} {size / first['file_events']:>7.1f}")
    print(f"complete and nothing lost: {ok}; lost {second['lost_events']}, dropped "
          f"{second['dropped_writes']}+{second['dropped_reads']}")
    print("target: <= 100 bytes per file event")
    c.write_run(args, "storage", t_start, {
        "files": nfiles,
        "reads_stored": not args.no_reads,
        "after_first": first,
        "after_second": second,
        "bytes_per_event_first": first["bytes_per_event"],
        "bytes_per_event_marginal": marginal,
        "complete": ok,
    })
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
