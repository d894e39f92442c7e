"""What the capture side hands to the store: one finished command line.

Plain dataclasses, no SQLAlchemy: the listener builds these while events
arrive and imports the store only once the command line has ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Why events were lost, and how the outputs name the reasons: facts of the
# journal's data (shournal.data), used here and by the store.
from shournal.data import (  # noqa: F401
    LOST_REASON_TEXT,
    LOST_REASON_UNKNOWN,
    LOST_REASONS,
    lost_reason_parts,
)


@dataclass(slots=True)
class FileEvent:
    path: bytes  # absolute path as the kernel reported it (raw bytes)
    size: int
    mtime_ns: int
    mode: int  # st_mode
    hash: int | None  # partial XXH64 (unsigned); None: empty file or hashing off
    content: bytes | None = None  # archived script content (read events only)


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
    # The apparatus manifest (shournal.capture.apparatus.recording), encoded; None:
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
    # Brought in by `shournal import` (shournal.importers), not recorded:
    # the source's kind ("bash", "zsh", "atuin", "shournal", "hishtory") and
    # the entry's stable identity there, so that importing the same or an
    # overlapping history again stores nothing twice.
    imported_from: str | None = None
    import_key: bytes | None = None
    # Secrets replaced by their markers on the way in (shournal.redact), in
    # the text, the archived scripts and the apparatus's environment and
    # argv: kind -> count, kinds with a count only.
    redactions: dict[str, int] = field(default_factory=dict)
    # 16 random bytes drawn where the command line started (the preload
    # library, `shournal run`): the same in the finished record and in one
    # recovered from its start, so that storing it again stores nothing
    # (docs/lab.md).  None: recorded before commands had one, or imported.
    uuid: bytes | None = None
