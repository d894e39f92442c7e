"""SQL for reading the journal: the WHERE terms of every criterion (shared by
query, statistics and deletion) and the command and file views.

Every statement is written once, as text with ``:name`` placeholders, and
runs over :class:`shournal.store.connection.Reads`: sqlite3 for a SQLite
journal, SQLAlchemy for PostgreSQL (the engines' few differences:
:mod:`shournal.store.connection`).  No SQLAlchemy import here.
"""

from __future__ import annotations

import os

from shournal.data import (
    LOST_REASONS,
    RETURN_VALUE_UNKNOWN,
    CommandView,
    FileEventView,
    FileProbe,
    ns_to_datetime,
)

# Not typing.TYPE_CHECKING: every reading command imports this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, TypeVar

    from shournal.data import Condition, Criteria, FileCriteria, Period, WrittenVersion
    from shournal.store.connection import Reads

    T = TypeVar("T")

__all__ = [
    "COMMON_MODE",
    "KIND_READ",
    "KIND_WRITE",
    "PREVIEW_BYTES",
    "capped_writers",
    "command_conditions",
    "content_only",
    "commands_by_id",
    "hash_from_bytes",
    "hash_settings",
    "hash_to_bytes",
    "matching_ids",
    "path_hash",
    "safe_text",
    "select_commands",
    "session_first_ids",
    "tag_counts",
    "written_versions",
    "written_versions_many",
]

# Which side of a command's file activity (queries and criteria).
KIND_WRITE = 0
KIND_READ = 1

# The mode of nearly every file event (a regular file, rw-r--r--), stored
# as NULL (see the notes in shournal.store.models).
COMMON_MODE = 0o100644

# Enough for the human output's first lines of an archived script.
PREVIEW_BYTES = 4096

_IN_BATCH = 500


def hash_to_bytes(value: int | None) -> bytes:
    """A partial hash as stored: 8 bytes little-endian, ``b""`` for none."""
    if value is None:
        return b""
    return value.to_bytes(8, "little")


def hash_from_bytes(value: bytes) -> int | None:
    """Inverse of :func:`hash_to_bytes`."""
    return int.from_bytes(value, "little") if value else None


def path_hash(path: bytes) -> int:
    """The directory lookup key: XXH64 of the path as a signed 64-bit
    integer (BIGINT)."""
    import xxhash

    value = xxhash.xxh64_intdigest(path)
    return value - (1 << 64) if value >= 1 << 63 else value


