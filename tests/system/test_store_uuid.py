"""A command's UUID makes storing it idempotent: the same spool frames
stored twice, a batch sent again after its COMMIT (or its reply) was cut,
store every command once with its events once -- on SQLite, on the tests'
PostgreSQL server (tests/fixtures_pg.py, reached through a unix socket
relay that cuts the connection at the COMMIT), and in a lab store as one
of its users."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url

from shournal.capture import spool as sp
from shournal.journal import Journal
from shournal.record import CommandRecord, FileEvent
from shournal.store import Store, StoreError
from shournal.store import models as m
from shournal.store.writer import PG_BATCH

T0 = 1_700_000_000_000_000_000


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'journal.sqlite'}"
    return request.getfixturevalue("pg_fresh_url")


def rec(i: int, *, uuid: bool = True) -> CommandRecord:
    """Command i: writes one file, reads two (one of them archived)."""
    return CommandRecord(
        text=f"make part{i}", return_value=0, start_ns=T0 + i * 10**9, end_ns=T0 + i * 10**9 + 5,
        working_dir="/w", username="u", hostname="h", session_uuid=b"\x01" * 16,
        hash_chunk_size=256, hash_max_reads=3,
        writes=[FileEvent(f"/w/out{i}".encode(), 10, i, 0o100644, 1000 + i)],
        reads=[FileEvent(b"/usr/lib/libc.so", 99, 6, 0o100644, 77),
               FileEvent(f"/w/run{i}.sh".encode(), 18, 7, 0o100755, 2000 + i,
                         content=f"echo {i}\n".encode())],
        uuid=i.to_bytes(16, "big") if uuid else None,
    )  # fmt: skip


def counts(s: Store) -> dict[str, int]:
    out = {}
    with s.reading() as conn:
        for model in (m.Command, m.WriteEvent, m.ReadEvent, m.ReadFile, m.Content):
            table = model.__table__
            out[table.name] = conn.execute(select(func.count()).select_from(table)).scalar_one()
    return out


def test_the_same_spool_frames_stored_twice_are_stored_once(db_url: str, tmp_path: Path) -> None:
    """The daemon's spool read twice (its committed offset lost) and
    stored twice: each command once, its events once; a record without a
    UUID (an older spool's) is still looked up by has_command."""
    spool = sp.Spool(tmp_path / "spool")
    recs = [rec(i) for i in range(5)] + [rec(99, uuid=False)]
    spool.append(recs)
    with Store(db_url) as s:
        first = [r for _end, r in spool.pending(100)]
        assert [r.uuid for r in first] == [r.uuid for r in recs]
        assert s.add_commands(first) == 6
        once = counts(s)
        assert once["command"] == 6 and once["write_event"] == 6 and once["read_event"] == 12
        again = [r for _end, r in spool.pending(100)]
        assert s.add_commands(again, skip_stored=True) == 0
        assert s.add_commands(again[:5]) == 0  # by UUID alone, without the lookup
        assert counts(s) == once
        # one by one (a listener's add_command): the stored id, nothing new
        ids = [c.id for c in Journal(s).find()]
        assert s.add_command(again[2]) == ids[2]
        assert counts(s) == once
        # a batch of stored and new ones stores the new ones only
        assert s.add_commands([again[0], rec(5), again[1], rec(6)]) == 2
        assert counts(s)["command"] == 8 and counts(s)["write_event"] == 8
        stored = {c.text: c.uuid for c in Journal(s).find()}
        assert stored["make part3"] == (3).to_bytes(16, "big") and stored["make part99"] is None
    spool.close()


def test_a_uuid_is_sixteen_bytes(db_url: str) -> None:
    with Store(db_url) as s:
        bad = rec(1)
        bad.uuid = b"short"
        with pytest.raises(ValueError, match="uuid must be 16 raw bytes"):
            s.add_command(bad)
        assert counts(s)["command"] == 0


def test_a_batch_with_a_bad_record_stores_none_of_it(db_url: str) -> None:
    """A batch whose last record is refused stores none of it; sent again
    (fixed), every command once (a batch cut at its COMMIT: below)."""
    recs = [rec(i) for i in range(4)]
    broken = rec(4)
    broken.writes[0].size = -1  # out of range: fails in the writer's checks
    with Store(db_url) as s:
        with pytest.raises(ValueError):
            s.add_commands([*recs, broken])
        assert counts(s)["command"] == 0
        assert s.add_commands([*recs, rec(4)]) == 5
        assert s.add_commands([*recs, rec(4)]) == 0
        assert counts(s)["command"] == 5


# -- PostgreSQL: the connection cut at the COMMIT ---------------------------------

_COMMIT = b"Q\x00\x00\x00\x0bCOMMIT\x00"  # a simple query message: COMMIT


class CommitCutter:
    """A relay in front of the server's unix socket that counts COMMITs
    and, when armed, cuts the connection at one: "before" (the COMMIT never
    reaches the server: it rolls back) or "after" (the server commits, its
    reply is lost: the client cannot tell)."""

    def __init__(self, server_dir: Path) -> None:
        self.target = str(server_dir / ".s.PGSQL.5432")
        self.dir = Path(tempfile.mkdtemp(prefix="shj-cut-", dir="/tmp"))
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.dir / ".s.PGSQL.5432"))
        self.listener.listen(16)
        self.commits = 0
        self.armed: str | None = None
        self.cut = threading.Event()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(self.target)
            state = {"committing": False}
            threading.Thread(target=self._up, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, state), daemon=True).start()

    @staticmethod
    def _close(*socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _up(self, client: socket.socket, server: socket.socket, state: dict[str, bool]) -> None:
        try:
            while data := client.recv(65536):
                if _COMMIT in data:
                    with self._lock:
                        self.commits += 1
                        armed, self.armed = self.armed, None
                    if armed == "before":
                        self.cut.set()
                        self._close(client, server)
                        return
                    state["committing"] = armed == "after"
                server.sendall(data)
        except OSError:
            pass
        self._close(client, server)

    def _down(self, server: socket.socket, client: socket.socket, state: dict[str, bool]) -> None:
        try:
            while data := server.recv(65536):
                if state["committing"]:  # the server's answer to the COMMIT: lost
                    self.cut.set()
                    break
                client.sendall(data)
        except OSError:
            pass
        self._close(client, server)

    def url(self, url: str) -> str:
        return make_url(url).set(query={"host": str(self.dir)}).render_as_string(False)

    def close(self) -> None:
        self.listener.close()
        for p in self.dir.iterdir():
            p.unlink()
        self.dir.rmdir()


@pytest.fixture
def cutter(pg_fresh_url: str) -> Iterator[CommitCutter]:
    relay = CommitCutter(Path(str(make_url(pg_fresh_url).query["host"])))
    yield relay
    relay.close()


@pytest.mark.pg
@pytest.mark.parametrize("where", ["before", "after"])
def test_a_batch_whose_commit_is_cut_is_sent_again_without_duplicates(
    pg_fresh_url: str, cutter: CommitCutter, where: str
) -> None:
    """The connection lost at a batch's COMMIT: the writer cannot know
    whether the server committed.  The batch sent again (as the daemon
    does, the spool still holding it) leaves every command once."""
    recs = [rec(i) for i in range(30)]
    with Store(cutter.url(pg_fresh_url)) as s:
        cutter.armed = where
        with pytest.raises(StoreError):
            s.add_commands(recs)
        assert cutter.cut.is_set()
    with Store(pg_fresh_url) as direct:
        assert counts(direct)["command"] == (30 if where == "after" else 0)
    with Store(cutter.url(pg_fresh_url)) as s:
        assert s.add_commands(recs) == (0 if where == "after" else 30)
        assert s.add_commands(recs[10:]) == 0
        got = counts(s)
    assert got["command"] == 30 and got["write_event"] == 30 and got["read_event"] == 60
    assert got["content"] == 30 and got["read_file"] == 31


@pytest.mark.pg
def test_postgresql_stores_a_batch_per_transaction(
    pg_fresh_url: str, cutter: CommitCutter
) -> None:
    """PG_BATCH commands per transaction: one COMMIT (one wait for the
    server's durable commit) per batch, not per command."""
    recs = [rec(i) for i in range(2 * PG_BATCH + 7)]
    with Store(cutter.url(pg_fresh_url)) as s:
        before = cutter.commits
        assert s.add_commands(recs) == len(recs)
        assert cutter.commits - before == 3
        before = cutter.commits
        for r in recs[:3]:
            s.add_command(r)
        assert cutter.commits - before == 3
    with Store(pg_fresh_url) as direct:
        assert counts(direct)["command"] == len(recs)


# -- a lab store -----------------------------------------------------------------------


def _server(*argv: str, stdin: str | None = None) -> None:
    res = subprocess.run([sys.executable, "-m", "shournal", "server", *argv], input=stdin,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr


def _admin(url: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    u = make_url(url)
    with psycopg.connect(host=u.query["host"], user=u.username, dbname=u.database,
                         autocommit=True) as conn:  # fmt: skip
        cur = conn.execute(sql)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


@pytest.fixture
def lab_users(pg_fresh_url: str) -> Iterator[tuple[str, str]]:
    """The URLs of two users of a lab store on the tests' server (roles
    are the server's: removed again)."""
    _server("init", pg_fresh_url)
    names = [f"lab-uuid-{os.getpid()}-{n}" for n in ("a", "b")]
    try:
        for name in names:
            _server("add-user", pg_fresh_url, name)
        yield tuple(  # type: ignore[misc]
            make_url(pg_fresh_url).set(username=n).render_as_string(False) for n in names
        )
    finally:
        for name in names:
            _admin(pg_fresh_url, f'DROP ROLE IF EXISTS "{name}"')


@pytest.mark.pg
def test_in_a_lab_store_a_uuid_is_unique_per_owner(
    pg_fresh_url: str, lab_users: tuple[str, str]
) -> None:
    """In a lab store each user's commands are unique by (owner, uuid): a
    user's batch sent twice stores once; a colleague's command with the
    same UUID is stored as his own and tells neither anything."""
    alice, bob = lab_users
    recs = [rec(i) for i in range(6)]
    with Store(alice) as s:
        assert s.add_commands(recs) == 6
        assert s.add_commands(recs) == 0
        assert s.add_command(recs[0]) == Journal(s).find()[0].id
    with Store(bob) as s:
        assert s.add_commands(recs[:3]) == 3  # the same UUIDs, his own rows
        assert s.add_commands(recs[:3]) == 0
        assert [c.text for c in Journal(s).find()] == [r.text for r in recs[:3]]
    owners = _admin(pg_fresh_url, "SELECT owner, count(*), count(DISTINCT uuid) FROM command "
                    "GROUP BY owner ORDER BY owner")  # fmt: skip
    assert [(str(o), n, d) for o, n, d in owners] == [
        (make_url(alice).username, 6, 6), (make_url(bob).username, 3, 3)]
    (index,) = _admin(pg_fresh_url, "SELECT indexdef FROM pg_indexes "
                      "WHERE indexname = 'ix_command_uuid'")  # fmt: skip
    assert "(owner, uuid)" in index[0]
    with Store(alice) as s, s.reading() as conn:
        assert conn.execute(text("SELECT count(*) FROM write_event")).scalar_one() == 6
