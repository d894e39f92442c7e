"""`shournal server init` and `add-user` on the private PostgreSQL server
of the tests (tests/fixtures_pg.py): what they print, --dry-run changing
nothing, idempotence, refusals as one line, passwords never printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from shournal.store import Store
from shournal.store.lab import SHARE_TABLE, data_tables
from shournal.store.migrations import SCHEMA_VERSION

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


# -- upgrading a lab store (server init on an older schema) ---------------------------


def structure(url: str) -> dict[str, set[tuple[object, ...]]]:
    """What a lab store is made of, by name: columns, constraints,
    indexes, policies, row-level security and owners, and grants."""
    queries = {
        "columns": "SELECT table_name, column_name, data_type, is_nullable, column_default "
        "FROM information_schema.columns WHERE table_schema = 'public'",
        "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
        "FROM pg_constraint WHERE connamespace = 'public'::regnamespace",
        "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes "
        "WHERE schemaname = 'public'",
        "policies": "SELECT tablename, policyname, cmd, qual, with_check FROM pg_policies "
        "WHERE schemaname = 'public'",
        "tables": "SELECT relname, relrowsecurity, relforcerowsecurity, "
        "pg_get_userbyid(relowner) FROM pg_class "
        "WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'S')",
        "grants": "SELECT table_name, privilege_type, grantee FROM "
        "information_schema.role_table_grants WHERE table_schema = 'public'",
        "sequences": "SELECT c.relname, has_sequence_privilege('shournal_users', c.oid, "
        "'USAGE') FROM pg_class c WHERE relnamespace = 'public'::regnamespace "
        "AND relkind = 'S'",
    }
    return {name: set(admin(url, sql)) for name, sql in queries.items()}


# What schema 8, 9 and 10 added (tables with unique and foreign keys, a
# column with a unique partial index): taken away, the store is one that
# server init made at schema 7.
TO_SCHEMA_7 = (
    "DROP TABLE command_tag, command_note, tag, redaction",
    "ALTER TABLE command DROP COLUMN imported_from, DROP COLUMN import_key",
    "UPDATE schema_version SET version = 7",
)


def as_user(url: str, role: str, *sql: str) -> None:
    admin(url, f'SET ROLE "{role}"; ' + "; ".join(sql))


def erins_command(url: str) -> None:
    as_user(
        url, "lab-erin",
        "INSERT INTO env (hostname, username) VALUES ('h1', 'erin')",
        "INSERT INTO working_dir (path) VALUES ('/home/erin')",
        "INSERT INTO command (text, return_value, start_time, end_time, cwd_id, env_id, "
        "dropped_writes, dropped_reads, lost_events) SELECT 'make', 0, now(), now(), w.id, "
        "e.id, 0, 0, 0 FROM working_dir w, env e",
    )  # fmt: skip


def test_init_upgrades_an_older_lab_store_to_exactly_a_new_one(
    pg_fresh_url: str, tmp_path: Path
) -> None:
    url = pg_fresh_url
    assert server("init", url).returncode == 0
    assert server("add-user", url, "lab-erin").returncode == 0
    try:
        new = structure(url)
        for sql in TO_SCHEMA_7:
            admin(url, sql)
        erins_command(url)
        # its users cannot upgrade it, and are told who can
        env = {**os.environ, "SHOURNAL_DB_URL": url, "HOME": str(tmp_path),
               "XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_DATA_HOME": str(tmp_path / "d")}
        res = subprocess.run([sys.executable, "-m", "shournal", "query", "--command-id", "1"],
                             env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert res.returncode == 3, res
        assert res.stderr.splitlines() == [
            f"shournal: the lab store {make_url(url).render_as_string()} has schema version 7, "
            f"older than this shournal's ({SCHEMA_VERSION}): ask its administrator to run "
            "`shournal server init` to upgrade it"
        ]
        old = structure(url)
        dry = server("init", url, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert 'ALTER TABLE "tag" ADD COLUMN owner name;' in dry.stdout
        assert "CREATE UNIQUE INDEX ix_command_import_key ON public.command USING btree " \
            "(owner, import_key) WHERE (import_key IS NOT NULL);" in dry.stdout
        assert "UPDATE schema_version SET version=" in dry.stdout
        assert structure(url) == old
        done = server("init", url)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == (
            f"upgraded the lab store from schema version 7 to {SCHEMA_VERSION} (owner columns, "
            "per-owner uniqueness and foreign keys on what was added)"
        )
        assert structure(url) == new
        assert admin(url, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
        assert server("init", url).stdout == "lab store in place: nothing to do\n"
        # erin's command is still hers; what was added is per owner for her
        assert admin(url, "SELECT owner FROM command") == [("lab-erin",)]
        as_user(url, "lab-erin",
                "INSERT INTO tag (name) VALUES ('x')",
                "INSERT INTO command_tag SELECT c.id, t.id FROM command c, tag t",
                "INSERT INTO redaction SELECT id, 'aws', 1 FROM command")  # fmt: skip
        assert admin(url, "SELECT owner FROM command_tag UNION SELECT owner FROM redaction") == [
            ("lab-erin",)]  # fmt: skip
        res = subprocess.run([sys.executable, "-m", "shournal", "query", "--command-id", "1"],
                             env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        # (the tests' administrator, a superuser, reads every row)
        assert res.returncode == 0 and "$ make" in res.stdout, res
    finally:
        admin(url, "DROP OWNED BY \"lab-erin\"; DROP ROLE \"lab-erin\"")


def test_a_newer_lab_store_is_refused(pg_fresh_url: str) -> None:
    assert server("init", pg_fresh_url).returncode == 0
    admin(pg_fresh_url, f"UPDATE schema_version SET version = {SCHEMA_VERSION + 1}")
    res = server("init", pg_fresh_url)
    assert res.returncode == 3
    assert res.stderr == (
        f"shournal: the lab store has schema version {SCHEMA_VERSION + 1}, newer than this "
        f"shournal's ({SCHEMA_VERSION}); upgrade shournal\n"
    )


def test_init_makes_the_keys_of_an_existing_lab_store_per_owner(pg_fresh_url: str) -> None:
    """A lab store made when the keys of references (a command's note,
    redaction counts) were not per owner: a colleague's command id
    collided there.  init makes them so."""
    url = pg_fresh_url
    assert server("init", url).returncode == 0
    new = structure(url)
    admin(url, "ALTER TABLE redaction DROP CONSTRAINT pk_redaction, "
               "ADD CONSTRAINT pk_redaction PRIMARY KEY (command_id, kind)")  # fmt: skip
    res = server("init", url)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "made keys, uniqueness and foreign keys per owner where they were not\n"
    assert structure(url) == new