def safe_text(value: str) -> str:
    """Text both backends accept.

    Strings from the shell may carry surrogate escapes (undecodable bytes)
    or NULs, which neither SQLite's UTF-8 nor PostgreSQL text can hold.
    Storing a readable escape beats losing the whole command.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        try:
            raw = value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raw = value.encode("utf-8", "backslashreplace")
        value = raw.decode("utf-8", "backslashreplace")
    return value.replace("\x00", "\\x00")


def mode_of(value: int | None) -> int:
    """A stored file mode (NULL: :data:`COMMON_MODE`)."""
    return COMMON_MODE if value is None else value


# A command's view, as (table, column) in the order command_view reads them.
COMMAND_COLUMNS: tuple[tuple[str, str], ...] = (
    ("command", "id"),
    ("command", "text"),
    ("command", "return_value"),
    ("command", "start_time"),
    ("command", "end_time"),
    ("working_dir", "path"),
    ("env", "username"),
    ("env", "hostname"),
    ("shell_session", "uuid"),
    ("hash_setting", "chunk_size"),
    ("hash_setting", "max_reads"),
    ("command", "dropped_writes"),
    ("command", "dropped_reads"),
    ("command", "lost_events"),
    ("apparatus", "derived_from"),
    *(("command", f"lost_{reason}") for reason in LOST_REASONS),
    ("command", "incomplete"),
    ("command_note", "text"),
    ("command", "imported_from"),
    ("command", "uuid"),
)

# The tables COMMAND_COLUMNS joins to command: (table, its column, the
# command's column equal to it, outer join).
COMMAND_JOINS: tuple[tuple[str, str, str, bool], ...] = (
    ("env", "id", "env_id", False),
    ("working_dir", "id", "cwd_id", False),
    ("shell_session", "id", "session_id", True),
    ("hash_setting", "id", "hash_setting_id", True),
    ("apparatus", "command_id", "id", True),
    ("command_note", "command_id", "id", True),
)

_COMMAND_SELECT = (
    "SELECT "
    + ", ".join(f"{table}.{column}" for table, column in COMMAND_COLUMNS)
    + " FROM command"
    + "".join(
        f" {'LEFT OUTER ' if outer else ''}JOIN {table} ON {table}.{column} = command.{own}"
        for table, column, own, outer in COMMAND_JOINS
    )
)


def command_view(conn: Reads, r: Sequence[Any]) -> CommandView:
    """A command row as COMMAND_COLUMNS lists its columns -> its view."""
    return CommandView(
        id=r[0],
        text=r[1],
        return_value=r[2],
        start_time=conn.time(r[3]),
        end_time=conn.time(r[4]),
        working_dir=r[5],
        username=r[6],
        hostname=r[7],
        session_uuid=None if r[8] is None else bytes(r[8]),
        hash_chunk_size=r[9],
        hash_max_reads=r[10],
        dropped_writes=r[11],
        dropped_reads=r[12],
        lost_events=r[13],
        derived_from=r[14],
        lost_reasons={
            reason: n
            for reason, n in zip(LOST_REASONS, r[15 : 15 + len(LOST_REASONS)], strict=True)
            if n
        },
        incomplete=bool(r[15 + len(LOST_REASONS)]),
        note=r[16 + len(LOST_REASONS)],
        imported_from=r[17 + len(LOST_REASONS)],
        uuid=None if r[18 + len(LOST_REASONS)] is None else bytes(r[18 + len(LOST_REASONS)]),
    )


def in_list(name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """An IN list as placeholders ``:name0..:nameN-1``, N the next power of
    two (the last value repeated; see :func:`padded`)."""
    filled = padded(list(values), values[-1])
    marks = ", ".join(f":{name}{i}" for i in range(len(filled)))
    return marks, {f"{name}{i}": v for i, v in enumerate(filled)}


def padded(items: list[T], filler: T) -> list[T]:
    """``items`` and ``filler`` repeated to the next power of two: a few
    fixed statements, each prepared once by either engine (a lineage walk
    runs hundreds of lookups of every size)."""
    n = 1
    while n < len(items):
        n *= 2
    return items + [filler] * (n - len(items))


class _Terms:
    """WHERE terms and their parameters, named uniquely as they are added."""

    def __init__(self, conn: Reads) -> None:
        self.conn = conn
        self.sql: list[str] = []
        self.params: dict[str, Any] = {}

    def param(self, value: Any) -> str:
        name = f"p{len(self.params)}"
        self.params[name] = value
        return f":{name}"

    def values(self, values: Sequence[Any]) -> str:
        """An IN list of ``values`` (an empty list matches nothing)."""
        if not values:
            return "NULL"
        return ", ".join(self.param(v) for v in values)


def hash_settings(conn: Reads) -> list[tuple[int, int]]:
    """Every (chunk size, max reads) the journal has hashed with.

    The original hashes only under settings that have a stored file of the
    probe's size; finding those needs a scan without a size index, while
    hashing under a few extra settings just finds nothing more.
    """
    return [(c, r) for c, r in conn.rows("SELECT chunk_size, max_reads FROM hash_setting")]


def _commands_having(t: _Terms, kind: int, conds: Any) -> str:
    """Command ids having a file event of ``kind`` whose file meets
    ``conds(alias)`` (the terms on the write event or read file).  Reads go
    through the read file versions, then their (read_file_id, command_id)
    index."""
    if kind == KIND_WRITE:
        return f"SELECT command_id FROM write_event WHERE {' AND '.join(conds('write_event'))}"
    return (
        "SELECT command_id FROM read_event WHERE read_file_id IN "
        f"(SELECT id FROM read_file WHERE {' AND '.join(conds('read_file'))})"
    )


def _file_match(t: _Terms, kind: int, probe: FileProbe) -> str:
    """Command ids having an event of ``kind`` for the probed content."""
    if probe.size == 0:
        # No hash for empty files: the mtime is all there is.  Reads: the
        # (hash, size, mtime_ns) index.  Writes: the partial index of
        # hashless writes, whose condition must appear literally.
        def empty(f: str) -> list[str]:
            if kind == KIND_WRITE:
                no_hash = f"length({f}.hash) = 0"
            else:
                no_hash = f"{f}.hash = {t.param(b'')}"
            out = [no_hash, f"{f}.size = 0"]
            if probe.mtime_ns is not None:
                out.append(f"{f}.mtime_ns = {t.param(probe.mtime_ns)}")
            return out

        return _commands_having(t, kind, empty)
    hashes = [hash_to_bytes(h) for h in sorted(probe.hashes)]

    def content(f: str) -> list[str]:
        return [f"{f}.hash IN ({t.values(hashes)})", f"{f}.size = {t.param(probe.size)}"]

    if probe.mtime_ns is None:
        # The content alone, whatever its mtime.
        return _commands_having(t, kind, content)
    mtime_ns = probe.mtime_ns
    if not hashes or _strict_found(t.conn, kind, probe, hashes):
        return _commands_having(
            t,
            kind,
            lambda f: [
                f"{f}.hash IN ({t.values([*hashes, b''])})",
                f"{f}.size = {t.param(probe.size)}",
                f"{f}.mtime_ns = {t.param(mtime_ns)}",
            ],
        )
    # Tools like wget or tar set old mtimes: fall back to the content alone.
    return _commands_having(t, kind, content)


def _strict_found(conn: Reads, kind: int, probe: FileProbe, hashes: list[bytes]) -> bool:
    """Whether an event of ``kind`` has the probe's size, one of its hashes
    and its mtime together."""
    # b"": stored by a command with hashing disabled; size+mtime must do.
    t = _Terms(conn)
    strict = _commands_having(
        t,
        kind,
        lambda f: [
            f"{f}.hash IN ({t.values([*hashes, b''])})",
            f"{f}.size = {t.param(probe.size)}",
            f"{f}.mtime_ns = {t.param(probe.mtime_ns)}",
        ],
    )
    return conn.first(strict, t.params) is not None


def content_only(conn: Reads, kind: int, probe: FileProbe) -> bool:
    """Whether :func:`_file_match` finds ``probe`` by its content alone: no
    event of ``kind`` has its size, hash and mtime together."""
    hashes = [hash_to_bytes(h) for h in sorted(probe.hashes)]
    if probe.size == 0 or probe.mtime_ns is None or not hashes:
        return False
    return not _strict_found(conn, kind, probe, hashes)


def capped_writers(conn: Reads, mtime_ns: int) -> list[int]:
    """Ids of the commands that dropped write events (the per-command cap)
    and ran when a file of ``mtime_ns`` was written: its writer may be one
    of them.  Only the no-results hint asks (a scan of the commands)."""
    from shournal.data import ran_at

    rows = conn.rows(
        "SELECT id, start_time, end_time FROM command WHERE dropped_writes > 0 ORDER BY id"
    )
    return [r[0] for r in rows if ran_at(conn.time(r[1]), conn.time(r[2]), mtime_ns)]


def session_first_ids(conn: Reads, uuids: Iterable[bytes]) -> dict[bytes, int]:
    """The id of each session's first command (by start time, then id):
    one seek of the (session_id) index per session."""
    out: dict[bytes, int] = {}
    for uuid in sorted(set(uuids)):
        first = conn.first(
            "SELECT command.id FROM command "
            "JOIN shell_session ON shell_session.id = command.session_id "
            "WHERE shell_session.uuid = :uuid ORDER BY command.start_time, command.id",
            {"uuid": uuid},
        )
        if first is not None:
            out[uuid] = first[0]
    return out


def _text_cond(
    t: _Terms, column: str, cond: Condition[str], *, case: bool, raw: bool = False
) -> str:
    """``column`` compared with ``cond``; ``raw``: the column holds bytes
    (else text, bound as the models bind it: :func:`safe_text`)."""
    if cond.op in ("eq", "ne"):
        op = "=" if cond.op == "eq" else "!="
        if not case:
            return f"lower({column}) {op} {t.param(safe_text(cond.value.lower()))}"
        value = os.fsencode(cond.value) if raw else safe_text(cond.value)
        return f"{column} {op} {t.param(value)}"
    pattern = t.conn.pattern(cond.value, case=case, raw=raw)
    if not raw:
        pattern = safe_text(pattern)
    name = t.param(pattern)
    if not case:
        return t.conn.nocase_pattern(column, name[1:])
    return f"{t.conn.case_pattern(column, raw)} {name}"


_OPS = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _ordered_cond(t: _Terms, column: str, cond: Condition[Any], conv: Any = None) -> str:
    def c(v: Any) -> str:
        return t.param(v if conv is None else conv(v))

    if cond.op == "between":
        return f"{column} >= {c(cond.value)} AND {column} <= {c(cond.high)}"
    return f"{column} {_OPS[cond.op]} {c(cond.value)}"


def _period_cond(t: _Terms, column: str, cond: Condition[Period]) -> str:
    """Times are periods: ``> 2024-05-01`` means after that whole day."""
    low: Period = cond.value
    op = cond.op
    if op == "between":
        high: Period = cond.high  # type: ignore[assignment]
        return f"{column} >= {t.param(low.start_ns)} AND {column} < {t.param(high.end_ns)}"
    if op == "eq":
        return f"{column} >= {t.param(low.start_ns)} AND {column} < {t.param(low.end_ns)}"
    if op == "ne":
        return f"({column} < {t.param(low.start_ns)} OR {column} >= {t.param(low.end_ns)})"
    return {
        "lt": lambda: f"{column} < {t.param(low.start_ns)}",
        "le": lambda: f"{column} < {t.param(low.end_ns)}",
        "gt": lambda: f"{column} >= {t.param(low.end_ns)}",
        "ge": lambda: f"{column} >= {t.param(low.start_ns)}",
    }[op]()


def _dir_value(path: str) -> str:
    """Directories are stored with their trailing slash."""
    return path if path.endswith("/") else path + "/"


def _file_criteria(t: _Terms, kind: int, fc: FileCriteria) -> str:
    """Command ids having one event of ``kind`` that meets every condition."""

    def conds(f: str) -> list[str]:
        out: list[str] = []
        if fc.path is not None:
            cond = fc.path
            if cond.op != "like" or not cond.value.endswith("%"):
                cond = type(cond)(cond.op, _dir_value(cond.value))
            where = [_text_cond(t, "directory.path", cond, case=True, raw=True)]
            if cond.op == "eq":
                # One seek of the path_hash index; patterns scan the
                # directory table (a row per directory, not per event).
                where.append(f"directory.path_hash = {t.param(path_hash(os.fsencode(cond.value)))}")
            out.append(f"{f}.directory_id IN (SELECT directory.id FROM directory "
                       f"WHERE {' AND '.join(where)})")  # fmt: skip
        if fc.name is not None:
            out.append(_text_cond(t, f"{f}.basename", fc.name, case=True, raw=True))
        if fc.size is not None:
            out.append(_ordered_cond(t, f"{f}.size", fc.size))
        if fc.hash is not None:
            out.append(_ordered_cond(t, f"{f}.hash", fc.hash, hash_to_bytes))
        if fc.mtime is not None:
            out.append(_period_cond(t, f"{f}.mtime_ns", fc.mtime))
        return out

    return _commands_having(t, kind, conds)


def command_conditions(
    conn: Reads,
    criteria: Criteria | None,
    probes: Sequence[tuple[int, FileProbe]] = (),
    ids: Sequence[int] | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """WHERE terms on ``command`` (joined with ``env``) for every criterion
    (None: none), probe and ``ids`` (None: any), with their parameters;
    shared by the query, the statistics and deletion."""
    t = _Terms(conn)
    where = t.sql
    if ids is not None:
        where.append(f"command.id IN ({t.values(ids)})")
    for kind, probe in probes:
        where.append(f"command.id IN ({_file_match(t, kind, probe)})")
    if criteria is None:
        return where, t.params
    cr = criteria
    if cr.lineage_of is not None:
        # Never ignored: the journal resolves it to ids first
        # (shournal.journal.Journal._criteria).
        raise ValueError("lineage_of must be resolved to command ids before the SQL")
    if cr.command_id is not None:
        where.append(_ordered_cond(t, "command.id", cr.command_id))
    if cr.command_ids is not None:
        where.append(f"command.id IN ({t.values(cr.command_ids)})")
    if cr.command_text is not None:
        # Text as typed: LIKE is case-insensitive, = and != are exact.
        exact = cr.command_text.op != "like"
        where.append(_text_cond(t, "command.text", cr.command_text, case=exact))
    if cr.cwd is not None:
        # "not equal" as NOT IN the equal ones: one seek, not a walk over
        # every other working directory.
        cond = type(cr.cwd)("eq", cr.cwd.value) if cr.cwd.op == "ne" else cr.cwd
        path_cond = _text_cond(t, "working_dir.path", cond, case=True)
        cwds = f"SELECT working_dir.id FROM working_dir WHERE {path_cond}"
        where.append(f"command.cwd_id {'NOT IN' if cr.cwd.op == 'ne' else 'IN'} ({cwds})")
    if cr.exit_code is not None:
        where.append(f"command.return_value != {t.param(RETURN_VALUE_UNKNOWN)}")
        where.append(_ordered_cond(t, "command.return_value", cr.exit_code))
    if cr.host is not None:
        where.append(_text_cond(t, "env.hostname", cr.host, case=False))
    if cr.user is not None:
        where.append(_text_cond(t, "env.username", cr.user, case=True))
    if cr.since is not None:
        since = t.param(conn.time_param(ns_to_datetime(cr.since.start_ns)))
        where.append(f"command.start_time >= {since}")
    if cr.until is not None:
        until = t.param(conn.time_param(ns_to_datetime(cr.until.end_ns)))
        where.append(f"command.start_time < {until}")
    if cr.session_uuid is not None:
        where.append("command.session_id IN (SELECT shell_session.id FROM shell_session "
                     f"WHERE shell_session.uuid = {t.param(cr.session_uuid)})")  # fmt: skip
    for name in cr.tags or ():
        where.append("command.id IN (SELECT command_tag.command_id FROM command_tag "
                     "JOIN tag ON tag.id = command_tag.tag_id "
                     f"WHERE tag.name = {t.param(safe_text(name))})")  # fmt: skip
    for kind, files in ((KIND_WRITE, cr.written), (KIND_READ, cr.read)):
        if files:
            where.append(f"command.id IN ({_file_criteria(t, kind, files)})")
    return where, t.params


def _where(terms: list[str]) -> str:
    return f" WHERE {' AND '.join(terms)}" if terms else ""


def matching_ids(conn: Reads, criteria: Criteria) -> tuple[str, dict[str, Any]]:
    """The ids of the commands matching ``criteria`` (a SELECT of one
    column ``id``, with its parameters): what query, stats and delete
    select."""
    terms, params = command_conditions(conn, criteria)
    sql = "SELECT command.id FROM command JOIN env ON env.id = command.env_id" + _where(terms)
    return sql, params


def select_commands(
    conn: Reads,
    *,
    probes: Sequence[tuple[int, FileProbe]],
    criteria: Criteria | None,
    ids: Sequence[int] | None = None,
    history: int | None,
    limit: int | None,
    reverse: bool = False,
    max_files: int | None,
) -> list[CommandView]:
    terms, params = command_conditions(conn, criteria, probes, ids)
    sql = _COMMAND_SELECT + _where(terms)
    newest_first = history is not None or reverse
    if newest_first:
        sql += " ORDER BY command.start_time DESC, command.id DESC"
    else:
        sql += " ORDER BY command.start_time, command.id"
    count = history if history is not None else limit
    if count is not None:
        sql += " LIMIT :limit"
        params["limit"] = count
    rows = conn.rows(sql, params)
    if history is not None:
        if not reverse:
            rows.reverse()
        if limit is not None:
            rows = rows[:limit]
    commands = [command_view(conn, r) for r in rows]
    _attach_events(conn, commands, max_files)
    return commands


def commands_by_id(
    conn: Reads, ids: Iterable[int], max_files: int | None = None
) -> list[CommandView]:
    """The commands with these ids (the missing ones left out), by start
    time: a few statements per batch of ids, each by primary key or the
    events' command index."""
    wanted = sorted(set(ids))
    found: list[CommandView] = []
    for start in range(0, len(wanted), _IN_BATCH):
        marks, params = in_list("id", wanted[start : start + _IN_BATCH])
        rows = conn.rows(f"{_COMMAND_SELECT} WHERE command.id IN ({marks})", params)
        commands = [command_view(conn, r) for r in rows]
        _attach_events(conn, commands, max_files)
        found += commands
    found.sort(key=lambda c: (c.start_time, c.id))
    return found


