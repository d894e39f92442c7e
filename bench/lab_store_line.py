"""CPU of the writer storing one typed command line in a lab store: the
store daemon's transaction of a line arriving alone (Store.add_commands of
one record), in a loop against a private PostgreSQL server (bench/lab_pg.py,
no fsync), timed with the process's CPU clock; what the driver sends for
one line listed (a round trip each).  --trees: other checkouts measured in
the same run, alternating (each in a child process importing that
checkout's package).

    .venv/bin/python bench/lab_store_line.py --lines 1500 --rounds 3 --trees .,/path/to/main
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(url: str, lines: int) -> None:
    import psycopg

    from shournal.record import CommandRecord
    from shournal.store import Store

    def rec(i: int) -> CommandRecord:
        now = time.time_ns()
        return CommandRecord(text=f"true {i}", return_value=0, start_ns=now, end_ns=now + 1000,
                             working_dir="/home/u", username="u", hostname="h",
                             session_uuid=b"s" * 16, hash_chunk_size=4096, hash_max_reads=3,
                             uuid=uuid.uuid4().bytes)  # fmt: skip

    with Store(url) as st:
        # what the driver sends, each a round trip: the statements (through
        # SQLAlchemy or on the driver's cursor) and its own BEGIN and COMMIT
        statements: list[str] = []
        execute, command = psycopg.Cursor.execute, psycopg.Connection._exec_command

        def seen(cur: psycopg.Cursor, query: object, *a: object, **k: object) -> object:
            statements.append(str(query))
            return execute(cur, query, *a, **k)  # type: ignore[arg-type]

        def seen_command(conn: psycopg.Connection, cmd: object, *a: object, **k: object) -> object:
            statements.append(bytes(cmd).decode() if isinstance(cmd, bytes) else str(cmd))
            return command(conn, cmd, *a, **k)  # type: ignore[arg-type]

        st.add_commands([rec(-1)])
        psycopg.Cursor.execute, psycopg.Connection._exec_command = seen, seen_command  # type: ignore[method-assign]
        st.add_commands([rec(-2)])
        psycopg.Cursor.execute, psycopg.Connection._exec_command = execute, command  # type: ignore[method-assign]
        t0 = time.process_time()
        for i in range(lines):
            st.add_commands([rec(i)])
        took = (time.process_time() - t0) / lines

    def short(message: str) -> str:
        """A message's statements, by their first words (for display)."""
        return "; ".join(" ".join(p.split()[:3]) for p in message.split(";") if p.strip())

    print(f"{took * 1000:.3f} ms per line, {len(statements)} round trips: "
          + " | ".join(short(s) for s in statements))  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trees", default=".", help="comma-separated checkouts")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    sys.path.insert(0, str(HERE))
    import lab_pg

    trees = [Path(t).resolve() for t in args.trees.split(",")]
    user = "benchstore"
    with lab_pg.lab_server([user], durable=False) as server:
        print(f"load {os.getloadavg()[0]:.1f}", flush=True)
        for r in range(args.rounds):
            for tree in trees if r % 2 == 0 else trees[::-1]:
                env = {**os.environ, "PYTHONPATH": str(tree)}
                out = subprocess.run(
                    [sys.executable, str(HERE / "lab_store_line.py"), "--child",
                     server.url(user), str(args.lines)],
                    env=env, capture_output=True, text=True, check=True, cwd=tree,
                )  # fmt: skip
                print(f"{tree}: {out.stdout.strip()} (round {r}, load {os.getloadavg()[0]:.1f})",
                      flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
