"""`shournal server init` and `add-user` on the private PostgreSQL server
of the tests (tests/fixtures_pg.py): what they print, --dry-run changing
nothing, idempotence, refusals as one line, passwords never printed."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest
from sqlalchemy.engine import make_url

from shournal.store import Store
from shournal.store.lab import SHARE_TABLE, data_tables

pytestmark = [pytest.mark.pg]


def server(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shournal", "server", *argv],
        input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def admin(url: str, sql: str) -> list[tuple[object, ...]]:
    u = make_url(url)
    with psycopg.connect(host=u.query["host"], user=u.username, dbname=u.database,
                         autocommit=True) as conn:  # fmt: skip
        cur = conn.execute(sql)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def tables(url: str) -> set[str]:
    return {r[0] for r in admin(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


def test_dry_run_prints_the_sql_and_changes_nothing(pg_fresh_url: str) -> None:
    res = server("init", pg_fresh_url, "--dry-run")
    assert res.returncode == 0, res.stderr
    sql = res.stdout
    for table in data_tables():
        assert f"ALTER TABLE \"{table}\" FORCE ROW LEVEL SECURITY;" in sql or (
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY;" in sql
        ), table
        assert "owner name NOT NULL DEFAULT current_user" in sql
    assert "CREATE POLICY lab_read ON" in sql
    assert "SECURITY DEFINER" not in sql and " BYPASSRLS" not in sql
    assert tables(pg_fresh_url) == set()


def test_init_is_idempotent_and_says_what_it_did(pg_fresh_url: str) -> None:
    first = server("init", pg_fresh_url)
    assert first.returncode == 0, first.stderr
    assert "created the journal's tables" in first.stdout
    assert "row-level security enabled and forced on every table" in first.stdout
    assert tables(pg_fresh_url) == {*data_tables(), "schema_version", SHARE_TABLE}
    again = server("init", pg_fresh_url)
    assert (again.returncode, again.stdout, again.stderr) == (
        0, "lab store in place: nothing to do\n", "")  # fmt: skip
    # something undone is done again, and only that
    admin(pg_fresh_url, "DROP POLICY lab_delete ON command")
    admin(pg_fresh_url, "ALTER TABLE content NO FORCE ROW LEVEL SECURITY")
    dry = server("init", pg_fresh_url, "--dry-run")
    assert dry.stdout.splitlines()[1:] == [
        'ALTER TABLE "content" FORCE ROW LEVEL SECURITY;',
        "CREATE POLICY lab_delete ON \"command\" FOR DELETE USING (owner = current_user);",
    ]
    fixed = server("init", pg_fresh_url)
    assert fixed.stdout.splitlines() == [
        "row-level security enabled and forced on every table",
        "created 1 policies (read: own and shared rows; insert, update, delete: own rows only)",
    ]
    assert server("init", pg_fresh_url).stdout == "lab store in place: nothing to do\n"


def test_the_stores_writer_writes_and_an_old_journal_is_refused(pg_fresh_url: str) -> None:
    # a single-user journal is not made a lab store behind its users' back
    Store(pg_fresh_url).close()
    res = server("init", pg_fresh_url)
    assert res.returncode == 3
    assert res.stderr.startswith("shournal: this database holds a single-user journal")
    assert len(res.stderr.splitlines()) == 1


def test_add_user_never_prints_a_password(pg_fresh_url: str) -> None:
    assert server("init", pg_fresh_url).returncode == 0
    secret = "S3cret-not-to-be-printed"
    url = make_url(pg_fresh_url).set(password="admin-pw-xyz").render_as_string(
        hide_password=False)  # fmt: skip
    dry = server("add-user", url, "lab-carol", "--password-stdin", "--dry-run",
                 stdin=secret + "\n")  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert secret not in dry.stdout + dry.stderr
    assert "admin-pw-xyz" not in dry.stdout + dry.stderr
    assert dry.stdout.splitlines()[0] == "-- " + make_url(url).render_as_string()
    assert "PASSWORD '********'" in dry.stdout
    res = server("add-user", pg_fresh_url, "lab-carol", "--password-stdin", stdin=secret + "\n")
    assert res.returncode == 0, res.stderr
    assert secret not in res.stdout + res.stderr
    assert "password of lab-carol set (scram-sha-256)" in res.stdout
    (stored,) = admin(pg_fresh_url, "SELECT rolpassword FROM pg_authid WHERE rolname = 'lab-carol'")
    assert str(stored[0]).startswith("SCRAM-SHA-256$")
    again = server("add-user", pg_fresh_url, "lab-carol")
    assert again.stdout == "lab-carol is a shournal user already: nothing to do\n"
    admin(pg_fresh_url, 'DROP ROLE "lab-carol"')


def test_add_user_refuses_roles_that_would_read_everything(pg_fresh_url: str) -> None:
    assert server("init", pg_fresh_url).returncode == 0
    admin(pg_fresh_url, 'CREATE ROLE "lab-dave" LOGIN BYPASSRLS')
    try:
        res = server("add-user", pg_fresh_url, "lab-dave")
        assert res.returncode == 3
        assert "bypasses row-level security" in res.stderr
        assert admin(pg_fresh_url,
                     "SELECT pg_has_role('lab-dave', 'shournal_users', 'MEMBER')") == [(False,)]
    finally:
        admin(pg_fresh_url, 'DROP ROLE "lab-dave"')
    res = server("add-user", pg_fresh_url, "shournal")  # the tests' superuser
    assert res.returncode == 3 and "is a superuser" in res.stderr
    res = server("add-user", pg_fresh_url, "bad name")
    assert res.returncode == 2 and res.stderr.startswith("shournal: invalid role name")
    res = server("init", "sqlite:////tmp/x.sqlite")
    assert res.returncode == 3 and "needs a postgresql:// URL" in res.stderr


def test_an_unreachable_server_is_one_line_with_the_password_masked() -> None:
    res = server("init", "postgresql://admin:topsecret@127.0.0.1:1/x")
    assert res.returncode == 3
    assert res.stdout == ""
    assert res.stderr.startswith("shournal: cannot reach postgresql://admin:***@127.0.0.1:1/x: ")
    assert "topsecret" not in res.stderr and len(res.stderr.splitlines()) == 1
