"""A lab store (docs/lab.md): two users on two hosts record into one
PostgreSQL over TCP (tests/fixtures_lab.py), and each attacks the other's
rows with raw psql; every refusal has its positive control (the owner, or
a reader the owner shares with, can)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures_lab import SHARE_ROLE, Lab, LabHost
from fixtures_shell import write_config

from shournal.store.lab import OWNER_ROLE, SHARE_TABLE, USERS_ROLE, data_tables

pytestmark = [pytest.mark.root]

# What each user records: a script (archived: its content is in table
# content), a file it writes, a session (shournal run makes none; the raw
# rows below add one).
SCRIPT = "echo made by $(id -un) > out.txt\n"


def record(host: LabHost, tag: str) -> None:
    """`sh job.sh` recorded through the setuid helper as host's user."""
    work = host.home / "work"
    script = work / "job.sh"
    script.write_text(SCRIPT + f"# {tag}\n")
    os.chown(script, host.user.pw_uid, host.user.pw_gid)
    res = host.shournal("run", "--", "sh", "job.sh")
    assert res.returncode == 0, res.stderr


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def refused(res: subprocess.CompletedProcess[str], why: str) -> None:
    assert res.returncode != 0, res.stdout
    assert why in res.stderr, res.stderr


def rows_of(lab: Lab, table: str, owner: str) -> list[tuple[object, ...]]:
    return lab.admin(f"SELECT * FROM {table} WHERE owner = %s ORDER BY 1, 2", (owner,))


def add_session(host: LabHost) -> None:
    ok(host.psql("INSERT INTO shell_session (uuid) VALUES (gen_random_uuid()::text::bytea)"))
    ok(host.psql("UPDATE command SET session_id = (SELECT max(id) FROM shell_session)"))


@pytest.fixture
def recorded(lab_clean: Lab) -> Lab:
    """Both users have recorded a command (and a session, an archived
    script, read and write events); nothing is shared."""
    a, b = lab_clean.hosts
    record(a, "alice's")
    record(b, "bob's")
    for h in (a, b):
        add_session(h)
    for table in ("command", "write_event", "read_event", "read_file", "content",
                  "shell_session", "directory", "working_dir", "env"):  # fmt: skip
        for h in (a, b):
            assert rows_of(lab_clean, table, h.name), (table, h.name)
    return lab_clean


# -- the catalogue -------------------------------------------------------------------


def test_every_table_has_forced_rls_and_no_role_bypasses_it(lab: Lab) -> None:
    names = ["schema_version", *data_tables(), SHARE_TABLE]
    flags = dict(
        (r[0], (r[1], r[2], r[3]))
        for r in lab.admin(
            "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
            "pg_get_userbyid(c.relowner) FROM pg_class c WHERE c.relkind = 'r' "
            "AND c.relnamespace = 'public'::regnamespace"
        )
    )
    assert sorted(flags) == sorted(names)
    assert {n: flags[n] for n in names} == {n: (True, True, OWNER_ROLE) for n in names}
    roles = {
        r[0]: r[1:]
        for r in lab.admin(
            "SELECT rolname, rolcanlogin, rolbypassrls, rolsuper FROM pg_roles "
            "WHERE rolname = ANY(%s)",
            ([OWNER_ROLE, USERS_ROLE, *(h.name for h in lab.hosts)],),
        )
    }
    assert roles == {
        OWNER_ROLE: (False, False, False),
        USERS_ROLE: (False, False, False),
        **{h.name: (True, False, False) for h in lab.hosts},
    }
    # no SECURITY DEFINER function, no view without security_invoker
    assert lab.admin(
        "SELECT proname FROM pg_proc WHERE prosecdef AND pronamespace = 'public'::regnamespace"
    ) == []
    assert lab.admin(
        "SELECT relname FROM pg_class WHERE relkind IN ('v', 'm') "
        "AND relnamespace = 'public'::regnamespace "
        "AND NOT coalesce('security_invoker=true' = ANY(reloptions), false)"
    ) == []
    # every unique index of recorded data begins with the owner (or is the
    # primary key, whose ids are the server's)
    uniques = lab.admin(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indrelid WHERE i.indisunique AND NOT i.indisprimary "
        "AND c.relnamespace = 'public'::regnamespace"
    )
    assert uniques
    for table, definition in uniques:
        assert "(owner, " in definition, (table, definition)


def test_the_owner_column_is_filled_by_the_database(recorded: Lab) -> None:
    a, b = recorded.hosts
    for table in data_tables():
        owners = {r[0] for r in recorded.admin(f"SELECT DISTINCT owner FROM {table}")}
        assert owners <= {a.name, b.name}, table


