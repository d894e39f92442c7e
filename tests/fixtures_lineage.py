"""The `j` fixture: a SQLite journal written by the real store writer and a
directory beside it, for the lineage, status and export tests (the files on
disk are real, the commands are records as the listener would store
them)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shournal import Journal
from shournal.hashing import partial_xxh64_bytes
from shournal.provenance.graph import build_lineage
from shournal.provenance.readers import JournalReader
from shournal.record import CommandRecord, FileEvent
from shournal.store import Store

T0 = int(datetime(2026, 1, 5, 9, 0, tzinfo=UTC).timestamp()) * 1_000_000_000
SECOND = 1_000_000_000


class J:
    """A journal and a directory: versions are (path, content, mtime)."""

    def __init__(self, store: Store, root: Path) -> None:
        self.store = store
        self.root = root

    def v(self, name: str, content: bytes, mtime: int) -> FileEvent:
        return FileEvent(
            path=os.fsencode(os.path.normpath(self.root / name)),
            size=len(content),
            mtime_ns=T0 + mtime * SECOND,
            mode=0o100644,
            hash=partial_xxh64_bytes(content) if content else None,
        )

    def disk(self, name: str, content: bytes, mtime: int) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        os.utime(path, ns=(T0 + mtime * SECOND, T0 + mtime * SECOND))
        return path

    def cmd(
        self,
        text: str,
        start: int,
        end: int | None = None,
        reads: list[FileEvent] | None = None,
        writes: list[FileEvent] | None = None,
        chunk: int = 256,
        return_value: int = 0,
        apparatus: bytes | None = None,
    ) -> int:
        return self.store.add_command(
            CommandRecord(
                text=text,
                return_value=return_value,
                start_ns=T0 + start * SECOND,
                end_ns=T0 + (start if end is None else end) * SECOND,
                working_dir=str(self.root),
                username="u",
                hostname="h",
                session_uuid=None,
                hash_chunk_size=chunk,
                hash_max_reads=3,
                reads=reads or [],
                writes=writes or [],
                apparatus=apparatus,
            )
        )

    def reader(self) -> JournalReader:
        return JournalReader(Journal(self.store))

    def lineage(self, *targets, depth=None):
        return build_lineage(self.reader(), list(targets), depth)


@pytest.fixture
def j(tmp_path: Path) -> Iterator[J]:
    with Store(f"sqlite:///{tmp_path / 'journal.sqlite'}") as store:
        root = tmp_path / "w"
        root.mkdir()
        yield J(store, root)


def _two_chains(j):
    """out <- sort <- gen (and an unrelated command that also reads raw)."""
    raw, mid, out = b"r" * 40, b"m" * 50, b"o" * 60
    v = j.v
    ids = {
        "gen": j.cmd("gen > raw", 10, reads=[v("seed", b"s" * 10, 1)], writes=[v("raw", raw, 10)]),
        "sort": j.cmd("sort raw > mid", 20, reads=[v("raw", raw, 10)], writes=[v("mid", mid, 20)]),
        "other": j.cmd("wc raw > n", 25, reads=[v("raw", raw, 10)], writes=[v("n", b"1\n", 25)]),
        "fin": j.cmd("tac mid > out", 30, reads=[v("mid", mid, 20)], writes=[v("out", out, 30)]),
    }  # fmt: skip
    return j.disk("out", out, 30), ids
