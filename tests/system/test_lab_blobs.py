"""Archived apparatus content in a lab store (docs/lab.md, "Archived
content on the server"): recorded on one host, restored and replayed on
another; a colleague's shared command replays, one whose content is not
readable says which; raw psql cannot read, forge, change or delete a
colleague's blobs, and storing a colleague's content tells nothing;
`shournal delete` removes the blobs its commands alone named.

The hosts, users and server are tests/fixtures_lab.py's.  "Alice on host
B" is alice with a home of her own there: her file archive on host A is
not hers on host B, so what comes back comes from the server."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures_lab import SHARE_ROLE, SUBNETS, Lab, LabHost, _make_home
from fixtures_shell import wait_for

from shournal.store.lab import SHARE_TABLE

pytestmark = [pytest.mark.root]

DATA = "1\n2\n3\n"
SCRIPT = "awk '{s += $1} END {print s}' data.txt > total.txt\n"


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def _write(host: LabHost, name: str, text: str) -> Path:
    path = host.home / "work" / name
    path.write_text(text)
    os.chown(path, host.user.pw_uid, host.user.pw_gid)
    return path


def record_apparatus(lab: Lab, host: LabHost, data: str = DATA) -> int:
    """`sh sum.sh` (reads data.txt, writes total.txt) recorded with its
    apparatus on ``host``; its command id."""
    _write(host, "data.txt", data)
    _write(host, "sum.sh", SCRIPT)
    res = host.shournal("run", "--apparatus", "--", "sh", "sum.sh")
    assert res.returncode == 0, res.stderr
    ((cid,),) = lab.admin(
        "SELECT max(id) FROM command WHERE owner = %s AND text = 'sh sum.sh'", (host.name,)
    )
    assert cid is not None
    return int(cid)


def blobs_of(lab: Lab, owner: str) -> dict[str, int]:
    """digest (hex) -> stored bytes of the owner's blobs."""
    return {r[0]: r[1] for r in lab.admin(
        "SELECT encode(digest, 'hex'), length(data) FROM apparatus_blob WHERE owner = %s",
        (owner,))}  # fmt: skip


def digest_of(lab: Lab, owner: str, cid: int, name: str) -> str:
    """The digest the manifest of ``cid`` names for the read file ``name``."""
    from shournal.store.archive import decode_manifest

    ((raw,),) = lab.admin(
        "SELECT manifest FROM apparatus WHERE command_id = %s AND owner = %s", (cid, owner)
    )
    (digest,) = [e[5] for e in decode_manifest(bytes(raw))["reads"] if e[0].endswith(name)]
    return str(digest)


def read_file_id(lab: Lab, owner: str, name: str) -> int:
    ((fid,),) = lab.admin(
        "SELECT max(id) FROM read_file WHERE owner = %s AND basename = %s",
        (owner, name.encode()),
    )
    return int(fid)


@pytest.fixture
def alice_on_b(lab_clean: Lab) -> Iterator[LabHost]:
    """Alice on host B, with a home (and so a file archive) of her own."""
    a, b = lab_clean.hosts
    password = (a.home / ".pgpass").read_text().splitlines()[0].rsplit(":", 1)[1]
    home = _make_home(a.user, [f"{s}.1" for s in SUBNETS], password)
    there = replace(b, user=a.user, home=home)
    wait_for(there.accepts, "the server accepting alice on host B")
    try:
        yield there
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)


def replayed_total(host: LabHost, cid: int, out: Path) -> subprocess.CompletedProcess[str]:
    return host.shournal("replay", str(cid), "-o", str(out))


