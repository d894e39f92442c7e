"""SQL for reading the journal: the WHERE terms of every criterion (shared by
query, statistics and deletion) and the command and file views."""

from __future__ import annotations

import functools
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    LargeBinary,
    Select,
    Text,
    and_,
    bindparam,
    cast,
    func,
    literal_column,
    or_,
    select,
)

from shournal.data import (
    RETURN_VALUE_UNKNOWN,
    CommandView,
    Condition,
    Criteria,
    CriteriaError,
    FileCriteria,
    FileEventView,
    FileProbe,
    Period,
    WrittenVersion,
    ns_to_datetime,
)
from shournal.store import models as m
from shournal.store.light import (
    COMMAND_COLUMNS,
    COMMAND_JOINS,
    PREVIEW_BYTES,
    attach_tags,
    command_view,
)
from shournal.store.models import KIND_READ, KIND_WRITE

__all__ = [
    "KIND_READ",
    "KIND_WRITE",
    "PREVIEW_BYTES",
    "command_conditions",
    "commands_by_id",
    "hash_settings",
    "matching_ids",
    "select_commands",
    "written_versions",
]


_IN_BATCH = 500


def _in_list(name: str, values: Sequence[Any]) -> tuple[int, dict[str, Any]]:
    """An IN list as bound parameters ``name0..nameN-1``, N the next power
    of two (the last value repeated): a few fixed lengths, so that the
    statements of each length are built and compiled once, without the
    per-execution rewriting of an expanding parameter (a lineage walk runs
    hundreds of small lookups)."""
    n = 1
    while n < len(values):
        n *= 2
    padded = [*values, *[values[-1]] * (n - len(values))]
    return n, {f"{name}{i}": v for i, v in enumerate(padded)}


def _in_params(name: str, n: int) -> list[Any]:
    return [bindparam(f"{name}{i}") for i in range(n)]

_W = m.WriteEvent
_RF = m.ReadFile
_RE = m.ReadEvent


def _commands_having(kind: int, conds: Any) -> Select[tuple[int]]:
    """Command ids having a file event of ``kind`` whose file meets
    ``conds(model)`` (``model``: WriteEvent or ReadFile).  Reads go through
    the read file versions, then their (read_file_id, command_id) index."""
    if kind == KIND_WRITE:
        return select(_W.command_id).where(*conds(_W))
    return select(_RE.command_id).where(_RE.read_file_id.in_(select(_RF.id).where(*conds(_RF))))


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
    if probe.size == 0:
        # No hash for empty files: the mtime is all there is.  Reads: the
        # (hash, size, mtime_ns) index.  Writes: the partial index of
        # hashless writes, whose condition must appear literally.
        if kind == KIND_WRITE:
            no_hash = func.length(_W.hash) == literal_column("0")
        else:
            no_hash = _RF.hash == b""
        return _commands_having(
            kind,
            lambda f: (no_hash, f.size == 0)
            + (() if probe.mtime_ns is None else (f.mtime_ns == probe.mtime_ns,)),
        )
    hashes = [m.hash_to_bytes(h) for h in sorted(probe.hashes)]
    if probe.mtime_ns is None:
        # The content alone, whatever its mtime.
        return _commands_having(kind, lambda f: (f.hash.in_(hashes), f.size == probe.size))
    strict = _strict_match(kind, probe, hashes)
    if not hashes or conn.execute(strict.limit(1)).first() is not None:
        return strict
    # Tools like wget or tar set old mtimes: fall back to the content alone.
    return _commands_having(kind, lambda f: (f.hash.in_(hashes), f.size == probe.size))


def _strict_match(kind: int, probe: FileProbe, hashes: list[bytes]) -> Select[tuple[int]]:
    # b"": stored by a command with hashing disabled; size+mtime must do.
    return _commands_having(
        kind,
        lambda f: (
            f.hash.in_([*hashes, b""]),
            f.size == probe.size,
            f.mtime_ns == probe.mtime_ns,
        ),
    )