def _attach_events(conn: Reads, commands: list[CommandView], max_files: int | None) -> None:
    by_id = {cmd.id: cmd for cmd in commands}
    ids = list(by_id)
    for start in range(0, len(ids), _IN_BATCH):
        batch = ids[start : start + _IN_BATCH]
        marks, params = in_list("id", batch)
        if max_files is not None:
            # Cut lists: the totals need counting.
            for table, attr in (("write_event", "write_count"), ("read_event", "read_count")):
                for cmd_id, count in conn.rows(
                    f"SELECT command_id, count(*) FROM {table} "
                    f"WHERE command_id IN ({marks}) GROUP BY command_id",
                    params,
                ):
                    setattr(by_id[cmd_id], attr, count)
            params["max_files"] = max_files
        # The read files, the written ones and the tags in one statement (a
        # lineage level in few round trips); the typed branch first, so
        # that PostgreSQL types the NULL columns of the others.
        parts = [] if max_files == 0 else [
            _events_sql(False, marks, max_files is not None),
            _events_sql(True, marks, max_files is not None),
        ]  # fmt: skip
        parts.append(
            "SELECT 0 AS kind, NULL AS id, command_tag.command_id AS command_id, NULL, NULL, "
            "NULL, NULL, NULL, NULL, NULL, NULL, NULL, tag.name FROM command_tag "
            f"JOIN tag ON tag.id = command_tag.tag_id WHERE command_tag.command_id IN ({marks})"
        )
        rows = conn.rows(" UNION ALL ".join(parts) + " ORDER BY kind, command_id, id", params)
        tags: list[tuple[int, str]] = []
        events: dict[bool, dict[int, list[FileEventView]]] = {True: {}, False: {}}
        for r in rows:
            if r[0] == 0:
                tags.append((r[2], r[12]))
                continue
            events[r[0] == 1].setdefault(r[2], []).append(
                FileEventView(
                    id=r[1],
                    path=bytes(r[3]) + bytes(r[4]),
                    size=r[5],
                    mtime_ns=r[6],
                    hash=hash_from_bytes(bytes(r[7])),
                    mode=mode_of(r[8]),
                    content_id=r[9],
                    content_preview=None if r[10] is None else bytes(r[10]),
                    content_size=r[11],
                )
            )
        attach_tags(by_id, tags)
        if max_files == 0:
            continue
        for cmd_id in batch:
            cmd = by_id[cmd_id]
            cmd.writes = events[True].get(cmd_id, [])
            cmd.reads = events[False].get(cmd_id, [])
            if max_files is None:
                # Everything was loaded: the totals are the lists.
                cmd.write_count = len(cmd.writes)
                cmd.read_count = len(cmd.reads)