# -- attacks without sharing -------------------------------------------------------


def test_a_user_reads_only_his_own_rows(recorded: Lab) -> None:
    a, b = recorded.hosts
    for table in data_tables():
        for me, other in ((a, b), (b, a)):
            seen = ok(me.psql(f"SELECT DISTINCT owner FROM {table}")).split()
            # positive control: the other's rows are there (the admin sees them);
            # the recorded lines have no apparatus, note, tag or redaction
            if table not in ("apparatus", "command_note", "tag", "command_tag", "redaction"):
                assert rows_of(recorded, table, other.name), table
                assert seen == [me.name], (table, me.name, seen)
            else:
                assert other.name not in seen


INSERTS = {
    "env": "(hostname, username{o}) VALUES ('h', 'u'{v})",
    "working_dir": "(path{o}) VALUES ('/forged'{v})",
    "shell_session": "(uuid{o}) VALUES ('forged-session'::bytea{v})",
    "directory": "(path, path_hash{o}) VALUES ('/forged/'::bytea, 1{v})",
    "content": "(algorithm, digest, data{o}) VALUES ('x', 'forged'::bytea, 'd'::bytea{v})",
    "command": (
        "(text, return_value, start_time, end_time, cwd_id, env_id, dropped_writes, "
        "dropped_reads, lost_events{o}) SELECT 'forged', 0, now(), now(), "
        "(SELECT min(id) FROM working_dir WHERE owner = current_user), "
        "(SELECT min(id) FROM env WHERE owner = current_user), 0, 0, 0{v}"
    ),
    "write_event": (
        "(command_id, directory_id, basename, size, mtime_ns, hash{o}) SELECT "
        "(SELECT min(id) FROM command WHERE owner = current_user), "
        "(SELECT min(id) FROM directory WHERE owner = current_user), "
        "'f'::bytea, 1, 1, ''::bytea{v}"
    ),
    "read_file": (
        "(directory_id, basename, size, mtime_ns, hash{o}) SELECT "
        "(SELECT min(id) FROM directory WHERE owner = current_user), "
        "'f'::bytea, 1, 1, ''::bytea{v}"
    ),
    "read_event": (
        "(command_id, read_file_id{o}) SELECT "
        "(SELECT max(id) FROM command WHERE owner = current_user), "
        "(SELECT max(id) FROM read_file WHERE owner = current_user){v}"
    ),
    "apparatus": (
        "(command_id, manifest{o}) SELECT "
        "(SELECT min(id) FROM command WHERE owner = current_user), 'm'::bytea{v}"
    ),
}


@pytest.mark.parametrize("table", sorted(INSERTS))
def test_inserting_as_another_owner_is_refused(recorded: Lab, table: str) -> None:
    a, b = recorded.hosts
    sql = f"INSERT INTO {table} " + INSERTS[table]
    before = len(rows_of(recorded, table, b.name))
    refused(a.psql(sql.format(o=", owner", v=f", '{b.name}'")),
            "violates row-level security policy")
    assert len(rows_of(recorded, table, b.name)) == before
    # positive controls: as himself (the default, or named), it is stored
    mine = len(rows_of(recorded, table, a.name))
    if table == "read_event":  # a command of his own that read nothing yet
        ok(a.psql("INSERT INTO read_file (directory_id, basename, size, mtime_ns, hash) "
                  "SELECT min(id), 'g'::bytea, 1, 1, ''::bytea FROM directory"))
        ok(a.psql(f"INSERT INTO command {INSERTS['command'].format(o='', v='')}"))
    ok(a.psql(sql.format(o=", owner", v=f", '{a.name}'")))
    assert len(rows_of(recorded, table, a.name)) == mine + 1


def test_rows_cannot_point_at_a_colleagues_rows(recorded: Lab) -> None:
    """Per-owner foreign keys: an event of one's own on a colleague's
    command (or directory) is refused, so nobody can hang rows on a
    colleague's nor block his deletions."""
    a, b = recorded.hosts
    (theirs,) = recorded.admin("SELECT min(id) FROM command WHERE owner = %s", (b.name,))[0]
    refused(a.psql(
        "INSERT INTO write_event (command_id, directory_id, basename, size, mtime_ns, hash) "
        f"SELECT {theirs}, (SELECT min(id) FROM directory), 'f'::bytea, 1, 1, ''::bytea"
    ), "violates foreign key constraint")  # fmt: skip
    refused(a.psql(f"INSERT INTO apparatus (command_id, manifest) VALUES ({theirs}, 'm')"),
            "violates foreign key constraint")


