"""The ORM-free reader: the few reads of a SQLite journal that ``shournal
query --history N`` and ``shournal query --wfile F`` need, with the
standard library's sqlite3 alone.

Why it exists: those two are what a history tool is asked all day, and
importing SQLAlchemy and its models costs several times the query itself
(bench/cli_startup.py).  :mod:`shournal.cli._fast` answers them through
this module and falls back to the full CLI (:mod:`shournal.store.reader`
over SQLAlchemy) for everything else.  So this module is deliberately
narrow: read-only (``mode=ro``, nothing on disk changes), SQLite only, and
only a journal of :data:`READS_SCHEMA`; anything it cannot open or read as
the full path would is :class:`Unanswered`, and the caller falls back.

The views it returns are those of :mod:`shournal.store.reader` (same
columns, order, conversions: NULL mode is :data:`COMMON_MODE`, times are
aware UTC, hashes 8 bytes little-endian), and the statistics those of
:func:`shournal.store.stats.compute_stats` for a list of command ids;
tests/test_cli_fast_path.py compares the two paths' output byte for byte.

The constants below are facts of the journal both readers use; the
SQLAlchemy side imports them from here.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter, defaultdict
from datetime import UTC, datetime

from shournal.data import (
    LOST_REASONS,
    MATCH_CONTENT,
    MATCH_EXACT,
    CommandModifications,
    CommandView,
    DirectoryActivity,
    FileEventView,
    FileProbe,
    JournalStats,
    SessionCommands,
    WorkingDirCommands,
)

# Every `shournal query` imports this module: no typing, no urllib.parse
# (tests/unit/test_cli_fast_path.py lists what the fast path must not import).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

__all__ = [
    "BUSY_SECONDS",
    "connect_read_only",
    "COMMON_MODE",
    "PREVIEW_BYTES",
    "READS_SCHEMA",
    "LightReader",
    "Unanswered",
    "hash_from_bytes",
    "hash_to_bytes",
    "journal_file",
]

# The mode of nearly every file event (a regular file, rw-r--r--), stored
# as NULL (see the notes in shournal.store.models).
COMMON_MODE = 0o100644


def hash_to_bytes(value: int | None) -> bytes:
    """A partial hash as stored: 8 bytes little-endian, ``b""`` for none."""
    if value is None:
        return b""
    return value.to_bytes(8, "little")


def hash_from_bytes(value: bytes) -> int | None:
    """Inverse of :func:`hash_to_bytes`."""
    return int.from_bytes(value, "little") if value else None


# Enough for the human output's first lines of an archived script.
PREVIEW_BYTES = 4096

# How long to wait for another process's lock, as the original does.
BUSY_SECONDS = 15

# The schema version whose tables the SQL below reads.  A journal of any
# other version (older: the full path upgrades it first) is Unanswered;
# tests/test_cli_fast_path.py fails when the models' SCHEMA_VERSION moves
# on without this module being reviewed.
READS_SCHEMA = 10

_IN_BATCH = 500

# A command's view, as (table, column) in the order command_view reads
# them: both readers select this list (shournal.store.reader through the
# models' tables), so the two agree by construction.
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


class StatsTally:
    """What both statistics readers count, batch by batch, and how they make
    the top lists of it: :func:`shournal.store.stats.compute_stats` over
    SQLAlchemy and :meth:`LightReader.stats_of` over sqlite3 differ only in
    the SQL that feeds this."""

    def __init__(self) -> None:
        self.modifications: Counter[int] = Counter()
        self.sessions: Counter[int] = Counter()
        self.session_times: dict[int, tuple[datetime, datetime]] = {}
        self.cwds: Counter[str] = Counter()
        self.dirs_w: Counter[int] = Counter()
        self.dirs_r: Counter[int] = Counter()
        self.session_ids: set[int] = set()

    @staticmethod
    def starts(out: JournalStats, first: datetime | None, last: datetime | None) -> None:
        """Widen ``out``'s first and last start to a batch's."""
        if first is not None and last is not None:
            out.first_start = first if out.first_start is None else min(out.first_start, first)
            out.last_start = last if out.last_start is None else max(out.last_start, last)

    def session(self, sid: int, count: int, lo: datetime, hi: datetime) -> None:
        """A batch's ``count`` commands of session ``sid``, from ``lo`` to ``hi``."""
        self.sessions[sid] += count
        old = self.session_times.get(sid)
        self.session_times[sid] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))

    def directory(self, did: int, written: int | None, total: int) -> None:
        """A batch's ``total`` events in directory ``did``, ``written`` of them writes."""
        self.dirs_w[did] += int(written or 0)
        self.dirs_r[did] += int(total) - int(written or 0)

    def finish(
        self,
        out: JournalStats,
        top: int,
        by_id: Callable[[str, str, list[Any]], dict[Any, Any]],
    ) -> JournalStats:
        """``out`` with the top-``top`` lists (ties by the smaller id or
        path); ``by_id(table, column, ids)`` reads a column of those rows."""

        def best(counter: Counter[Any]) -> list[Any]:
            return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:top]

        top_mods = best(self.modifications)
        texts = by_id("command", "text", [cid for cid, _ in top_mods])
        out.most_modifications = [
            CommandModifications(cid, texts.get(cid, ""), n) for cid, n in top_mods
        ]
        top_sessions = best(self.sessions)
        uuids = by_id("shell_session", "uuid", [sid for sid, _ in top_sessions])
        out.sessions_most_commands = [
            SessionCommands(bytes(uuids[sid]), n, *self.session_times[sid])
            for sid, n in top_sessions
        ]
        out.busiest_working_dirs = [WorkingDirCommands(p, n) for p, n in best(self.cwds)]
        top_dirs = best(Counter({d: self.dirs_w[d] + self.dirs_r[d] for d in self.dirs_w}))
        paths = by_id("directory", "path", [d for d, _ in top_dirs])
        out.busiest_directories = [
            DirectoryActivity(bytes(paths[d]), self.dirs_w[d], self.dirs_r[d]) for d, _ in top_dirs
        ]
        return out


