"""CPU of the store daemon for one typed command line, from the spool to
the journal: a shournal.capture.daemon.Daemon in this process (its store
thread running, no socket served), fed one record at a time as a worker
hands over a line typed alone (spool_record: the append and its fsync),
each waited for until it is stored, --gap seconds apart (a typed line
finds the caches cold); the process's CPU (every thread, user and system)
per line.  What reading the line from the shell costs (listener.collect)
is the same whatever the journal and is not in it.

Modes: `sqlite` (the default journal file in a fresh data directory) and
`lab` (a lab store on a private PostgreSQL server, bench/lab_pg.py with
PostgreSQL's durable defaults, as `cpu_per_command.py --modes lab`).
--trees: other checkouts measured in the same run, alternating (each in
a child process importing that checkout's package).

    .venv/bin/python bench/daemon_store_line.py --lines 200 --rounds 3 --modes sqlite,lab \\
        --trees .,/path/to/other/checkout
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(url: str, lines: int, warmup: int, gap: float) -> None:
    home = Path(tempfile.mkdtemp(prefix="shournal-bench-daemon-"))
    try:
        run = home / "run"
        run.mkdir(mode=0o700)
        os.environ.update({"HOME": str(home), "XDG_RUNTIME_DIR": str(run),
                           "XDG_DATA_HOME": str(home / "data"),
                           "XDG_CONFIG_HOME": str(home / "config")})  # fmt: skip
        os.environ.pop("SHOURNAL_DB_URL", None)
        if url:
            os.environ["SHOURNAL_DB_URL"] = url
        print(_measure(lines, warmup, gap), flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _measure(lines: int, warmup: int, gap: float) -> str:
    from shournal import _paths
    from shournal.capture.daemon import Daemon
    from shournal.record import CommandRecord

    session = uuid.uuid4().bytes

    def rec(i: int) -> CommandRecord:
        now = time.time_ns()
        return CommandRecord(text=f"true {i}", return_value=0, start_ns=now, end_ns=now + 1000,
                             working_dir="/home/u", username="u", hostname="h",
                             session_uuid=session, hash_chunk_size=4096, hash_max_reads=3,
                             uuid=uuid.uuid4().bytes)  # fmt: skip

    mine, _theirs = socket.socketpair()
    daemon = Daemon(_paths.private_runtime_dir(), mine)
    daemon.store_thread.start()

    def typed(i: int) -> None:
        # as Daemon._start and _connection do for a line that came alone
        with daemon.lock:
            daemon._alone = True
            daemon.active += 1
        if not daemon.spool_record(rec(i)):
            raise SystemExit("a line was not spooled")
        with daemon.lock:
            daemon.active -= 1
            daemon.last_activity = time.monotonic()
            daemon.lock.notify_all()
            deadline = time.monotonic() + 60
            while daemon.spool.backlog() and time.monotonic() < deadline:
                daemon.lock.wait(1.0)
            if daemon.spool.backlog() or daemon.error:
                raise SystemExit(f"not stored: {daemon.error}")
        time.sleep(gap)  # (what the store thread does after the commit is in it)

    for i in range(warmup):
        typed(-1 - i)
    t0 = time.process_time()
    for i in range(lines):
        typed(i)
    took = (time.process_time() - t0) / lines
    stored = daemon.stored
    with daemon.lock:
        daemon.stopping = True
        daemon._store_wake.notify_all()
    daemon.store_thread.join(30)
    return f"{took * 1000:.3f} {stored}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--gap", type=float, default=0.3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="sqlite,lab")
    ap.add_argument("--trees", default=".", help="comma-separated checkouts")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        url, lines, warmup, gap = args.child
        child(url, int(lines), int(warmup), float(gap))
        return 0
    sys.path.insert(0, str(HERE))
    import lab_pg

    trees = [Path(t).resolve() for t in args.trees.split(",")]
    modes = args.modes.split(",")
    runs = [(mode, tree) for mode in modes for tree in trees]
    user = "benchstore"
    results: dict[tuple[str, Path], list[float]] = {run: [] for run in runs}
    with lab_pg.lab_server([user], durable=True) as server:
        urls = {"sqlite": "", "lab": server.url(user)}
        for r in range(args.rounds):
            for mode, tree in runs if r % 2 == 0 else runs[::-1]:
                env = {**os.environ, "PYTHONPATH": str(tree)}
                out = subprocess.run(
                    [sys.executable, str(HERE / "daemon_store_line.py"), "--child", urls[mode],
                     str(args.lines), str(args.warmup), str(args.gap)],
                    env=env, capture_output=True, text=True, cwd=tree,
                )  # fmt: skip
                if out.returncode != 0:
                    print(out.stdout, out.stderr, file=sys.stderr)
                    return 1
                ms, stored = out.stdout.split()[-2:]
                results[(mode, tree)].append(float(ms))
                print(f"{mode:6s} {tree}: {float(ms):.3f} ms CPU per line, {stored} stored "
                      f"(round {r}, load {os.getloadavg()[0]:.1f})", flush=True)
    for (mode, tree), values in results.items():
        print(f"{mode:6s} {tree}: median of {len(values)} rounds "
              f"{statistics.median(values):.3f} ms ({min(values):.3f}-{max(values):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
