"""Restoring archived read files: the library (--restore-rfiles) on SQLite
and PostgreSQL, hostile stored paths and symlinks, and `shournal restore`
(including its overwrite prompt on a real pty)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from fixtures_cli import answer_shournal
from fixtures_cli import run_shournal as shournal
from typer.testing import CliRunner

from shournal.cli import app
from shournal.journal import Journal
from shournal.record import CommandRecord, FileEvent
from shournal.restore import (
    NotArchived,
    RestoreError,
    TargetExists,
    restore_file,
    restore_read_files,
)
from shournal.store import Store
from shournal.store import models as m
from shournal.store.migrations import SCHEMA_VERSION

T0 = 1_700_000_000_000_000_000
MTIME = 1_600_000_000_123_456_789

V1 = b"#!/bin/sh\necho version 1\n"
V2 = b"#!/bin/sh\necho version 2 is longer\n"
HELPER = b"export X=1\n"


def read(path: bytes, data: bytes | None, mode: int = 0o100755, h: int = 5) -> FileEvent:
    size = len(data) if data is not None else 99
    return FileEvent(path=path, size=size, mtime_ns=MTIME, mode=mode, hash=h, content=data)


def record(text: str, reads: list[FileEvent], writes: list[FileEvent] | None = None):
    return CommandRecord(
        text=text,
        return_value=0,
        start_ns=T0,
        end_ns=T0 + 10**9,
        working_dir="/home/u",
        username="u",
        hostname="box",
        session_uuid=b"\x01" * 16,
        hash_chunk_size=256,
        hash_max_reads=3,
        reads=reads,
        writes=writes or [],
    )


def event_ids(journal: Journal, command_id: int) -> list[int]:
    """The command's write ids, then its read (read file) ids."""
    (cmd,) = journal.find(command_id=command_id)
    return [*sorted(e.id for e in cmd.writes), *sorted(e.id for e in cmd.reads)]


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def two_versions(journal: Journal) -> tuple[int, int]:
    """The README scenario: demo.sh run in two versions, the second run
    also sourcing a helper; a read without archived content."""
    a = journal.add(record("./demo.sh", [read(b"/home/u/demo.sh", V1)]))
    b = journal.add(
        record(
            "./demo.sh",
            [
                read(b"/home/u/demo.sh", V2),
                read(b"/home/u/lib/helper.sh", HELPER, mode=0o100640),
                read(b"/usr/bin/cat", None),
            ],
        )
    )
    return a, b


def test_restore_read_files_into_command_dirs(journal, two_versions, tmp_path):
    a, b = two_versions
    dest = tmp_path / "restored"
    # As query hands them over for display: the read lists cut to nothing.
    commands = journal.find(command_text="./demo.sh", max_files=0)
    assert [c.id for c in commands] == [a, b] and commands[1].reads == []
    result = restore_read_files(journal, commands, dest)
    assert result.count == 3 and result.skipped == []
    assert tree(dest) == {
        f"command-{a}/home/u/demo.sh": V1,
        f"command-{b}/home/u/demo.sh": V2,
        f"command-{b}/home/u/lib/helper.sh": HELPER,
    }
    helper = dest / f"command-{b}/home/u/lib/helper.sh"
    assert stat.S_IMODE(helper.stat().st_mode) == 0o640
    assert stat.S_IMODE((dest / f"command-{a}/home/u/demo.sh").stat().st_mode) == 0o755
    assert helper.stat().st_mtime_ns == MTIME
    assert {r.source for r in result.restored} == {b"/home/u/demo.sh", b"/home/u/lib/helper.sh"}


def test_existing_target_stops_before_anything_is_written(journal, two_versions, tmp_path):
    a, b = two_versions
    dest = tmp_path / "restored"
    existing = dest / f"command-{b}/home/u/lib/helper.sh"
    existing.parent.mkdir(parents=True)
    existing.write_bytes(b"mine")
    commands = journal.find(command_text="./demo.sh")
    with pytest.raises(TargetExists) as info:
        restore_read_files(journal, commands, dest)
    assert "helper.sh exists" in str(info.value) and "\n" not in str(info.value)
    assert tree(dest) == {f"command-{b}/home/u/lib/helper.sh": b"mine"}

    result = restore_read_files(journal, commands, dest, overwrite=True)
    assert result.count == 3
    assert existing.read_bytes() == HELPER
    assert not [p for p in existing.parent.iterdir() if p.name.startswith(".shournal")]


def test_symlinks_below_dest_are_never_followed(journal, two_versions, tmp_path):
    a, b = two_versions
    dest, outside = tmp_path / "restored", tmp_path / "outside"
    outside.mkdir()
    dest.mkdir()
    # A planted link in place of a directory: refused, nothing written.
    (dest / f"command-{a}").symlink_to(outside)
    commands = journal.find(command_id=a)
    with pytest.raises(RestoreError) as info:
        restore_read_files(journal, commands, dest, overwrite=True)
    assert "symlink" in str(info.value)
    assert list(outside.iterdir()) == []

    # A planted link in place of the file: replaced, its target untouched.
    victim = outside / "victim"
    victim.write_bytes(b"precious")
    target_dir = dest / f"command-{b}/home/u"
    target_dir.mkdir(parents=True)
    (target_dir / "demo.sh").symlink_to(victim)
    commands = journal.find(command_id=b)
    with pytest.raises(TargetExists):
        restore_read_files(journal, commands, dest)
    restore_read_files(journal, commands, dest, overwrite=True)
    assert victim.read_bytes() == b"precious"
    assert not (target_dir / "demo.sh").is_symlink()
    assert (target_dir / "demo.sh").read_bytes() == V2