def test_recorded_on_one_host_restored_and_replayed_on_another(
    lab_clean: Lab, alice_on_b: LabHost
) -> None:
    a = lab_clean.hosts[0]
    cid = record_apparatus(lab_clean, a)
    data_digest = digest_of(lab_clean, a.name, cid, "/data.txt")
    stored = blobs_of(lab_clean, a.name)
    assert data_digest in stored, stored  # stored with the manifest
    assert len(stored) >= 3  # data.txt, sum.sh, awk and its libraries...
    # the files change on disk: only the archived content reproduces
    _write(a, "data.txt", "100\n")
    _write(a, "sum.sh", "echo changed > total.txt\n")
    assert not (alice_on_b.home / ".local" / "share" / "shournal" / "archive").exists()

    out = alice_on_b.home / "replay-out"
    res = replayed_total(alice_on_b, cid, out)
    assert res.returncode == 0, res.stdout + res.stderr
    total = out / str(a.home / "work" / "total.txt").lstrip("/")
    assert total.read_text() == "6\n"
    assert "identical" in res.stdout

    fid = read_file_id(lab_clean, a.name, "data.txt")
    target = alice_on_b.home / "data.restored"
    ok(alice_on_b.shournal("restore", "--file-id", str(fid), "-o", str(target)))
    assert target.read_text() == DATA

    # Her own content gone from the server (she may delete her rows): the
    # replay names each file whose content is unreadable and writes nothing.
    assert ok(alice_on_b.psql(
        f"DELETE FROM apparatus_blob WHERE digest = decode('{data_digest}', 'hex') "
        "RETURNING owner")) == a.name  # fmt: skip
    gone = alice_on_b.home / "replay-gone"
    res = replayed_total(alice_on_b, cid, gone)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.splitlines()
    assert lines == [
        f"shournal: command {cid}: the archived content of {a.home}/work/data.txt is not "
        "readable (not in the journal for you, nor in this host's archive)"
    ], lines
    assert not gone.exists()
    res = alice_on_b.shournal("restore", "--file-id", str(fid), "-o",
                              str(alice_on_b.home / "again"))  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert f"file {fid}: its archived content is not readable" in res.stderr, res.stderr
    assert not (alice_on_b.home / "again").exists()
    # on host A her file archive still has it: replay works there
    res = replayed_total(a, cid, a.home / "replay-a")
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_colleagues_command_replays_when_shared_and_says_what_is_not_readable(
    lab_clean: Lab,
) -> None:
    a, b = lab_clean.hosts
    cid = record_apparatus(lab_clean, a)
    out = b.home / "replay-out"
    # not shared: bob cannot see the command at all
    res = replayed_total(b, cid, out)
    assert res.returncode == 2 and f"no command with id {cid}" in res.stderr, res.stderr
    assert not out.exists()
    assert ok(b.psql("SELECT count(*) FROM apparatus_blob")) == "0"

    ok(a.psql(f"INSERT INTO {SHARE_TABLE} (role) VALUES ('{SHARE_ROLE}')"))
    res = replayed_total(b, cid, out)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (out / str(a.home / "work" / "total.txt").lstrip("/")).read_text() == "6\n"
    fid = read_file_id(lab_clean, a.name, "data.txt")
    ok(b.shournal("restore", "--file-id", str(fid), "-o", str(b.home / "hers.txt")))
    assert (b.home / "hers.txt").read_text() == DATA

    # A blob whose data does not hold its digest's content (alice forged
    # her own row) is not readable either: readers check every blob.
    data_digest = digest_of(lab_clean, a.name, cid, "/data.txt")
    ok(a.psql("UPDATE apparatus_blob SET data = decode('5231300a', 'hex') "
              f"WHERE digest = decode('{data_digest}', 'hex')"))  # fmt: skip
    again = b.home / "replay-again"
    res = replayed_total(b, cid, again)
    assert res.returncode == 2, res.stdout + res.stderr
    assert [line for line in res.stderr.splitlines() if "not readable" in line] == [
        f"shournal: command {cid}: the archived content of {a.home}/work/data.txt is not "
        "readable (not in the journal for you, nor in this host's archive)"
    ], res.stderr
    assert not again.exists()


def test_raw_psql_cannot_read_forge_change_or_delete_a_colleagues_blobs(
    lab_clean: Lab,
) -> None:
    a, b = lab_clean.hosts
    record_apparatus(lab_clean, a)
    before = blobs_of(lab_clean, a.name)
    assert before
    # read: his own only (positive control: alice sees hers)
    assert ok(b.psql("SELECT count(*) FROM apparatus_blob")) == "0"
    assert ok(a.psql("SELECT count(*) FROM apparatus_blob")) == str(len(before))
    # insert as alice: refused; as himself: stored
    res = b.psql("INSERT INTO apparatus_blob (digest, data, owner) "
                 f"VALUES ('x'::bytea, 'Rx'::bytea, '{a.name}')")  # fmt: skip
    assert res.returncode != 0 and "violates row-level security policy" in res.stderr
    ok(b.psql("INSERT INTO apparatus_blob (digest, data) VALUES ('x'::bytea, 'Rx'::bytea)"))
    assert list(blobs_of(lab_clean, b.name)) == [b"x".hex()]
    # update and delete alice's: nothing happens, shared or not
    for shared in (False, True):
        if shared:
            ok(a.psql(f"INSERT INTO {SHARE_TABLE} (role) VALUES ('{SHARE_ROLE}')"))
            assert ok(b.psql("SELECT count(*) FROM apparatus_blob WHERE owner <> current_user")
                      ) == str(len(before))  # fmt: skip
        assert ok(b.psql(f"UPDATE apparatus_blob SET data = 'Rforged'::bytea "
                         f"WHERE owner = '{a.name}' RETURNING 1")) == ""  # fmt: skip
        assert ok(b.psql(f"DELETE FROM apparatus_blob WHERE owner = '{a.name}' "
                         "RETURNING 1")) == ""  # fmt: skip
        assert blobs_of(lab_clean, a.name) == before
    # nor give his own away; positive control: he changes and deletes his own
    res = b.psql(f"UPDATE apparatus_blob SET owner = '{a.name}'")
    assert res.returncode != 0 and "violates row-level security policy" in res.stderr
    assert ok(b.psql("UPDATE apparatus_blob SET data = 'Ry'::bytea RETURNING owner")) == b.name
    assert ok(b.psql("DELETE FROM apparatus_blob RETURNING owner")) == b.name


