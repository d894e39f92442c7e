"""Finding commands in the journal: the library behind ``shournal query``.

Criteria are AND-combined.  ``--wfile``/``--rfile`` match by content, never
by name (original §5): a file is identified by its size, partial hash and
mtime, so a renamed or moved file still leads to the command that wrote it.

SQLAlchemy is imported only when a query actually runs.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from shournal import _paths
from shournal.capture import protocol
from shournal.data import (
    INT64_MAX,
    RETURN_VALUE_UNKNOWN,
    BadSessionId,
    CommandView,
    Criteria,
    CriteriaError,
    FileCriteria,
    FileEventView,
    FileProbe,
    QueryError,
    QueryFileError,
)
from shournal.query.criteria import parse_criteria, session_id_bytes, session_id_text

if TYPE_CHECKING:
    from shournal.store.db import Store

__all__ = [
    "RETURN_VALUE_UNKNOWN",
    "BadSessionId",
    "CommandView",
    "Criteria",
    "CriteriaError",
    "FileCriteria",
    "FileEventView",
    "FileProbe",
    "QueryError",
    "QueryFileError",
    "check_file",
    "find_commands",
    "merge_criteria",
    "parse_criteria",
    "probe_file",
    "session_id_bytes",
    "session_id_text",
    "wait_for_pending",
]


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
    from shournal.capture.hashing import partial_xxh64

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


def merge_criteria(criteria: Criteria | None, **filters: Any) -> Criteria:
    """``criteria`` with the criteria ``filters`` (parse_criteria's
    keywords) added; a filter replaces the criterion of the same name."""
    crit = criteria if criteria is not None else Criteria()
    given = {k: v for k, v in filters.items() if v is not None}
    if not given:
        return crit
    extra = parse_criteria(**given)
    changes: dict[str, Any] = {
        f.name: getattr(extra, f.name)
        for f in fields(Criteria)
        if f.name not in ("written", "read") and getattr(extra, f.name) is not None
    }
    for side in ("written", "read"):
        mine, theirs = getattr(crit, side), getattr(extra, side)
        changes[side] = replace(
            mine,
            **{f.name: getattr(theirs, f.name) for f in fields(FileCriteria)
               if getattr(theirs, f.name) is not None},
        )  # fmt: skip
    return replace(crit, **changes)


def find_commands(
    store: Store,
    criteria: Criteria | None = None,
    *,
    wfile: str | os.PathLike[str] | None = None,
    rfile: str | os.PathLike[str] | None = None,
    written: FileProbe | None = None,
    read: FileProbe | None = None,
    history: int | None = None,
    limit: int | None = None,
    reverse: bool = False,
    max_files: int | None = None,
    **filters: Any,
) -> list[CommandView]:
    """Commands matching all given criteria, oldest first (newest first with
    ``reverse``), with their files.

    ``criteria``: from :func:`shournal.query.criteria.parse_criteria`; keyword
    ``filters`` (its keywords: ``cwd``, ``command_text``, ``since``...) are
    parsed the same way and added.  ``lineage_of`` is a provenance walk:
    :meth:`shournal.journal.Journal.find` resolves it to command ids.
    ``wfile``/``rfile``: commands that wrote/read this file's content.
    ``written``/``read``: commands that wrote/read this content (size,
    partial hashes, and the mtime unless it is None).
    ``history``: only the last N matching commands by start time.
    ``limit``: at most N commands, taken in output order.
    ``max_files``: load at most N written and N read files per command
    (the stored totals are still reported); None loads all.

    :raises QueryError: a criterion cannot be used (missing file, bad id).
    :raises shournal.store.StoreError: the journal cannot be read.
    """
    from shournal.store import reader

    crit = merge_criteria(criteria, **filters)
    for name, value in (("history", history), ("limit", limit), ("max_files", max_files)):
        if value is not None and not 0 <= value <= INT64_MAX:
            raise QueryError(f"{name} must be between 0 and {INT64_MAX}")
    with store.reading() as conn:
        probes = []
        if written is not None:
            probes.append((reader.KIND_WRITE, written))
        if read is not None:
            probes.append((reader.KIND_READ, read))
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
_MARKERS = (protocol.MARK_RUN, protocol.MARK_END, protocol.MARK_STORE)
_PENDING = (protocol.MARK_END, protocol.MARK_STORE)


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
    be one.  A runtime dir that is not the user's own is not read (anybody
    could have put markers there): one line on stderr says so."""
    try:
        directory = str(_paths.private_runtime_dir(create=False))
    except _paths.UnsafeDirectory as e:
        print(f"shournal: {e}", file=sys.stderr)
        return 0
    except OSError:
        return 0
    deadline = time.monotonic() + max(timeout, 0.0)
    while True:
        pending = _count_pending(directory)
        if pending == 0 or time.monotonic() >= deadline:
            return pending + _drain_daemon(directory, deadline)
        time.sleep(_POLL_SECONDS)


def _drain_daemon(directory: str, deadline: float) -> int:
    """Commands spooled by the store daemon (shournal.capture.daemon) but not yet in
    the journal, after asking it to store them within the time left."""
    from shournal.capture import protocol, spool

    left_ms = max(int((deadline - time.monotonic()) * 1000), 0)
    answer = protocol.daemon_request(directory, protocol.MSG_DRAIN, left_ms, left_ms / 1000 + 1)
    if answer is not None:
        return answer[0]
    # No daemon runs: what it left is stored when the next one starts.
    return spool.backlog_of()[0]