# What a file: URI's path keeps as it is (urllib.parse.quote's safe set).
_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def _uri_path(path: str) -> str:
    """``path`` percent-encoded for a file: URI (the bytes of its name)."""
    return "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in os.fsencode(path))


def connect_read_only(path: str, **kw: object) -> sqlite3.Connection:
    """A connection to the SQLite file `path` that changes nothing on disk
    (``mode=ro``): a reader needs no write permission on the journal.

    A WAL journal whose ``-shm`` file is missing and cannot be made (a
    read-only directory or mount: an archived journal) cannot be opened so;
    it is opened ``immutable`` then.  Nobody can be writing it: a writer
    would have made the ``-shm`` file, which stays while it is open.

    A journal the user may write is opened read-write with ``query_only``
    instead: a read-only connection cannot remove the ``-wal`` and ``-shm``
    files it makes (SQLite's last writable connection does), so every
    read would leave them behind.

    :raises sqlite3.Error: it cannot be opened or read.
    """
    full = os.path.abspath(path)
    if os.access(full, os.W_OK) and os.access(os.path.dirname(full), os.W_OK):
        conn = sqlite3.connect(f"file:{_uri_path(full)}?mode=rw", uri=True, **kw)  # type: ignore[arg-type]
        try:
            conn.execute("PRAGMA query_only=ON")
        except sqlite3.Error:
            conn.close()
            raise
        return conn
    uri = f"file:{_uri_path(full)}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, **kw)  # type: ignore[arg-type]
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
        if os.access(os.path.dirname(os.path.abspath(path)), os.W_OK) or os.path.exists(
            path + "-shm"
        ):
            raise
    return sqlite3.connect(uri + "&immutable=1", uri=True, **kw)  # type: ignore[arg-type]


class Unanswered(Exception):
    """This journal or question is not for the light reader; use the full
    path (which gives the answer, or the error, the user must see)."""


def journal_file(url: str | None) -> str:
    """The SQLite file of the journal :func:`shournal.journal.resolve_url`
    named, as :class:`shournal.store.db.Store` would open it.

    :raises Unanswered: not a plain ``sqlite:///FILE`` URL, or the default
        journal's directory is not safe to use (the full path says why).
    """
    if url is None:
        from shournal import _paths

        path = _paths.default_db_file()
        try:
            _paths.check_own_directory(
                os.path.dirname(path), follow_links=True, forbidden_mode=0o022
            )
        except FileNotFoundError:
            raise Unanswered("no journal directory") from None
        except (_paths.UnsafeDirectory, OSError):
            raise Unanswered("journal directory not usable") from None
        return path
    prefix = "sqlite:///"
    rest = url[len(prefix) :] if url.startswith(prefix) else ""
    # Query strings, escapes and in-memory databases: SQLAlchemy's URL
    # parser decides what they mean.
    if not rest or any(ch in rest for ch in "?%#") or rest == ":memory:":
        raise Unanswered("not a plain SQLite file URL")
    return rest


