"""Queries on a shared lab store of 1 million commands and 10 million file
events on PostgreSQL, and its bytes per event beside SQLite's.

The journal is bench/journal_gen.py's (the one bench/query_perf.py and
bench/lineage_perf.py measure on SQLite; cached), loaded into a lab store
(bench/lab_pg.py: `shournal server init` / `add-user` plans, users alice
and bob in role lab) with COPY as the superuser, every row owned by alice
(foreign-key triggers off during the load: the rows come from a consistent
journal), then VACUUM ANALYZE.  Then, through the real store writer as
alice: ``[store] share_with = ["lab"]`` applied, and the lineage chain of
bench/lineage_perf.py (--depth commands, its last output on disk).

Measured, warm caches, through the library on an open journal, for two
readers in alternation -- alice (her own rows) and bob (a colleague who
reads them because she shares with lab: the row-level-security policy's
sharing branch is evaluated for every row):

* ``--wfile`` of the generator's probe files (``Journal.find``, at most 10
  files per command loaded, as `shournal query` does);
* ``build_lineage`` of the chain's last output, a fresh reader each time;

median and p95 over --reps of each; then, once, the statements of one of
each run again under EXPLAIN ANALYZE: their number and the server's
planning and execution time (the rest is the client and the round trips).
Targets (issue 29, as on SQLite): --wfile <= 50 ms, a 50-step lineage <= 200 ms.  Sizes: the sum of
pg_total_relation_size (heap, TOAST, indexes) over the tables, per event;
the SQLite file of the same journal per event beside it.  The server runs
with PostgreSQL's default memory settings (shared_buffers 128 MB), without
fsync (nothing here is durable work).

    nice .venv/bin/python bench/lab_query.py                         # 1M / 10M
    .venv/bin/python bench/lab_query.py --commands 100000 --events 1000000 \\
        --db /var/tmp/shournal-bench/journal-100k.sqlite --tag 100k
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

import journal_gen  # noqa: E402
import lab_pg  # noqa: E402
from lineage_perf import add_chain  # noqa: E402
from query_perf import HUMAN_MAX_FILES, journal_size, summary  # noqa: E402

from shournal import Journal  # noqa: E402
from shournal.provenance.graph import DiskTarget, build_lineage  # noqa: E402
from shournal.provenance.readers import JournalReader  # noqa: E402
from shournal.store import lab  # noqa: E402

TARGETS = {"wfile_ms": 50, "lineage_ms": 200}
OWNER, COLLEAGUE = "alice", "bob"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def copy_into_lab(db: Path, server: lab_pg.LabServer, owner: str) -> dict[str, Any]:
    """Every row of the SQLite journal into the lab store, owned by
    `owner`; seconds per table."""
    import psycopg

    src = sqlite3.connect(db)
    have = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    took: dict[str, Any] = {}
    with psycopg.connect(host=str(server.socket_dir), user=lab_pg.SUPERUSER,
                         dbname=lab_pg.DATABASE) as dst:  # fmt: skip
        # The journal is consistent: no per-row foreign-key trigger.
        dst.execute("SET session_replication_role = replica")
        for table in lab.data_tables():
            if table not in have or not src.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
                continue
            t = time.perf_counter()
            cols = [r[1] for r in src.execute(f"PRAGMA table_info({table})")]
            times = {i for i, c in enumerate(cols) if c in ("start_time", "end_time")}
            sql = f"COPY {table} (owner, {', '.join(cols)}) FROM STDIN"
            with dst.cursor().copy(sql) as copy:  # type: ignore[arg-type]
                for row in src.execute(f"SELECT {', '.join(cols)} FROM {table}"):
                    if times:
                        row = tuple(v + "+00" if i in times and v is not None else v
                                    for i, v in enumerate(row))  # fmt: skip
                    copy.write_row((owner, *row))
            if "id" in cols:  # ids were copied: move the sequences past them
                dst.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "  # type: ignore[arg-type]
                            f"(SELECT coalesce(max(id), 1) FROM {table}))")  # fmt: skip
            took[table] = time.perf_counter() - t
            log(f"copied {table} in {took[table]:.1f} s")
        dst.commit()
    src.close()
    t = time.perf_counter()
    server.admin("VACUUM ANALYZE")
    took["vacuum_analyze"] = time.perf_counter() - t
    return took


def time_wfile(journal: Journal, probe: dict) -> tuple[float, bool]:
    t = time.perf_counter()
    found = journal.find(wfile=probe["path"], max_files=HUMAN_MAX_FILES)
    return time.perf_counter() - t, probe["command_id"] in {c.id for c in found}


def time_lineage(journal: Journal, target: Path, depth: int) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    lin = build_lineage(JournalReader(journal), [DiskTarget(str(target))])
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    if len(lin.commands) != depth:
        raise SystemExit(f"lineage has {len(lin.commands)} commands, expected {depth}")
    return wall, cpu


def server_side(journal: Journal, target: Path, depth: int, probe: dict) -> dict[str, Any]:
    """The SQL of one lineage walk and one --wfile, each statement run
    again under EXPLAIN ANALYZE: how many, and the server's planning and
    execution time in total (the rest of the wall time is the client's
    CPU and the round trips)."""
    from sqlalchemy import event

    seen: list[tuple[str, Any]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
        seen.append((statement, parameters))

    out: dict[str, Any] = {}
    for what, run in (("lineage", lambda: time_lineage(journal, target, depth)),
                      ("wfile", lambda: time_wfile(journal, probe))):  # fmt: skip
        seen.clear()
        event.listen(journal._store.engine, "before_cursor_execute", capture)
        run()
        event.remove(journal._store.engine, "before_cursor_execute", capture)
        selects = [(q, a) for q, a in seen if q.lstrip().upper().startswith(("SELECT", "WITH"))]
        planning = execution = 0.0
        with journal._store.engine.connect() as conn:
            for sql, params in selects:
                for (line,) in conn.exec_driver_sql("EXPLAIN (ANALYZE) " + sql, params):
                    if line.startswith(("Planning Time", "Execution Time")):
                        ms = float(line.split()[2])
                        if line.startswith("Planning"):
                            planning += ms
                        else:
                            execution += ms
        out[what] = {"statements": len(seen), "selects": len(selects),
                     "planning_ms": planning, "execution_ms": execution}  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    journal_gen.journal_args(p)
    p.add_argument("--probes", type=int, default=200)
    p.add_argument("--depth", type=int, default=50, help="commands in the lineage")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    p.add_argument("--tag", default="")
    args = p.parse_args(argv)
    meta = journal_gen.ensure_journal(args.db, args.commands, args.events, args.seed,
                                      args.probes, log=log)  # fmt: skip
    events, commands = meta["file_events"], meta["commands"]
    probes = [q for q in meta["probes"] if q["kind"] == "write" and q["mtime_matches"]]
    out: dict[str, Any] = {
        "argv": sys.argv[1:] if argv is None else argv,
        "journal": {"commands": commands, "file_events": events},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "loadavg_start": os.getloadavg(),
    }
    out["sqlite"] = journal_size(args.db, events, commands)
    with lab_pg.lab_server([OWNER, COLLEAGUE], durable=False) as server:
        out["server_version"] = server.admin("SHOW server_version")[0][0]
        t = time.perf_counter()
        out["copy_s"] = copy_into_lab(args.db, server, OWNER)
        out["copy_s"]["total"] = time.perf_counter() - t
        sizes = server.data_bytes()
        out["postgresql"] = {
            "bytes": sum(sizes.values()), "bytes_per_event": sum(sizes.values()) / events,
            "bytes_per_event_by_table": {k: v / events for k, v in sizes.items() if v > 8192},
        }  # fmt: skip
        log(f"bytes per event: PostgreSQL {out['postgresql']['bytes_per_event']:.1f}, "
            f"SQLite {out['sqlite']['bytes_per_event']:.1f}")
        with Journal.open(server.url(OWNER)) as journal:
            notes = lab.apply_sharing(journal._store, ["lab"])
            if notes:
                raise SystemExit(f"sharing failed: {notes}")
            work = Path(tempfile.mkdtemp(prefix="shlab-lineage-", dir="/var/tmp"))
            target = add_chain(journal, work, args.depth, args.seed)
        readers = {who: Journal.open(server.url(who)) for who in (OWNER, COLLEAGUE)}
        wfile: dict[str, list[float]] = {who: [] for who in readers}
        misses = dict.fromkeys(readers, 0)
        lineage: dict[str, list[float]] = {who: [] for who in readers}
        lineage_cpu: dict[str, list[float]] = {who: [] for who in readers}
        for journal in readers.values():  # warm-up
            time_wfile(journal, probes[0])
            time_lineage(journal, target, args.depth)
        for rep in range(args.reps):
            probe = probes[rep % len(probes)]
            for who, journal in readers.items():
                t, hit = time_wfile(journal, probe)
                wfile[who].append(t)
                misses[who] += not hit
                wall, cpu = time_lineage(journal, target, args.depth)
                lineage[who].append(wall)
                lineage_cpu[who].append(cpu)
        server_time = {who: server_side(journal, target, args.depth, probes[0])
                       for who, journal in readers.items()}  # fmt: skip
        for journal in readers.values():
            journal.close()
        shutil.rmtree(work, ignore_errors=True)
        out["readers"] = {
            who: {"wfile_s": summary(wfile[who]) | {"misses": misses[who]},
                  "lineage_s": summary(lineage[who]), "lineage_cpu_s": summary(lineage_cpu[who]),
                  "server": server_time[who]}
            for who in readers
        }  # fmt: skip
    out["loadavg_end"] = os.getloadavg()
    for who, r in out["readers"].items():
        log(f"{who}: --wfile median {r['wfile_s']['median'] * 1000:.1f} ms "
            f"(misses {r['wfile_s']['misses']}), lineage of {args.depth} median "
            f"{r['lineage_s']['median'] * 1000:.1f} ms "
            f"(CPU {r['lineage_cpu_s']['median'] * 1000:.1f} ms)")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / f"lab_query{'-' + args.tag if args.tag else ''}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