@pytest.mark.parametrize(
    "table, change",
    [
        ("command", "text = 'forged'"),
        ("write_event", "size = 0"),
        ("read_event", "command_id = command_id"),
        ("read_file", "size = 0"),
        ("content", "data = 'forged'::bytea"),
        ("shell_session", "uuid = 'forged'::bytea"),
        ("directory", "path = '/forged/'::bytea"),
        ("working_dir", "path = '/forged'"),
        ("env", "hostname = 'forged'"),
    ],
)
def test_updating_and_deleting_a_colleagues_rows_changes_nothing(
    recorded: Lab, table: str, change: str
) -> None:
    a, b = recorded.hosts
    before = rows_of(recorded, table, b.name)
    assert ok(a.psql(f"UPDATE {table} SET {change} WHERE owner = '{b.name}' RETURNING 1")) == ""
    assert ok(a.psql(f"DELETE FROM {table} WHERE owner = '{b.name}' RETURNING 1")) == ""
    assert ok(a.psql(f"UPDATE {table} SET {change} RETURNING owner")).split() == [a.name] * len(
        rows_of(recorded, table, a.name)
    )  # positive control: his own rows he may change
    assert rows_of(recorded, table, b.name) == before
    # nor give his own rows away
    refused(a.psql(f"UPDATE {table} SET owner = '{b.name}'"),
            "violates row-level security policy")


def test_deleting_his_own_rows_works_and_leaves_the_colleagues(recorded: Lab) -> None:
    a, b = recorded.hosts
    before = rows_of(recorded, "command", b.name)
    assert ok(a.psql("DELETE FROM command RETURNING owner")).split() == [a.name]
    assert rows_of(recorded, "command", a.name) == []
    assert rows_of(recorded, "command", b.name) == before


def test_inserting_a_colleagues_content_gives_no_signal(recorded: Lab) -> None:
    """Bob archived job.sh; alice inserting content with its digest (or the
    hash of his written file) behaves exactly as inserting a digest nobody
    has: uniqueness is per owner."""
    a, b = recorded.hosts
    ((digest,),) = recorded.admin(
        "SELECT encode(digest, 'hex') FROM content WHERE owner = %s", (b.name,)
    )
    ((whash,),) = recorded.admin(
        "SELECT encode(hash, 'hex') FROM write_event WHERE owner = %s", (b.name,)
    )
    assert not recorded.admin(
        "SELECT 1 FROM content WHERE owner = %s AND encode(digest, 'hex') = %s",
        (a.name, digest),
    )
    unseen = "00" * 16
    (algorithm,) = recorded.admin("SELECT algorithm FROM content LIMIT 1")[0]
    results = []
    for d in (digest, unseen):
        sql = ("INSERT INTO content (algorithm, digest, data) "
               f"VALUES ('{algorithm}', decode('{d}', 'hex'), 'x') ")  # fmt: skip
        results.append(a.run("psql", "-X", "-h", a.server_ip, "-U", a.name, "-d",
                             "shournal_lab", "-c", sql + "ON CONFLICT DO NOTHING"))  # fmt: skip
    assert [(r.returncode, r.stdout, r.stderr) for r in results] == [(0, "INSERT 0 1\n", "")] * 2
    # the same for the partial hash of a file a colleague wrote
    results = []
    for h in (whash, "11" * 8):
        results.append(a.psql(
            "INSERT INTO read_file (directory_id, basename, size, mtime_ns, hash) SELECT "
            "(SELECT min(id) FROM directory WHERE owner = current_user), 'out.txt'::bytea, "
            f"13, 1, decode('{h}', 'hex') RETURNING 'stored'"
        ))  # fmt: skip
    assert [(r.returncode, r.stdout, r.stderr) for r in results] == [(0, "stored\n", "")] * 2


# -- sharing ------------------------------------------------------------------------


