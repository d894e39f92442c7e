"""The dataclasses of :mod:`shournal.data`: the criteria the journal is
asked (:class:`Criteria` and its parts) and the lineage walk's
:class:`WrittenVersion`.  Import them from :mod:`shournal.data`, which
loads this module on first use: creating dataclasses, and importing
:mod:`dataclasses` itself, would cost every `shournal query` several ms,
and its fast path (:mod:`shournal.cli._fast`) needs none of these.

Standard library only, like :mod:`shournal.data`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, Literal, Protocol, TypeVar

__all__ = [
    "WRITE_CLOCK_TOLERANCE_NS",
    "Condition",
    "Criteria",
    "FileCriteria",
    "Period",
    "WrittenVersion",
    "possible_writers",
]

Op = Literal["eq", "ne", "lt", "le", "gt", "ge", "like", "between"]
T = TypeVar("T")


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


# How far a file's mtime (the file system's clock, coarse: it may lag the
# system clock by a tick) may lie outside the run of the command that
# wrote it (start and end taken by the shell and the listener).
WRITE_CLOCK_TOLERANCE_NS = 2_000_000_000


def _ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


class _Write(Protocol):
    @property
    def mtime_ns(self) -> int: ...
    @property
    def start_time(self) -> datetime: ...
    @property
    def end_time(self) -> datetime: ...


W = TypeVar("W", bound=_Write)


def possible_writers(candidates: Iterable[W], mtime_ns: int) -> list[W]:
    """The writes of a content (``candidates``) that can have made the
    version with ``mtime_ns``: the ones the journal saw with that very
    mtime (a move keeps it; ``tar``, ``cp -p`` set an old one), else the
    ones whose command ran when the version was written (its run
    +- :data:`WRITE_CLOCK_TOLERANCE_NS`).  Any other write of the same
    content made another file: this version was written outside the
    journal (an unrecorded ``cp``).  The one rule of the lineage walk,
    ``status``, the exports and ``query --wfile``."""
    pool = list(candidates)
    same = [c for c in pool if c.mtime_ns == mtime_ns]
    if same:
        return same
    return [c for c in pool if ran_at(c.start_time, c.end_time, mtime_ns)]


def ran_at(start_time: datetime, end_time: datetime | None, mtime_ns: int) -> bool:
    """Whether a command that ran from ``start_time`` to ``end_time`` can
    have written a file at ``mtime_ns`` (+- :data:`WRITE_CLOCK_TOLERANCE_NS`;
    a command that never finished has no end: its start must do)."""
    tol = WRITE_CLOCK_TOLERANCE_NS
    return _ns(start_time) - tol <= mtime_ns <= _ns(end_time or start_time) + tol



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
    """AND-combined criteria on commands, as :func:`shournal.criteria.parse_criteria`
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
    # Commands carrying every one of these tags (shournal tag).
    tags: tuple[str, ...] | None = None
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
                "user", "since", "until", "session_uuid", "tags", "lineage_of",
            )
        )  # fmt: skip
