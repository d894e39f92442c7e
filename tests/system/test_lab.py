"""A lab store (docs/lab.md): two users on two hosts record into one
PostgreSQL over TCP (tests/fixtures_lab.py), and each attacks the other's
rows with raw psql; every refusal has its positive control (the owner, or
a reader the owner shares with, can)."""

from __future__ import annotations

import json
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


def add_the_rest(host: LabHost) -> None:
    """What a recorded line has not: an apparatus manifest and a blob, a
    note, a tag, a redaction count (as shournal writes them, as the host's
    user)."""
    for sql in (
        "INSERT INTO apparatus (command_id, manifest) SELECT max(id), 'm'::bytea FROM command",
        "INSERT INTO command_note (command_id, text) SELECT max(id), 'why' FROM command",
        "INSERT INTO tag (name) VALUES ('paper')",
        "INSERT INTO command_tag (command_id, tag_id) SELECT max(c.id), max(t.id) "
        "FROM command c, tag t",
        "INSERT INTO redaction (command_id, kind, count) SELECT max(id), 'aws', 1 FROM command",
        "INSERT INTO apparatus_blob (digest, data) VALUES (decode(md5(current_user), 'hex'), "
        "'Rd'::bytea)",
    ):
        ok(host.psql(sql))


@pytest.fixture
def recorded(lab_clean: Lab) -> Lab:
    """Both users have recorded a command (and a session, an archived
    script, read and write events, an apparatus manifest, a note, a tag, a
    redaction count): a row of each in every table; nothing is shared."""
    a, b = lab_clean.hosts
    record(a, "alice's")
    record(b, "bob's")
    for h in (a, b):
        add_session(h)
        add_the_rest(h)
    for table in data_tables():
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
    # every unique index of recorded data is per owner: it begins with the
    # owner, or (a primary key of references) ends with it; or it is the
    # primary key of ids, which are the server's
    uniques = lab.admin(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indrelid WHERE i.indisunique "
        "AND c.relnamespace = 'public'::regnamespace AND c.relname <> 'schema_version'"
    )
    assert uniques
    for table, definition in uniques:
        # (a primary key of ids from the shared sequences tells nothing)
        if not definition.endswith("USING btree (id)"):
            assert "(owner, " in definition or (
                definition.endswith(", owner)") and f"pk_{table} " in definition
            ), (table, definition)


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
            # positive control: the other's rows are there (the admin sees them)
            assert rows_of(recorded, table, other.name), table
            assert seen == [me.name], (table, me.name, seen)


# A row of each table as its user would insert it: {o} and {v} add an
# owner column and value, {<table>} is the id of a row of <table> it
# refers to (by default the user's newest, OWN_REF).
INSERTS = {
    "env": "(hostname, username{o}) VALUES ('h', 'u'{v})",
    "hash_setting": "(chunk_size, max_reads{o}) VALUES (1, 1{v})",
    "working_dir": "(path{o}) VALUES ('/forged'{v})",
    "shell_session": "(uuid{o}) VALUES ('forged-session'::bytea{v})",
    "directory": "(path, path_hash{o}) VALUES ('/forged/'::bytea, 1{v})",
    "content": "(algorithm, digest, data{o}) VALUES ('x', 'forged'::bytea, 'd'::bytea{v})",
    "command": (
        "(text, return_value, start_time, end_time, cwd_id, env_id, session_id, "
        "hash_setting_id, dropped_writes, dropped_reads, lost_events{o}) SELECT 'forged', 0, "
        "now(), now(), {working_dir}, {env}, {shell_session}, {hash_setting}, 0, 0, 0{v}"
    ),
    "write_event": (
        "(command_id, directory_id, basename, size, mtime_ns, hash{o}) SELECT "
        "{command}, {directory}, 'f'::bytea, 1, 1, ''::bytea{v}"
    ),
    "read_file": (
        "(directory_id, basename, size, mtime_ns, hash, content_id{o}) SELECT "
        "{directory}, 'f'::bytea, 1, 1, ''::bytea, {content}{v}"
    ),
    "read_event": "(command_id, read_file_id{o}) SELECT {command}, {read_file}{v}",
    "apparatus": "(command_id, manifest{o}) SELECT {command}, 'm'::bytea{v}",
    "command_note": "(command_id, text{o}) SELECT {command}, 'forged'{v}",
    "tag": "(name{o}) VALUES ('forged'{v})",
    "command_tag": "(command_id, tag_id{o}) SELECT {command}, {tag}{v}",
    "redaction": "(command_id, kind, count{o}) SELECT {command}, 'forged', 1{v}",
    "apparatus_blob": "(digest, data{o}) VALUES ('forged'::bytea, 'Rd'::bytea{v})",
}
OWN_REF = "(SELECT max(id) FROM {t} WHERE owner = current_user)"
# Rows whose newest row of their own a user refers to next (each row
# above that refers to a command, a read file or a tag is keyed by it).
FRESH_PARENTS = ("command", "read_file", "tag")