def capped_writers(conn: Connection, mtime_ns: int) -> list[int]:
    """Ids of the commands that dropped write events (the per-command cap)
    and ran when a file of ``mtime_ns`` was written: its writer may be one
    of them.  Only the no-results hint asks (a scan of the commands)."""
    from shournal._criteria import ran_at

    c = m.Command.__table__.c
    rows = conn.execute(
        select(c.id, c.start_time, c.end_time).where(c.dropped_writes > 0).order_by(c.id)
    )
    return [r[0] for r in rows if ran_at(r[1], r[2], mtime_ns)]


def content_only(conn: Connection, kind: int, probe: FileProbe) -> bool:
    """Whether :func:`_file_match` finds ``probe`` by its content alone: no
    event of ``kind`` has its size, hash and mtime together."""
    hashes = [m.hash_to_bytes(h) for h in sorted(probe.hashes)]
    if probe.size == 0 or probe.mtime_ns is None or not hashes:
        return False
    return conn.execute(_strict_match(kind, probe, hashes).limit(1)).first() is None


def _like_pattern(pattern: str) -> str:
    return _escape_like(pattern)


def _glob_pattern(pattern: str) -> str:
    """A LIKE pattern whose only wildcard is ``%`` as a SQLite GLOB pattern
    (GLOB is case-sensitive, unlike SQLite's LIKE)."""
    out = []
    for ch in pattern:
        if ch == "%":
            out.append("*")
        elif ch in "*?[":
            out.append(f"[{ch}]")
        else:
            out.append(ch)
    return "".join(out)


# SQLite refuses a LIKE or GLOB pattern longer than this (in bytes,
# SQLITE_MAX_LIKE_PATTERN_LENGTH) with "pattern too complex".
SQLITE_MAX_PATTERN = 50_000


def _bounded(dialect: str, pattern: str) -> str:
    """`pattern` as the database gets it, or a usage error when SQLite
    would refuse it (not a journal that cannot be used)."""
    size = len(pattern.encode("utf-8", "surrogateescape"))
    if dialect == "sqlite" and size > SQLITE_MAX_PATTERN:
        raise CriteriaError(
            f"search pattern too long ({size} bytes; SQLite takes at most {SQLITE_MAX_PATTERN})"
        )
    return pattern


def _text_cond(
    dialect: str, column: Any, cond: Condition[str], *, case: bool, raw: bool = False
) -> ColumnElement[bool]:
    """``column`` compared with ``cond``; ``raw``: the column holds bytes."""

    def val(v: str) -> Any:
        return os.fsencode(v) if raw else v

    if cond.op == "eq":
        return column == val(cond.value) if case else func.lower(column) == cond.value.lower()
    if cond.op == "ne":
        return column != val(cond.value) if case else func.lower(column) != cond.value.lower()
    if not case:
        return column.ilike(_bounded(dialect, _like_pattern(cond.value)), escape="\\")
    if dialect == "sqlite":
        # GLOB (case-sensitive) matches text only: a BLOB operand never
        # matches, so paths are compared as the text their bytes spell.
        subject = cast(column, Text) if raw else column
        return subject.op("GLOB")(_bounded(dialect, _glob_pattern(cond.value)))
    # PostgreSQL: LIKE is case-sensitive and its default escape is the
    # backslash, for text and bytea alike.
    return column.op("LIKE")(val(_like_pattern(cond.value)))


def _ordered_cond(column: Any, cond: Condition[Any], conv: Any = None) -> ColumnElement[bool]:
    def c(v: Any) -> Any:
        return v if conv is None else conv(v)

    op = cond.op
    if op == "between":
        return and_(column >= c(cond.value), column <= c(cond.high))
    return {
        "eq": column.__eq__,
        "ne": column.__ne__,
        "lt": column.__lt__,
        "le": column.__le__,
        "gt": column.__gt__,
        "ge": column.__ge__,
    }[op](c(cond.value))