def _utc(value: str | None) -> datetime | None:
    """A stored command time (SQLAlchemy's SQLite DATETIME text, UTC) as an
    aware datetime, as models.UtcDateTime reads it."""
    if value is None:
        return None
    moment = datetime.fromisoformat(value)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


class LightReader:
    """A read-only connection to a SQLite journal of :data:`READS_SCHEMA`.

    :raises Unanswered: no such file, not a database, another schema
        version, or any error of SQLite.
    """

    def __init__(self, path: str) -> None:
        if not os.path.exists(path):
            raise Unanswered("no journal file")
        try:
            self._conn = connect_read_only(path, isolation_level=None, timeout=BUSY_SECONDS)
        except sqlite3.Error as e:
            raise Unanswered(str(e)) from None
        try:
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_SECONDS * 1000}")
            self.check_schema()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> LightReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise Unanswered(str(e)) from None

    def check_schema(self) -> None:
        """:raises Unanswered: the journal is not of :data:`READS_SCHEMA`."""
        rows = self._rows("SELECT version FROM schema_version WHERE id = 1")
        if [tuple(r) for r in rows] != [(READS_SCHEMA,)]:
            raise Unanswered("another schema version")

    def begin(self) -> None:
        """Start the read transaction the reads after it share (one
        consistent snapshot, as Store.reading)."""
        self._rows("BEGIN")
        self.check_schema()

    # -- commands ------------------------------------------------------------------

    def hash_settings(self) -> list[tuple[int, int]]:
        """Every (chunk size, max reads) the journal has hashed with."""
        return [(c, r) for c, r in self._rows("SELECT chunk_size, max_reads FROM hash_setting")]

    def _written_match(self, probe: FileProbe) -> tuple[str, list[Any], bool]:
        """Command ids that wrote the probed content (reader._file_match for
        writes): size, hash and mtime; without a command of that mtime, size
        and hash alone (tools such as wget or tar set old mtimes).  The flag:
        found by the content alone (find_commands' ``match``)."""
        if probe.size == 0:
            return (
                "SELECT command_id FROM write_event "
                "WHERE length(hash) = 0 AND size = 0 AND mtime_ns = ?",
                [probe.mtime_ns],
                False,
            )
        hashes = [hash_to_bytes(h) for h in sorted(probe.hashes)]
        strict = (
            f"SELECT command_id FROM write_event WHERE hash IN ({_marks([*hashes, b''])}) "
            "AND size = ? AND mtime_ns = ?",
            [*hashes, b"", probe.size, probe.mtime_ns],
        )
        if not hashes or self._rows(strict[0] + " LIMIT 1", strict[1]):
            return (*strict, False)
        # No write of that mtime: the commands whose run covers it, by the
        # lineage walk's rule (loaded only here: it costs the dataclasses).
        from types import SimpleNamespace

        from shournal._criteria import possible_writers

        rows = self._rows(
            "SELECT w.command_id, c.start_time, c.end_time, w.mtime_ns FROM write_event w "
            f"JOIN command c ON c.id = w.command_id WHERE w.hash IN ({_marks(hashes)}) "
            "AND w.size = ?",
            [*hashes, probe.size],
        )
        writes = [
            SimpleNamespace(command_id=r[0], start_time=_utc(r[1]), end_time=_utc(r[2]),
                            mtime_ns=r[3])  # fmt: skip
            for r in rows
        ]
        assert probe.mtime_ns is not None
        ids = sorted({w.command_id for w in possible_writers(writes, probe.mtime_ns)})
        return f"SELECT id FROM command WHERE id IN ({_marks(ids)})", ids, bool(ids)

    def capped_writers(self, mtime_ns: int) -> list[int]:
        """reader.capped_writers: the commands that dropped write events
        and ran when a file of ``mtime_ns`` was written."""
        from shournal._criteria import ran_at

        rows = self._rows(
            "SELECT id, start_time, end_time FROM command WHERE dropped_writes > 0 ORDER BY id"
        )
        return [r[0] for r in rows if ran_at(_utc(r[1]), _utc(r[2]), mtime_ns)]

    def find(
        self, *, written: FileProbe | None, history: int | None, max_files: int | None
    ) -> list[CommandView]:
        """reader.select_commands for no criteria but the written content
        and ``--history``: oldest first, with their files."""
        sql, params = _COMMAND_SELECT, []
        by_content = False
        if written is not None:
            match, params, by_content = self._written_match(written)
            sql += f" WHERE command.id IN ({match})"
        if history is None:
            sql += " ORDER BY command.start_time, command.id"
        else:
            sql += " ORDER BY command.start_time DESC, command.id DESC LIMIT ?"
            params.append(history)
        rows = self._rows(sql, params)
        if history is not None:
            rows.reverse()
        commands = [command_view(r) for r in rows]
        if written is not None:
            for cmd in commands:
                cmd.match = MATCH_CONTENT if by_content else MATCH_EXACT
        self._attach_events(commands, max_files)
        return commands

    def _attach_events(self, commands: list[CommandView], max_files: int | None) -> None:
        by_id = {cmd.id: cmd for cmd in commands}
        ids = list(by_id)
        for start in range(0, len(ids), _IN_BATCH):
            batch = ids[start : start + _IN_BATCH]
            attach_tags(by_id, self._rows(tags_sql(len(batch)), batch))
            params: list[Any] = list(batch)
            if max_files is not None:
                # Cut lists: the totals need counting.
                for table, attr in (("write_event", "write_count"), ("read_event", "read_count")):
                    for cmd_id, count in self._rows(
                        f"SELECT command_id, count(*) FROM {table} "
                        f"WHERE command_id IN ({_marks(batch)}) GROUP BY command_id",
                        batch,
                    ):
                        setattr(by_id[cmd_id], attr, count)
                if max_files == 0:
                    continue
                params.append(max_files)
            for writes in (True, False):
                events: dict[int, list[FileEventView]] = defaultdict(list)
                for r in self._rows(_events_sql(writes, len(batch), max_files is not None), params):
                    events[r[1]].append(
                        FileEventView(
                            id=r[0],
                            path=bytes(r[2]) + bytes(r[3]),
                            size=r[4],
                            mtime_ns=r[5],
                            hash=hash_from_bytes(bytes(r[6])),
                            mode=COMMON_MODE if r[7] is None else r[7],
                            content_id=r[8],
                            content_preview=None if r[9] is None else bytes(r[9]),
                            content_size=r[10],
                        )
                    )
                for cmd_id in batch:
                    found = events.get(cmd_id, [])
                    cmd = by_id[cmd_id]
                    if writes:
                        cmd.writes = found
                    else:
                        cmd.reads = found
                    if max_files is None:
                        # Everything was loaded: the totals are the lists.
                        if writes:
                            cmd.write_count = len(found)
                        else:
                            cmd.read_count = len(found)

    # -- statistics ----------------------------------------------------------------

    def stats_of(self, command_ids: Iterable[int], top: int) -> JournalStats:
        """shournal.store.stats.compute_stats(command_ids=...) without criteria:
        totals and top-``top`` lists over these commands."""
        out = JournalStats()
        ids = sorted(set(command_ids))
        if not ids:
            return out
        tally = StatsTally()
        for start in range(0, len(ids), _IN_BATCH):
            batch = ids[start : start + _IN_BATCH]
            inc = f"id IN ({_marks(batch)})"
            inw = f"command_id IN ({_marks(batch)})"
            ((n, first, last),) = self._rows(
                f"SELECT count(id), min(start_time), max(start_time) FROM command WHERE {inc}",
                batch,
            )
            out.commands += n
            tally.starts(out, _utc(first), _utc(last))
            for table, attr in (("write_event", "written_events"), ("read_event", "read_events")):
                ((count,),) = self._rows(f"SELECT count(*) FROM {table} WHERE {inw}", batch)
                setattr(out, attr, getattr(out, attr) + count)
            for cid, count in self._rows(
                f"SELECT command_id, count(*) FROM write_event WHERE {inw} GROUP BY command_id",
                batch,
            ):
                tally.modifications[cid] += count
            for sid, count, lo, hi in self._rows(
                "SELECT session_id, count(*), min(start_time), max(end_time) FROM command "
                f"WHERE session_id IS NOT NULL AND {inc} GROUP BY session_id",
                batch,
            ):
                tally.session_ids.add(sid)
                tally.session(sid, count, _utc(lo), _utc(hi))
            for path, count in self._rows(
                "SELECT w.path, p.n FROM working_dir w JOIN (SELECT cwd_id, count(*) AS n "
                f"FROM command WHERE {inc} GROUP BY cwd_id) p ON p.cwd_id = w.id",
                batch,
            ):
                tally.cwds[path] += count
            # Every event once: writes, and reads through their read file.
            for did, w, total in self._rows(
                "SELECT directory_id, sum(w), count(*) FROM ("
                f"SELECT directory_id, 1 AS w FROM write_event WHERE {inw} UNION ALL "
                "SELECT f.directory_id, 0 AS w FROM read_event r JOIN read_file f "
                f"ON f.id = r.read_file_id WHERE r.{inw}) GROUP BY directory_id",
                [*batch, *batch],
            ):
                tally.directory(did, w, total)
        out.sessions = len(tally.session_ids)

        def by_id(table: str, column: str, wanted: list[Any]) -> dict[Any, Any]:
            if not wanted:
                return {}
            return dict(
                self._rows(
                    f"SELECT id, {column} FROM {table} WHERE id IN ({_marks(wanted)})", wanted
                )
            )

        return tally.finish(out, top, by_id)