def tag_counts(conn: Reads) -> list[tuple[str, int]]:
    """Every tag with its number of commands, by name (code point order)."""
    rows = conn.rows(
        "SELECT tag.name, count(command_tag.command_id) FROM tag "
        "JOIN command_tag ON command_tag.tag_id = tag.id GROUP BY tag.name"
    )
    return sorted((name, n) for name, n in rows)


def attach_tags(commands: dict[int, CommandView], rows: Iterable[Any]) -> None:
    """Set each command's ``tags`` from (command id, name) rows, sorted by
    code point (not by the database's collation: both backends agree)."""
    touched = set()
    for cmd_id, name in rows:
        commands[cmd_id].tags.append(name)
        touched.add(cmd_id)
    for cmd_id in touched:
        commands[cmd_id].tags.sort()


def _events_sql(writes: bool, marks: str, limited: bool) -> str:
    """A batch of commands' (``marks``) written or read files (kind 1 or
    2; the caller orders by command and event id); ``limited``: only the
    first ``:max_files`` per command, without fetching the rest of a
    command that wrote 10^5 files.  A read file's id is the id of the read
    event."""
    table, order = ("write_event", "id") if writes else ("read_event", "read_file_id")
    where = f"command_id IN ({marks})"
    if limited:
        ev = (
            f"(SELECT * FROM (SELECT {table}.*, row_number() OVER (PARTITION BY command_id "
            f"ORDER BY {order}) AS rank FROM {table} WHERE {where}) AS ranked "
            "WHERE rank <= :max_files)"
        )
    else:
        ev = f"(SELECT * FROM {table} WHERE {where})"
    if writes:
        return (
            "SELECT 1 AS kind, ev.id AS id, ev.command_id AS command_id, d.path, ev.basename, "
            "ev.size, ev.mtime_ns, ev.hash, ev.mode, NULL, NULL, NULL, NULL "
            f"FROM {ev} AS ev JOIN directory d ON d.id = ev.directory_id"
        )
    return (
        "SELECT 2 AS kind, f.id AS id, ev.command_id AS command_id, d.path, f.basename, f.size, "
        f"f.mtime_ns, f.hash, f.mode, f.content_id, substr(c.data, 1, {PREVIEW_BYTES}), "
        f"length(c.data), NULL FROM {ev} AS ev "
        "JOIN read_file f ON f.id = ev.read_file_id JOIN directory d ON d.id = f.directory_id "
        "LEFT OUTER JOIN content c ON c.id = f.content_id"
    )


