"""Push throughput into a lab store: --hosts hosts, each with a backlog of
command lines of --events file events in its store daemon's spool, push at
once into one PostgreSQL server (bench/lab_pg.py: a lab store made by the
plans of `shournal server init` / `add-user`, one login role per host,
PostgreSQL's durable defaults).

Each host is a process of its own with its own home, runtime directory and
``SHOURNAL_DB_URL``; its spool is written by the real spool writer
(shournal.capture.spool.Spool.append, in chunks of 50 lines), and drained by
the real store daemon (shournal.capture.daemon.Daemon: its store thread and
``drain()``, as `shournal query` asks it; batches, retries and the store's
writer as they are).  When every host's spool is full and its daemon
built, all start at once; the figure is the wall time from the start to the
last host's end, and the commands per second over all hosts.  Afterwards the
rows are counted on the server (every command once, every event).

Two workloads, in this order, on one server (the second finds the journal
of the first):

* **throughput**: --lines command lines per host (issue 29: 8 x 10,000 of
  10 events);
* **outage**: the backlog of a --outage-second outage at --rate command
  lines per second per host (default 10 minutes at 1 line/s: 600 lines per
  host), drained as the daemon drains it when the server is back.  The
  retry delay before the daemon notices (at most 10 s; `shournal sync` asks
  at once) is not in it.

The machine's load average is recorded before and after each workload.

    .venv/bin/python bench/lab_push.py --hosts 8 --lines 10000 --tag full
    .venv/bin/python bench/lab_push.py --hosts 2 --lines 500 --tag small
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

SECOND = 10**9
_T0 = 1_780_000_000 * SECOND
CHUNK = 50  # lines per Spool.append (one fsync) while filling


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ a host


def records(host: int, first: int, n: int, events: int) -> list[Any]:
    """`n` command lines of a build-like step: a third of the events read
    sources (the same versions again and again, as a build rereads them),
    the rest write new outputs into a few directories."""
    from shournal.record import CommandRecord, FileEvent

    rng = random.Random(host * 1_000_003 + first)
    home = f"/home/h{host}/proj"
    reads = max(1, events // 3)
    out = []
    for k in range(first, first + n):
        t = _T0 + k * SECOND
        rs = [FileEvent(path=f"{home}/src/m{rng.randrange(200)}.c".encode(), size=4000,
                        mtime_ns=_T0, mode=0o100644, hash=rng.randrange(200) + 1)
              for _ in range(reads)]  # fmt: skip
        ws = [FileEvent(path=f"{home}/build/d{k % 20}/o{k}-{j}.o".encode(),
                        size=rng.randrange(1, 100_000), mtime_ns=t + SECOND // 2,
                        mode=0o100644, hash=rng.getrandbits(63))
              for j in range(events - reads)]  # fmt: skip
        out.append(CommandRecord(
            text=f"cc -c src/m{k % 200}.c -o build/d{k % 20}/o{k}.o", return_value=0,
            start_ns=t, end_ns=t + SECOND // 2, working_dir=home, username=f"u{host}",
            hostname=f"host{host}", session_uuid=host.to_bytes(2, "big") * 8,
            hash_chunk_size=256, hash_max_reads=3, reads=rs, writes=ws,
            uuid=rng.randbytes(16),  # as the preload library draws one per line
        ))  # fmt: skip
    return out


def worker(host: int, first: int, lines: int, events: int) -> int:
    """Fill this host's spool, build its daemon, say "ready", wait for "go"
    on stdin, drain; print one JSON line."""
    from shournal import _paths
    from shournal.capture.daemon import Daemon
    from shournal.capture.spool import Spool

    spool = Spool()
    t = time.perf_counter()
    for at in range(0, lines, CHUNK):
        spool.append(records(host, first + at, min(CHUNK, lines - at), events))
    fill_s = time.perf_counter() - t
    spooled = spool.backlog()
    spool.close()
    a, b = socket.socketpair()
    daemon = Daemon(_paths.private_runtime_dir(), a)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    t, c = time.perf_counter(), time.process_time()
    daemon.store_thread.start()
    left = daemon.drain(3600)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    with daemon.lock:
        daemon.stopping = True
        daemon._store_wake.notify_all()
    daemon.store_thread.join(60)
    print(json.dumps({"host": host, "wall_s": wall, "cpu_s": cpu, "left": left,
                      "stored": daemon.stored, "lost": daemon.lost, "error": daemon.error,
                      "fill_s": fill_s, "spool_bytes": spooled}), flush=True)  # fmt: skip
    a.close()
    b.close()
    return 0


# ------------------------------------------------------------------ driver


def host_env(base: Path, host: int, url: str) -> dict[str, str]:
    home = base / f"h{host}"
    (home / "run").mkdir(parents=True, exist_ok=True, mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOURNAL_", "XDG_"))}
    env |= {"HOME": str(home), "XDG_RUNTIME_DIR": str(home / "run"), "SHOURNAL_DB_URL": url}
    return env


def run_workload(server: Any, base: Path, hosts: int, first: int, lines: int,
                 events: int) -> dict[str, Any]:  # fmt: skip
    load_before = os.getloadavg()
    procs = []
    for h in range(hosts):
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", str(h), "--first", str(first),
             "--lines", str(lines), "--events", str(events)],
            env=host_env(base, h, server.url(f"h{h}")), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True,
        ))  # fmt: skip
    for p in procs:
        if p.stdout is None or p.stdout.readline().strip() != "ready":
            raise SystemExit("a host did not get ready")
    t = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = []
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        results.append(json.loads(line) if line else {"error": "no result"})
    wall = time.perf_counter() - t
    for p in procs:
        p.wait(60)
    load_after = os.getloadavg()
    total = hosts * lines
    return {
        "hosts": hosts, "lines_per_host": lines, "events_per_line": events,
        "commands": total, "wall_s": wall, "commands_per_s": total / wall,
        "events_per_s": total * events / wall, "per_host": results,
        "loadavg_before": load_before, "loadavg_after": load_after,
    }  # fmt: skip


def expected_events(hosts: int, lines: int, events: int) -> int:
    """The events the journal holds for `lines` lines per host: a command
    that read one file version twice has one read event for it."""
    total = 0
    for h in range(hosts):
        for at in range(0, lines, CHUNK):
            for rec in records(h, at, min(CHUNK, lines - at), events):
                total += len(rec.writes) + len({(r.path, r.hash) for r in rec.reads})
    return total


def check_rows(server: Any, hosts: int, want: int, events: int) -> dict[str, Any]:
    """Every command of every host once, with all its events."""
    cmds = dict(server.admin("SELECT owner::text, count(*) FROM command GROUP BY owner"))
    writes = server.admin("SELECT count(*) FROM write_event")[0][0]
    reads = server.admin("SELECT count(*) FROM read_event")[0][0]
    dupes = server.admin(
        "SELECT count(*) FROM (SELECT owner, start_time, text FROM command "
        "GROUP BY owner, start_time, text HAVING count(*) > 1) d")[0][0]  # fmt: skip
    ok = (all(cmds.get(f"h{h}") == want for h in range(hosts)) and dupes == 0
          and writes + reads == expected_events(hosts, want, events))  # fmt: skip
    return {"commands_per_owner": cmds, "write_events": writes, "read_events": reads,
            "duplicates": dupes, "complete": ok}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--hosts", type=int, default=8)
    p.add_argument("--lines", type=int, default=10_000, help="command lines per host")
    p.add_argument("--events", type=int, default=10, help="file events per command line")
    p.add_argument("--outage", type=float, default=600.0, help="seconds the server was away")
    p.add_argument("--rate", type=float, default=1.0,
                   help="command lines per second per host while it was away")
    p.add_argument("--workloads", default="throughput,outage")
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    p.add_argument("--tag", default="")
    p.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    p.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker is not None:
        return worker(args.worker, args.first, args.lines, args.events)
    if args.hosts < 1 or args.lines < 1 or args.events < 2:
        p.error("--hosts and --lines at least 1, --events at least 2")

    import lab_pg

    backlog = round(args.outage * args.rate)
    out: dict[str, Any] = {
        "args": {k: str(v) for k, v in vars(args).items() if k not in ("worker", "first")},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "revision": subprocess.run(["git", "-C", str(BENCH_DIR), "rev-parse", "HEAD"],
                                   capture_output=True, text=True).stdout.strip(),
    }  # fmt: skip
    base = Path(tempfile.mkdtemp(prefix="shlab-push-", dir="/var/tmp"))
    hosts = [f"h{h}" for h in range(args.hosts)]
    try:
        with lab_pg.lab_server(hosts, durable=True) as server:
            out["server_version"] = server.admin("SHOW server_version")[0][0]
            first, stored = 0, 0
            for name in args.workloads.split(","):
                lines = args.lines if name == "throughput" else backlog
                log(f"{name}: {args.hosts} hosts x {lines} lines of {args.events} events")
                r = run_workload(server, base, args.hosts, first, lines, args.events)
                first += lines
                stored += lines
                r["rows"] = check_rows(server, args.hosts, stored, args.events)
                if name == "outage":
                    r["outage_s"], r["rate_per_host"] = args.outage, args.rate
                out[name] = r
                log(f"{name}: {r['commands']} commands in {r['wall_s']:.2f} s = "
                    f"{r['commands_per_s']:.0f}/s; load {r['loadavg_before'][0]:.1f} -> "
                    f"{r['loadavg_after'][0]:.1f}; complete: {r['rows']['complete']}")
            out["data_bytes"] = server.data_bytes()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / f"lab_push{'-' + args.tag if args.tag else ''}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
