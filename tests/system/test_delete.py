"""shournal delete: criteria, bulk deletion with garbage collection, atomicity,
and the CLI (including its prompt on a real pty), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fixtures_cli import answer_shournal
from fixtures_cli import run_shournal as shournal
from sqlalchemy import func, select, text
from typer.testing import CliRunner

from shournal.cli import app
from shournal.criteria import parse_age, parse_criteria, parse_time_value
from shournal.data import Criteria, CriteriaError, Period
from shournal.deletion import DeleteError
from shournal.record import CommandRecord, FileEvent
from shournal.store import Store, StoreError
from shournal.store import models as m
from shournal.store.gc import delete_commands, plan_delete
from shournal.store.migrations import SCHEMA_VERSION

T0 = 1_700_000_000_000_000_000  # 2023-11-14 22:13:20 UTC
DAY = 86400 * 10**9
SESSION_A = b"\xaa" * 16
SESSION_B = b"\xbb" * 16

TABLES = (
    m.Command,
    m.WriteEvent,
    m.ReadFile,
    m.ReadEvent,
    m.WorkingDir,
    m.Directory,
    m.Content,
    m.ShellSession,
    m.Env,
    m.HashSetting,
)


def ev(path: bytes, size: int = 10, h: int | None = 7, content: bytes | None = None) -> FileEvent:
    return FileEvent(path=path, size=size, mtime_ns=T0, mode=0o100644, hash=h, content=content)


def record(
    text_: str,
    *,
    start_ns: int = T0,
    cwd: str = "/home/u",
    session: bytes | None = SESSION_A,
    host: str = "box",
    chunk: int | None = 256,
    writes: list[FileEvent] | None = None,
    reads: list[FileEvent] | None = None,
) -> CommandRecord:
    return CommandRecord(
        text=text_,
        return_value=0,
        start_ns=start_ns,
        end_ns=start_ns + 10**9,
        working_dir=cwd,
        username="u",
        hostname=host,
        session_uuid=session,
        hash_chunk_size=chunk,
        hash_max_reads=None if chunk is None else 3,
        writes=writes or [],
        reads=reads or [],
    )


def counts(store: Store) -> dict[str, int]:
    with store.reading() as conn:
        return {
            t.__tablename__: conn.execute(select(func.count()).select_from(t)).scalar_one()
            for t in TABLES
        }


def ids(store: Store) -> list[int]:
    with store.reading() as conn:
        return list(conn.execute(select(m.Command.id).order_by(m.Command.id)).scalars())


SCRIPT = b"#!/bin/sh\necho shared\n"


@pytest.fixture
def journal(store: Store) -> dict[str, int]:
    """Four commands: a and b read the same archived script; c is alone in
    session B on another host with hashing off; d is old."""
    a = store.add_command(
        record(
            "./run.sh > out.txt",
            writes=[ev(b"/proj/out.txt"), ev(b"/only-a/x.log", 3, 9)],
            reads=[ev(b"/proj/run.sh", len(SCRIPT), 5, SCRIPT)],
        )
    )
    b = store.add_command(
        record(
            "sh /proj/run.sh",
            start_ns=T0 + 60 * 10**9,
            reads=[ev(b"/proj/run.sh", len(SCRIPT), 5, SCRIPT)],
        )
    )
    c = store.add_command(
        record(
            "make secret_key",
            start_ns=T0 + 120 * 10**9,
            cwd="/srv/build",
            session=SESSION_B,
            host="other",
            chunk=None,
            writes=[ev(b"/srv/build/key", 4, None)],
            reads=[ev(b"/srv/build/Makefile", 20, 11, b"all:\n\ttrue\n")],
        )
    )
    d = store.add_command(record("ls", start_ns=T0 - 400 * DAY, session=None))
    return {"a": a, "b": b, "c": c, "d": d}


# -- the library ---------------------------------------------------------------------


def test_shared_content_survives_until_its_last_command_goes(store, journal):
    before = counts(store)
    assert before == {
        "command": 4,
        "write_event": 3,
        "read_file": 2,  # a and b read the same version of run.sh
        "read_event": 3,
        "working_dir": 2,  # /home/u, /srv/build
        "directory": 3,  # /proj/, /only-a/, /srv/build/
        "content": 2,
        "shell_session": 2,
        "env": 2,
        "hash_setting": 1,
    }

    res = delete_commands(store, parse_criteria(command_id=[journal["a"]]))
    assert (res.commands, res.events) == (1, 3)
    # /only-a/ was a's alone; /proj/ and the script are still b's.
    assert res.collected == {
        "read_file": 0,
        "directory": 1,
        "tag": 0,
        "working_dir": 0,
        "content": 0,
        "shell_session": 0,
        "env": 0,
        "hash_setting": 0,
    }
    after = counts(store)
    assert after["content"] == 2 and after["directory"] == 2
    assert ids(store) == sorted([journal["b"], journal["c"], journal["d"]])

    res = delete_commands(store, parse_criteria(command_id=[journal["b"]]))
    assert (res.commands, res.events) == (1, 1)
    assert res.collected["content"] == 1 and res.collected["directory"] == 1
    assert res.collected["read_file"] == 1
    # Session A is still used by nobody but d? No: d has no session.
    assert res.collected["shell_session"] == 1

    res = delete_commands(store, parse_criteria(command_id=[journal["c"], journal["d"], 123456]))
    assert (res.commands, res.events) == (2, 2)
    assert res.collected["working_dir"] == 2
    assert counts(store) == dict.fromkeys(before, 0)


def test_criteria_are_and_combined(store, journal):
    now = datetime.fromtimestamp(T0 / 1e9, UTC) + timedelta(days=1)
    crit = parse_criteria(cwd="/home/u", command_text="%run.sh%", now=now)
    plan = plan_delete(store, crit)
    assert plan.command_ids == [journal["a"], journal["b"]]
    assert plan.event_count == 4

    # AND: text matches a and b, the session only c.
    crit = parse_criteria(command_text="%run%", session_id=SESSION_B)
    assert plan_delete(store, crit).commands == []

    old = parse_criteria(older_than="1y", now=now)
    assert plan_delete(store, old).command_ids == [journal["d"]]
    crit = parse_criteria(older_than="1y", cwd="/srv/build", now=now)
    assert plan_delete(store, crit).commands == []

    # Exact cwd unless it has %; LIKE only treats % as wildcard.
    assert plan_delete(store, parse_criteria(cwd="/srv")).commands == []
    assert plan_delete(store, parse_criteria(cwd="/srv%")).command_ids == [journal["c"]]
    assert plan_delete(store, parse_criteria(command_text="make secret_key")).command_ids == [
        journal["c"]
    ]
    assert plan_delete(store, parse_criteria(command_text="make secretXkey")).commands == []

    until = parse_criteria(until="2023-11-14T22:14:00+00:00")
    assert plan_delete(store, until).command_ids == [journal["d"], journal["a"]]

    base64_b = "u7u7u7u7u7u7u7u7u7u7uw=="
    assert plan_delete(store, parse_criteria(session_id=base64_b)).command_ids == [journal["c"]]


def test_plan_changes_nothing_and_matches_the_deletion(store, journal):
    before = counts(store)
    crit = parse_criteria(session_id=SESSION_A)
    plan = plan_delete(store, crit)
    assert counts(store) == before
    assert [c.text for c in plan.commands] == ["./run.sh > out.txt", "sh /proj/run.sh"]
    res = delete_commands(store, crit)
    assert res.commands == len(plan.commands) and res.events == plan.event_count


def test_only_ids_limits_to_the_confirmed_set(store, journal):
    crit = parse_criteria(cwd="/home/u")
    res = delete_commands(store, crit, only_ids=[journal["b"], journal["c"]])
    # c is confirmed but does not match the criteria: it stays.
    assert res.commands == 1
    assert ids(store) == sorted([journal["a"], journal["c"], journal["d"]])


def test_no_match_changes_nothing(store, journal):
    before = counts(store)
    res = delete_commands(store, parse_criteria(command_id=[999]))
    assert (res.commands, res.events) == (0, 0)
    assert counts(store) == before


def test_a_failure_half_way_rolls_everything_back(store, journal):
    # A real error raised by the database after the events and commands
    # were already deleted inside the transaction.
    with store.writing() as conn:
        if store.dialect_name == "sqlite":
            conn.execute(
                text(
                    "CREATE TRIGGER no_gc BEFORE DELETE ON shell_session "
                    "BEGIN SELECT RAISE(ABORT, 'refused by test'); END"
                )
            )
        else:
            conn.execute(
                text(
                    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'refused by test'; END $$"
                )
            )
            conn.execute(
                text(
                    "CREATE TRIGGER no_gc BEFORE DELETE ON shell_session "
                    "FOR EACH ROW EXECUTE FUNCTION refuse()"
                )
            )
            # Fires even with session_replication_role = replica.
            conn.execute(text("ALTER TABLE shell_session ENABLE ALWAYS TRIGGER no_gc"))
    before = counts(store)
    with pytest.raises(StoreError) as info:
        delete_commands(store, parse_criteria(session_id=SESSION_B))
    assert "refused by test" in str(info.value) and "\n" not in str(info.value)
    assert counts(store) == before
    # The connection is usable again and the temp tables are gone.
    res = delete_commands(store, parse_criteria(command_id=[journal["a"]]))
    assert res.commands == 1


def test_foreign_keys_are_on_again_after_a_delete(tmp_path):
    with Store(f"sqlite:///{tmp_path / 'j.sqlite'}") as s:
        s.add_command(record("x"))
        delete_commands(s, parse_criteria(command_text="x"))
        with s.reading() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_many_commands_in_bulk(store):
    """Enough ids to exceed every IN-list and parameter limit."""
    n = 1200
    with store.writing() as conn:
        env = conn.execute(
            m.Env.__table__.insert().returning(m.Env.id), {"hostname": "h", "username": "u"}
        ).scalar_one()
        d = conn.execute(
            m.Directory.__table__.insert().returning(m.Directory.id), {"path": b"/bulk/"}
        ).scalar_one()
        cwd = conn.execute(
            m.WorkingDir.__table__.insert().returning(m.WorkingDir.id), {"path": "/bulk"}
        ).scalar_one()
        when = datetime.fromtimestamp(T0 / 1e9, UTC)
        conn.execute(
            m.Command.__table__.insert(),
            [
                {
                    "id": i + 1,
                    "text": f"cmd {i}",
                    "return_value": 0,
                    "start_time": when + timedelta(seconds=i),
                    "end_time": when + timedelta(seconds=i),
                    "cwd_id": cwd,
                    "env_id": env,
                    "dropped_writes": 0,
                    "dropped_reads": 0,
                    "lost_events": 0,
                }
                for i in range(n)
            ],
        )
        conn.execute(
            m.WriteEvent.__table__.insert(),
            [
                {
                    "command_id": i // 3 + 1,
                    "directory_id": d,
                    "basename": b"f%d" % i,
                    "size": i,
                    "mtime_ns": i,
                    "hash": b"",
                    "mode": 0o644,
                }
                for i in range(3 * n)
            ],
        )
    keep = n - 1
    res = delete_commands(
        store, parse_criteria(cwd="/bulk"), only_ids=[i + 1 for i in range(n) if i != keep - 1]
    )
    assert (res.commands, res.events) == (n - 1, 3 * (n - 1))
    assert res.collected["directory"] == 0  # still used by the survivor
    assert res.collected["working_dir"] == 0
    assert counts(store)["write_event"] == 3
    res = delete_commands(store, parse_criteria(cwd="/bulk"))
    assert res.collected["directory"] == 1 and res.collected["env"] == 1
    assert res.collected["working_dir"] == 1


# -- ages and dates ------------------------------------------------------------------


def _ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 10**9


def test_parse_age():
    now = datetime(2024, 3, 31, 12, 0, tzinfo=UTC)

    def age(text: str) -> int:
        return parse_age("--older-than", text, now=now).start_ns

    assert age("1y") == _ns(datetime(2023, 3, 31, 12, 0, tzinfo=UTC))
    assert age("1m") == _ns(datetime(2024, 2, 29, 12, 0, tzinfo=UTC))
    assert age("13M") == _ns(datetime(2023, 2, 28, 12, 0, tzinfo=UTC))
    assert age("3d") == _ns(now - timedelta(days=3))
    assert age(" 2h ") == _ns(now - timedelta(hours=2))
    assert age("2w") == _ns(now - timedelta(weeks=2))
    assert age("30min") == _ns(now - timedelta(minutes=30))
    assert age("10s") == _ns(now - timedelta(seconds=10))
    for bad in ("", "3", "d", "-1d", "1.5d", "3 fortnights", "1x", "99999999999999y"):
        with pytest.raises(CriteriaError) as info:
            age(bad)
        assert "\n" not in str(info.value)


def test_until_a_date_is_that_whole_day():
    """As in ``shournal query``: a date is the whole (local) day, a time
    its precision."""
    assert parse_time_value("--until", "2024-01-31T14:00+02:00") == Period(
        _ns(datetime(2024, 1, 31, 12, tzinfo=UTC)), _ns(datetime(2024, 1, 31, 12, 1, tzinfo=UTC))
    )
    day = parse_time_value("--until", "2024-01-31")
    assert day.start_ns == _ns(datetime(2024, 1, 31).astimezone())
    assert day.end_ns == _ns(datetime(2024, 2, 1).astimezone())
    for bad in ("", "last tuesday", "2024-13-01", "31.01.2024", "2024-01-31T25:00"):
        with pytest.raises(CriteriaError):
            parse_time_value("--until", bad)


def test_criteria_errors():
    with pytest.raises(DeleteError, match="no criteria"):
        delete_commands(None, parse_criteria())  # type: ignore[arg-type]
    with pytest.raises(DeleteError, match="no criteria"):
        plan_delete(None, Criteria())  # type: ignore[arg-type]
    with pytest.raises(CriteriaError, match="session id"):
        parse_criteria(session_id="not-an-id")
    with pytest.raises(CriteriaError, match="empty"):
        parse_criteria(cwd="")
    with pytest.raises(CriteriaError, match="command-id"):
        parse_criteria(command_id=[-1])
    # Both cutoffs: the earlier one is what all criteria together mean.
    now = datetime(2024, 6, 1, tzinfo=UTC)
    crit = parse_criteria(older_than="1y", until="2024-05-01T00:00Z", now=now)
    assert crit.until is not None
    assert crit.until.start_ns == _ns(datetime(2023, 6, 1, tzinfo=UTC))


# -- the CLI ---------------------------------------------------------------------------


@pytest.fixture
def cli_journal(tmp_path: Path, cli_env: dict[str, str]) -> Path:
    path = tmp_path / "journal.sqlite"
    with Store(f"sqlite:///{path}") as s:
        s.add_command(
            record("./run.sh", reads=[ev(b"/proj/run.sh", len(SCRIPT), 5, SCRIPT)],
                   writes=[ev(b"/proj/out")])
        )  # fmt: skip
        s.add_command(record("sh /proj/run.sh", reads=[ev(b"/proj/run.sh", 22, 5, SCRIPT)]))
        s.add_command(record("make", cwd="/srv/build", session=SESSION_B))
    return path


def test_cli_deletes_with_yes(cli_journal, cli_env):
    res = shournal(["delete", "--command-text", "%run.sh", "--yes"], cli_env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (
        "Deleted 2 commands and 3 file events. "
        "Removed 1 directory, 1 archived file, 1 session no longer referenced."
    )
    with Store(f"sqlite:///{cli_journal}") as s:
        assert counts(s)["command"] == 1


def test_cli_dry_run_lists_and_changes_nothing(cli_journal, cli_env):
    before = cli_journal.read_bytes()
    res = shournal(["delete", "--session-id", "qqqqqqqqqqqqqqqqqqqqqg==", "--dry-run"], cli_env)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "cmd-id 1 2023-11-14 22:13 /home/u $ ./run.sh"
    assert lines[1].startswith("cmd-id 2 ")
    assert lines[-1] == "Would delete 2 commands and 3 file events (dry run, nothing deleted)."
    assert cli_journal.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["delete", "--yes"], 2, "no criteria"),
        (["delete", "--until", "last tuesday", "--yes"], 2, "cannot read the time"),
        (["delete", "--older-than", "three days", "--yes"], 2, "invalid age"),
        (["delete", "--session-id", "zz", "--yes"], 2, "session id"),
        (["delete", "--cwd", "/srv/build"], 2, "not a terminal"),
        (["delete", "--command-id", "999", "--yes"], 1, "no commands match"),
        (["delete", "--command-id", "999", "--dry-run"], 1, "no commands match"),
    ],
)
def test_cli_bad_input_is_one_line_and_changes_nothing(cli_journal, cli_env, args, code, needle):
    before = cli_journal.read_bytes()
    res = shournal(args, cli_env)
    assert res.returncode == code, res.stderr
    assert res.stderr.count("\n") == 1 and needle in res.stderr
    assert res.stderr.startswith("shournal: ")
    assert cli_journal.read_bytes() == before


def test_cli_unparsable_id_is_a_usage_error(cli_journal, cli_env):
    # Reported by typer itself (a boxed message, not one line: CLI-wide).
    before = cli_journal.read_bytes()
    res = shournal(["delete", "--command-id", "abc", "--yes"], cli_env)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert cli_journal.read_bytes() == before


def test_cli_newer_schema_and_corrupt_journal(tmp_path, cli_env, cli_journal):
    with Store(f"sqlite:///{cli_journal}") as s, s.writing() as conn:
        conn.execute(m.SchemaVersion.__table__.update().values(version=SCHEMA_VERSION + 1))
    before = cli_journal.read_bytes()
    res = shournal(["delete", "--cwd", "/srv/build", "--yes"], cli_env)
    assert res.returncode == 3
    assert res.stderr.startswith("shournal: ") and res.stderr.count("\n") == 1
    assert "newer" in res.stderr
    assert cli_journal.read_bytes() == before

    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database at all " * 300)
    env = {**cli_env, "SHOURNAL_DB_URL": f"sqlite:///{garbage}"}
    res = shournal(["delete", "--cwd", "/x", "--yes"], env)
    assert res.returncode == 3 and res.stderr.count("\n") == 1
    assert garbage.read_bytes() == b"not a database at all " * 300


def test_cli_no_journal_yet(tmp_path, cli_env):
    res = shournal(["delete", "--cwd", "/x", "--yes"], cli_env)
    assert res.returncode == 1 and "nothing to delete" in res.stderr
    assert not (tmp_path / "journal.sqlite").exists()


def test_cli_prompt_on_a_terminal(cli_journal, cli_env):
    before = cli_journal.read_bytes()
    args = ["delete", "--cwd", "/srv/build"]
    question = "Delete 1 command and 0 file events? [y/N]: "
    status, listed, out = answer_shournal(args, cli_env, question, "n")
    assert status == 1 and "cmd-id 3 " in listed and "nothing deleted" in out, out
    assert cli_journal.read_bytes() == before

    status, _, out = answer_shournal(args, cli_env, question, "y")
    assert status == 0 and "Deleted 1 command and 0 file events." in out, out
    with Store(f"sqlite:///{cli_journal}") as s:
        assert ids(s) == [1, 2]


def test_cli_postgresql(pg_fresh_url, cli_env):
    with Store(pg_fresh_url) as s:
        s.add_command(record("a", reads=[ev(b"/p/s.sh", 3, 1, b"abc")]))
        s.add_command(record("b", reads=[ev(b"/p/s.sh", 3, 1, b"abc")], session=SESSION_B))
    env = {**cli_env, "SHOURNAL_DB_URL": pg_fresh_url}
    res = shournal(["delete", "--command-text", "a", "--yes"], env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (
        "Deleted 1 command and 1 file event. Removed 1 session no longer referenced."
    )
    with Store(pg_fresh_url) as s:
        assert counts(s)["content"] == 1


def test_help():
    res = CliRunner().invoke(app, ["delete", "--help"])
    assert res.exit_code == 0
    for option in ("--command-id", "--session-id", "--cwd", "--command-text", "--older-than",
                   "--until", "--dry-run", "--yes"):  # fmt: skip
        assert option in res.output


@pytest.mark.parametrize("can_index", [True, False])
def test_postgresql_without_the_trigger_privilege(pg_fresh_url, monkeypatch, can_index):
    """A plain (non-superuser) role cannot skip foreign-key triggers: the
    triggers run, helped by transaction-local indexes when the role owns
    the table, and the result is the same; no index is left behind."""
    import shournal.store.gc as mt

    def lock_only(conn):
        conn.execute(text(f"LOCK TABLE {mt._PG_LOCK_ORDER} IN SHARE ROW EXCLUSIVE MODE"))
        return False

    monkeypatch.setattr(mt, "_pg_prepare", lock_only)
    monkeypatch.setattr(mt, "_PG_INDEX_FROM", 0)
    if not can_index:
        monkeypatch.setattr(mt, "_pg_try_index", lambda conn, child, col: None)
    with Store(pg_fresh_url) as s:
        for i in range(5):
            s.add_command(
                record(
                    f"c{i}",
                    session=bytes([i]) * 16,
                    reads=[ev(b"/d%d/s.sh" % i, 3, i, b"v%d" % i)],
                    writes=[ev(b"/shared/out", 1, 1)],
                )
            )
        res = delete_commands(s, parse_criteria(command_text="c%"), only_ids=[1, 2, 3, 4])
        assert (res.commands, res.events) == (4, 8)
        assert res.collected == {
            "read_file": 4,
            "directory": 4,
            "tag": 0,
            "working_dir": 0,
            "content": 4,
            "shell_session": 4,
            "env": 0,
            "hash_setting": 0,
        }
        with s.reading() as conn:
            left = conn.execute(
                text("SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'shournal_gc%'")
            ).scalar_one()
        assert left == 0
        assert counts(s)["content"] == 1 and counts(s)["directory"] == 2


def test_a_writer_makes_again_the_rows_a_delete_collected(store):
    """The writer keeps the ids of the rows it found (its host, directory,
    session, hash setting) across its transactions on PostgreSQL; the rows a
    delete collected since are made again, not referenced gone."""
    assert store.add_commands([record("first", cwd="/kept")]) == 1
    res = delete_commands(store, parse_criteria(command_text="first"))
    assert res.commands == 1
    assert counts(store)["env"] == counts(store)["working_dir"] == 0
    assert store.add_commands([record("second", cwd="/kept", start_ns=T0 + 1)]) == 1
    with store.reading() as conn:
        row = conn.execute(
            select(m.Env.hostname, m.WorkingDir.path, m.ShellSession.uuid, m.HashSetting.chunk_size)
            .select_from(m.Command)
            .join(m.Env, m.Env.id == m.Command.env_id)
            .join(m.WorkingDir, m.WorkingDir.id == m.Command.cwd_id)
            .join(m.ShellSession, m.ShellSession.id == m.Command.session_id)
            .join(m.HashSetting, m.HashSetting.id == m.Command.hash_setting_id)
            .where(m.Command.text == "second")
        ).one()
    assert tuple(row) == ("box", "/kept", SESSION_A, 256)
    assert counts(store)["env"] == counts(store)["shell_session"] == 1
