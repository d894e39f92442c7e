"""A private PostgreSQL server holding a lab store, for the lab benchmarks
(bench/lab_push.py, bench/lab_query.py, bench/cpu_per_command.py --lab).

Debian's server binaries, the cluster in a directory under /var/tmp, reached
through a unix socket there (auth trust: the benchmarks measure shournal,
not the handshake); under root the server runs as ``nobody``.  The lab
store is made as an administrator makes it: the plans of ``shournal server
init`` and ``shournal server add-user`` (shournal.store.lab) run with the
superuser's URL; every user is a member of the group role ``lab``.

``durable`` keeps PostgreSQL's defaults (fsync, synchronous_commit: what a
lab's server runs); without it the server runs as the tests' does (no
fsync), for loading a journal quickly.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shournal.store import lab  # noqa: E402

PG_BIN = Path(os.environ.get("SHOURNAL_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
SUPERUSER = "postgres"
DATABASE = "shournal"
GROUP = "lab"


@dataclass
class LabServer:
    socket_dir: Path
    log: Path

    def url(self, user: str) -> str:
        return f"postgresql+psycopg://{user}@/{DATABASE}?host={self.socket_dir}"

    def postmaster(self) -> int:
        return int((self.socket_dir / "data" / "postmaster.pid").read_text().split()[0])

    @property
    def admin_url(self) -> str:
        return self.url(SUPERUSER)

    def admin(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """`sql` as the superuser (not subject to row-level security)."""
        import psycopg

        with psycopg.connect(host=str(self.socket_dir), user=SUPERUSER, dbname=DATABASE,
                             autocommit=True) as conn:  # fmt: skip
            cur = conn.execute(sql, params)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def add_users(self, users: Sequence[str]) -> None:
        for user in users:
            lab.execute(self.admin_url, lambda c, u=user: lab.plan_add_user(c, u), False)
        self.admin(f"GRANT {GROUP} TO " + ", ".join(lab.quote(u) for u in users))

    def data_bytes(self) -> dict[str, int]:
        """pg_total_relation_size (heap, TOAST, indexes) of every table."""
        names = [*lab.data_tables(), lab.SHARE_TABLE, "schema_version"]
        rows = self.admin(
            "SELECT relname::text, pg_total_relation_size(oid) FROM pg_class "
            "WHERE relkind = 'r' AND relname = ANY(%s)", (names,)
        )  # fmt: skip
        return {name: int(size) for name, size in rows}


def _as_server(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "nobody", "--", *argv] if os.geteuid() == 0 else argv


def _run(argv: list[str]) -> None:
    res = subprocess.run(_as_server(argv), capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({res.returncode}): {res.stdout}{res.stderr}")


@contextmanager
def lab_server(users: Sequence[str], durable: bool = True,
               settings: Sequence[str] = ()) -> Iterator[LabServer]:  # fmt: skip
    """A started server with a lab store, `users` added and in role lab."""
    if not (PG_BIN / "initdb").exists():
        raise SystemExit(f"PostgreSQL server binaries not found in {PG_BIN}")
    base = Path(tempfile.mkdtemp(prefix="shlab-", dir="/var/tmp"))
    # Other users' shells (cpu_per_command.py) reach the socket too.
    base.chmod(0o755)
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(base, nobody.pw_uid, nobody.pw_gid)
    data, log = base / "data", base / "server.log"
    pg_ctl = str(PG_BIN / "pg_ctl")
    options = [f"-c listen_addresses='' -c unix_socket_directories='{base}'"]
    if not durable:
        options.append("-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
    options += [f"-c {s}" for s in settings]
    try:
        _run([str(PG_BIN / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
              "--encoding=UTF8", "--no-sync"])  # fmt: skip
        _run([pg_ctl, "-D", str(data), "-l", str(log), "-o", " ".join(options), "-w", "start"])
        server = LabServer(base, log)
        import psycopg

        with psycopg.connect(host=str(base), user=SUPERUSER, dbname="postgres",
                             autocommit=True) as conn:  # fmt: skip
            conn.execute(f"CREATE DATABASE {DATABASE}")  # type: ignore[arg-type]
            conn.execute(f"CREATE ROLE {GROUP} NOLOGIN")  # type: ignore[arg-type]
        lab.execute(server.admin_url, lab.plan_init, False)
        server.add_users(users)
        yield server
    finally:
        subprocess.run(_as_server([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"]),
                       capture_output=True, check=False)  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)
