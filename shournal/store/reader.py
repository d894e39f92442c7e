"""SQL for reading the journal; used through :mod:`shournal.query`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import Connection, LargeBinary, Select, func, select

from shournal.query import CommandView, FileEventView, FileProbe
from shournal.store import models as m
from shournal.store.models import KIND_READ, KIND_WRITE

__all__ = ["KIND_READ", "KIND_WRITE", "PREVIEW_BYTES", "hash_settings", "select_commands"]

# Enough for the human output's first lines of an archived script.
PREVIEW_BYTES = 4096

_IN_BATCH = 500

_FE = m.FileEvent


def hash_settings(conn: Connection) -> list[tuple[int, int]]:
    """Every (chunk size, max reads) the journal has hashed with.

    The original hashes only under settings that have a stored file of the
    probe's size; finding those needs a scan without a size index, while
    hashing under a few extra settings just finds nothing more.
    """
    rows = conn.execute(select(m.HashSetting.chunk_size, m.HashSetting.max_reads))
    return [(chunk, reads) for chunk, reads in rows]


def _escape_like(pattern: str) -> str:
    """Only ``%`` stays a wildcard: ``_`` is common in file and command names."""
    return pattern.replace("\\", "\\\\").replace("_", "\\_")


def _file_match(conn: Connection, kind: int, probe: FileProbe) -> Select[tuple[int]]:
    """Command ids having an event of ``kind`` for the probed content."""
    base = select(_FE.command_id).where(_FE.kind == kind, _FE.size == probe.size)
    if probe.size == 0:
        # No hash for empty files: the mtime is all there is.  Querying the
        # empty hash lets the hash index narrow the search.
        return base.where(_FE.hash == b"", _FE.mtime_ns == probe.mtime_ns)
    hashes = [m.hash_to_bytes(h) for h in sorted(probe.hashes)]
    # b"": stored by a command with hashing disabled; size+mtime must do.
    strict = base.where(_FE.hash.in_([*hashes, b""]), _FE.mtime_ns == probe.mtime_ns)
    if not hashes or conn.execute(strict.limit(1)).first() is not None:
        return strict
    # Tools like wget or tar set old mtimes: fall back to the content alone.
    return base.where(_FE.hash.in_(hashes))


def select_commands(
    conn: Connection,
    *,
    probes: Sequence[tuple[int, FileProbe]],
    history: int | None,
    command_text: str | None,
    cwd: str | None,
    session_uuid: bytes | None,
    command_id: int | None,
    limit: int | None,
    max_files: int | None,
) -> list[CommandView]:
    c = m.Command
    stmt = (
        select(
            c.id,
            c.text,
            c.return_value,
            c.start_time,
            c.end_time,
            c.working_dir,
            m.Env.username,
            m.Env.hostname,
            m.ShellSession.uuid,
            m.HashSetting.chunk_size,
            m.HashSetting.max_reads,
            c.dropped_writes,
            c.dropped_reads,
            c.lost_events,
        )
        .join(m.Env, m.Env.id == c.env_id)
        .outerjoin(m.ShellSession, m.ShellSession.id == c.session_id)
        .outerjoin(m.HashSetting, m.HashSetting.id == c.hash_setting_id)
    )
    if command_id is not None:
        stmt = stmt.where(c.id == command_id)
    if command_text is not None:
        stmt = stmt.where(c.text.ilike(_escape_like(command_text), escape="\\"))
    if cwd is not None:
        if "%" in cwd:
            stmt = stmt.where(c.working_dir.ilike(_escape_like(cwd), escape="\\"))
        else:
            stmt = stmt.where(c.working_dir == cwd)
    if session_uuid is not None:
        stmt = stmt.where(m.ShellSession.uuid == session_uuid)
    for kind, probe in probes:
        stmt = stmt.where(c.id.in_(_file_match(conn, kind, probe)))
    if history is not None:
        stmt = stmt.order_by(c.start_time.desc(), c.id.desc()).limit(history)
    else:
        stmt = stmt.order_by(c.start_time, c.id)
        if limit is not None:
            stmt = stmt.limit(limit)
    rows = conn.execute(stmt).all()
    if history is not None:
        rows.reverse()
        if limit is not None:
            rows = rows[:limit]
    commands = [
        CommandView(
            id=r[0],
            text=r[1],
            return_value=r[2],
            start_time=r[3],
            end_time=r[4],
            working_dir=r[5],
            username=r[6],
            hostname=r[7],
            session_uuid=r[8],
            hash_chunk_size=r[9],
            hash_max_reads=r[10],
            dropped_writes=r[11],
            dropped_reads=r[12],
            lost_events=r[13],
        )
        for r in rows
    ]
    _attach_events(conn, commands, max_files)
    return commands


def _attach_events(conn: Connection, commands: list[CommandView], max_files: int | None) -> None:
    by_id = {cmd.id: cmd for cmd in commands}
    ids = list(by_id)
    for start in range(0, len(ids), _IN_BATCH):
        batch = ids[start : start + _IN_BATCH]
        counts = conn.execute(
            select(_FE.command_id, _FE.kind, func.count())
            .where(_FE.command_id.in_(batch))
            .group_by(_FE.command_id, _FE.kind)
        )
        for cmd_id, kind, count in counts:
            if kind == KIND_WRITE:
                by_id[cmd_id].write_count = count
            else:
                by_id[cmd_id].read_count = count
        if max_files == 0:
            continue
        events: dict[tuple[int, int], list[FileEventView]] = defaultdict(list)
        for row in conn.execute(_events_stmt(batch, max_files)):
            events[(row.command_id, row.kind)].append(
                FileEventView(
                    id=row.id,
                    path=bytes(row.dir) + bytes(row.basename),
                    size=row.size,
                    mtime_ns=row.mtime_ns,
                    hash=m.hash_from_bytes(bytes(row.hash)),
                    mode=row.mode,
                    content_id=row.content_id,
                    content_preview=None if row.preview is None else bytes(row.preview),
                    content_size=row.content_size,
                )
            )
        for cmd_id in batch:
            by_id[cmd_id].writes = events.get((cmd_id, KIND_WRITE), [])
            by_id[cmd_id].reads = events.get((cmd_id, KIND_READ), [])


def _events_stmt(command_ids: list[int], max_files: int | None) -> Select:
    ev = _FE.__table__
    where = [ev.c.command_id.in_(command_ids)]
    if max_files is not None:
        # The first N per command and kind, without fetching the rest of a
        # command that wrote 10^5 files.
        rank = (
            func.row_number()
            .over(partition_by=(ev.c.command_id, ev.c.kind), order_by=ev.c.id)
            .label("rank")
        )
        ev = select(ev, rank).where(*where).subquery()
        where = [ev.c.rank <= max_files]
    return (
        select(
            ev.c.id,
            ev.c.command_id,
            ev.c.kind,
            m.Directory.path.label("dir"),
            ev.c.basename,
            ev.c.size,
            ev.c.mtime_ns,
            ev.c.hash,
            ev.c.mode,
            ev.c.content_id,
            func.substr(m.Content.data, 1, PREVIEW_BYTES, type_=LargeBinary).label("preview"),
            func.length(m.Content.data).label("content_size"),
        )
        .select_from(ev)
        .join(m.Directory, m.Directory.id == ev.c.directory_id)
        .outerjoin(m.Content, m.Content.id == ev.c.content_id)
        .where(*where)
        .order_by(ev.c.command_id, ev.c.kind, ev.c.id)
    )