def _events_sql(writes: bool, n: int, limited: bool) -> str:
    """A batch of ``n`` commands' written (or read) files, by command and
    event id; ``limited``: only the first ``?`` (the last parameter) per
    command, without fetching the rest of a command that wrote 10^5 files."""
    table, order = ("write_event", "id") if writes else ("read_event", "read_file_id")
    where = f"command_id IN ({', '.join('?' * n)})"
    if limited:
        ev = (
            f"(SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY command_id "
            f"ORDER BY {order}) AS rank FROM {table} WHERE {where}) WHERE rank <= ?)"
        )
    else:
        ev = f"(SELECT * FROM {table} WHERE {where})"
    if writes:
        return (
            "SELECT ev.id, ev.command_id, d.path, ev.basename, ev.size, ev.mtime_ns, ev.hash, "
            f"ev.mode, NULL, NULL, NULL FROM {ev} AS ev "
            "JOIN directory d ON d.id = ev.directory_id ORDER BY ev.command_id, ev.id"
        )
    return (
        "SELECT f.id, ev.command_id, d.path, f.basename, f.size, f.mtime_ns, f.hash, f.mode, "
        f"f.content_id, substr(c.data, 1, {PREVIEW_BYTES}), length(c.data) FROM {ev} AS ev "
        "JOIN read_file f ON f.id = ev.read_file_id JOIN directory d ON d.id = f.directory_id "
        "LEFT OUTER JOIN content c ON c.id = f.content_id ORDER BY ev.command_id, ev.read_file_id"
    )


def command_view(r: Sequence[Any], time: Callable[[Any], Any] = _utc) -> CommandView:
    """A command row as COMMAND_COLUMNS lists its columns -> its view;
    ``time`` makes the start and end datetimes of what the driver returned."""
    return CommandView(
        id=r[0],
        text=r[1],
        return_value=r[2],
        start_time=time(r[3]),
        end_time=time(r[4]),
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
    )


# A batch of commands' tags, by command and name (both readers run it; the
# SQLAlchemy one through the models' tables, the same columns).
def tags_sql(n: int) -> str:
    return (
        "SELECT command_tag.command_id, tag.name FROM command_tag "
        "JOIN tag ON tag.id = command_tag.tag_id "
        f"WHERE command_tag.command_id IN ({', '.join('?' * n)}) "
    )


def attach_tags(commands: dict[int, CommandView], rows: Iterable[Any]) -> None:
    """Set each command's ``tags`` from (command id, name) rows, sorted by
    code point (not by the database's collation: both backends agree)."""
    touched = set()
    for cmd_id, name in rows:
        commands[cmd_id].tags.append(name)
        touched.add(cmd_id)
    for cmd_id in touched:
        commands[cmd_id].tags.sort()