def test_hostile_stored_paths_are_skipped(journal, tmp_path):
    """A shared journal may hold anything: paths are data, not trusted."""
    cid = journal.add(
        record(
            "evil",
            [
                read(b"/a/../../../escaped", b"x"),
                read(b"relative/escaped", b"y"),
                read(b"/ok//twice/file", b"z"),
                read(b"/ok/./file", b"w"),
                read(b"/nul/a\0b", b"n"),
                read(b"/fine/setuid", b"s", mode=0o106755),
            ],
        )
    )
    out = tmp_path / "out"
    dest = out / "d" / "restored"
    result = restore_read_files(journal, journal.find(command_id=cid), dest)
    reasons = sorted(reason for _, _, reason in result.skipped)
    assert reasons == ["contains '.'", "contains '..'", "contains a NUL byte",
                       "contains an empty component", "is not absolute"]
    assert tree(out) == {f"d/restored/command-{cid}/fine/setuid": b"s"}
    assert not [p for p in Path("/").glob("escaped")] + list(tmp_path.rglob("escaped"))
    # No setuid/setgid bits come back from the journal.
    assert stat.S_IMODE((dest / f"command-{cid}/fine/setuid").stat().st_mode) == 0o755


def test_nothing_archived_creates_nothing(journal, tmp_path):
    cid = journal.add(record("cat", [read(b"/usr/bin/cat", None)]))
    result = restore_read_files(journal, journal.find(command_id=cid), tmp_path / "r")
    assert result.count == 0
    assert not (tmp_path / "r").exists()


def test_load_archived_and_restore_file(journal, two_versions, tmp_path):
    a, b = two_versions
    first = event_ids(journal, a)[0]
    item = journal.archived(first)
    assert (item.path, item.data, item.command_id) == (b"/home/u/demo.sh", V1, a)
    target = tmp_path / "demo.sh"
    restore_file(item, target)
    assert target.read_bytes() == V1 and target.stat().st_mtime_ns == MTIME
    with pytest.raises(TargetExists):
        restore_file(item, target)
    with pytest.raises(NotArchived, match="no file with id"):
        journal.archived(10**9)
    not_archived = event_ids(journal, b)[-1]
    with pytest.raises(NotArchived, match="not archived"):
        journal.archived(not_archived)


# -- the CLI ---------------------------------------------------------------------------


@pytest.fixture
def cli_journal(tmp_path: Path) -> tuple[Path, list[int]]:
    path = tmp_path / "journal.sqlite"
    with Journal.open(f"sqlite:///{path}", create=True) as s:
        cid = s.add(
            record(
                "./demo.sh",
                [read(b"/home/u/demo.sh", V1), read(b"/usr/bin/cat", None)],
                writes=[FileEvent(b"/home/u/out", 3, MTIME, 0o100644, 9)],
            )
        )
        ids = event_ids(s, cid)
    return path, ids  # ids: write, archived read, plain read


def test_cli_restores_into_cwd_and_refuses_to_overwrite(tmp_path, cli_env, cli_journal):
    _, (write_id, archived, plain) = cli_journal
    work = tmp_path / "work"
    work.mkdir()
    res = shournal(["restore", "--file-id", str(archived)], cli_env, work)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"Restored /home/u/demo.sh (file id {archived}) to {work}/demo.sh"
    assert (work / "demo.sh").read_bytes() == V1
    assert stat.S_IMODE((work / "demo.sh").stat().st_mode) == 0o755

    (work / "demo.sh").write_bytes(b"edited")
    res = shournal(["restore", "--file-id", str(archived)], cli_env, work)
    assert res.returncode == 2
    assert res.stderr == f"shournal: {work}/demo.sh exists (use --force to overwrite)\n"
    assert (work / "demo.sh").read_bytes() == b"edited"

    res = shournal(["restore", "--file-id", str(archived), "--force"], cli_env, work)
    assert res.returncode == 0 and (work / "demo.sh").read_bytes() == V1

    res = shournal(["restore", "--file-id", str(archived), "-o", str(tmp_path)], cli_env, work)
    assert res.returncode == 0 and (tmp_path / "demo.sh").read_bytes() == V1
    res = shournal(["restore", "--file-id", str(archived), "-o", "copy.sh"], cli_env, work)
    assert res.returncode == 0 and (work / "copy.sh").read_bytes() == V1


