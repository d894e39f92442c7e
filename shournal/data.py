"""The library's data types: what the journal hands out (command and file
views, statistics) and what it is asked (criteria), with the errors of
asking.

The bottom of the import graph: standard library only, nothing from
shournal, so that every other module (store, query, renderers, CLI) can
import these without pulling in SQLAlchemy or each other.

Every `shournal query` imports this module, so it stays cheap: the views
and statistics are plain classes with ``__slots__`` (equality, repr and,
for the frozen ones, hashing as :mod:`dataclasses` would make them), not
dataclasses, whose creation and module would cost the fast path
(:mod:`shournal.cli._fast`) more than the rest of its imports.  The
criteria types are dataclasses in :mod:`shournal._criteria`, loaded when
first named here.
"""

from __future__ import annotations

# Not typing.TYPE_CHECKING: importing typing costs `shournal query` ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Mapping
    from datetime import datetime
    from typing import Any

    from shournal._criteria import Condition, Criteria, FileCriteria, Period

__all__ = [
    "ArchivedFile",
    "NotArchived",
    "DEFAULT_TOP",
    "INT64_MAX",
    "LOST_REASONS",
    "NOTE_MAX_CHARS",
    "TAG_MAX_CHARS",
    "LabelError",
    "check_note",
    "check_tag",
    "RETURN_VALUE_UNKNOWN",
    "WRITE_CLOCK_TOLERANCE_NS",
    "BadSessionId",
    "CommandModifications",
    "CommandView",
    "Condition",
    "Criteria",
    "CriteriaError",
    "DirectoryActivity",
    "FileCriteria",
    "FileEventView",
    "FileProbe",
    "JournalStats",
    "Period",
    "QueryError",
    "QueryFileError",
    "Part",
    "RedactResult",
    "RestoreError",
    "TargetExists",
    "InputEntry",
    "ProgramEntry",
    "SessionCommands",
    "UsageBucket",
    "UsageStats",
    "WriterEntry",
    "WorkingDirCommands",
    "WrittenVersion",
    "lost_reason_parts",
    "ns_to_datetime",
    "possible_writers",
    "ran_at",
    "uuid_text",
]

# The original stores INT32_MAX when the exit status is unknown.
RETURN_VALUE_UNKNOWN = 2**31 - 1


def ns_to_datetime(ns: int) -> datetime:
    """Nanoseconds since the epoch (a record's times) as an aware UTC
    datetime, to the microsecond the journal keeps."""
    from datetime import UTC, datetime

    seconds, rest = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest // 1000)