def test_dedup_is_per_owner_and_a_colleagues_digest_gives_no_signal(lab_clean: Lab) -> None:
    a, b = lab_clean.hosts
    ca = record_apparatus(lab_clean, a)
    count = "SELECT count(*) FROM apparatus_blob WHERE owner = %s"
    once = lab_clean.admin(count, (a.name,))
    record_apparatus(lab_clean, a)  # the same content again: no new blob
    assert lab_clean.admin(count, (a.name,)) == once
    cb = record_apparatus(lab_clean, b)  # the same data and script, by bob
    data_digest = digest_of(lab_clean, a.name, ca, "/data.txt")
    assert digest_of(lab_clean, b.name, cb, "/data.txt") == data_digest
    assert lab_clean.admin(
        "SELECT owner FROM apparatus_blob WHERE digest = decode(%s, 'hex') ORDER BY owner",
        (data_digest,)) == sorted([(a.name,), (b.name,)])  # fmt: skip
    # Inserting the digest of content only alice has behaves as a digest
    # nobody has.
    _write(a, "secret.txt", "only alice has this\n")
    ok(a.shournal("run", "--apparatus", "--", "cat", "secret.txt"))
    ((cat,),) = lab_clean.admin(
        "SELECT max(id) FROM command WHERE owner = %s AND text LIKE 'cat %%'", (a.name,))
    hers = digest_of(lab_clean, a.name, cat, "/secret.txt")
    assert hers in blobs_of(lab_clean, a.name)
    results = []
    for d in (hers, "00" * 16):
        results.append(b.run("psql", "-X", "-h", b.server_ip, "-U", b.name, "-d",
                             "shournal_lab", "-c",
                             "INSERT INTO apparatus_blob (digest, data) "
                             f"VALUES (decode('{d}', 'hex'), 'Rx') ON CONFLICT DO NOTHING"))
    assert [(r.returncode, r.stdout, r.stderr) for r in results] == [(0, "INSERT 0 1\n", "")] * 2


def test_delete_removes_the_blobs_only_its_commands_named(lab_clean: Lab) -> None:
    a, b = lab_clean.hosts
    first = record_apparatus(lab_clean, a)
    _write(a, "other.txt", "another input\n")
    ok(a.shournal("run", "--apparatus", "--", "cat", "other.txt", "data.txt"))
    ((second,),) = lab_clean.admin(
        "SELECT max(id) FROM command WHERE owner = %s AND text LIKE 'cat %%'", (a.name,))
    record_apparatus(lab_clean, b)
    bobs = blobs_of(lab_clean, b.name)
    data_digest = digest_of(lab_clean, a.name, first, "/data.txt")
    script_digest = digest_of(lab_clean, a.name, first, "/sum.sh")
    other_digest = digest_of(lab_clean, a.name, second, "/other.txt")
    dry = ok(a.shournal("delete", "--command-id", str(second), "--dry-run"))
    assert "free" in dry, dry
    ok(a.shournal("delete", "--command-id", str(second), "-y"))
    left = blobs_of(lab_clean, a.name)
    # only the second named other.txt; data.txt the first names still
    assert other_digest not in left and {data_digest, script_digest} <= set(left)
    ok(a.shournal("delete", "--command-id", str(first), "-y"))
    assert blobs_of(lab_clean, a.name) == {}
    assert blobs_of(lab_clean, b.name) == bobs  # his stay