def same_mtime_writers(conn: Reads, size: int, mtime_ns: int, hashes: Iterable[int]) -> list[int]:
    """The ids of the commands that wrote this content (``size``, one of
    ``hashes``, or no hash) with this very ``mtime_ns``: the writes of
    :func:`written_versions` with that mtime."""
    wanted = [hash_to_bytes(h) for h in sorted(set(hashes))]
    marks, params = in_list("h", [*wanted, b""])
    params.update(size=size, mtime=mtime_ns)
    rows = conn.rows(
        f"SELECT DISTINCT command_id FROM write_event WHERE hash IN ({marks}) "
        "AND size = :size AND mtime_ns = :mtime",
        params,
    )
    return [r[0] for r in rows]


_VERSION_COLUMNS = (
    "write_event.id AS write_id, write_event.command_id AS command_id, command.start_time, "
    "command.end_time AS end_time, directory.path, write_event.basename, write_event.size, "
    "write_event.mtime_ns, write_event.hash, hash_setting.chunk_size, hash_setting.max_reads"
)
_VERSION_JOINS = (
    "JOIN command ON command.id = write_event.command_id "
    "JOIN directory ON directory.id = write_event.directory_id "
    "LEFT OUTER JOIN hash_setting ON hash_setting.id = command.hash_setting_id"
)

