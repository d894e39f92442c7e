"""A private PostgreSQL server for the tests.

Started once per test session from Debian's server binaries, in a temp
directory, reachable only through a unix socket in that directory (no TCP).
PostgreSQL refuses to run as root, so under root the server runs as
``nobody``.  Register with ``pytest_plugins = ["fixtures_pg"]``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_BIN = Path(os.environ.get("SHOURNAL_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_SUPERUSER = "shournal"
PG_DATABASE = "shournal_test"
_RUN_AS = "nobody"


def _as_server_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", _RUN_AS, "--", *argv]


def _run(argv: list[str], log: Path | None = None) -> None:
    result = subprocess.run(
        _as_server_user(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
        raise RuntimeError(f"{argv[0]} failed ({result.returncode}):\n{result.stdout}\n{tail}")


def _url(socket_dir: Path, database: str) -> str:
    return f"postgresql+psycopg://{PG_SUPERUSER}@/{database}?host={socket_dir}"


def _admin_execute(socket_dir: Path, sql: str) -> None:
    import psycopg

    with psycopg.connect(
        host=str(socket_dir), user=PG_SUPERUSER, dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """URL of a fresh database on a private PostgreSQL server."""
    initdb, pg_ctl = PG_BIN / "initdb", PG_BIN / "pg_ctl"
    if not (initdb.exists() and pg_ctl.exists()):
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN}")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed")
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot drop privileges for postgres")
        owner = pwd.getpwnam(_RUN_AS)
    # Short path: unix socket paths are limited to ~107 bytes.
    base = Path(tempfile.mkdtemp(prefix="shj-pg-", dir="/tmp"))
    data, log = base / "data", base / "server.log"
    try:
        if os.geteuid() == 0:
            os.chown(base, owner.pw_uid, owner.pw_gid)
        _run(
            [
                str(initdb),
                "-D", str(data),
                "-U", PG_SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
            ]
        )  # fmt: skip
        options = (
            f"-c listen_addresses='' -c unix_socket_directories='{base}' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        _run([str(pg_ctl), "-D", str(data), "-l", str(log), "-o", options, "-w", "start"], log)
    except Exception:
        shutil.rmtree(base, ignore_errors=True)
        raise
    try:
        _admin_execute(base, f"CREATE DATABASE {PG_DATABASE}")
        yield _url(base, PG_DATABASE)
    finally:
        subprocess.run(
            _as_server_user([str(pg_ctl), "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
            check=False,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_fresh_url(pg_url: str) -> Iterator[str]:
    """A new, empty database on the session's server for one test."""
    from sqlalchemy.engine import make_url

    socket_dir = Path(str(make_url(pg_url).query["host"]))
    name = f"t_{uuid.uuid4().hex[:16]}"
    _admin_execute(socket_dir, f"CREATE DATABASE {name}")
    try:
        yield _url(socket_dir, name)
    finally:
        # Open connections of a failed test must not keep the database alive.
        _admin_execute(socket_dir, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
