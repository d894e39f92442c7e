"""Writers of a lab store on the private PostgreSQL server of the tests
(tests/fixtures_pg.py): the find-or-insert of directories and read files
excludes the writers of one owner only.  Each owner's rows are unique and
visible to its writer apart from everyone else's (shournal.store.lab), so
a colleague's writer has nothing to wait for -- and a lab of many hosts
does not push one command at a time (bench/lab_push.py)."""

from __future__ import annotations

import threading

import psycopg
import pytest
from fixtures_shell import wait_for
from sqlalchemy.engine import make_url

from shournal.record import CommandRecord, FileEvent
from shournal.store import Store, lab

pytestmark = [pytest.mark.pg]


def _as(url: str, user: str) -> str:
    return make_url(url).set(username=user).render_as_string(hide_password=False)


def _waiting_on_advisory(url: str, user: str) -> int:
    u = make_url(url)
    with psycopg.connect(host=u.query["host"], user=u.username, dbname=u.database,
                         autocommit=True) as conn:  # fmt: skip
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND wait_event = 'advisory'",
            (user,),
        ).fetchone()[0]  # type: ignore[index]


def _line(who: str, i: int) -> CommandRecord:
    """A command with a new directory and a new read file version: both go
    through the find-or-insert."""
    ev = FileEvent(path=f"/home/{who}/new{i}/f".encode(), size=10, mtime_ns=i, mode=0o100644,
                   hash=i + 1)  # fmt: skip
    return CommandRecord(
        text=f"cp f g {i}", return_value=0, start_ns=10**18 + i, end_ns=10**18 + i + 1,
        working_dir=f"/home/{who}", username=who, hostname="h", session_uuid=bytes(16),
        hash_chunk_size=256, hash_max_reads=3, reads=[ev],
        writes=[FileEvent(path=f"/home/{who}/out{i}/g".encode(), size=10, mtime_ns=i,
                          mode=0o100644, hash=i + 2)],
    )  # fmt: skip


def test_owners_do_not_wait_for_each_others_find_or_insert(pg_fresh_url: str) -> None:
    lab.execute(pg_fresh_url, lab.plan_init, False)
    for user in ("wr_alice", "wr_bob"):
        lab.execute(pg_fresh_url, lambda c, u=user: lab.plan_add_user(c, u), False)
    alice, alice2, bob = (Store(_as(pg_fresh_url, u)) for u in ("wr_alice", "wr_alice", "wr_bob"))
    try:
        threads = []
        with alice.writing() as conn:
            alice.writer._lock_find_or_insert(conn)
            # a colleague's writer goes on while alice holds her lock
            bob_done = threading.Event()
            t = threading.Thread(target=lambda: (bob.add_command(_line("wr_bob", 1)),
                                                 bob_done.set()))  # fmt: skip
            t.start()
            threads.append(t)
            assert bob_done.wait(60), "bob's writer waited for alice's find-or-insert lock"
            # (control) alice's second writer waits for it
            t = threading.Thread(target=alice2.add_command, args=(_line("wr_alice", 2),))
            t.start()
            threads.append(t)
            wait_for(lambda: _waiting_on_advisory(pg_fresh_url, "wr_alice") == 1,
                     "alice's second writer to wait for her lock")  # fmt: skip
        for t in threads:
            t.join(60)
            assert not t.is_alive()
        u = make_url(pg_fresh_url)
        with psycopg.connect(host=u.query["host"], user=u.username, dbname=u.database) as conn:
            owners = conn.execute("SELECT owner::text FROM command ORDER BY 1").fetchall()
        assert owners == [("wr_alice",), ("wr_bob",)]
    finally:
        for store in (alice, alice2, bob):
            store.close()
