"""Command records for synthetic journals: what the listener would store,
built without a shell (the unit and the system tests share them)."""

from __future__ import annotations

import os
from pathlib import Path

from shournal.hashing import partial_xxh64
from shournal.record import CommandRecord, FileEvent

T0 = 1_700_000_000_000_000_000
MINUTE = 60 * 10**9


def file_event(path: Path, chunk: int = 256, max_reads: int = 3) -> FileEvent:
    """An event as the listener would record it for this real file."""
    st = path.stat()
    fd = os.open(path, os.O_RDONLY)
    try:
        digest = partial_xxh64(fd, st.st_size, chunk, max_reads)
    finally:
        os.close(fd)
    return FileEvent(
        path=os.fsencode(path),
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        mode=st.st_mode,
        hash=digest,
    )


def record(text: str, start_ns: int = T0, **kw: object) -> CommandRecord:
    values: dict[str, object] = {
        "text": text,
        "return_value": 0,
        "start_ns": start_ns,
        "end_ns": start_ns + 10**9,
        "working_dir": "/home/u",
        "username": "u",
        "hostname": "box",
        "session_uuid": b"\x11" * 16,
        "hash_chunk_size": 256,
        "hash_max_reads": 3,
    }
    values.update(kw)
    return CommandRecord(**values)  # type: ignore[arg-type]