def foreign_keys() -> list[tuple[str, str, str]]:
    """(table, column, referenced table) of every foreign key of the
    models: each is attacked below."""
    from shournal.store import models as m

    return sorted(
        (t.name, fk.parent.name, fk.column.table.name)
        for t in m.Base.metadata.sorted_tables
        for fk in t.foreign_keys
    )


def insert_sql(table: str, owner: str | None = None, **refs: str) -> str:
    fills = {ref: refs.get(ref, OWN_REF.format(t=ref)) for _t, _c, ref in foreign_keys()}
    o, v = ("", "") if owner is None else (", owner", f", '{owner}'")
    return f"INSERT INTO {table} " + INSERTS[table].format(o=o, v=v, **fills)


def fresh_parents(host: LabHost) -> None:
    """A new command, read file and tag of the host's user: the newest, so
    that a row referring to them is new too."""
    for parent in FRESH_PARENTS:
        ok(host.psql(insert_sql(parent).replace("'forged'", "'fresh-' || now()::text")))


def test_every_table_with_an_owner_is_attacked() -> None:
    """A table added to the models without its attacks fails here."""
    assert sorted(INSERTS) == sorted(data_tables())
    assert sorted(CHANGES) == sorted(data_tables())
    assert {ref for _t, _c, ref in foreign_keys()} <= set(INSERTS)
    for table, column, ref in foreign_keys():
        assert column in INSERTS[table] and f"{{{ref}}}" in INSERTS[table], (table, column)


@pytest.mark.parametrize("table", data_tables())
def test_inserting_as_another_owner_is_refused(recorded: Lab, table: str) -> None:
    a, b = recorded.hosts
    before = len(rows_of(recorded, table, b.name))
    refused(a.psql(insert_sql(table, b.name)), "violates row-level security policy")
    assert len(rows_of(recorded, table, b.name)) == before
    # positive controls: as himself (the default, or named), it is stored
    fresh_parents(a)
    mine = len(rows_of(recorded, table, a.name))
    ok(a.psql(insert_sql(table, a.name)))
    assert len(rows_of(recorded, table, a.name)) == mine + 1


@pytest.mark.parametrize("fk", foreign_keys(), ids="-".join)
def test_rows_cannot_point_at_a_colleagues_rows(recorded: Lab, fk: tuple[str, str, str]) -> None:
    """Per-owner foreign keys: a row of one's own that refers to a
    colleague's row (an event on his command, a command in his working
    directory, a tag of his) is refused, so nobody can hang rows on a
    colleague's nor block his deletions."""
    a, b = recorded.hosts
    table, _column, ref = fk
    (theirs,) = recorded.admin(f"SELECT max(id) FROM {ref} WHERE owner = %s", (b.name,))[0]
    fresh_parents(a)
    refused(a.psql(insert_sql(table, **{ref: str(theirs)})), "violates foreign key constraint")
    # positive control: the same row, referring to his own
    ok(a.psql(insert_sql(table)))


CHANGES = {
    "command": "text = 'forged'",
    "write_event": "size = 0",
    "read_event": "command_id = command_id",
    "read_file": "size = 0",
    "content": "data = 'forged'::bytea",
    "shell_session": "uuid = 'forged'::bytea",
    "directory": "path = '/forged/'::bytea",
    "working_dir": "path = '/forged'",
    "env": "hostname = 'forged'",
    "hash_setting": "max_reads = 99",
    "apparatus": "manifest = 'forged'::bytea",
    "command_note": "text = 'forged'",
    "tag": "name = 'forged'",
    "command_tag": "tag_id = tag_id",
    "redaction": "count = 99",
    "apparatus_blob": "data = 'Rforged'::bytea",
}


