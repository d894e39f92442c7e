"""What deleting commands reports: the plan shown before (``--dry-run``),
the result after, and the one usage error (no criteria)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from shournal.data import QueryError


class DeleteError(QueryError):
    """A deletion that cannot be run as given (no criteria; one-line
    message)."""


@dataclass(frozen=True, slots=True)
class CommandSummary:
    id: int
    start_time: datetime  # aware, UTC
    working_dir: str
    text: str


@dataclass(slots=True)
class DeletePlan:
    """What a deletion would remove (``--dry-run``)."""

    commands: list[CommandSummary]
    event_count: int
    # Apparatus archive blobs only these commands name, and their bytes.
    archive_blobs: int = 0
    archive_bytes: int = 0

    @property
    def command_ids(self) -> list[int]:
        return [c.id for c in self.commands]


@dataclass(slots=True)
class DeleteResult:
    commands: int = 0
    events: int = 0
    # Rows removed because nothing referenced them any more, by table.
    collected: dict[str, int] = field(default_factory=dict)
    # Apparatus archive blobs removed (nothing names them any more).
    archive_blobs: int = 0
    archive_bytes: int = 0
    # Why unreferenced blobs were kept (one line), or None.
    archive_kept: str | None = None


NO_CRITERIA = (
    "no criteria: give at least one of --command-id, --session-id, --cwd, "
    "--command-text, --older-than, --until"
)
