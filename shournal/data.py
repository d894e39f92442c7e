"""The library's data types: what the journal hands out (command and file
views) and what it is asked (criteria), with the errors of asking.

The bottom of the import graph: standard library only, nothing from
shournal, so that every other module (store, query, renderers, CLI) can
import these without pulling in SQLAlchemy or each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, Literal, TypeVar

__all__ = [
    "INT64_MAX",
    "RETURN_VALUE_UNKNOWN",
    "BadSessionId",
    "CommandView",
    "Condition",
    "Criteria",
    "CriteriaError",
    "FileCriteria",
    "FileEventView",
    "FileProbe",
    "Period",
    "QueryError",
    "QueryFileError",
    "WrittenVersion",
]

# The original stores INT32_MAX when the exit status is unknown.
RETURN_VALUE_UNKNOWN = 2**31 - 1

# Ids, sizes, counts and limits are 64-bit signed integers in the journal
# (and in SQLite's and PostgreSQL's bound parameters).
INT64_MAX = 2**63 - 1

Op = Literal["eq", "ne", "lt", "le", "gt", "ge", "like", "between"]
T = TypeVar("T")


# -- errors ----------------------------------------------------------------------


class QueryError(Exception):
    """A query that cannot be run as given (a usage error; one-line
    message)."""


class CriteriaError(QueryError):
    """A criterion value that cannot be parsed."""


class QueryFileError(QueryError):
    """The file given to --wfile/--rfile cannot be examined."""


class BadSessionId(CriteriaError):
    """The session id is neither base64 of 16 bytes nor a UUID."""


# -- what the journal hands out ------------------------------------------------------


@dataclass(slots=True)
class FileEventView:
    """A file a command wrote, or the version of a file it read.

    ``id`` is the write event's id, or the read file version's id (the one
    ``shournal restore --file-id`` takes); ``path`` is absolute, as bytes.
    """

    id: int
    path: bytes
    size: int
    mtime_ns: int
    hash: int | None
    mode: int
    content_id: int | None = None  # archived content, if any
    content_preview: bytes | None = None  # its first bytes
    content_size: int | None = None
    # Set by --stat (shournal.query.filestat): "U" up to date, "M" modified,
    # "N" missing, "ERROR"; None when not checked.
    status: str | None = None

    @property
    def is_stored(self) -> bool:
        """Whether the content of this read file was archived."""
        return self.content_id is not None


@dataclass(slots=True)
class CommandView:
    """One recorded command line with its files (``writes``, ``reads``).

    Times are aware datetimes in UTC; ``session_uuid`` is the 16 raw bytes
    of the shell session (None for ``shournal run`` outside a shell).
    """

    id: int
    text: str
    return_value: int
    start_time: datetime  # aware, UTC
    end_time: datetime
    working_dir: str
    username: str
    hostname: str
    session_uuid: bytes | None
    hash_chunk_size: int | None
    hash_max_reads: int | None
    dropped_writes: int = 0
    dropped_reads: int = 0
    lost_events: int = 0
    # `shournal rerun`: the recorded command this one derives from.
    derived_from: int | None = None
    # lost_events by reason (shournal.capture.record.LOST_REASONS), those with a
    # count; empty when the journal did not record reasons (schema <= 4)
    lost_reasons: dict[str, int] = field(default_factory=dict)
    # stored from its start: the shell never reported the end (it exec'd a
    # program, was hung up or died); the exit status is unknown
    incomplete: bool = False
    writes: list[FileEventView] = field(default_factory=list)
    reads: list[FileEventView] = field(default_factory=list)
    # Stored totals; larger than len(writes)/len(reads) when max_files cut
    # the lists short.
    write_count: int = 0
    read_count: int = 0

    @property
    def return_value_known(self) -> bool:
        return self.return_value != RETURN_VALUE_UNKNOWN


@dataclass(frozen=True, slots=True)
class FileProbe:
    """What identifies a file's content in the journal."""

    size: int
    mtime_ns: int | None  # None: any mtime (content alone)
    hashes: frozenset[int]  # its partial hash under each stored hash setting


