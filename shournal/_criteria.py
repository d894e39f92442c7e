"""The dataclasses of :mod:`shournal.data`: the criteria the journal is
asked (:class:`Criteria` and its parts).  Import them from :mod:`shournal.data`, which
loads this module on first use: creating dataclasses, and importing
:mod:`dataclasses` itself, would cost every `shournal query` several ms,
and its fast path (:mod:`shournal.cli._fast`) needs none of these.

Standard library only, like :mod:`shournal.data`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

__all__ = [
    "Condition",
    "Criteria",
    "FileCriteria",
    "Period",
]

Op = Literal["eq", "ne", "lt", "le", "gt", "ge", "like", "between"]
T = TypeVar("T")


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
