"""Finding commands in the journal: the library behind ``shournal query``.

Criteria are AND-combined.  ``--wfile``/``--rfile`` match by content, never
by name (original §5): a file is identified by its size, partial hash and
mtime, so a renamed or moved file still leads to the command that wrote it.

SQLAlchemy is imported only when a query actually runs.
"""

from __future__ import annotations

import os
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from shournal.data import (
    INT64_MAX,
    MATCH_CONTENT,
    MATCH_EXACT,
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
from shournal.query.pending import wait_for_pending
from shournal.query.probe import check_file, probe_file

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
        by_content = any(reader.content_only(conn, kind, probe) for kind, probe in probes
                         if kind == reader.KIND_READ)  # fmt: skip
        probes, crit, writes_by_content = _writers_by_run(conn, probes, crit)
        commands = reader.select_commands(
            conn,
            probes=probes,
            criteria=crit,
            history=history,
            limit=limit,
            reverse=reverse,
            max_files=max_files,
        )
    if any(p.mtime_ns is not None for p in (written, read) if p is not None) or (
        wfile is not None or rfile is not None
    ):
        match = MATCH_CONTENT if by_content or writes_by_content else MATCH_EXACT
        for cmd in commands:
            cmd.match = match
    return commands


def _writers_by_run(
    conn: Any, probes: list[tuple[int, FileProbe]], crit: Criteria
) -> tuple[list[tuple[int, FileProbe]], Criteria, bool]:
    """A written content with an mtime (``--wfile``) as the ids of the
    commands that can have written that version, chosen as the lineage
    walk chooses (:func:`shournal._criteria.possible_writers`): the same
    mtime, else a run that covers it.  The flag: found by the content alone
    (no write of it has that mtime)."""
    from shournal._criteria import possible_writers
    from shournal.store import reader

    rest = []
    by_content = False
    for kind, probe in probes:
        if kind != reader.KIND_WRITE or probe.mtime_ns is None:
            rest.append((kind, probe))
            continue
        found = reader.written_versions(conn, probe.size, probe.mtime_ns, probe.hashes)
        writers = possible_writers(found, probe.mtime_ns)
        by_content |= bool(writers) and all(w.mtime_ns != probe.mtime_ns for w in writers)
        ids = {w.command_id for w in writers}
        if crit.command_ids is not None:
            ids &= set(crit.command_ids)
        crit = replace(crit, command_ids=tuple(sorted(ids)))
    return rest, crit, by_content
