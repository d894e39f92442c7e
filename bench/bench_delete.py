"""How long `shournal delete` takes on a large journal.

Builds a synthetic journal (COMMANDS commands, EVENTS file events each,
half writes, half reads of files no other command read,
spread over a few thousand directories, one session per 50 commands, an
archived script per 20 commands shared by neighbours) and deletes the
oldest DELETE commands with the library call behind `shournal delete
--until`, printing the wall time of the deletion alone.

    .venv/bin/python bench/bench_delete.py --url sqlite:////tmp/j.sqlite \\
        --commands 200000 --events 10 --delete 100000
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from shournal import Journal
from shournal.store import Store
from shournal.store import models as m

BATCH = 20_000


def build(store: Store, commands: int, events: int, seed: int = 1) -> datetime:
    rnd = random.Random(seed)
    t0 = datetime(2020, 1, 1, tzinfo=UTC)
    with store.writing() as conn:
        env = conn.execute(
            m.Env.__table__.insert().returning(m.Env.id), {"hostname": "h", "username": "u"}
        ).scalar_one()
        hs = conn.execute(
            m.HashSetting.__table__.insert().returning(m.HashSetting.id),
            {"chunk_size": 4096, "max_reads": 20},
        ).scalar_one()
        n_dirs = max(100, commands // 50)
        conn.execute(
            m.Directory.__table__.insert(),
            [
                {"id": i + 1, "path": b"/home/u/project%d/sub%d/" % (i // 7, i)}
                for i in range(n_dirs)
            ],
        )
        conn.execute(
            m.WorkingDir.__table__.insert(),
            [{"id": i + 1, "path": f"/home/u/project{i}"} for i in range(300)],
        )
        n_sessions = commands // 50 + 1
        conn.execute(
            m.ShellSession.__table__.insert(),
            [{"id": i + 1, "uuid": i.to_bytes(16, "big")} for i in range(n_sessions)],
        )
        n_contents = commands // 20 + 1
        conn.execute(
            m.Content.__table__.insert(),
            [
                {"id": i + 1, "algorithm": "xxh3_128", "digest": i.to_bytes(16, "big"),
                 "data": b"#!/bin/sh\necho %d\n" % i}
                for i in range(n_contents)
            ],
        )  # fmt: skip
        ev_id = 0
        for start in range(0, commands, BATCH):
            cmd_rows: list[dict] = []
            writes: list[dict] = []
            reads: list[dict] = []
            links: list[dict] = []
            for i in range(start, min(start + BATCH, commands)):
                cmd_rows.append(
                    {
                        "id": i + 1,
                        "text": f"make -j4 target{i % 97}",
                        "return_value": 0,
                        "start_time": t0 + timedelta(seconds=30 * i),
                        "end_time": t0 + timedelta(seconds=30 * i + 5),
                        "cwd_id": i % 300 + 1,
                        "session_id": i // 50 + 1,
                        "env_id": env,
                        "hash_setting_id": hs,
                        "dropped_writes": 0,
                        "dropped_reads": 0,
                        "lost_events": 0,
                    }
                )
                # Commands work near each other: directories drift with time.
                base = (i * n_dirs) // commands
                for k in range(events):
                    ev_id += 1
                    row = {
                        "id": ev_id,
                        "directory_id": min(n_dirs, base + rnd.randrange(5)) or 1,
                        "basename": b"file%d.o" % rnd.randrange(10**6),
                        "size": int(rnd.lognormvariate(8, 2)),
                        "mtime_ns": rnd.randrange(2**60),
                        "hash": rnd.randrange(2**64).to_bytes(8, "little"),
                        "mode": 0o100644,
                    }
                    if k % 2 == 0:
                        writes.append({**row, "command_id": i + 1})
                    else:
                        content = (i // 20 + 1) if k == 1 and i % 3 == 0 else None
                        reads.append({**row, "content_id": content})
                        links.append({"command_id": i + 1, "read_file_id": ev_id})
            conn.execute(m.Command.__table__.insert(), cmd_rows)
            conn.execute(m.WriteEvent.__table__.insert(), writes)
            conn.execute(m.ReadFile.__table__.insert(), reads)
            conn.execute(m.ReadEvent.__table__.insert(), links)
    return t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--commands", type=int, default=200_000)
    ap.add_argument("--events", type=int, default=10)
    ap.add_argument("--delete", type=int, default=100_000)
    args = ap.parse_args()
    with Journal.open(args.url, create=True) as journal:
        store = journal._store  # (it times the store's own deletion)
        began = time.perf_counter()
        t0 = build(store, args.commands, args.events)
        print(f"built {args.commands} commands, {args.commands * args.events} events "
              f"in {time.perf_counter() - began:.1f} s")  # fmt: skip
        # A time given to the second is that second: --until covers it, so
        # the last one before the first kept command.
        until = (t0 + timedelta(seconds=30 * args.delete - 1)).isoformat(timespec="seconds")
        began = time.perf_counter()
        result = journal.delete(until=until)
        elapsed = time.perf_counter() - began
        with store.reading() as conn:
            left = sum(
                conn.execute(select(func.count()).select_from(t)).scalar_one()
                for t in (m.WriteEvent, m.ReadEvent)
            )
        print(
            f"deleted {result.commands} commands, {result.events} events in {elapsed:.2f} s; "
            f"collected {result.collected}; {left} events left"
        )


if __name__ == "__main__":
    main()
