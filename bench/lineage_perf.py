"""Lineage performance: a lineage 50 commands deep over the synthetic
journal of bench/journal_gen.py (default 1 million commands, 10 million
file events).

A chain of ``--depth`` commands is added to a copy of the cached journal
(``<db>.lineage.sqlite``, made once per journal and chain) through the
real store writer, as a day of analysis would be: each step runs the same
archived script (``step.sh``), reads the previous step's output and its
own parameter file, and writes the next output; the first reads a raw
download.  The last output exists on disk with its real partial hash, so
the target is probed exactly as ``shournal lineage FILE`` probes it.

Measured, warm page cache, on an open journal: ``build_lineage`` of that
file (library time, wall clock and the process's CPU time; a fresh reader
each time so no command is cached), median and p95 over ``--reps``; the
number of SQL statements one walk runs and, with ``--plans``, SQLite's plan
of each (no full scan of the event, file or command tables).  Target
(issue 16): <= 200 ms for 50 commands over 1 M commands / 10 M events.

    nice .venv/bin/python bench/lineage_perf.py                    # 1M / 10M
    nice .venv/bin/python bench/lineage_perf.py --commands 100000 --events 1000000 \\
        --db /var/tmp/shournal-bench/journal-100k.sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

import journal_gen  # noqa: E402

from shournal import Journal  # noqa: E402
from shournal.hashing import partial_xxh64_bytes  # noqa: E402
from shournal.provenance.graph import DiskTarget, build_lineage  # noqa: E402
from shournal.provenance.readers import JournalReader  # noqa: E402
from shournal.record import CommandRecord, FileEvent  # noqa: E402

TARGET_MS = 200
CHAIN_MARK = "lineage-bench-step"
SECOND = 10**9


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def summary(values: list[float]) -> dict[str, Any]:
    values = sorted(values)
    p95 = statistics.quantiles(values, n=20, method="inclusive")[18] if len(values) > 1 \
        else values[0]  # fmt: skip
    return {"n": len(values), "median": statistics.median(values), "p95": p95,
            "min": values[0], "max": values[-1]}  # fmt: skip


def add_chain(journal: Journal, work: Path, depth: int, seed: int) -> Path:
    """``depth`` commands, each reading the one before's output; returns
    the last output (written to disk)."""
    rng = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    last = journal.find(history=1)
    start = (int(last[0].end_time.timestamp()) + 3600) * SECOND if last else 0

    def version(name: str, data: bytes, mtime: int) -> FileEvent:
        return FileEvent(
            path=os.fsencode(work / name), size=len(data), mtime_ns=mtime, mode=0o100644,
            hash=partial_xxh64_bytes(data), content=data if name.endswith(".sh") else None,
        )  # fmt: skip

    script = version("step.sh", b"#!/bin/sh\nsort -k2 \"$1\" | awk -f \"$2\" > \"$3\"\n", start)
    prev = version("raw.tsv", rng.randbytes(50_000), start)
    data = b""
    for i in range(depth):
        t = start + (i + 1) * 60 * SECOND
        params = version(f"params{i}.awk", rng.randbytes(300), t - 30 * SECOND)
        data = rng.randbytes(40_000 + i)
        out = version(f"out{i}.tsv", data, t + SECOND)
        journal.add(CommandRecord(
            text=f"sh step.sh {os.fsdecode(prev.path)} params{i}.awk out{i}.tsv # {CHAIN_MARK}",
            return_value=0, start_ns=t, end_ns=t + SECOND, working_dir=str(work),
            username="alice", hostname="ws-alice", session_uuid=bytes(16),
            hash_chunk_size=journal_gen.CHUNK_SIZE, hash_max_reads=journal_gen.MAX_READS,
            reads=[script, prev, params], writes=[out],
        ))  # fmt: skip
        prev = out
    target = Path(os.fsdecode(prev.path))
    target.write_bytes(data)
    os.utime(target, ns=(prev.mtime_ns, prev.mtime_ns))
    return target


def lineage_journal(db: Path, depth: int, seed: int) -> tuple[Path, Path]:
    """The copy of ``db`` with the chain, and the chain's target on disk."""
    copy = Path(f"{db}.lineage.sqlite")
    stamp = Path(f"{copy}.json")
    work = Path(f"{db}.lineage-work")
    want = {"source_mtime_ns": db.stat().st_mtime_ns, "depth": depth, "seed": seed}
    try:
        fresh = json.loads(stamp.read_text()) == want and copy.exists()
    except (OSError, ValueError):
        fresh = False
    target = work / f"out{depth - 1}.tsv"
    if fresh and target.exists():
        return copy, target
    log(f"copying {db} to {copy} and adding a chain of {depth} commands")
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(db, copy)
    with Journal.open(f"sqlite:///{copy}") as journal:
        target = add_chain(journal, work, depth, seed)
    stamp.write_text(json.dumps(want) + "\n")
    return copy, target