@pytest.mark.parametrize(
    ("which", "code", "needle"),
    [
        # (No "write" case any more: write ids are a separate series from
        # the read file ids that --file-id takes, see models.py.)
        ("plain", 1, "not archived"),
        ("unknown", 1, "no file with id 424242"),
        ("negative", 1, "no file with id -5"),
        ("nodir", 2, "cannot use directory"),
    ],
)
def test_cli_errors_are_one_line_and_change_nothing(
    tmp_path, cli_env, cli_journal, which, code, needle
):
    journal, (write_id, archived, plain) = cli_journal
    file_id = {"plain": plain, "unknown": 424242, "negative": -5}.get(
        which, archived
    )
    extra = ["-o", str(tmp_path / "missing" / "x.sh")] if which == "nodir" else []
    work = tmp_path / "work"
    work.mkdir()
    before = journal.read_bytes()
    res = shournal(["restore", "--file-id", str(file_id), *extra], cli_env, work)
    assert res.returncode == code
    assert res.stderr.startswith("shournal: ") and res.stderr.count("\n") == 1
    assert needle in res.stderr
    assert list(work.iterdir()) == []
    assert journal.read_bytes() == before


def test_cli_store_problems(tmp_path, cli_env, cli_journal):
    journal, (_, archived, _) = cli_journal
    work = tmp_path / "work"
    work.mkdir()
    with Store(f"sqlite:///{journal}") as s, s.writing() as conn:
        conn.execute(m.SchemaVersion.__table__.update().values(version=SCHEMA_VERSION + 1))
    before = journal.read_bytes()
    res = shournal(["restore", "--file-id", str(archived)], cli_env, work)
    assert res.returncode == 3 and "newer" in res.stderr and res.stderr.count("\n") == 1
    assert journal.read_bytes() == before and list(work.iterdir()) == []

    env = {**cli_env, "SHOURNAL_DB_URL": f"sqlite:///{tmp_path / 'none.sqlite'}"}
    res = shournal(["restore", "--file-id", "1"], env, work)
    assert res.returncode == 1 and "nothing to restore" in res.stderr
    assert not (tmp_path / "none.sqlite").exists()


def test_cli_asks_before_overwriting_on_a_terminal(tmp_path, cli_env, cli_journal):
    _, (_, archived, _) = cli_journal
    work = tmp_path / "work"
    work.mkdir()
    (work / "demo.sh").write_bytes(b"edited")

    args = ["restore", "--file-id", str(archived)]
    question = f"{work}/demo.sh exists. Overwrite? [y/N]: "
    status, _, out = answer_shournal(args, cli_env, question, "", work)  # default: no
    assert status == 1 and "not overwriting" in out, out
    assert (work / "demo.sh").read_bytes() == b"edited"

    status, _, out = answer_shournal(args, cli_env, question, "y", work)
    assert status == 0 and "Restored /home/u/demo.sh" in out, out
    assert (work / "demo.sh").read_bytes() == V1


def test_cli_postgresql(pg_fresh_url, tmp_path, cli_env):
    with Journal.open(pg_fresh_url, create=True) as s:
        cid = s.add(record("./demo.sh", [read(b"/home/u/demo.sh", V2)]))
        (file_id,) = event_ids(s, cid)
    res = shournal(
        ["restore", "--file-id", str(file_id)],
        {**cli_env, "SHOURNAL_DB_URL": pg_fresh_url},
        tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "demo.sh").read_bytes() == V2


def test_help():
    res = CliRunner().invoke(app, ["restore", "--help"])
    assert res.exit_code == 0
    for option in ("--file-id", "--output", "--force"):
        assert option in res.output


def test_cli_query_restore_rfiles(tmp_path, cli_env, cli_journal):
    """`shournal query --restore-rfiles`: every found command's archived reads
    land in DIR/command-<id>/<path>; shournal-json's footer says where."""
    work = tmp_path / "work"
    work.mkdir()
    dest = tmp_path / "restored"
    res = shournal(["query", "--command-text", "./demo.sh", "--restore-rfiles",
                    "--restore-dir", str(dest), "--output-format", "shournal-json"],
                   cli_env, work)
    assert res.returncode == 0, res.stderr
    (cmd_dir,) = dest.iterdir()
    assert cmd_dir.name.startswith("command-")
    assert (cmd_dir / "home/u/demo.sh").read_bytes() == V1
    assert stat.S_IMODE((cmd_dir / "home/u/demo.sh").stat().st_mode) == 0o755
    assert not (cmd_dir / "usr").exists()  # not archived: nothing to restore
    footer = res.stdout.splitlines()[-1]
    assert footer.startswith("FOOTER:") and str(dest) in footer, footer
    assert '"countOfRestoredFiles":1' in footer.replace(" ", ""), footer
    assert f"restored 1 file(s) into {dest}" in res.stderr
    # again: the files exist, one line, nothing overwritten
    (cmd_dir / "home/u/demo.sh").write_bytes(b"mine")
    res = shournal(["query", "--command-text", "./demo.sh", "--restore-rfiles",
                    "--restore-dir", str(dest)], cli_env, work)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert (cmd_dir / "home/u/demo.sh").read_bytes() == b"mine"
