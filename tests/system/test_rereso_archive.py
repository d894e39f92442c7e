"""The journal archive as a source of a file version's recorded content,
on SQLite and on PostgreSQL (the rest of the content tests are in
tests/unit/test_rereso_content.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shournal.hashing import partial_xxh64_bytes
from shournal.journal import Journal
from shournal.record import CommandRecord, FileEvent
from shournal.rereso import content

CSV = b"x,y\n1,2\n"


def test_journal_archive_returns_the_archived_script_version(journal: Journal, tmp_path: Path):
    script = tmp_path / "run.sh"
    old = b"#!/bin/sh\necho old\n"
    script.write_bytes(b"#!/bin/sh\necho edited since\n")
    h = partial_xxh64_bytes(old)
    rec = CommandRecord(
        text=f"sh {script} in.csv", return_value=0, start_ns=10**18, end_ns=10**18 + 1,
        working_dir=str(tmp_path), username="u", hostname="h", session_uuid=None,
        hash_chunk_size=256, hash_max_reads=3,
        reads=[
            FileEvent(os.fsencode(script), len(old), 5, 0o100755, h, content=old),
            FileEvent(os.fsencode(tmp_path / "in.csv"), len(CSV), 5, 0o100644,
                      partial_xxh64_bytes(CSV)),
        ],
    )
    cid = journal.add(rec)
    (cmd,) = journal.find(command_id=cid)
    by_name = {os.path.basename(e.path): e for e in cmd.reads}
    archive = content.JournalArchive(journal)
    v_script = content.FileVersion.of(cmd, by_name[b"run.sh"], read=True)
    assert archive(v_script) == old
    assert content.recorded_content(v_script, archive) == (old, content.FROM_ARCHIVE)
    v_csv = content.FileVersion.of(cmd, by_name[b"in.csv"], read=True)
    assert archive(v_csv) is None
    with pytest.raises(content.ContentUnavailable, match="missing"):
        content.recorded_content(v_csv, archive)