def test_shared_rows_are_readable_never_changeable(recorded: Lab) -> None:
    a, b = recorded.hosts
    ok(b.psql(f"INSERT INTO {SHARE_TABLE} (role) VALUES ('{SHARE_ROLE}')"))
    for table in ("command", "write_event", "read_event", "read_file", "content",
                  "shell_session", "directory", "working_dir", "env"):  # fmt: skip
        seen = set(ok(a.psql(f"SELECT DISTINCT owner FROM {table}")).split())
        assert seen == {a.name, b.name}, table  # allowed now
        before = rows_of(recorded, table, b.name)
        assert ok(a.psql(f"DELETE FROM {table} WHERE owner = '{b.name}' RETURNING 1")) == ""
        assert ok(a.psql(f"UPDATE {table} SET owner = owner WHERE owner = '{b.name}' "
                         "RETURNING 1")) == ""  # fmt: skip
        assert rows_of(recorded, table, b.name) == before
    # bob still reads only his own: alice shares nothing
    assert ok(b.psql("SELECT DISTINCT owner FROM command")).split() == [b.name]
    # nobody shares on another's behalf, or stops another's sharing, or
    # shares with a role he is not a member of
    refused(a.psql(f"INSERT INTO {SHARE_TABLE} (owner, role) VALUES ('{b.name}', 'lab')"),
            "violates row-level security policy")
    assert ok(a.psql(f"DELETE FROM {SHARE_TABLE} RETURNING 1")) == ""
    recorded.admin('CREATE ROLE "outsiders" NOLOGIN')
    try:
        refused(a.psql(f"INSERT INTO {SHARE_TABLE} (role) VALUES ('outsiders')"),
                "violates row-level security policy")
    finally:
        recorded.admin('DROP ROLE "outsiders"')
    # bob stops sharing: alice sees her own again
    assert ok(b.psql(f"DELETE FROM {SHARE_TABLE} RETURNING owner")) == b.name
    assert ok(a.psql("SELECT DISTINCT owner FROM command")).split() == [a.name]


def test_a_member_of_another_group_does_not_see_shared_rows(recorded: Lab) -> None:
    a, b = recorded.hosts
    recorded.admin(f'REVOKE "{SHARE_ROLE}" FROM "{a.name}"')
    try:
        ok(b.psql(f"INSERT INTO {SHARE_TABLE} (role) VALUES ('{SHARE_ROLE}')"))
        assert ok(a.psql("SELECT DISTINCT owner FROM command")).split() == [a.name]
    finally:
        recorded.admin(f'GRANT "{SHARE_ROLE}" TO "{a.name}"')


# -- through shournal ---------------------------------------------------------------


def test_query_and_delete_through_shournal(recorded: Lab) -> None:
    a, b = recorded.hosts
    out = ok(a.shournal("query", "--command-text", "sh job.sh", "--output-format", "json"))
    assert f"{a.home}/work" in out and f"{b.home}/work" not in out
    ok(b.psql(f"INSERT INTO {SHARE_TABLE} (role) VALUES ('{SHARE_ROLE}')"))
    out = ok(a.shournal("query", "--command-text", "sh job.sh", "--output-format", "json"))
    assert f"{a.home}/work" in out and f"{b.home}/work" in out
    # --wfile of bob's file, as alice: his command (shared)
    out = ok(a.shournal("query", "--wfile", str(b.home / "work" / "out.txt")))
    assert str(b.home / "work") in out
    # delete as alice: only her own go, and the dry run says so
    dry = ok(a.shournal("delete", "--command-text", "%", "--dry-run"))
    assert "Would delete 1 command" in dry, dry
    ok(a.shournal("delete", "--command-text", "%", "-y"))
    assert rows_of(recorded, "command", a.name) == []
    assert len(rows_of(recorded, "command", b.name)) == 1
    (bobs,) = recorded.admin("SELECT id FROM command WHERE owner = %s", (b.name,))[0]
    res = a.shournal("delete", "--command-id", str(bobs), "-y")
    assert res.returncode == 1, res.stderr
    assert len(rows_of(recorded, "command", b.name)) == 1
    # and bob's own delete works
    ok(b.shournal("delete", "--command-id", str(bobs), "-y"))
    assert rows_of(recorded, "command", b.name) == []


def test_lineage_through_a_colleagues_shared_command(lab_clean: Lab) -> None:
    """Bob writes data in a shared folder; alice's script reads it and
    writes a result: alice's lineage of the result reaches bob's command
    once he shares, and stops at the data before."""
    a, b = lab_clean.hosts
    shared = Path(b.home / "work")
    record(b, "bob's")  # writes out.txt in bob's work dir
    data = shared / "out.txt"
    data.chmod(0o644)
    script = a.home / "work" / "use.sh"
    script.write_text(f"cat {data} > result.txt\n")
    os.chown(script, a.user.pw_uid, a.user.pw_gid)
    # a colleague's file is outside her home and not hers to write
    write_config(a.home, '[read_events]\nonly_writable = false\ninclude_paths = ["/"]\n',
                 a.install)
    try:
        ok(a.shournal("run", "--", "sh", "use.sh"))
    finally:
        shutil.rmtree(a.home / ".config")
    result = str(a.home / "work" / "result.txt")
    before = ok(a.shournal("lineage", result))
    assert "sh use.sh" in before and "sh job.sh" not in before
    ok(b.psql(f"INSERT INTO {SHARE_TABLE} (role) VALUES ('{SHARE_ROLE}')"))
    after = ok(a.shournal("lineage", result))
    assert "sh use.sh" in after and "sh job.sh" in after, after