# Contents asked for in one statement: its parameters (4 per hash and
# content, 2 per empty file) stay far below both engines' limits.
_VERSIONS_BATCH = 256
# Rows of the looked-up keys that match no write (no size is negative):
# the key lists are padded with them (see padded).
_NO_KEY = (-1, b"", -1, 0)
_NO_EMPTY_FILE = (-1, -1)
# Levels of this many contents or more are prefetched (Reads.prefetch),
# in this many statements.
_PREFETCH_MIN = 64
_PREFETCH_WAYS = 4


def _versions_statement(
    batch: Sequence[tuple[int, int, tuple[int, ...]]], *, pad: bool = True
) -> tuple[str, dict[str, Any]]:
    """One statement for the writes of every content of ``batch`` (see
    :func:`written_versions`), each row led by the content's index in
    ``batch``: the contents' keys as a table of values, joined to the
    write events' ``(hash, size)`` index (one lookup per key); empty files
    through the partial index of hashless writes on ``mtime_ns``."""
    keyed: list[tuple[Any, ...]] = []  # (q, hash, size, mtime)
    empty: list[tuple[Any, ...]] = []  # (q, mtime)
    for q, (size, mtime, hashes) in enumerate(batch):
        if size == 0:
            # Empty files have no hash (the partial index's condition is
            # spelled literally so that both engines use it).
            empty.append((q, mtime))
            continue
        # Any of the hashes, or b"" (stored with hashing off: then only
        # with the same mtime).
        keyed.extend((q, hash_to_bytes(h), size, mtime) for h in hashes)
        keyed.append((q, b"", size, mtime))
    params: dict[str, Any] = {}
    ctes: list[str] = []
    parts: list[str] = []
    if keyed:
        values = []
        for i, (q, h, size, mtime) in enumerate(padded(keyed, _NO_KEY) if pad else keyed):
            params.update({f"k{i}q": q, f"k{i}h": h, f"k{i}s": size, f"k{i}m": mtime})
            values.append(f"(:k{i}q, :k{i}h, :k{i}s, :k{i}m)")
        ctes.append(f"wanted(q, h, s, m) AS (VALUES {', '.join(values)})")
        # CROSS JOIN: SQLite's planner then loops over the keys, looking
        # each up in the index (it would rather scan the write events);
        # PostgreSQL plans it as any inner join.
        parts.append(
            f"SELECT wanted.q AS q, {_VERSION_COLUMNS} FROM wanted CROSS JOIN write_event "
            f"{_VERSION_JOINS} "
            "WHERE write_event.hash = wanted.h AND write_event.size = wanted.s "
            "AND (length(write_event.hash) > 0 OR write_event.mtime_ns = wanted.m)"
        )
    if empty:
        values = []
        for i, (q, mtime) in enumerate(padded(empty, _NO_EMPTY_FILE) if pad else empty):
            params.update({f"e{i}q": q, f"e{i}m": mtime})
            values.append(f"(:e{i}q, :e{i}m)")
        ctes.append(f"empty_file(q, m) AS (VALUES {', '.join(values)})")
        parts.append(
            f"SELECT empty_file.q AS q, {_VERSION_COLUMNS} FROM empty_file CROSS JOIN write_event "
            f"{_VERSION_JOINS} "
            "WHERE length(write_event.hash) = 0 AND write_event.size = 0 "
            "AND write_event.mtime_ns = empty_file.m"
        )
    sql = (
        f"WITH {', '.join(ctes)} {' UNION ALL '.join(parts)} "
        "ORDER BY q, end_time DESC, command_id DESC, write_id DESC"
    )
    return sql, params