@dataclass(frozen=True, slots=True)
class WrittenVersion:
    """One write event of a looked-up content, with what the lineage walk
    needs of its command (times, hash settings) without loading it."""

    write_id: int
    command_id: int
    start_time: datetime  # aware, UTC: of the writing command
    end_time: datetime
    path: bytes  # where the command wrote it
    size: int
    mtime_ns: int
    hash: int | None
    hash_chunk_size: int | None  # the writing command's hash settings
    hash_max_reads: int | None


# -- what the journal is asked ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Condition(Generic[T]):
    """``column <op> value``; ``high`` is the upper bound of ``between``."""

    op: Op
    value: T
    high: T | None = None


@dataclass(frozen=True, slots=True)
class Period:
    """A time as the half-open interval [start_ns, end_ns) of its precision,
    in ns since the epoch (UTC).  An instant lasts 1 ns."""

    start_ns: int
    end_ns: int


@dataclass(slots=True)
class FileCriteria:
    """Conditions that must all hold for one and the same written (or read)
    file event of a command."""

    name: Condition[str] | None = None  # on the basename
    path: Condition[str] | None = None  # on the directory (absolute)
    size: Condition[int] | None = None
    hash: Condition[int] | None = None
    mtime: Condition[Period] | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.name, self.path, self.size, self.hash, self.mtime))


@dataclass(slots=True)
class Criteria:
    """AND-combined criteria on commands, as :func:`shournal.query.criteria.parse_criteria`
    makes them from the CLI's spelling.  Query, statistics and deletion
    all take this one type, so they select the same commands."""

    command_text: Condition[str] | None = None
    cwd: Condition[str] | None = None
    command_id: Condition[int] | None = None
    command_ids: tuple[int, ...] | None = None  # any of these ids
    exit_code: Condition[int] | None = None
    host: Condition[str] | None = None
    user: Condition[str] | None = None
    since: Period | None = None  # start time >= its start
    until: Period | None = None  # start time < its end
    session_uuid: bytes | None = None
    # Commands in the lineage of these files (absolute paths; the version
    # on disk): resolved by the journal through the provenance walk.
    lineage_of: tuple[str, ...] | None = None
    written: FileCriteria = field(default_factory=FileCriteria)
    read: FileCriteria = field(default_factory=FileCriteria)

    def is_empty(self) -> bool:
        return not self.written and not self.read and all(
            getattr(self, k) is None
            for k in (
                "command_text", "cwd", "command_id", "command_ids", "exit_code", "host",
                "user", "since", "until", "session_uuid", "lineage_of",
            )
        )  # fmt: skip


# -- statistics (shournal.store.stats computes them) --------------------------

# entries in each top-N list
DEFAULT_TOP = 5


@dataclass(frozen=True, slots=True)
class CommandModifications:
    """A command and how many files it wrote."""

    command_id: int
    text: str
    written: int


@dataclass(frozen=True, slots=True)
class SessionCommands:
    """A shell session and how many commands ran in it."""

    session_uuid: bytes
    commands: int
    first_start: datetime
    last_end: datetime


@dataclass(frozen=True, slots=True)
class WorkingDirCommands:
    """A working directory and how many commands ran in it."""

    path: str
    commands: int


@dataclass(frozen=True, slots=True)
class DirectoryActivity:
    """A directory and how many file events (written + read) happened in it."""

    path: bytes  # with its trailing slash, as stored
    written: int
    read: int

    @property
    def total(self) -> int:
        return self.written + self.read


@dataclass(slots=True)
class JournalStats:
    """Totals and the four top-N lists, each sorted by count descending."""

    commands: int = 0
    sessions: int = 0
    written_events: int = 0
    read_events: int = 0
    first_start: datetime | None = None
    last_start: datetime | None = None
    most_modifications: list[CommandModifications] = field(default_factory=list)
    sessions_most_commands: list[SessionCommands] = field(default_factory=list)
    busiest_working_dirs: list[WorkingDirCommands] = field(default_factory=list)
    busiest_directories: list[DirectoryActivity] = field(default_factory=list)
