"""What the capture side hands to the store: one finished command line.

Plain dataclasses, no SQLAlchemy: the listener builds these while events
arrive and imports the store only once the command line has ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class FileEvent:
    path: bytes  # absolute path as the kernel reported it (raw bytes)
    size: int
    mtime_ns: int
    mode: int  # st_mode
    hash: int | None  # partial XXH64 (unsigned); None: empty file or hashing off
    content: bytes | None = None  # archived script content (read events only)


# Why file events were lost (stored per reason, in this order):
#   overflow   - the kernel's queue overflowed, or an event came without an
#                fd (the kernel failed to open the file for the holder);
#   unreadable - the holder's check of the file failed (access check,
#                fstat, its path or its content could not be read);
#   path       - the event's path no longer led to its file (renamed,
#                replaced or unlinked before the holder took it);
#   relay      - the relay from the holder ended early (the holder was
#                killed or crashed) or records went missing on the way.
# A file the user may not read is dropped, not lost: it is none of his.
# Events beyond a cap are counted as dropped_writes/dropped_reads.
LOST_REASONS = ("overflow", "unreadable", "path", "relay")
# How the outputs name them (the HTML report gets these texts too).
LOST_REASON_TEXT = {
    "overflow": "kernel queue overflow",
    "unreadable": "file check failed",
    "path": "path no longer led to the file",
    "relay": "event relay ended early",
}
LOST_REASON_UNKNOWN = "reason not recorded"


def lost_reason_parts(lost_events: int, lost_reasons: dict[str, int]) -> list[tuple[str, int]]:
    """(text, count) of each reason of a command's lost events, in
    LOST_REASONS order; what no reason accounts for (a journal of before
    reasons were stored) as LOST_REASON_UNKNOWN."""
    parts = [(LOST_REASON_TEXT[r], lost_reasons[r]) for r in LOST_REASONS if lost_reasons.get(r)]
    rest = lost_events - sum(n for _t, n in parts)
    if rest > 0:
        parts.append((LOST_REASON_UNKNOWN, rest))
    return parts


@dataclass(slots=True)
class CommandRecord:
    text: str
    return_value: int
    start_ns: int  # UTC, ns since the epoch
    end_ns: int
    working_dir: str
    username: str
    hostname: str
    session_uuid: bytes | None  # 16 raw bytes
    hash_chunk_size: int | None  # None: hashing disabled
    hash_max_reads: int | None
    writes: list[FileEvent] = field(default_factory=list)
    reads: list[FileEvent] = field(default_factory=list)
    # Nothing lost silently: events beyond the per-command caps (dropped),
    # and events lost on the way (lost_events, of which lost_reasons says
    # why: LOST_REASONS -> count, reasons with a count only).
    dropped_writes: int = 0
    dropped_reads: int = 0
    lost_events: int = 0
    # The apparatus manifest (shournal.reproduce.recording), encoded; None:
    # recorded without its apparatus.
    apparatus: bytes | None = None
    # With the apparatus: the command it derives from (`shournal rerun`).
    derived_from: int | None = None
    lost_reasons: dict[str, int] = field(default_factory=dict)
    # The shell never reported the line's end (it exec'd a program, was
    # hung up or died): stored from its start, the exit status unknown
    # (return_value RETURN_VALUE_UNKNOWN), the end when its last process
    # exited.
    incomplete: bool = False