def _version(conn: Reads, r: Sequence[Any]) -> WrittenVersion:
    from shournal.data import WrittenVersion

    return WrittenVersion(
        write_id=r[0],
        command_id=r[1],
        start_time=conn.time(r[2]),
        end_time=conn.time(r[3]),
        path=bytes(r[4]) + bytes(r[5]),
        size=r[6],
        mtime_ns=r[7],
        hash=hash_from_bytes(bytes(r[8])),
        hash_chunk_size=r[9],
        hash_max_reads=r[10],
    )


def written_versions(
    conn: Reads, size: int, mtime_ns: int, hashes: Iterable[int]
) -> list[WrittenVersion]:
    """Every write event of a content: ``size`` and one of ``hashes`` (any
    mtime), or a write stored without a hash (hashing off, empty file) of
    this size and ``mtime_ns``; newest end first.  One index lookup: the
    write events' ``(hash, size)`` index, empty files the partial index of
    hashless writes on ``mtime_ns``; the command by primary key."""
    return written_versions_many(conn, [(size, mtime_ns, hashes)])[0]


def written_versions_many(
    conn: Reads, contents: Sequence[tuple[int, int, Iterable[int]]]
) -> list[list[WrittenVersion]]:
    """:func:`written_versions` of each (size, mtime_ns, hashes), in that
    order, in one statement per up to 256 distinct contents, each content
    still its own index lookup (a lineage level in one round trip,
    whatever its number of files)."""
    keys = [(size, mtime, tuple(sorted(set(hashes)))) for size, mtime, hashes in contents]
    distinct = list(dict.fromkeys(keys))
    found: dict[tuple[int, int, tuple[int, ...]], list[WrittenVersion]] = {k: [] for k in distinct}
    ahead: list[tuple[str, dict[str, Any]]] = []
    if len(distinct) >= _PREFETCH_MIN and conn.can_prefetch:
        # Each content is an index page of its own (hashes are random): on
        # a journal not read lately, parts of them are read side by side,
        # ahead of the lookup itself (in the same order).
        ahead = [
            _versions_statement(part[start : start + _VERSIONS_BATCH], pad=False)
            for part in (distinct[i::_PREFETCH_WAYS] for i in range(_PREFETCH_WAYS))
            for start in range(0, len(part), _VERSIONS_BATCH)
        ]
    with conn.prefetching(ahead):
        for start in range(0, len(distinct), _VERSIONS_BATCH):
            batch = distinct[start : start + _VERSIONS_BATCH]
            sql, params = _versions_statement(batch)
            for r in conn.rows(sql, params):
                found[batch[r[0]]].append(_version(conn, r[1:]))
    return [found[k] for k in keys]
