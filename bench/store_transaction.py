"""CPU of one journal transaction of the store daemon for a line typed
alone: Store.add_commands with one `true` (no file events), on a fresh
SQLite journal in a temporary directory, in this process (no root, no
installation).  Prints the CPU per transaction of --n transactions after
--warmup, --rounds times.

    .venv/bin/python bench/store_transaction.py --n 2000 --rounds 5
    .venv/bin/python bench/store_transaction.py --n 100 --rounds 3 --gap 0.3

Back to back (no --gap) the CPU's caches hold everything a transaction
touches.  A typed line reaches the daemon seconds after the last one, with
the caches cold, and then costs several times as much: --gap sleeps that
long before each transaction and takes each one's thread CPU time (the
median of a round is printed then, not the mean: a sleep's wake-up may
land on a busy core).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shournal.record import CommandRecord  # noqa: E402
from shournal.store import Store  # noqa: E402

_T0 = 1_700_000_000_000_000_000


def _line(i: int) -> CommandRecord:
    return CommandRecord(
        text="true", return_value=0, start_ns=_T0 + i * 1000, end_ns=_T0 + i * 1000 + 500,
        working_dir="/home/u/work", username="u", hostname="h", session_uuid=bytes(range(16)),
        hash_chunk_size=4096, hash_max_reads=3,
    )


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gap", type=float, default=0.0,
                    help="seconds slept before each transaction (0.3: as typed lines come)")
    args = ap.parse_args()
    if args.n < 1 or args.rounds < 1 or args.warmup < 0 or args.gap < 0:
        ap.error("--n and --rounds must be at least 1; --warmup and --gap not negative")
    per: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        store = Store(f"sqlite:///{d}/journal.db")
        i = 0
        for _ in range(args.warmup):
            store.add_commands([_line(i)])
            i += 1
        for r in range(args.rounds):
            if args.gap:
                each = []
                for _ in range(args.n):
                    time.sleep(args.gap)
                    t = time.thread_time_ns()
                    store.add_commands([_line(i)])
                    each.append((time.thread_time_ns() - t) / 1e6)
                    i += 1
                per.append(statistics.median(each))
            else:
                t = _cpu()
                for _ in range(args.n):
                    store.add_commands([_line(i)])
                    i += 1
                per.append((_cpu() - t) / args.n * 1000)
            print(f"round {r}: {per[-1]:.3f} ms CPU per transaction", flush=True)
        store.close()
    print(f"median of {args.rounds} rounds: {statistics.median(per):.3f} ms "
          f"({min(per):.3f}-{max(per):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
