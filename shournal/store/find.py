"""Finding commands: criteria and file probes made into one read of the
journal (:mod:`shournal.store.reader` builds the SQL).

Criteria are AND-combined.  ``--wfile``/``--rfile`` match by content, never
by name (original §5): a file is identified by its size, partial hash and
mtime, so a renamed or moved file still leads to the command that wrote it.
"""

from __future__ import annotations

from shournal.data import INT64_MAX, MATCH_CONTENT, MATCH_EXACT, QueryError
from shournal.probe import probe_file
from shournal.store import reader

# Not typing.TYPE_CHECKING: every `shournal query` imports this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import os

    from shournal.data import CommandView, Criteria, FileProbe
    from shournal.store.connection import Reads


def find_commands(
    conn: Reads,
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
) -> list[CommandView]:
    """Commands matching all given criteria, oldest first (newest first with
    ``reverse``), with their files.

    ``criteria``: parsed (:func:`shournal.criteria.parse_criteria`), a
    ``lineage_of`` in it already resolved to command ids
    (:meth:`shournal.journal.Journal.find` merges and checks them).
    ``wfile``/``rfile``: commands that wrote/read this file's content.
    ``written``/``read``: commands that wrote/read this content (size,
    partial hashes, and the mtime unless it is None).
    ``history``: only the last N matching commands by start time.
    ``limit``: at most N commands, taken in output order.
    ``max_files``: load at most N written and N read files per command
    (the stored totals are still reported); None loads all.

    :raises QueryError: a criterion cannot be used (missing file, bad id).
    """
    crit = criteria
    for name, value in (("history", history), ("limit", limit), ("max_files", max_files)):
        if value is not None and not 0 <= value <= INT64_MAX:
            raise QueryError(f"{name} must be between 0 and {INT64_MAX}")
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
    probes, ids, writes_by_content = _writers_by_run(conn, probes)
    commands = reader.select_commands(
        conn,
        probes=probes,
        criteria=crit,
        ids=ids,
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
    conn: Reads, probes: list[tuple[int, FileProbe]]
) -> tuple[list[tuple[int, FileProbe]], list[int] | None, bool]:
    """A written content with an mtime (``--wfile``) as the ids of the
    commands that can have written that version, chosen as the lineage
    walk chooses (:func:`shournal.data.possible_writers`): the same
    mtime, else a run that covers it.  The probes left, the ids (None:
    no such probe), and whether they were found by the content alone (no
    write of it has that mtime)."""
    rest = []
    ids: set[int] | None = None
    by_content = False
    for kind, probe in probes:
        if kind != reader.KIND_WRITE or probe.mtime_ns is None:
            rest.append((kind, probe))
            continue
        # The writes with that very mtime, when there are any, are what
        # possible_writers picks (without loading the lineage's types).
        found = set(reader.same_mtime_writers(conn, probe.size, probe.mtime_ns, probe.hashes))
        if not found:
            from shournal.data import possible_writers

            versions = reader.written_versions(conn, probe.size, probe.mtime_ns, probe.hashes)
            found = {w.command_id for w in possible_writers(versions, probe.mtime_ns)}
            # (every version of that mtime is a same_mtime_writers row)
            by_content |= bool(found)
        ids = found if ids is None else ids & found
    return rest, None if ids is None else sorted(ids), by_content
