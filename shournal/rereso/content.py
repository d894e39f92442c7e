"""The content of a recorded file version: what a command actually read
or wrote, not whatever lies at that path today.

A :data:`ContentSource` is a function that, given a :class:`FileVersion`,
returns its archived bytes or None.  There are two: the journal's own
script archive (:class:`JournalArchive`: the ``content`` table, filled for
read scripts) and the content-addressed archive of ``shournal run
--apparatus`` (:class:`ApparatusArchive`: every file a command so recorded
read), asked in turn by :func:`default_source`.

When no source has the version, the file on disk is used only if it still
is that version (:func:`recorded_content`): same size and the same partial
hash under the recording command's hash settings.  Otherwise the caller
names the file and stops.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shournal.data import CommandView, FileEventView
    from shournal.journal import Journal
    from shournal.store.archive import Contents

# Where content came from (shown to users).
FROM_ARCHIVE = "archive"
FROM_DISK = "disk"


@dataclass(frozen=True, slots=True)
class FileVersion:
    """One version of a file as the journal recorded it."""

    path: bytes
    size: int
    mtime_ns: int
    hash: int | None  # partial hash under (chunk_size, max_reads); None: not hashed
    chunk_size: int | None
    max_reads: int | None
    read_file_id: int | None = None  # set for read files (shournal restore --file-id)
    content_id: int | None = None  # the journal archived it
    command_id: int | None = None  # the command that read or wrote it

    @classmethod
    def of(cls, cmd: CommandView, ev: FileEventView, *, read: bool) -> FileVersion:
        return cls(
            path=ev.path,
            size=ev.size,
            mtime_ns=ev.mtime_ns,
            hash=ev.hash,
            chunk_size=cmd.hash_chunk_size,
            max_reads=cmd.hash_max_reads,
            read_file_id=ev.id if read else None,
            content_id=ev.content_id,
            command_id=cmd.id,
        )

    @property
    def shown(self) -> str:
        return os.fsdecode(self.path)


# The exact bytes of a recorded version, or None when the source does not
# have it.
ContentSource = Callable[[FileVersion], "bytes | None"]


class JournalArchive:
    """The journal's script archive (``content`` table) as a
    :data:`ContentSource`."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def __call__(self, version: FileVersion) -> bytes | None:
        if version.content_id is None:
            return None
        data = self._journal.content(version.content_id)
        if data is None:
            return None
        # A stored row that is not this version (size differs) is not used.
        return data if len(data) == version.size else None


class ApparatusArchive:
    """The apparatus archive as a :data:`ContentSource`: the version a
    command recorded with ``--apparatus`` read (or, with
    ``archive_outputs``, wrote), found in that command's manifest by path,
    size and mtime and returned from the archive (digest checked)."""

    def __init__(self, journal: Journal, archive: Contents | None = None) -> None:
        self._journal = journal
        self._archive = archive or journal.apparatus_content()
        self._manifests: dict[int, dict[str, Any] | None] = {}

    def manifest(self, command_id: int) -> dict[str, Any] | None:
        if command_id not in self._manifests:
            from shournal.reproduce.experiment import load_manifest

            self._manifests[command_id] = load_manifest(self._journal, command_id)
        return self._manifests[command_id]

    def __call__(self, version: FileVersion) -> bytes | None:
        from shournal.store.archive import ArchiveError

        if version.command_id is None:
            return None
        man = self.manifest(version.command_id)
        if man is None:
            return None
        shown = version.shown
        for path, size, mtime, _mode, _hsh, digest, why in (*man["reads"], *man["writes"]):
            if path != shown or size != version.size or mtime != version.mtime_ns:
                continue
            if digest is None or why is not None:
                continue
            try:
                return self._archive.get(digest)
            except ArchiveError:
                return None  # a written file's digest without its content, or damaged
        return None


def default_source(journal: Journal) -> ContentSource:
    """Every archive the ``journal`` has: its script archive, then
    the apparatus archive."""
    return first_of(JournalArchive(journal), ApparatusArchive(journal))


def first_of(*sources: ContentSource) -> ContentSource:
    """A source asking each of ``sources`` in turn."""
    chain: Iterable[ContentSource] = tuple(sources)

    def first(version: FileVersion) -> bytes | None:
        for source in chain:
            data = source(version)
            if data is not None:
                return data
        return None

    return first


class ContentUnavailable(Exception):
    """Neither an archive nor the disk has the recorded version."""

    def __init__(self, version: FileVersion, reason: str) -> None:
        super().__init__(f"{version.shown} ({reason})")
        self.version = version
        self.reason = reason


def read_regular(path: bytes) -> bytes | str:
    """The bytes of the regular file ``path``, or why not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return "missing"
    except OSError as e:
        return f"cannot open: {e.strerror}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "no longer a regular file"
        parts = []
        while chunk := os.read(fd, 1 << 20):
            parts.append(chunk)
        return b"".join(parts)
    except OSError as e:
        return f"cannot read: {e.strerror}"
    finally:
        os.close(fd)


def disk_matches(version: FileVersion, data: bytes) -> str | None:
    """None when ``data`` (read from disk) is the recorded version, else
    what differs."""
    from shournal.hashing import partial_xxh64_bytes

    if len(data) != version.size:
        return "changed since it was recorded: size differs"
    if version.hash is None or version.chunk_size is None or version.max_reads is None:
        if version.size:
            return "recorded without a hash: cannot tell whether it changed"
        return None
    if partial_xxh64_bytes(data, version.chunk_size, version.max_reads) != version.hash:
        return "changed since it was recorded: hash differs"
    return None


def recorded_content(version: FileVersion, source: ContentSource) -> tuple[bytes, str]:
    """The recorded bytes of ``version`` and where they came from
    (:data:`FROM_ARCHIVE` or :data:`FROM_DISK`).

    :raises ContentUnavailable: no source has it and the file on disk is
        not (or no longer) that version.
    """
    data = source(version)
    if data is not None:
        return data, FROM_ARCHIVE
    got = read_regular(version.path)
    if isinstance(got, str):
        raise ContentUnavailable(version, got)
    differs = disk_matches(version, got)
    if differs is not None:
        raise ContentUnavailable(version, differs)
    return got, FROM_DISK