def _period_cond(column: Any, cond: Condition[Period], conv: Any) -> ColumnElement[bool]:
    """Times are periods: ``> 2024-05-01`` means after that whole day."""
    low: Period = cond.value
    op = cond.op
    if op == "between":
        high: Period = cond.high  # type: ignore[assignment]
        return and_(column >= conv(low.start_ns), column < conv(high.end_ns))
    if op == "eq":
        return and_(column >= conv(low.start_ns), column < conv(low.end_ns))
    if op == "ne":
        return or_(column < conv(low.start_ns), column >= conv(low.end_ns))
    return {
        "lt": lambda: column < conv(low.start_ns),
        "le": lambda: column < conv(low.end_ns),
        "gt": lambda: column >= conv(low.end_ns),
        "ge": lambda: column >= conv(low.start_ns),
    }[op]()


def _dir_value(path: str) -> str:
    """Directories are stored with their trailing slash."""
    return path if path.endswith("/") else path + "/"


def _file_criteria(dialect: str, kind: int, fc: FileCriteria) -> Select[tuple[int]]:
    """Command ids having one event of ``kind`` that meets every condition."""

    def conds(f: Any) -> list[ColumnElement[bool]]:
        out: list[ColumnElement[bool]] = []
        if fc.path is not None:
            cond = fc.path
            if cond.op != "like" or not cond.value.endswith("%"):
                cond = Condition(cond.op, _dir_value(cond.value))
            where = [_text_cond(dialect, m.Directory.path, cond, case=True, raw=True)]
            if cond.op == "eq":
                # One seek of the path_hash index; patterns scan the
                # directory table (a row per directory, not per event).
                where.append(m.Directory.path_hash == m.path_hash(os.fsencode(cond.value)))
            dirs = select(m.Directory.id).where(*where)
            out.append(f.directory_id.in_(dirs))
        if fc.name is not None:
            out.append(_text_cond(dialect, f.basename, fc.name, case=True, raw=True))
        if fc.size is not None:
            out.append(_ordered_cond(f.size, fc.size))
        if fc.hash is not None:
            out.append(_ordered_cond(f.hash, fc.hash, m.hash_to_bytes))
        if fc.mtime is not None:
            out.append(_period_cond(f.mtime_ns, fc.mtime, int))
        return out

    return _commands_having(kind, conds)


@functools.cache
def _command_select() -> Select:
    """A command's own columns (no files), built once from the list the
    light reader selects too."""
    tables = m.Base.metadata.tables
    command = tables["command"]
    joined = command
    for table, column, own, outer in COMMAND_JOINS:
        other = tables[table]
        joined = joined.join(other, other.c[column] == command.c[own], isouter=outer)
    return select(*(tables[t].c[col] for t, col in COMMAND_COLUMNS)).select_from(joined)


def _command_view(r: Any) -> CommandView:
    # the driver's datetimes are already aware (models.UtcDateTime)
    return command_view(r, time=lambda t: t)


def select_commands(
    conn: Connection,
    *,
    probes: Sequence[tuple[int, FileProbe]],
    criteria: Criteria,
    history: int | None,
    limit: int | None,
    reverse: bool = False,
    max_files: int | None,
) -> list[CommandView]:
    c = m.Command
    stmt = _command_select()
    stmt = stmt.where(*command_conditions(conn, criteria, probes))
    newest_first = history is not None or reverse
    if newest_first:
        stmt = stmt.order_by(c.start_time.desc(), c.id.desc())
    else:
        stmt = stmt.order_by(c.start_time, c.id)
    if history is not None:
        stmt = stmt.limit(history)
    elif limit is not None:
        stmt = stmt.limit(limit)
    rows = conn.execute(stmt).all()
    if history is not None:
        if not reverse:
            rows.reverse()
        if limit is not None:
            rows = rows[:limit]
    commands = [_command_view(r) for r in rows]
    _attach_events(conn, commands, max_files)
    return commands