@pytest.mark.parametrize("table", data_tables())
def test_updating_and_deleting_a_colleagues_rows_changes_nothing(
    recorded: Lab, table: str
) -> None:
    a, b = recorded.hosts
    change = CHANGES[table]
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
    for table in data_tables():
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


def test_a_journal_recorded_alone_moves_into_the_lab_as_its_users(lab_clean: Lab) -> None:
    """Alice recorded into her own SQLite journal (through the setuid
    helper); `server import` moves it into the lab store as her rows, with
    the archived script, note and tag, each once; bob sees none of it."""
    a, b = lab_clean.hosts
    old = a.home / "old.sqlite"
    alone = {"SHOURNAL_DB_URL": f"sqlite:///{old}"}
    script = a.home / "work" / "job.sh"
    script.write_text(SCRIPT)
    os.chown(script, a.user.pw_uid, a.user.pw_gid)
    ok(a.shournal("run", "--", "sh", "job.sh", **alone))
    ok(a.shournal("note", "1", "made out.txt", **alone))
    ok(a.shournal("tag", "1", "paper", **alone))
    record(a, "already in the lab")  # the lab store's ids differ from the journal's
    res = a.shournal("server", "import", str(old), "--map", str(a.home / "map.tsv"))
    assert ok(res).startswith("moved 1 command, skipped 0 already stored, from "), res
    (line,) = [ln for ln in (a.home / "map.tsv").read_text().splitlines() if ln[0] != "#"]
    old_id, new_id = line.split("\t")
    assert old_id == "1" and new_id != "1"
    assert lab_clean.admin("SELECT owner, text FROM command WHERE id = %s", (int(new_id),)) == [
        (a.name, "sh job.sh")]  # fmt: skip
    shown = ok(a.shournal("query", "--command-id", new_id))
    assert "Note: made out.txt" in shown and "Tags: paper" in shown, shown
    assert "echo made by" in shown, shown  # the archived script came along
    for table in ("command_note", "command_tag", "tag", "content"):
        assert {r[0] for r in lab_clean.admin(f"SELECT owner FROM {table}")} == {a.name}, table
    assert ok(b.psql(f"SELECT count(*) FROM command WHERE id = {int(new_id)}")) == "0"
    again = ok(a.shournal("server", "import", str(old)))
    assert again.startswith("moved 0 commands, skipped 1 already stored"), again


def test_a_colleagues_commands_say_whose_they_are(recorded: Lab) -> None:
    """Human output names user@host of the commands that are not the
    reader's own (JSON always carries both); the reader's own stay as
    they were."""
    a, b = recorded.hosts
    ok(b.psql(f"INSERT INTO {SHARE_TABLE} (role) VALUES ('{SHARE_ROLE}')"))
    host = os.uname().nodename  # (the hosts' namespaces share the machine's name)
    out = ok(a.shournal("query", "--command-text", "sh job.sh"))
    blocks = {blk.split("\n")[1]: blk for blk in out.split("\n\n")}
    mine, bobs = blocks[f"Working directory: {a.home}/work"], blocks[
        f"Working directory: {b.home}/work"]  # fmt: skip
    assert "User: " not in mine and "Hostname: " not in mine, mine
    assert f"User: {b.name}\nHostname: {host}" in bobs, bobs
    lines = ok(a.shournal("history", "--all")).splitlines()
    ends = sorted(ln.split("  ")[-1] for ln in lines)
    assert ends == sorted([f"{b.name}@{host} #paper sh job.sh", "#paper sh job.sh"]), lines
    js = json.loads(ok(a.shournal("query", "--command-text", "sh job.sh",
                                  "--output-format", "json")))  # fmt: skip
    assert sorted((c["username"], c["hostname"]) for c in js) == sorted(
        [(a.name, host), (b.name, host)])  # fmt: skip


# -- users' usual credentials -----------------------------------------------------------


