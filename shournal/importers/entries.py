"""What the importers of shell history files share: this machine's host and
user (a history file names neither), the text of an entry as the recorder
stores it, and the start times of entries the file gives none."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from shournal.data import RETURN_VALUE_UNKNOWN
from shournal.importers import identity
from shournal.record import CommandRecord

# The spacing of estimated start times (entries without a time of their own
# keep their order).
STEP_NS = 1_000_000
# The last second a journal can hold (9999-12-31 23:59:59 UTC, with room
# for the steps): a time past it, or before 1970, is no time at all.
MAX_S = 253_402_300_799 - 86_400


def check_time(ns: int, what: str) -> int:
    """``ns`` (a start or end time) if a journal can hold it."""
    from shournal.importers import ImportFailed

    if not 0 <= ns <= MAX_S * 1_000_000_000:
        raise ImportFailed(f"{what}: time {ns} ns since 1970 is out of range")
    return ns


def this_user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def this_host() -> str:
    return socket.gethostname()


def text_of(raw: bytes) -> str:
    """An entry's bytes as text, as the recorder stores a command line:
    bytes that are not UTF-8 kept as visible ``\\xNN`` escapes."""
    return raw.decode("utf-8", errors="backslashreplace")


@dataclass(slots=True)
class Entry:
    """One entry of a shell history file."""

    text: bytes
    start_s: int | None = None  # seconds since the epoch, as the file says
    duration_s: int | None = None


def to_records(kind: str, entries: Sequence[Entry], file_mtime_ns: int) -> list[CommandRecord]:
    """Records of a shell history's entries, keyed (:mod:`identity`).

    Entries without a time are placed STEP_NS apart: those after a timed
    entry just after it, those before the first timed one (or all, when
    none is) just before it -- or before the file's last change, the latest
    moment they can have been typed.  Host and user are this machine's; the
    working directory and the exit status are unknown (empty, and
    RETURN_VALUE_UNKNOWN)."""
    starts: list[int | None] = [
        e.start_s * 1_000_000_000 if e.start_s is not None and 0 <= e.start_s <= MAX_S else None
        for e in entries
    ]
    first = next((i for i, s in enumerate(starts) if s is not None), len(entries))
    anchor = starts[first] if first < len(entries) else file_mtime_ns
    assert anchor is not None
    anchor = max(anchor, (first + 1) * STEP_NS)
    placed: list[int] = []
    previous = anchor - (first + 1) * STEP_NS
    for s in starts:
        previous = s if s is not None else previous + STEP_NS
        placed.append(previous)
    user, host = this_user(), this_host()
    records = []
    for e, start in zip(entries, placed, strict=True):
        duration_s = min(max(e.duration_s or 0, 0), MAX_S)
        end = min(start + duration_s * 1_000_000_000, MAX_S * 1_000_000_000)
        records.append(
            CommandRecord(
                text=text_of(e.text),
                return_value=RETURN_VALUE_UNKNOWN,
                start_ns=start,
                end_ns=end,
                working_dir="",
                username=user,
                hostname=host,
                session_uuid=None,
                hash_chunk_size=None,
                hash_max_reads=None,
            )
        )
    identity.assign(kind, records, [s is not None for s in starts])
    return records


def lines(data: bytes) -> list[bytes]:
    """The lines of a history file, without their newline (a last line
    without one counts)."""
    out = data.split(b"\n")
    if out and out[-1] == b"":
        out.pop()
    return out


def looks_binary(data: bytes) -> bool:
    """A NUL byte or a database header: not a shell history (a history
    file holds text; zsh metafies NUL)."""
    return b"\x00" in data[:65536] or data.startswith(b"SQLite format 3")