def uuid_text(raw: bytes) -> str:
    """A command's UUID (16 raw bytes) as text, 8-4-4-4-12 hex digits (as
    str(uuid.UUID(bytes=raw)), without importing uuid on the query's path)."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# Ids, sizes, counts and limits are 64-bit signed integers in the journal
# (and in SQLite's and PostgreSQL's bound parameters).
INT64_MAX = 2**63 - 1

_CRITERIA_TYPES = ("Condition", "Criteria", "FileCriteria", "Op", "Period")


def __getattr__(name: str) -> Any:
    if name in _CRITERIA_TYPES:
        import shournal._criteria

        return getattr(shournal._criteria, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- errors ----------------------------------------------------------------------


class NotArchived(Exception):
    """No archived content for a read file id (restore, replay)."""


class RestoreError(Exception):
    """Restoring cannot proceed (one-line message); nothing was written."""


class TargetExists(RestoreError):
    """The target exists and overwriting was not requested."""

    def __init__(self, target: os.PathLike[str]) -> None:
        super().__init__(f"{target} exists (use --force to overwrite)")
        self.target = target


class ArchivedFile:
    """One archived read file of one command."""

    __slots__ = ("file_id", "command_id", "path", "mode", "mtime_ns", "data")

    def __init__(self, file_id: int, command_id: int, path: bytes, mode: int, mtime_ns: int,
                 data: bytes) -> None:
        self.file_id = file_id  # the read file's id, as printed after "id" by query
        self.command_id = command_id
        self.path = path  # original absolute path
        self.mode = mode
        self.mtime_ns = mtime_ns
        self.data = data

    @property
    def name(self) -> bytes:
        return self.path.rsplit(b"/", 1)[-1]

    def __repr__(self) -> str:
        return (f"ArchivedFile(file_id={self.file_id}, command_id={self.command_id}, "
                f"path={self.path!r})")


class QueryError(Exception):
    """A query that cannot be run as given (a usage error; one-line
    message)."""


class CriteriaError(QueryError):
    """A criterion value that cannot be parsed."""


class QueryFileError(QueryError):
    """The file given to --wfile/--rfile cannot be examined."""


class BadSessionId(CriteriaError):
    """The session id is neither base64 of 16 bytes nor a UUID."""


# -- lost events -------------------------------------------------------------------

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


# -- notes and tags (shournal note, shournal tag) ------------------------------------

# The longest note and tag, in characters: a note is a sentence or a
# paragraph, a tag a word people type.
NOTE_MAX_CHARS = 4096
TAG_MAX_CHARS = 64


class LabelError(QueryError):
    """A note or tag that cannot be stored as given (a usage error)."""


def check_tag(tag: str) -> str:
    """``tag`` if it is one: 1..TAG_MAX_CHARS printable characters, no blank
    (a tag is a word: ``fig3``, ``paper-2``, ``run:v2``).

    :raises LabelError: it is not."""
    shown = tag.encode("unicode_escape").decode("ascii")[:80]
    if not tag:
        raise LabelError("a tag cannot be empty")
    if len(tag) > TAG_MAX_CHARS:
        raise LabelError(f"tag {shown!r} is too long ({len(tag)} characters; at most "
                         f"{TAG_MAX_CHARS})")  # fmt: skip
    if not tag.isprintable() or any(ch.isspace() for ch in tag):
        raise LabelError(f"tag {shown!r}: a tag is one word of printable characters "
                         "(no blanks or control characters)")  # fmt: skip
    return tag


def check_note(text: str) -> str:
    """``text`` without surrounding blanks if it is a note: not empty, at
    most NOTE_MAX_CHARS characters, printable apart from line breaks and
    tabs.

    :raises LabelError: it is not."""
    text = text.strip()
    if not text:
        raise LabelError("a note cannot be empty (--clear removes one)")
    if len(text) > NOTE_MAX_CHARS:
        raise LabelError(f"the note is too long ({len(text)} characters; at most "
                         f"{NOTE_MAX_CHARS})")  # fmt: skip
    if not all(ch.isprintable() or ch in "\n\t" for ch in text):
        raise LabelError("a note must not contain control characters")
    return text


# -- plain value classes ---------------------------------------------------------------


class _Value:
    """Equality and repr over the fields (``__slots__``, in order), as a
    dataclass has them; mutable, so not hashable.  Each subclass lists its
    fields once in ``__slots__`` and takes them, in that order, in
    ``__init__`` (tests/unit/test_data.py checks both agree)."""

    __slots__ = ()

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        """The fields, a subclass's after its bases'."""
        return tuple(n for c in reversed(cls.__mro__) for n in c.__dict__.get("__slots__", ()))

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._names())

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._fields() == other._fields()  # type: ignore[attr-defined]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._names())
        return f"{self.__class__.__qualname__}({inner})"


class _FrozenValue(_Value):
    """A :class:`_Value` whose fields cannot be changed, hashable."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._fields())

    def _init(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _replace(self, **changes: Any) -> Any:
        """A copy with ``changes``, as ``dataclasses.replace`` makes one of
        a frozen dataclass (the name as namedtuple's, clashing with no
        field)."""
        values = {name: getattr(self, name) for name in self._names()}
        unknown = sorted(changes.keys() - values.keys())
        if unknown:
            raise TypeError(f"{self.__class__.__qualname__} has no field {unknown[0]!r}")
        values.update(changes)
        return self.__class__(**values)


# -- what the journal hands out ------------------------------------------------------


class FileEventView(_Value):
    """A file a command wrote, or the version of a file it read.

    ``id`` is the write event's id, or the read file version's id (the one
    ``shournal restore --file-id`` takes); ``path`` is absolute, as bytes.
    ``content_id`` is the archived content, if any, ``content_preview`` its
    first bytes.  ``status`` is set by --stat (shournal.query.filestat): "U"
    up to date, "M" modified, "N" missing, "ERROR"; None when not checked.
    """

    __slots__ = (
        "id", "path", "size", "mtime_ns", "hash", "mode", "content_id", "content_preview",
        "content_size", "status",
    )  # fmt: skip

    def __init__(
        self,
        id: int,
        path: bytes,
        size: int,
        mtime_ns: int,
        hash: int | None,
        mode: int,
        content_id: int | None = None,
        content_preview: bytes | None = None,
        content_size: int | None = None,
        status: str | None = None,
    ) -> None:
        self.id = id
        self.path = path
        self.size = size
        self.mtime_ns = mtime_ns
        self.hash = hash
        self.mode = mode
        self.content_id = content_id
        self.content_preview = content_preview
        self.content_size = content_size
        self.status = status

    @property
    def is_stored(self) -> bool:
        """Whether the content of this read file was archived."""
        return self.content_id is not None


# CommandView.match: the file given to a query was found by its content and
# mtime, or by its content alone (a copy, `touch`, an unpacked archive).
MATCH_EXACT = "exact"
MATCH_CONTENT = "content"


class CommandView(_Value):
    """One recorded command line with its files (``writes``, ``reads``).

    Times are aware datetimes in UTC; ``session_uuid`` is the 16 raw bytes
    of the shell session (None for ``shournal run`` outside a shell).
    ``derived_from``: the recorded command a `shournal rerun` derives from.
    ``lost_reasons``: lost_events by reason (:data:`LOST_REASONS`), those
    with a count; empty when the journal did not record reasons (schema <=
    4).  ``incomplete``: stored from its start, the shell never reported
    the end (it exec'd a program, was hung up or died); the exit status is
    unknown.  ``imported_from``: brought in by `shournal import` from that
    kind of history ("bash", "zsh", "atuin", "shournal", "hishtory"); None
    for a recorded command.  ``uuid``: the 16 random bytes the command line
    got where it started (None: stored before commands had one, or
    imported).  ``write_count``/``read_count`` are the stored totals, larger
    than len(writes)/len(reads) when max_files cut the lists short.
    ``note`` and ``tags``: what the user added (`shournal note`, `shournal
    tag`); untrusted text like the command line (made printable, or
    escaped, where shown).
    ``match``: how a file given to the query (``--wfile``/``--rfile``) was
    found: None without one, :data:`MATCH_EXACT` or :data:`MATCH_CONTENT`
    (same size and hash, but no recorded version has the file's mtime).
    """

    __slots__ = (
        "id", "text", "return_value", "start_time", "end_time", "working_dir", "username",
        "hostname", "session_uuid", "hash_chunk_size", "hash_max_reads", "dropped_writes",
        "dropped_reads", "lost_events", "derived_from", "lost_reasons", "incomplete",
        "imported_from", "writes", "reads", "write_count", "read_count", "note", "tags",
        "match", "uuid",
    )  # fmt: skip

    def __init__(
        self,
        id: int,
        text: str,
        return_value: int,
        start_time: datetime,
        end_time: datetime,
        working_dir: str,
        username: str,
        hostname: str,
        session_uuid: bytes | None,
        hash_chunk_size: int | None,
        hash_max_reads: int | None,
        dropped_writes: int = 0,
        dropped_reads: int = 0,
        lost_events: int = 0,
        derived_from: int | None = None,
        lost_reasons: dict[str, int] | None = None,
        incomplete: bool = False,
        imported_from: str | None = None,
        writes: list[FileEventView] | None = None,
        reads: list[FileEventView] | None = None,
        write_count: int = 0,
        read_count: int = 0,
        note: str | None = None,
        tags: list[str] | None = None,
        match: str | None = None,
        uuid: bytes | None = None,
    ) -> None:
        self.id = id
        self.text = text
        self.return_value = return_value
        self.start_time = start_time
        self.end_time = end_time
        self.working_dir = working_dir
        self.username = username
        self.hostname = hostname
        self.session_uuid = session_uuid
        self.hash_chunk_size = hash_chunk_size
        self.hash_max_reads = hash_max_reads
        self.dropped_writes = dropped_writes
        self.dropped_reads = dropped_reads
        self.lost_events = lost_events
        self.derived_from = derived_from
        self.lost_reasons: dict[str, int] = {} if lost_reasons is None else lost_reasons
        self.incomplete = incomplete
        self.imported_from = imported_from
        self.writes: list[FileEventView] = [] if writes is None else writes
        self.reads: list[FileEventView] = [] if reads is None else reads
        self.write_count = write_count
        self.read_count = read_count
        self.note = note
        self.tags: list[str] = [] if tags is None else tags
        self.match = match
        self.uuid = uuid

    @property
    def return_value_known(self) -> bool:
        return self.return_value != RETURN_VALUE_UNKNOWN


class FileProbe(_FrozenValue):
    """What identifies a file's content in the journal: its size, mtime
    (None: any mtime, content alone) and its partial hash under each stored
    hash setting."""

    __slots__ = ("size", "mtime_ns", "hashes")
    size: int
    mtime_ns: int | None
    hashes: frozenset[int]

    def __init__(self, size: int, mtime_ns: int | None, hashes: frozenset[int]) -> None:
        self._init(size=size, mtime_ns=mtime_ns, hashes=hashes)


class WrittenVersion(_FrozenValue):
    """One write event of a looked-up content, with what the lineage walk
    needs of its command (times, hash settings) without loading it."""

    __slots__ = (
        "write_id", "command_id", "start_time", "end_time", "path", "size", "mtime_ns", "hash",
        "hash_chunk_size", "hash_max_reads",
    )  # fmt: skip
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

    def __init__(
        self,
        write_id: int,
        command_id: int,
        start_time: datetime,
        end_time: datetime,
        path: bytes,
        size: int,
        mtime_ns: int,
        hash: int | None,
        hash_chunk_size: int | None,
        hash_max_reads: int | None,
    ) -> None:
        self._init(
            write_id=write_id, command_id=command_id, start_time=start_time,
            end_time=end_time, path=path, size=size, mtime_ns=mtime_ns, hash=hash,
            hash_chunk_size=hash_chunk_size, hash_max_reads=hash_max_reads,
        )  # fmt: skip


# How far a file's mtime (the file system's clock, coarse: it may lag the
# system clock by a tick) may lie outside the run of the command that
# wrote it (start and end taken by the shell and the listener).
WRITE_CLOCK_TOLERANCE_NS = 2_000_000_000


def _ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def possible_writers(candidates: Iterable[WrittenVersion], mtime_ns: int) -> list[WrittenVersion]:
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


# -- what `shournal redact` changed in a journal (shournal.store.redaction) ----------


class Part(_Value):
    """One kind of stored text: how many rows changed (or would), and the
    secrets replaced in them by kind."""

    __slots__ = ("changed", "counts")
    changed: int
    counts: dict[str, int]

    def __init__(self, changed: int = 0, counts: dict[str, int] | None = None) -> None:
        self.changed = changed
        self.counts = {} if counts is None else counts

    def add(self, counts: Mapping[str, int]) -> None:
        self.changed += 1
        for kind, n in counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n


class RedactResult(_Value):
    """What :func:`shournal.store.redaction.redact_stored` changed (``dry_run``: would change)."""

    __slots__ = ("commands", "scripts", "environments", "dry_run")
    commands: Part
    scripts: Part
    environments: Part
    dry_run: bool

    def __init__(self, commands: Part | None = None, scripts: Part | None = None,
                 environments: Part | None = None, dry_run: bool = False) -> None:
        self.commands = Part() if commands is None else commands
        self.scripts = Part() if scripts is None else scripts
        self.environments = Part() if environments is None else environments
        self.dry_run = dry_run

    @property
    def total(self) -> int:
        return sum(sum(p.counts.values()) for p in (self.commands, self.scripts,
                                                     self.environments))


# -- statistics (shournal.store.stats computes them) --------------------------

# entries in each top-N list
DEFAULT_TOP = 5


class CommandModifications(_FrozenValue):
    """A command and how many files it wrote."""

    __slots__ = ("command_id", "text", "written")
    command_id: int
    text: str
    written: int

    def __init__(self, command_id: int, text: str, written: int) -> None:
        self._init(command_id=command_id, text=text, written=written)


class SessionCommands(_FrozenValue):
    """A shell session and how many commands ran in it."""

    __slots__ = ("session_uuid", "commands", "first_start", "last_end")
    session_uuid: bytes
    commands: int
    first_start: datetime
    last_end: datetime

    def __init__(
        self, session_uuid: bytes, commands: int, first_start: datetime, last_end: datetime
    ) -> None:
        self._init(
            session_uuid=session_uuid, commands=commands, first_start=first_start,
            last_end=last_end,
        )  # fmt: skip


class WorkingDirCommands(_FrozenValue):
    """A working directory and how many commands ran in it."""

    __slots__ = ("path", "commands")
    path: str
    commands: int

    def __init__(self, path: str, commands: int) -> None:
        self._init(path=path, commands=commands)


class DirectoryActivity(_FrozenValue):
    """A directory (``path`` with its trailing slash, as stored) and how
    many file events (written + read) happened in it."""

    __slots__ = ("path", "written", "read")
    path: bytes
    written: int
    read: int

    def __init__(self, path: bytes, written: int, read: int) -> None:
        self._init(path=path, written=written, read=read)

    @property
    def total(self) -> int:
        return self.written + self.read


class JournalStats(_Value):
    """Totals and the four top-N lists, each sorted by count descending."""

    __slots__ = (
        "commands", "sessions", "written_events", "read_events", "first_start", "last_start",
        "most_modifications", "sessions_most_commands", "busiest_working_dirs",
        "busiest_directories", "redactions",
    )  # fmt: skip

    def __init__(
        self,
        commands: int = 0,
        sessions: int = 0,
        written_events: int = 0,
        read_events: int = 0,
        first_start: datetime | None = None,
        last_start: datetime | None = None,
        most_modifications: list[CommandModifications] | None = None,
        sessions_most_commands: list[SessionCommands] | None = None,
        busiest_working_dirs: list[WorkingDirCommands] | None = None,
        busiest_directories: list[DirectoryActivity] | None = None,
        redactions: dict[str, int] | None = None,
    ) -> None:
        self.commands = commands
        self.sessions = sessions
        self.written_events = written_events
        self.read_events = read_events
        self.first_start = first_start
        self.last_start = last_start
        self.most_modifications: list[CommandModifications] = (
            [] if most_modifications is None else most_modifications
        )
        self.sessions_most_commands: list[SessionCommands] = (
            [] if sessions_most_commands is None else sessions_most_commands
        )
        self.busiest_working_dirs: list[WorkingDirCommands] = (
            [] if busiest_working_dirs is None else busiest_working_dirs
        )
        self.busiest_directories: list[DirectoryActivity] = (
            [] if busiest_directories is None else busiest_directories
        )
        # Secrets replaced by their markers in these commands, by kind
        # (shournal.redact); filled by shournal.store.stats only.
        self.redactions: dict[str, int] = {} if redactions is None else redactions


# -- what files commands produced and consumed (shournal stats; computed by
# shournal.store.stats.compute_usage) ------------------------------------------


class UsageBucket(_FrozenValue):
    """One bucket of a period (an hour, a day or a month, from ``start``):
    commands started in it, and their written and read file events."""

    __slots__ = ("start", "commands", "written", "read")
    start: datetime
    commands: int
    written: int
    read: int

    def __init__(self, start: datetime, commands: int, written: int, read: int) -> None:
        self._init(start=start, commands=commands, written=written, read=read)


class WriterEntry(_FrozenValue):
    """A command and how many files (write events) and bytes it wrote."""

    __slots__ = ("command_id", "text", "files", "bytes")
    command_id: int
    text: str
    files: int
    bytes: int

    def __init__(self, command_id: int, text: str, files: int, bytes: int) -> None:
        self._init(command_id=command_id, text=text, files=files, bytes=bytes)


class InputEntry(_FrozenValue):
    """A file (its path, any version) and how many commands read it."""

    __slots__ = ("path", "commands")
    path: bytes
    commands: int

    def __init__(self, path: bytes, commands: int) -> None:
        self._init(path=path, commands=commands)


class ProgramEntry(_FrozenValue):
    """A program (a command line's first word, its file name) and how many
    command lines started with it."""

    __slots__ = ("program", "commands")
    program: str
    commands: int

    def __init__(self, program: str, commands: int) -> None:
        self._init(program=program, commands=commands)


class UsageStats(_Value):
    """What the commands of a scope produced and consumed: per bucket
    (``bucket``: "hour", "day" or "month", local time), the distinct files
    written (``produced``, ``written_bytes``) and read (``consumed``), the
    biggest writers by files and by bytes, the inputs most commands read
    and the most used programs; top lists sorted by count descending."""

    __slots__ = (
        "bucket", "series", "produced", "written_bytes", "consumed", "writers_by_files",
        "writers_by_bytes", "reused_inputs", "programs",
    )  # fmt: skip

    def __init__(
        self,
        bucket: str = "day",
        series: list[UsageBucket] | None = None,
        produced: int = 0,
        written_bytes: int = 0,
        consumed: int = 0,
        writers_by_files: list[WriterEntry] | None = None,
        writers_by_bytes: list[WriterEntry] | None = None,
        reused_inputs: list[InputEntry] | None = None,
        programs: list[ProgramEntry] | None = None,
    ) -> None:
        self.bucket = bucket
        self.series: list[UsageBucket] = [] if series is None else series
        self.produced = produced
        self.written_bytes = written_bytes
        self.consumed = consumed
        self.writers_by_files: list[WriterEntry] = (
            [] if writers_by_files is None else writers_by_files
        )
        self.writers_by_bytes: list[WriterEntry] = (
            [] if writers_by_bytes is None else writers_by_bytes
        )
        self.reused_inputs: list[InputEntry] = [] if reused_inputs is None else reused_inputs
        self.programs: list[ProgramEntry] = [] if programs is None else programs
