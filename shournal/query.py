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
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

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
    # Set by --stat (shournal.filestat): "U" up to date, "M" modified,
    # "N" missing, "ERROR"; None when not checked.
    status: str | None = None

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


@dataclass(slots=True)
class FileCriteria:
    """Conditions that must all hold for one and the same written (or read)
    file event of a command."""

    name: Any = None  # Condition[str] on the basename
    path: Any = None  # Condition[str] on the directory
    size: Any = None  # Condition[int]
    hash: Any = None  # Condition[int]
    mtime: Any = None  # Condition[Period]

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.name, self.path, self.size, self.hash, self.mtime))


@dataclass(slots=True)
class Criteria:
    """Parsed, AND-combined query criteria (see :func:`parse_criteria`)."""

    command_text: Any = None
    cwd: Any = None
    command_id: Any = None
    exit_code: Any = None
    host: Any = None
    user: Any = None
    since: Any = None  # Period: start time >= its start
    until: Any = None  # Period: start time < its end
    session_uuid: bytes | None = None
    written: FileCriteria = field(default_factory=FileCriteria)
    read: FileCriteria = field(default_factory=FileCriteria)

    def is_empty(self) -> bool:
        return not self.written and not self.read and all(
            getattr(self, k) is None
            for k in (
                "command_text", "cwd", "command_id", "exit_code", "host", "user",
                "since", "until", "session_uuid",
            )
        )  # fmt: skip


def parse_criteria(
    *,
    command_text: str | None = None,
    cwd: str | None = None,
    command_id: str | int | None = None,
    exit_code: str | int | None = None,
    host: str | None = None,
    user: str | None = None,
    since: str | None = None,
    until: str | None = None,
    session_id: str | bytes | None = None,
    wname: str | None = None,
    rname: str | None = None,
    wpath: str | None = None,
    rpath: str | None = None,
    wsize: str | int | None = None,
    rsize: str | int | None = None,
    whash: str | int | None = None,
    rhash: str | int | None = None,
    wmtime: str | None = None,
    rmtime: str | None = None,
    now: datetime | None = None,
) -> Criteria:
    """Parse criteria given as the CLI takes them (see :mod:`shournal.criteria`
    for the operator syntax).  Defaults: ``command_text`` LIKE
    (case-insensitive, ``%`` wildcard); names, paths, cwd, host and user equal
    unless the value contains ``%``.

    :raises shournal.criteria.CriteriaError: a value cannot be parsed.
    :raises BadSessionId: the session id is malformed.
    """
    from shournal import criteria as cr

    def opt(parse: Any, name: str, value: Any, **kw: Any) -> Any:
        return None if value is None else parse(name, str(value), **kw)

    c = Criteria(
        command_text=opt(cr.parse_text, "--command-text", command_text, default="like"),
        cwd=opt(cr.parse_text, "--cwd", cwd),
        command_id=opt(cr.parse_int, "--command-id", command_id),
        exit_code=opt(cr.parse_int, "--exit-code", exit_code),
        host=opt(cr.parse_text, "--host", host),
        user=opt(cr.parse_text, "--user", user),
        since=None if since is None else cr.parse_time_value("--since", since, now=now),
        until=None if until is None else cr.parse_time_value("--until", until, now=now),
        session_uuid=None if session_id is None else session_id_bytes(session_id),
    )
    for files, prefix, name, path, size, hash_, mtime in (
        (c.written, "--w", wname, wpath, wsize, whash, wmtime),
        (c.read, "--r", rname, rpath, rsize, rhash, rmtime),
    ):
        files.name = opt(cr.parse_text, f"{prefix}name", name)
        files.path = opt(cr.parse_text, f"{prefix}path", path)
        files.size = opt(cr.parse_size, f"{prefix}size", size)
        files.hash = opt(cr.parse_hash, f"{prefix}hash", hash_)
        files.mtime = opt(cr.parse_time, f"{prefix}mtime", mtime, now=now)
    if c.since is not None and c.until is not None and c.until.end_ns <= c.since.start_ns:
        raise cr.CriteriaError("--until lies before --since: nothing can match")
    return c


def find_commands(
    store: Store,
    criteria: Criteria | None = None,
    *,
    wfile: str | os.PathLike[str] | None = None,
    rfile: str | os.PathLike[str] | None = None,
    history: int | None = None,
    command_text: str | None = None,
    cwd: str | None = None,
    session_id: str | bytes | None = None,
    command_id: int | None = None,
    limit: int | None = None,
    reverse: bool = False,
    max_files: int | None = None,
) -> list[CommandView]:
    """Commands matching all given criteria, oldest first (newest first with
    ``reverse``), with their files.

    ``criteria``: from :func:`parse_criteria`; the keyword shortcuts
    ``command_text``, ``cwd``, ``session_id`` and ``command_id`` are parsed
    the same way and override it.
    ``wfile``/``rfile``: commands that wrote/read this file's content.
    ``history``: only the last N matching commands by start time.
    ``limit``: at most N commands, taken in output order.
    ``max_files``: load at most N written and N read files per command
    (the stored totals are still reported); None loads all.

    :raises QueryError: a criterion cannot be used (missing file, bad id).
    :raises shournal.store.StoreError: the journal cannot be read.
    """
    from shournal.store import reader

    crit = criteria if criteria is not None else Criteria()
    if any(v is not None for v in (command_text, cwd, session_id, command_id)):
        extra = parse_criteria(
            command_text=command_text, cwd=cwd, session_id=session_id, command_id=command_id
        )
        crit = replace(
            crit,
            command_text=extra.command_text or crit.command_text,
            cwd=extra.cwd or crit.cwd,
            session_uuid=extra.session_uuid or crit.session_uuid,
            command_id=extra.command_id or crit.command_id,
        )
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
            criteria=crit,
            history=history,
            limit=limit,
            reverse=reverse,
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
            return pending + _drain_daemon(directory, deadline)
        time.sleep(_POLL_SECONDS)


def _drain_daemon(directory: str, deadline: float) -> int:
    """Commands spooled by the store daemon (shournal.daemon) but not yet in
    the journal, after asking it to store them within the time left."""
    from shournal import protocol, spool

    left_ms = max(int((deadline - time.monotonic()) * 1000), 0)
    answer = protocol.daemon_request(directory, protocol.MSG_DRAIN, left_ms, left_ms / 1000 + 1)
    if answer is not None:
        return answer[0]
    # No daemon runs: what it left is stored when the next one starts.
    return spool.backlog_of()[0]