def measure(copy: Path, target: Path, reps: int, depth: int, plans: bool) -> dict[str, Any]:
    with Journal.open(f"sqlite:///{copy}") as journal:
        statements: list[str] = []
        capture = [False]

        def _seen(statement: str) -> None:
            if capture[0]:
                statements.append(statement)

        # The journal reads a SQLite file through its own sqlite3
        # connection; each statement as run, its values in place.
        journal._source._conn.set_trace_callback(_seen)  # type: ignore[attr-defined]
        journal.hash_settings()
        times, cpu = [], []
        for rep in range(reps + 1):
            capture[0] = rep == 0
            t0, c0 = time.perf_counter(), time.process_time()
            lin = build_lineage(JournalReader(journal), [DiskTarget(str(target))])
            elapsed, used = time.perf_counter() - t0, time.process_time() - c0
            if len(lin.commands) != depth:
                raise SystemExit(f"lineage has {len(lin.commands)} commands, expected {depth}")
            if rep:  # the first walk warms the page cache
                times.append(elapsed)
                cpu.append(used)
    selects = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH"))]
    if not selects:
        raise SystemExit("no statement of the walk was seen: the count would be wrong")
    out: dict[str, Any] = {
        "lineage_s": summary(times),
        "lineage_cpu_s": summary(cpu),
        "commands": depth,
        "files": len(lin.files),
        "statements_per_walk": len(selects),
    }
    if plans:
        con = sqlite3.connect(copy)
        found = []
        for sql in selects:
            rows = con.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
            found.append({"sql": " ".join(sql.split())[:300], "plan": [r[3] for r in rows]})
        con.close()
        out["plans"] = found
        big = ("command", "write_event", "read_event", "read_file")
        out["full_scans"] = sorted({
            step for p in found for step in p["plan"]
            if step.startswith("SCAN ") and step.split()[1] in big
        })  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    journal_gen.journal_args(p)
    p.add_argument("--depth", type=int, default=50, help="commands in the lineage")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--plans", action="store_true", help="EXPLAIN QUERY PLAN of each statement")
    p.add_argument("--nice", type=int, default=10,
                   help="niceness (the machine is shared; 0 for the library's own time)")
    p.add_argument("--results", type=Path, default=BENCH_DIR / "results" / "lineage_perf.json")
    args = p.parse_args(argv)
    os.nice(args.nice)
    meta = journal_gen.ensure_journal(args.db, args.commands, args.events, args.seed, log=log)
    copy, target = lineage_journal(args.db, args.depth, args.seed)
    result = measure(copy, target, args.reps, args.depth, args.plans)
    result["journal"] = {k: meta[k] for k in ("commands", "file_events") if k in meta}
    result["argv"] = sys.argv[1:] if argv is None else argv
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(result, indent=1) + "\n")
    lin, cpu = result["lineage_s"], result["lineage_cpu_s"]
    print(
        f"lineage of {args.depth} commands over {result['journal']}: "
        f"median {lin['median'] * 1000:.1f} ms, p95 {lin['p95'] * 1000:.1f} ms "
        f"(CPU median {cpu['median'] * 1000:.1f} ms, p95 {cpu['p95'] * 1000:.1f} ms; "
        f"target {TARGET_MS} ms); {result['statements_per_walk']} SELECTs per walk"
        + (f"; full scans: {result['full_scans'] or 'none'}" if args.plans else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