def test_share_with_in_the_config_shares_and_unshares(lab_clean: Lab) -> None:
    a, b = lab_clean.hosts
    write_config(a.home, '[store]\nshare_with = ["lab", "no-such-role", "shournal_schema"]\n',
                 a.install)
    try:
        res = a.shournal("run", "--", "true")
        assert res.returncode == 0, res.stderr
        # what cannot be shared is said (at the shell's next prompt); the
        # command is stored
        said = "".join(p.read_text() for p in (a.home / "run" / "shournal").glob("warnings*"))
        assert "no role 'no-such-role' on the server" in said, said
        assert "not a member of 'shournal_schema'" in said, said
        assert lab_clean.admin("SELECT text FROM command") == [("true",)]
        assert lab_clean.admin(f"SELECT owner, role::text FROM {SHARE_TABLE}") == [
            (a.name, SHARE_ROLE)
        ]
        assert ok(b.psql("SELECT DISTINCT owner FROM command")).split() == [a.name]
        write_config(a.home, "[store]\nshare_with = []\n", a.install)
        ok(a.shournal("run", "--", "true"))
        assert lab_clean.admin(f"SELECT owner FROM {SHARE_TABLE}") == []
        assert ok(b.psql("SELECT count(*) FROM command")) == "0"
    finally:
        shutil.rmtree(a.home / ".config")


def test_a_password_in_the_url_is_never_printed(lab_clean: Lab) -> None:
    """A URL with a (wrong) password: doctor, query and a recorded command
    say the store cannot be used, never the password."""
    a, _b = lab_clean.hosts
    secret = "Wr0ng-secret-in-url"
    url = a.url.replace(f"{a.name}@", f"{a.name}:{secret}@")
    env = {"SHOURNAL_DB_URL": url, "PGPASSFILE": "/nonexistent"}
    outputs = []
    doctor = a.shournal("doctor", **env)
    outputs.append(doctor.stdout + doctor.stderr)
    assert "password authentication failed" in outputs[-1], outputs[-1]
    query = a.shournal("query", "--history", "3", **env)
    assert query.returncode == 3
    outputs.append(query.stdout + query.stderr)
    run = a.shournal("run", "--", "true", **env)
    outputs.append(run.stdout + run.stderr)
    warnings = a.home / "run" / "shournal"
    outputs.extend(p.read_text() for p in warnings.glob("warnings*"))
    for text in outputs:
        assert secret not in text, text
    assert "the server refused the credentials" in run.stderr, run.stderr
    assert lab_clean.admin("SELECT count(*) FROM command") == [(0,)]


def test_recording_beside_a_colleagues_shared_rows(lab_clean: Lab) -> None:
    """Bob shares; alice records a command reading bob's file in bob's
    directory: her writer must make rows of her own (directory, working
    directory, read file), never reuse his shared ones."""
    a, b = lab_clean.hosts
    record(b, "bob's")
    ok(b.psql(f"INSERT INTO {SHARE_TABLE} (role) VALUES ('{SHARE_ROLE}')"))
    data = b.home / "work" / "out.txt"
    write_config(a.home, '[read_events]\nonly_writable = false\ninclude_paths = ["/"]\n'
                 '[script_archive]\nonly_writable = false\n', a.install)
    try:
        ok(a.shournal("run", "--", "sh", "-c", f"cat {data} job.sh > /dev/null",
                      cwd=b.home / "work"))  # fmt: skip
    finally:
        shutil.rmtree(a.home / ".config")
    for table in ("directory", "working_dir", "read_file", "content"):
        assert rows_of(lab_clean, table, a.name), table
    names = {bytes(r[0]) for r in lab_clean.admin(
        "SELECT basename FROM read_file WHERE owner = %s", (a.name,))}  # fmt: skip
    assert {b"out.txt", b"job.sh"} <= names
    # her query finds both: her read of the script, and his
    out = ok(a.shournal("query", "--rfile", str(b.home / "work" / "job.sh")))
    assert "$ sh -c 'cat " in out and "$ sh job.sh" in out, out
