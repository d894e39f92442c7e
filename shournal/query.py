"""Finding commands in the journal: the library behind ``shournal query``.

Criteria are AND-combined.  ``--wfile``/``--rfile`` match by content, never
by name (original §5): a file is identified by its size, partial hash and
mtime, so a renamed or moved file still leads to the command that wrote it.

SQLAlchemy is imported only when a query actually runs.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
import time
import uuid
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from shournal import _paths

if TYPE_CHECKING:
    from shournal.store.db import Store

# The original stores INT32_MAX when the exit status is unknown.
RETURN_VALUE_UNKNOWN = 2**31 - 1


class QueryError(Exception):
    """A query that cannot be run as given (one-line message)."""


class QueryFileError(QueryError):
    """The file given to --wfile/--rfile cannot be examined."""


class BadSessionId(QueryError):
    """The session id is neither base64 of 16 bytes nor a UUID."""


@dataclass(slots=True)
class FileEventView:
    id: int
    path: bytes
    size: int
    mtime_ns: int
    hash: int | None
    mode: int
    content_id: int | None = None  # archived content, if any
    content_preview: bytes | None = None  # its first bytes (see PREVIEW_BYTES)
    content_size: int | None = None

    @property
    def is_stored(self) -> bool:
        return self.content_id is not None


@dataclass(slots=True)
class CommandView:
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
    mtime_ns: int
    hashes: frozenset[int]  # its partial hash under each stored hash setting


def session_id_bytes(value: str | bytes) -> bytes:
    """The 16 raw bytes of a session id given as printed (base64) or as a
    UUID string."""
    if isinstance(value, bytes):
        if len(value) != 16:
            raise BadSessionId("a raw session id must have 16 bytes")
        return value
    text = value.strip()
    with suppress(ValueError):
        return uuid.UUID(text).bytes
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise BadSessionId(f"invalid session id {value!r} (expected base64 as printed, or a UUID)")
    return raw


def session_id_text(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _open_regular(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    name = os.fsdecode(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise QueryFileError(f"cannot open {name}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise QueryFileError(f"cannot examine {name}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise QueryFileError(f"{name} is not a regular file")
    return fd, st


def check_file(path: str | os.PathLike[str]) -> None:
    """Fail early (before the journal is opened) when ``path`` cannot be
    used for --wfile/--rfile."""
    fd, _ = _open_regular(path)
    os.close(fd)


def probe_file(path: str | os.PathLike[str], hash_settings: Iterable[tuple[int, int]]) -> FileProbe:
    """Stat ``path`` and hash it under every (chunk size, max reads) given."""
    from shournal.hashing import partial_xxh64

    fd, st = _open_regular(path)
    hashes: set[int] = set()
    try:
        if st.st_size > 0:
            for chunk, max_reads in set(hash_settings):
                digest = partial_xxh64(fd, st.st_size, chunk, max_reads)
                if digest is not None:
                    hashes.add(digest)
    except OSError as e:
        raise QueryFileError(f"cannot read {os.fsdecode(path)}: {e.strerror}") from None
    finally:
        os.close(fd)
    return FileProbe(size=st.st_size, mtime_ns=st.st_mtime_ns, hashes=frozenset(hashes))


def find_commands(
    store: Store,
    *,
    wfile: str | os.PathLike[str] | None = None,
    rfile: str | os.PathLike[str] | None = None,
    history: int | None = None,
    command_text: str | None = None,
    cwd: str | None = None,
    session_id: str | bytes | None = None,
    command_id: int | None = None,
    limit: int | None = None,
    max_files: int | None = None,
) -> list[CommandView]:
    """Commands matching all given criteria, oldest first, with their files.

    ``history``: only the last N matching commands by start time.
    ``limit``: at most N commands (the oldest matching ones).
    ``command_text``: SQL LIKE, ``%`` is the wildcard, case-insensitive.
    ``cwd``: LIKE when it contains ``%``, otherwise exact.
    ``max_files``: load at most N written and N read files per command
    (the stored totals are still reported); None loads all.

    :raises QueryError: a criterion cannot be used (missing file, bad id).
    :raises shournal.store.StoreError: the journal cannot be read.
    """
    from shournal.store import reader

    sid = None if session_id is None else session_id_bytes(session_id)
    for name, value in (("history", history), ("limit", limit), ("max_files", max_files)):
        if value is not None and value < 0:
            raise QueryError(f"{name} must not be negative")
    with store.reading() as conn:
        probes = []
        if wfile is not None or rfile is not None:
            settings = reader.hash_settings(conn)
            if wfile is not None:
                probes.append((reader.KIND_WRITE, probe_file(wfile, settings)))
            if rfile is not None:
                probes.append((reader.KIND_READ, probe_file(rfile, settings)))
        return reader.select_commands(
            conn,
            probes=probes,
            history=history,
            command_text=command_text,
            cwd=cwd,
            session_uuid=sid,
            command_id=command_id,
            limit=limit,
            max_files=max_files,
        )


# -- waiting for commands that are still being stored -------------------------

_POLL_SECONDS = 0.02

# Listener markers in the runtime dir: <pid>.run while the command runs,
# <pid>.end once the shell saw it finish, <pid>.store once every event is
# read and the record is being written.  All are removed after the commit.
_MARKERS = ("run", "end", "store")
_PENDING = ("end", "store")


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, belongs to someone else
        return True
    return True


def _count_pending(directory: str) -> int:
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    pending = 0
    for name in names:
        stem, _, suffix = name.partition(".")
        if suffix not in _MARKERS or not stem.isdigit():
            continue
        if not _alive(int(stem)):
            # A listener that died will never remove its marker.
            with suppress(OSError):
                os.unlink(os.path.join(directory, name))
            continue
        if suffix in _PENDING:
            pending += 1
    return pending


def wait_for_pending(timeout: float = 3.0) -> int:
    """Wait until no finished command is still being stored (``<pid>.end``
    or ``<pid>.store`` markers of live listeners in the runtime dir), at
    most ``timeout`` seconds; return how many are still pending.  Commands
    still running (``<pid>.run``) are not waited for: the query itself may
    be one."""
    directory = str(_paths.runtime_dir())
    deadline = time.monotonic() + max(timeout, 0.0)
    while True:
        pending = _count_pending(directory)
        if pending == 0 or time.monotonic() >= deadline:
            return pending
        time.sleep(_POLL_SECONDS)