def commands_by_id(
    conn: Connection, ids: Iterable[int], max_files: int | None = None
) -> list[CommandView]:
    """The commands with these ids (the missing ones left out), by start
    time: a few statements per batch of ids, each by primary key or the
    events' command index."""
    wanted = sorted(set(ids))
    found: list[CommandView] = []
    for start in range(0, len(wanted), _IN_BATCH):
        batch = wanted[start : start + _IN_BATCH]
        n, params = _in_list("id", batch)
        commands = [_command_view(r) for r in conn.execute(_by_id_stmt(n), params)]
        _attach_events(conn, commands, max_files)
        found += commands
    found.sort(key=lambda c: (c.start_time, c.id))
    return found


@functools.cache
def _by_id_stmt(n: int) -> Select:
    return _command_select().where(m.Command.id.in_(_in_params("id", n)))


def session_first_ids(conn: Connection, uuids: Iterable[bytes]) -> dict[bytes, int]:
    """The id of each session's first command (by start time, then id):
    one seek of the (session_id) index per session."""
    c, sess = m.Command, m.ShellSession
    out: dict[bytes, int] = {}
    for uuid in sorted(set(uuids)):
        first = conn.execute(
            select(c.id)
            .join(sess, sess.id == c.session_id)
            .where(sess.uuid == uuid)
            .order_by(c.start_time, c.id)
            .limit(1)
        ).scalar_one_or_none()
        if first is not None:
            out[uuid] = first
    return out


def matching_ids(conn: Connection, criteria: Criteria) -> Select[tuple[int]]:
    """The ids of the commands matching ``criteria``: what query, stats and
    delete select."""
    c = m.Command
    return select(c.id).join(m.Env, m.Env.id == c.env_id).where(*command_conditions(conn, criteria))


def command_conditions(
    conn: Connection, criteria: Criteria, probes: Sequence[tuple[int, FileProbe]] = ()
) -> list[ColumnElement[bool]]:
    """WHERE terms on ``command`` (joined with ``env`` and ``shell_session``)
    for every criterion; shared by the query and the statistics."""
    c = m.Command
    dialect = conn.dialect.name
    where: list[ColumnElement[bool]] = []
    cr = criteria
    if cr.lineage_of is not None:
        # Never ignored: the journal resolves it to ids first
        # (shournal.journal.Journal._criteria).
        raise ValueError("lineage_of must be resolved to command ids before the SQL")
    if cr.command_id is not None:
        where.append(_ordered_cond(c.id, cr.command_id))
    if cr.command_ids is not None:
        where.append(c.id.in_(cr.command_ids))
    if cr.command_text is not None:
        # Text as typed: LIKE is case-insensitive, = and != are exact.
        exact = cr.command_text.op != "like"
        where.append(_text_cond(dialect, c.text, cr.command_text, case=exact))
    if cr.cwd is not None:
        # "not equal" as NOT IN the equal ones: one seek, not a walk over
        # every other working directory.
        cond = Condition("eq", cr.cwd.value) if cr.cwd.op == "ne" else cr.cwd
        cwds = select(m.WorkingDir.id).where(
            _text_cond(dialect, m.WorkingDir.path, cond, case=True)
        )
        where.append(c.cwd_id.not_in(cwds) if cr.cwd.op == "ne" else c.cwd_id.in_(cwds))
    if cr.exit_code is not None:
        where.append(c.return_value != RETURN_VALUE_UNKNOWN)
        where.append(_ordered_cond(c.return_value, cr.exit_code))
    if cr.host is not None:
        where.append(_text_cond(dialect, m.Env.hostname, cr.host, case=False))
    if cr.user is not None:
        where.append(_text_cond(dialect, m.Env.username, cr.user, case=True))
    if cr.since is not None:
        where.append(c.start_time >= ns_to_datetime(cr.since.start_ns))
    if cr.until is not None:
        where.append(c.start_time < ns_to_datetime(cr.until.end_ns))
    if cr.session_uuid is not None:
        sessions = select(m.ShellSession.id).where(m.ShellSession.uuid == cr.session_uuid)
        where.append(c.session_id.in_(sessions))
    for name in cr.tags or ():
        tagged = (
            select(m.CommandTag.command_id)
            .join(m.Tag, m.Tag.id == m.CommandTag.tag_id)
            .where(m.Tag.name == name)
        )
        where.append(c.id.in_(tagged))
    for kind, files in ((KIND_WRITE, cr.written), (KIND_READ, cr.read)):
        if files:
            where.append(c.id.in_(_file_criteria(dialect, kind, files)))
    for kind, probe in probes:
        where.append(c.id.in_(_file_match(conn, kind, probe)))
    return where


