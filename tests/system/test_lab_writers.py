"""Writers of a lab store on the private PostgreSQL server of the tests
(tests/fixtures_pg.py): the find-or-insert of directories and read files
excludes the writers of one owner only.  Each owner's rows are unique and
visible to its writer apart from everyone else's (shournal.store.lab), so
a colleague's writer has nothing to wait for -- and a lab of many hosts
does not push one command at a time (bench/lab_push.py)."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

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


def _round_trips(store: Store, tmp_path: Path, store_them: Callable[[], object]) -> list[str]:
    """The messages the writer's connection sent while `store_them` ran
    that each wait for the server's answer (libpq's trace of the protocol):
    a simple query's Query, an extended query's Sync."""
    with store.writing() as conn:
        pgconn = conn.connection.driver_connection.pgconn
    trace = tmp_path / "protocol.trace"
    with trace.open("w") as f:
        pgconn.trace(f.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            store_them()
        finally:
            pgconn.untrace()
    # (one message a line, but for the newlines of a query's text)
    sent = [m.split("\t", 3) for m in re.split(r"\n(?=[FB]\t)", trace.read_text().strip())]
    return [m[3].strip() if m[2] == "Query" else m[2]
            for m in sent if m[0] == "F" and m[2] in ("Query", "Sync")]  # fmt: skip


def test_a_typed_line_is_one_round_trip_on_a_writers_connection_of_its_own(
        pg_fresh_url: str, tmp_path: Path) -> None:
    """The writer stores a line typed alone (no file events; the ids of its
    host, directory, session and hash setting known from the line before)
    in one round trip: BEGIN, the first statement, the command's INSERT and
    COMMIT in one message -- and so a batch of such lines.  Its connection,
    kept between transactions in the driver's autocommit mode, is never a
    reader's: a connection back in the pool is in a transaction again for
    the next.  One the server dropped fails that write (the daemon's spool
    keeps the line) and the next write takes a new one."""
    lab.execute(pg_fresh_url, lab.plan_init, False)
    lab.execute(pg_fresh_url, lambda c: lab.plan_add_user(c, "wr_carol"), False)
    store = Store(_as(pg_fresh_url, "wr_carol"))
    try:
        assert store.add_commands([_typed(0)]) == 1  # (the ids of the small tables are kept)
        stored: list[int] = []
        sent = _round_trips(store, tmp_path, lambda: stored.append(store.add_commands([_typed(1)])))
        assert stored == [1] and len(sent) == 1, sent
        statements = [s.split()[0] for s in sent[0].strip('"').split(";\n")]
        assert statements == ["BEGIN", "SELECT", "INSERT", "COMMIT"], sent
        # a batch: one round trip too; a line stored before is not stored twice
        again = _typed(2)
        batch = [again, replace(_typed(3), text="echo 100% done; true"), again]
        sent = _round_trips(store, tmp_path, lambda: stored.append(store.add_commands(batch)))
        assert stored[-1] == 2 and len(sent) == 1, sent
        # (control) a line with a file event takes the transaction of many
        sent = _round_trips(store, tmp_path, lambda: store.add_commands([_line("u", 9)]))
        assert len(sent) > 3, sent

        # a second writer meanwhile (another thread) takes a pooled connection
        with store.writing():
            t = threading.Thread(target=store.add_commands, args=([_typed(5)],))
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
            store.add_commands([_typed(4)])
        assert store.add_commands([_typed(4)]) == 1
        with store.reading() as conn:
            texts = [r[0] for r in conn.exec_driver_sql("SELECT text FROM command ORDER BY 1")]
        assert texts == ["cp f g 9", "echo 100% done; true", "true 0", "true 1", "true 2",
                         "true 4", "true 5"]
    finally:
        store.close()


def test_the_command_row_written_on_the_driver_is_what_sqlalchemy_writes(
        pg_fresh_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL the command's INSERT runs on the driver's cursor
    (shournal.store.precompiled), and a typed line's is sent with its
    values in its text (Writer._at_once, psycopg's client-side binding):
    the row must be, column for column, what SQLAlchemy's own execution
    stores (a datetime off by its microseconds or its zone would no longer
    match has_command's lookup)."""
    lab.execute(pg_fresh_url, lab.plan_init, False)
    lab.execute(pg_fresh_url, lambda c: lab.plan_add_user(c, "wr_dave"), False)
    # (the text a colleague's journal may hold: quotes, backslashes, a
    # statement of its own, a placeholder, controls, non-ASCII)
    odd = replace(_typed(0), text="it's 100% \\ 'odd'); DELETE FROM command; -- %s\n\tä€",
                  start_ns=10**18 + 123_456_789, end_ns=10**18 + 987_654_321,
                  return_value=-3, dropped_writes=2, dropped_reads=5, lost_events=7,
                  lost_reasons={"overflow": 3}, incomplete=True)  # fmt: skip
    rows = []
    for way in ("at once", "driver", "sqlalchemy"):
        store = Store(_as(pg_fresh_url, "wr_dave"))
        try:
            if way == "at once":  # (the line before: the small tables' ids known)
                assert store.add_commands([_typed(1)]) == 1
            if way == "sqlalchemy":
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
    assert rows[0] == rows[1] == rows[2]
    assert rows[0]["text"] == odd.text
    with Store(_as(pg_fresh_url, "wr_dave")) as store, store.reading() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM command").scalar_one() == 4
    assert rows[0]["start_time"].microsecond == 123_456 and rows[0]["incomplete"] is True


def test_a_line_sent_at_once_cannot_end_its_string_whatever_the_servers_quoting(
        pg_fresh_url: str, tmp_path: Path) -> None:
    """The values of a line sent at once are in the SQL text (psycopg's
    client-side binding), so a recorded text must not be able to end its
    string literal and run SQL of its own: not with the server's default
    quoting, nor with standard_conforming_strings off (backslashes then
    escape inside '...').  Each time the text comes back exactly and the
    rows stored before are still there."""
    lab.execute(pg_fresh_url, lab.plan_init, False)
    lab.execute(pg_fresh_url, lambda c: lab.plan_add_user(c, "wr_erin"), False)
    texts = ["x\\'); DELETE FROM command; --", "\\\\'; DELETE FROM command; --",
             "x' || (SELECT 1) || '", "\\x00 $$; DELETE FROM command; $$"]  # fmt: skip
    u = make_url(pg_fresh_url)
    for conforming in ("on", "off"):
        with psycopg.connect(host=u.query["host"], user=u.username, dbname=u.database,
                             autocommit=True) as admin:  # fmt: skip
            admin.execute(f"ALTER ROLE wr_erin SET standard_conforming_strings = {conforming}")
        with Store(_as(pg_fresh_url, "wr_erin")) as store:
            assert store.add_commands([_typed(0)]) == 1  # (the ids kept: the next at once)
            with store.writing() as conn:
                assert conn.exec_driver_sql("SHOW standard_conforming_strings").scalar_one() \
                    == conforming
            recs = [replace(_typed(1), text=t) for t in texts]
            stored: list[int] = []

            def store_them(store: Store = store, recs: list[CommandRecord] = recs,
                           stored: list[int] = stored) -> None:
                stored.append(store.add_commands(recs))

            sent = _round_trips(store, tmp_path, store_them)
            assert stored == [len(texts)] and len(sent) == 1, sent  # (sent at once)
            with store.reading() as conn:
                rows = conn.exec_driver_sql("SELECT uuid, text FROM command").all()
                got = {bytes(uuid_): text for uuid_, text in rows}
        assert [got[rec.uuid] for rec in recs] == texts
    assert len(got) == 2 * (1 + len(texts))