def _service_file(host: LabHost, **services: str) -> None:
    """~/.pg_service.conf with a service per keyword (its sslrootcert)."""
    text = "".join(
        f"[{name}]\nhost={host.server_ip}\ndbname=shournal_lab\nuser={host.name}\n"
        f"sslmode=verify-full\nsslrootcert={root}\n"
        for name, root in services.items()
    )
    path = host.home / ".pg_service.conf"
    path.write_text(text)
    os.chown(path, host.user.pw_uid, host.user.pw_gid)


def test_a_service_name_with_verify_full_works_and_a_wrong_ca_is_refused(
    lab_clean: Lab, tmp_path: Path
) -> None:
    """[store] url names a service of ~/.pg_service.conf whose server
    certificate is checked (sslmode=verify-full against the lab's CA; the
    certificate names the address the host reaches the server at); the
    password comes from ~/.pgpass and is never shown; a wrong CA is one
    line, status 3, and nothing stored."""
    from fixtures_lab import make_ca

    a, b = lab_clean.hosts
    wrong_ca, _key = make_ca(tmp_path, "not-the-lab")
    shutil.copyfile(wrong_ca, a.home / "wrong-ca.crt")
    _service_file(a, lab=str(a.home / "ca.crt"), elsewhere=str(a.home / "wrong-ca.crt"))
    password = (a.home / ".pgpass").read_text().split(":")[-1].strip()
    write_config(a.home, '[store]\nurl = "postgresql:///?service=lab"\n', a.install)
    try:
        # (the URL of the config, not the lab fixture's)
        env = {"SHOURNAL_DB_URL": ""}
        ok(a.shournal("run", "--", "true", **env))
        assert lab_clean.admin("SELECT owner, text FROM command") == [(a.name, "true")]
        shown = ok(a.shournal("query", "--command-text", "true", **env))
        assert "$ true" in shown
        # (negative control: it is the config's service that is used)
        write_config(a.home, '[store]\nurl = "postgresql:///?service=elsewhere"\n', a.install)
        assert a.shournal("query", "--command-text", "true", **env).returncode == 3
        # the lab's server speaks TLS to this user: psql through the same service
        ssl = ok(a.run("psql", "-X", "-A", "-t", "service=lab", "-c",
                       "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"))  # fmt: skip
        assert ssl == "t"
        outputs = []
        for argv in (("query", "--command-text", "true"), ("doctor",)):
            res = a.shournal(*argv, SHOURNAL_DB_URL="postgresql:///?service=elsewhere")
            outputs.append(res.stdout + res.stderr)
            if argv[0] == "query":
                assert res.returncode == 3, res
                assert res.stdout == "" and len(res.stderr.splitlines()) == 1, res
                assert "certificate verify failed" in res.stderr, res.stderr
        run = a.shournal("run", "--", "echo", "not stored",
                         SHOURNAL_DB_URL="postgresql:///?service=elsewhere")  # fmt: skip
        outputs.append(run.stdout + run.stderr)
        assert lab_clean.admin("SELECT count(*) FROM command") == [(1,)]
        for text in outputs:
            assert password not in text, text
    finally:
        shutil.rmtree(a.home / ".config")
        (a.home / ".pg_service.conf").unlink()
        (a.home / "wrong-ca.crt").unlink()


def test_rows_of_a_command_are_found_by_its_id_through_an_index(recorded: Lab) -> None:
    """The per-owner primary keys keep their own columns first and the owner
    last: a lineage level or a delete's cascade looks rows up by command id,
    which a key led by the owner answers only by reading the whole index
    (seconds a level on a journal of millions of events)."""
    keys = dict(recorded.admin(
        "SELECT c.relname, array(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY "
        "k(n, o) JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n ORDER BY k.o) "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
        "JOIN pg_namespace s ON s.oid = c.relnamespace "
        "WHERE i.indisprimary AND s.nspname = current_schema()"))  # fmt: skip
    # (the sharing table is keyed by owner and role: looked up by owner)
    per_owner = {t: k for t, k in keys.items() if "owner" in k and t != "lab_share"}
    # positive control: the tables keyed by references are there, per owner
    assert {"read_event", "command_note", "command_tag", "redaction", "apparatus"} <= set(per_owner)
    assert [t for t, k in per_owner.items() if k[0] == "owner" or k[-1] != "owner"] == [], per_owner
    assert per_owner["read_event"][0] == "command_id", per_owner