def _attach_events(conn: Connection, commands: list[CommandView], max_files: int | None) -> None:
    by_id = {cmd.id: cmd for cmd in commands}
    ids = list(by_id)
    for start in range(0, len(ids), _IN_BATCH):
        batch = ids[start : start + _IN_BATCH]
        n, params = _in_list("id", batch)
        attach_tags(by_id, conn.execute(_tags_stmt(n), params))
        if max_files is not None:
            # Cut lists: the totals need counting.
            for cmd_id, count in conn.execute(_count_stmt(KIND_WRITE, n), params):
                by_id[cmd_id].write_count = count
            for cmd_id, count in conn.execute(_count_stmt(KIND_READ, n), params):
                by_id[cmd_id].read_count = count
            if max_files == 0:
                continue
            params["max_files"] = max_files
        for kind, stmt in (
            (KIND_WRITE, _writes_stmt(max_files is not None, n)),
            (KIND_READ, _reads_stmt(max_files is not None, n)),
        ):
            events: dict[int, list[FileEventView]] = defaultdict(list)
            for row in conn.execute(stmt, params):
                events[row.command_id].append(
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
                found = events.get(cmd_id, [])
                if kind == KIND_WRITE:
                    by_id[cmd_id].writes = found
                else:
                    by_id[cmd_id].reads = found
                if max_files is None:
                    # Everything was loaded: the totals are the lists.
                    if kind == KIND_WRITE:
                        by_id[cmd_id].write_count = len(found)
                    else:
                        by_id[cmd_id].read_count = len(found)


@functools.cache
def _tags_stmt(n: int) -> Select:
    """A batch's tags (light.tags_sql over the models' tables)."""
    ct, tag = m.CommandTag, m.Tag
    return (
        select(ct.command_id, tag.name)
        .join(tag, tag.id == ct.tag_id)
        .where(ct.command_id.in_(_in_params("id", n)))
    )


@functools.cache
def _count_stmt(kind: int, n: int) -> Select:
    table = _W if kind == KIND_WRITE else _RE
    return (
        select(table.command_id, func.count())
        .where(table.command_id.in_(_in_params("id", n)))
        .group_by(table.command_id)
    )


def _first_n(table: Any, order: Any, limited: bool, n: int) -> Any:
    """``table``'s rows of the ``n`` commands ``:id0``...; ``limited``: the first
    ``:max_files`` per command only, without fetching the rest of a command
    that wrote 10^5 files."""
    where = [table.c.command_id.in_(_in_params("id", n))]
    if not limited:
        return select(table).where(*where).subquery()
    rank = (
        func.row_number()
        .over(partition_by=table.c.command_id, order_by=table.c[order])
        .label("rank")
    )
    ranked = select(table, rank).where(*where).subquery()
    return select(ranked).where(ranked.c.rank <= bindparam("max_files")).subquery()


@functools.cache
def _writes_stmt(limited: bool, n: int) -> Select:
    ev = _first_n(_W.__table__, "id", limited, n)
    return (
        select(
            ev.c.id,
            ev.c.command_id,
            m.Directory.path.label("dir"),
            ev.c.basename,
            ev.c.size,
            ev.c.mtime_ns,
            ev.c.hash,
            ev.c.mode,
            literal_column("NULL").label("content_id"),
            literal_column("NULL").label("preview"),
            literal_column("NULL").label("content_size"),
        )
        .select_from(ev)
        .join(m.Directory, m.Directory.id == ev.c.directory_id)
        .order_by(ev.c.command_id, ev.c.id)
    )


@functools.cache
def _reads_stmt(limited: bool, n: int) -> Select:
    """A command's reads, by read file id (the read file's id is the id of
    the read event)."""
    ev = _first_n(_RE.__table__, "read_file_id", limited, n)
    return (
        select(
            _RF.id,
            ev.c.command_id,
            m.Directory.path.label("dir"),
            _RF.basename,
            _RF.size,
            _RF.mtime_ns,
            _RF.hash,
            _RF.mode,
            _RF.content_id,
            func.substr(m.Content.data, 1, PREVIEW_BYTES, type_=LargeBinary).label("preview"),
            func.length(m.Content.data).label("content_size"),
        )
        .select_from(ev)
        .join(_RF, _RF.id == ev.c.read_file_id)
        .join(m.Directory, m.Directory.id == _RF.directory_id)
        .outerjoin(m.Content, m.Content.id == _RF.content_id)
        .order_by(ev.c.command_id, ev.c.read_file_id)
    )


@functools.cache
def _written_versions_stmt(empty: bool, n: int) -> Any:
    """The content lookup of :func:`written_versions`, built once (a
    lineage runs it once per file version)."""
    w, c = _W, m.Command
    if empty:
        # Empty files have no hash: the partial index of hashless writes
        # (its condition spelled literally so that both backends use it).
        match = and_(
            func.length(w.hash) == literal_column("0"),
            w.size == 0,
            w.mtime_ns == bindparam("mtime"),
        )
    else:
        # Any of the hashes (b"" among them: stored with hashing off, then
        # only with the same mtime); the (hash, size) index.
        match = and_(
            w.hash.in_(_in_params("h", n)),
            w.size == bindparam("size"),
            or_(func.length(w.hash) > 0, w.mtime_ns == bindparam("mtime")),
        )
    return (
        select(
            w.id, w.command_id, c.start_time, c.end_time, m.Directory.path, w.basename,
            w.size, w.mtime_ns, w.hash, m.HashSetting.chunk_size, m.HashSetting.max_reads,
        )  # fmt: skip
        .join(c, c.id == w.command_id)
        .join(m.Directory, m.Directory.id == w.directory_id)
        .outerjoin(m.HashSetting, m.HashSetting.id == c.hash_setting_id)
        .where(match)
        .order_by(c.end_time.desc(), c.id.desc(), w.id.desc())
    )


def written_versions(
    conn: Connection, size: int, mtime_ns: int, hashes: Iterable[int]
) -> list[WrittenVersion]:
    """Every write event of a content: ``size`` and one of ``hashes`` (any
    mtime), or a write stored without a hash (hashing off, empty file) of
    this size and ``mtime_ns``; newest end first.  One index lookup: the
    write events' ``(hash, size)`` index, empty files the partial index of
    hashless writes on ``mtime_ns``; the command by primary key."""
    n = 0
    params: dict[str, object] = {"mtime": mtime_ns}
    if size != 0:
        wanted = [m.hash_to_bytes(h) for h in sorted(set(hashes))]
        n, in_list = _in_list("h", [*wanted, b""])
        params.update(in_list, size=size)
    rows = conn.execute(_written_versions_stmt(size == 0, n), params).all()
    return [
        WrittenVersion(
            write_id=r[0],
            command_id=r[1],
            start_time=r[2],
            end_time=r[3],
            path=bytes(r[4]) + bytes(r[5]),
            size=r[6],
            mtime_ns=r[7],
            hash=m.hash_from_bytes(bytes(r[8])),
            hash_chunk_size=r[9],
            hash_max_reads=r[10],
        )
        for r in rows
    ]
