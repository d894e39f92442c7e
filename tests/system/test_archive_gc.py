"""Garbage collection of the apparatus archive by `shournal delete`: a
blob goes when the last command whose manifest names it is deleted, a blob
another command still names stays, and `--dry-run` says how many bytes
would be freed.  Real store, real archive, the CLI as a subprocess."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fixtures_cli import run_shournal

from shournal.journal import Journal
from shournal.record import CommandRecord
from shournal.reproduce.experiment import load_manifest
from shournal.store import Store
from shournal.store.archive import Archive, encode_manifest

T0 = 1_767_600_000 * 1_000_000_000


def _manifest(reads: list[tuple[str, str]], writes: list[tuple[str, str]] = ()) -> bytes:
    def entry(path: str, digest: str) -> list[object]:
        return [path, 10, T0, 0o100644, None, digest, None]

    return encode_manifest({
        "format": 1, "env": {}, "argv": ["true"],
        "reads": [entry(p, d) for p, d in reads],
        "writes": [entry(p, d) for p, d in writes],
        "not_archived": {},
    })  # fmt: skip


def _add(store: Store, text: str, start: int, manifest: bytes) -> int:
    return store.add_command(CommandRecord(
        text=text, return_value=0, start_ns=T0 + start, end_ns=T0 + start + 1,
        working_dir="/w", username="u", hostname="h", session_uuid=None,
        hash_chunk_size=256, hash_max_reads=3, reads=[], writes=[], apparatus=manifest,
    ))  # fmt: skip


def _setup(env: dict[str, str]) -> tuple[Archive, dict[str, str], dict[str, int]]:
    arc = Archive(Path(env["XDG_DATA_HOME"]) / "shournal" / "archive")
    digest = {name: arc.put(os.urandom(300) + name.encode())[0]
              for name in ("shared", "orphan", "b_only", "b_output")}  # fmt: skip
    with Store(env["SHOURNAL_DB_URL"]) as store:
        ids = {
            "a": _add(store, "analysis a", 1, _manifest(
                [("/w/shared", digest["shared"]), ("/w/orphan", digest["orphan"])])),
            "b": _add(store, "analysis b", 2, _manifest(
                [("/w/same-content", digest["shared"]), ("/w/b", digest["b_only"])],
                [("/w/out", digest["b_output"])])),
            "plain": _add(store, "no apparatus", 3, None),
        }  # fmt: skip
    return arc, digest, ids


@pytest.fixture(params=["sqlite", "postgresql"])
def journal_env(request, cli_env: dict[str, str]) -> dict[str, str]:
    """The CLI's environment on a SQLite file or on PostgreSQL (whose
    deletion skips the foreign-key triggers, the cascade with them)."""
    if request.param == "sqlite":
        return cli_env
    return {**cli_env, "SHOURNAL_DB_URL": request.getfixturevalue("pg_fresh_url")}


def test_delete_collects_the_blobs_no_remaining_command_names(journal_env):
    cli_env = journal_env
    arc, digest, ids = _setup(cli_env)
    orphan_bytes = arc.path_of(digest["orphan"]).stat().st_size

    res = run_shournal(["delete", "--command-id", str(ids["a"]), "--dry-run"], cli_env)
    assert res.returncode == 0, res.stderr
    assert (f"Would delete 1 command and 0 file events, and free {orphan_bytes} bytes "
            "of the apparatus archive (1 archived blob)") in res.stdout, res.stdout
    assert all(arc.has(d) for d in digest.values())  # a dry run removes nothing

    res = run_shournal(["delete", "--command-id", str(ids["a"]), "--yes"], cli_env)
    assert res.returncode == 0, res.stderr
    assert f"Freed {orphan_bytes} bytes of the apparatus archive (1 archived blob)" in res.stdout
    assert not arc.has(digest["orphan"])
    # named by b too (under another path): stays, and still checks out
    assert arc.get(digest["shared"]) and arc.has(digest["b_only"])
    with Store(cli_env["SHOURNAL_DB_URL"]) as store:
        assert load_manifest(Journal(store), ids["a"]) is None  # the manifest went with it
        assert load_manifest(Journal(store), ids["b"]) is not None

    # a command without an apparatus frees nothing
    res = run_shournal(["delete", "--command-id", str(ids["plain"]), "--dry-run"], cli_env)
    assert res.returncode == 0 and "apparatus archive" not in res.stdout, res.stdout
    res = run_shournal(["delete", "--command-id", str(ids["b"]), "--yes"], cli_env)
    assert res.returncode == 0, res.stderr
    assert "(3 archived blobs)" in res.stdout, res.stdout
    assert not any(arc.has(d) for d in digest.values())
    assert arc.stored_bytes() == 0


def test_blobs_stay_while_a_command_is_being_recorded_with_its_apparatus(cli_env):
    """A recorder may be about to store a manifest naming a blob it found
    archived already: while one holds the archive, delete removes the
    commands but no blob, and says so."""
    arc, digest, ids = _setup(cli_env)
    held = arc.hold_for_recording()
    assert held is not None
    try:
        res = run_shournal(["delete", "--command-id", str(ids["a"]), "--yes"], cli_env)
    finally:
        os.close(held)
    assert res.returncode == 0, res.stderr
    assert "Deleted 1 command" in res.stdout
    assert "archived blob" in res.stderr and "kept" in res.stderr, res.stderr
    assert arc.has(digest["orphan"])
