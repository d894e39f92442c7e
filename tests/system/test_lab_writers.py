"""Writers of a lab store on the private PostgreSQL server of the tests
(tests/fixtures_pg.py): the find-or-insert of directories and read files
excludes the writers of one owner only.  Each owner's rows are unique and
visible to its writer apart from everyone else's (shournal.store.lab), so
a colleague's writer has nothing to wait for -- and a lab of many hosts
does not push one command at a time (bench/lab_push.py)."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
from fixtures_shell import wait_for
from sqlalchemy.engine import make_url

from shournal.errors import StoreError
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


def _typed(i: int) -> CommandRecord:
    """A line typed alone: no file events."""
    return CommandRecord(
        text=f"true {i}", return_value=0, start_ns=10**18 + i, end_ns=10**18 + i + 1,
        working_dir="/home/u", username="u", hostname="h", session_uuid=bytes(16),
        hash_chunk_size=256, hash_max_reads=3, uuid=uuid.uuid4().bytes,
    )  # fmt: skip


def test_a_typed_line_is_three_round_trips_on_a_writers_connection_of_its_own(
        pg_fresh_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer stores a line typed alone in 3 round trips: its first
    statement begins the transaction (the driver's own BEGIN would be a
    round trip more), the command's INSERT, the COMMIT.  Its connection,
    kept between transactions in the driver's autocommit mode, is never a
    reader's: a connection back in the pool is in a transaction again for
    the next.  One the server dropped fails that write (the daemon's spool
    keeps the line) and the next write takes a new one."""
    lab.execute(pg_fresh_url, lab.plan_init, False)
    lab.execute(pg_fresh_url, lambda c: lab.plan_add_user(c, "wr_carol"), False)
    store = Store(_as(pg_fresh_url, "wr_carol"))
    try:
        assert store.add_commands([_typed(0)]) == 1  # (the ids of the small tables are kept)
        # what the driver sends: statements (through SQLAlchemy or on its
        # cursor) and its own BEGIN and COMMIT, a round trip each
        sent: list[str] = []
        execute, command = psycopg.Cursor.execute, psycopg.Connection._exec_command

        def seen(cur, query, *args, **kwargs):  # type: ignore[no-untyped-def]
            sent.append(str(query))
            return execute(cur, query, *args, **kwargs)

        def seen_command(conn, cmd, *args, **kwargs):  # type: ignore[no-untyped-def]
            sent.append(bytes(cmd).decode())
            return command(conn, cmd, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, "execute", seen)
        monkeypatch.setattr(psycopg.Connection, "_exec_command", seen_command)
        assert store.add_commands([_typed(1)]) == 1
        assert [s.split()[0] for s in sent] == ["BEGIN;", "INSERT", "COMMIT"], sent
        monkeypatch.undo()

        # a second writer meanwhile (another thread) takes a pooled connection
        with store.writing():
            t = threading.Thread(target=store.add_commands, args=([_typed(2)],))
            t.start()
            t.join(60)
        with store.reading() as conn:
            conn.exec_driver_sql("SELECT 1")
            assert conn.connection.driver_connection.info.transaction_status \
                == psycopg.pq.TransactionStatus.INTRANS

        with store.writing() as conn:
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        u = make_url(pg_fresh_url)
        with psycopg.connect(host=u.query["host"], user=u.username, dbname=u.database,
                             autocommit=True) as admin:  # fmt: skip
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StoreError):
            store.add_commands([_typed(3)])
        assert store.add_commands([_typed(3)]) == 1
        with store.reading() as conn:
            texts = [r[0] for r in conn.exec_driver_sql("SELECT text FROM command ORDER BY 1")]
        assert texts == [f"true {i}" for i in range(4)]
    finally:
        store.close()


def test_the_command_row_written_on_the_driver_is_what_sqlalchemy_writes(
        pg_fresh_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL the command's INSERT runs on the driver's cursor
    (shournal.store.precompiled): the row must be, column for column, what
    SQLAlchemy's own execution stores (a datetime off by its microseconds
    or its zone would no longer match has_command's lookup)."""
    from dataclasses import replace

    lab.execute(pg_fresh_url, lab.plan_init, False)
    lab.execute(pg_fresh_url, lambda c: lab.plan_add_user(c, "wr_dave"), False)
    odd = replace(_typed(0), start_ns=10**18 + 123_456_789, end_ns=10**18 + 987_654_321,
                  return_value=-3, dropped_writes=2, dropped_reads=5, lost_events=7,
                  lost_reasons={"overflow": 3}, incomplete=True)  # fmt: skip
    rows = []
    for through_sqlalchemy in (False, True):
        store = Store(_as(pg_fresh_url, "wr_dave"))
        try:
            if through_sqlalchemy:
                monkeypatch.setattr(store.writer, "_driver_run",
                                    lambda conn, _key, make, values: conn.execute(make(), values))
            rec = replace(odd, uuid=uuid.uuid4().bytes)
            assert store.add_commands([rec]) == 1
            assert store.has_command(replace(rec, uuid=None))
            with store.reading() as conn:
                row = conn.exec_driver_sql(
                    "SELECT * FROM command WHERE uuid = %(u)s", {"u": rec.uuid}).mappings().one()
            rows.append({k: v for k, v in row.items() if k not in ("id", "uuid")})
        finally:
            store.close()
    assert rows[0] == rows[1]
    assert rows[0]["start_time"].microsecond == 123_456 and rows[0]["incomplete"] is True
