"""Statistics of the journal (the original's four sections, plus totals).

:func:`compute_stats` is the library entry point; the human output of
``shournal query``, ``shournal stats`` and the HTML report all render the
same :class:`JournalStats`.  Everything is counted in SQL (GROUP BY), so the
whole journal of 10^7 file events is summarised without loading it.

Scope: the whole journal, the commands matching a
:class:`shournal.data.Criteria`, or an explicit list of command ids (the
commands a query found).  Ties are broken by the smaller id or path so the
result is deterministic.  The SQL is text over
:class:`shournal.store.connection.Reads`, as :mod:`shournal.store.reader`'s.
"""

from __future__ import annotations

from collections import Counter

from shournal.data import (
    DEFAULT_TOP,
    INT64_MAX,
    CommandModifications,
    DirectoryActivity,
    InputEntry,
    JournalStats,
    ProgramEntry,
    SessionCommands,
    UsageBucket,
    UsageStats,
    WorkingDirCommands,
    WriterEntry,
)
from shournal.store.reader import in_list, matching_ids

# Not typing.TYPE_CHECKING: `shournal query` imports this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from datetime import datetime
    from typing import Any

    from shournal.data import Criteria
    from shournal.store.connection import Reads
    from shournal.store.db import Store

_IN_BATCH = 500

# One part of the scope: a batch of command ids (None: all) and the SQL
# (with its parameters) of the commands matching criteria (None: all).
_Part = tuple["list[int] | None", "tuple[str, dict[str, Any]] | None"]


class StatsTally:
    """What the statistics count, batch by batch, and how they make the top
    lists of it."""

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

    def finish(self, out: JournalStats, top: int, conn: Reads) -> JournalStats:
        """``out`` with the top-``top`` lists (ties by the smaller id or
        path)."""

        def best(counter: Counter[Any]) -> list[Any]:
            return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:top]

        def by_id(table: str, column: str, wanted: list[Any]) -> dict[Any, Any]:
            if not wanted:
                return {}
            marks, params = in_list("id", wanted)
            return dict(conn.rows(f"SELECT id, {column} FROM {table} WHERE id IN ({marks})",
                                  params))  # fmt: skip

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


def compute_stats(
    store: Store,
    *,
    command_ids: Iterable[int] | None = None,
    criteria: Criteria | None = None,
    top: int = DEFAULT_TOP,
) -> JournalStats:
    """Statistics over the whole journal, the commands matching
    ``criteria``, or only ``command_ids`` (both: their intersection).

    :raises shournal.store.StoreError: the journal cannot be read.
    """
    from shournal.store.connection import AlchemyReads

    with store.reading() as conn:
        return compute_stats_conn(
            AlchemyReads(conn), command_ids=command_ids, criteria=criteria, top=top
        )


def compute_stats_conn(
    conn: Reads,
    *,
    command_ids: Iterable[int] | None = None,
    criteria: Criteria | None = None,
    top: int = DEFAULT_TOP,
) -> JournalStats:
    """:func:`compute_stats` inside an open read transaction."""
    if not 0 <= top <= INT64_MAX:
        raise ValueError(f"top must be between 0 and {INT64_MAX}")
    scope = None
    if criteria is not None and not criteria.is_empty():
        scope = matching_ids(conn, criteria)
    if command_ids is None:
        return _stats(conn, [(None, scope)], top, limit_in_sql=True)
    ids = sorted(set(command_ids))
    if not ids:
        return JournalStats()
    parts: list[_Part] = [(ids[s : s + _IN_BATCH], scope) for s in range(0, len(ids), _IN_BATCH)]
    return _stats(conn, parts, top, limit_in_sql=False)


def _restrict(column: str, part: _Part) -> tuple[str, dict[str, Any]]:
    """WHERE terms (each followed by AND, or nothing) limiting ``column``
    (a command id) to one part of the scope, and their parameters."""
    batch, scope = part
    terms: list[str] = []
    params: dict[str, Any] = {}
    if batch is not None:
        marks, params = in_list("id", batch)
        terms.append(f"{column} IN ({marks})")
    if scope is not None:
        terms.append(f"{column} IN ({scope[0]})")
        params.update(scope[1])
    return "".join(f"{term} AND " for term in terms), params


def _stats(conn: Reads, parts: Sequence[_Part], top: int, *, limit_in_sql: bool) -> JournalStats:
    out = JournalStats()
    tally = StatsTally()
    limit = f" LIMIT {int(top)}" if limit_in_sql else ""
    for part in parts:
        where_c, params = _restrict("command.id", part)
        where_w, _ = _restrict("write_event.command_id", part)
        where_r, _ = _restrict("read_event.command_id", part)
        ((n, first, last, nsess),) = conn.rows(
            "SELECT count(command.id), min(command.start_time), max(command.start_time), "
            f"count(DISTINCT command.session_id) FROM command WHERE {where_c}1 = 1",
            params,
        )
        out.commands += n
        if limit_in_sql:
            out.sessions = nsess
        tally.starts(out, conn.time(first), conn.time(last))
        ((count,),) = conn.rows(f"SELECT count(*) FROM write_event WHERE {where_w}1 = 1", params)
        out.written_events += count
        ((count,),) = conn.rows(f"SELECT count(*) FROM read_event WHERE {where_r}1 = 1", params)
        out.read_events += count

        # Commands with most file modifications.
        for cid, count in conn.rows(
            "SELECT write_event.command_id, count(*) AS n FROM write_event "
            f"WHERE {where_w}1 = 1 GROUP BY write_event.command_id "
            f"ORDER BY n DESC, write_event.command_id{limit}",
            params,
        ):
            tally.modifications[cid] += count

        # Sessions with most commands.
        sessions = f"command.session_id IS NOT NULL AND {where_c}1 = 1"
        if not limit_in_sql:
            tally.session_ids.update(
                sid for (sid,) in conn.rows(
                    f"SELECT DISTINCT command.session_id FROM command WHERE {sessions}", params)
            )  # fmt: skip
        for sid, count, lo, hi in conn.rows(
            "SELECT command.session_id, count(*) AS n, min(command.start_time), "
            f"max(command.end_time) FROM command WHERE {sessions} GROUP BY command.session_id "
            f"ORDER BY n DESC, command.session_id{limit}",
            params,
        ):
            tally.session(sid, count, conn.time(lo), conn.time(hi))  # type: ignore[arg-type]

        # Working directories with most commands.
        for path, count in conn.rows(
            "SELECT working_dir.path, per_cwd.n FROM working_dir JOIN (SELECT command.cwd_id "
            f"AS cwd_id, count(*) AS n FROM command WHERE {where_c}1 = 1 GROUP BY "
            "command.cwd_id) AS per_cwd ON per_cwd.cwd_id = working_dir.id "
            f"ORDER BY per_cwd.n DESC, working_dir.path{limit}",
            params,
        ):
            tally.cwds[path] += count

        # Directories with most input/output activity.
        # Every event once: writes, and reads through their read file.
        for did, written, total in conn.rows(
            "SELECT events.directory_id, sum(events.w), count(*) AS n FROM ("
            f"SELECT write_event.directory_id AS directory_id, 1 AS w FROM write_event "
            f"WHERE {where_w}1 = 1 UNION ALL SELECT read_file.directory_id AS directory_id, "
            "0 AS w FROM read_event JOIN read_file ON read_file.id = read_event.read_file_id "
            f"WHERE {where_r}1 = 1) AS events GROUP BY events.directory_id "
            f"ORDER BY n DESC, events.directory_id{limit}",
            params,
        ):
            tally.directory(did, written, total)

        where_x, _ = _restrict("redaction.command_id", part)
        for kind, count in redaction_counts(conn, where_x, params).items():
            out.redactions[kind] = out.redactions.get(kind, 0) + count
    if not limit_in_sql:
        out.sessions = len(tally.session_ids)
    return tally.finish(out, top, conn)


# -- redactions (shournal.redact) ------------------------------------------------------


def redaction_counts(conn: Reads, where: str = "", params: dict[str, Any] | None = None
                     ) -> dict[str, int]:  # fmt: skip
    """The stored redactions summed by kind (``where``: terms on
    ``redaction.command_id``, each followed by AND, see :func:`_restrict`)."""
    rows = conn.rows(
        f"SELECT redaction.kind, sum(redaction.count) FROM redaction WHERE {where}1 = 1 "
        "GROUP BY redaction.kind ORDER BY redaction.kind",
        params,
    )
    return {kind: int(n) for kind, n in rows if n}


def redactions_of(conn: Reads, ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """The stored redaction counts of these commands, by command and kind
    (commands without one left out)."""
    out: dict[int, dict[str, int]] = {}
    for start in range(0, len(ids), 500):
        marks, params = in_list("id", list(ids[start : start + 500]))
        for cid, kind, n in conn.rows(
            f"SELECT command_id, kind, count FROM redaction WHERE command_id IN ({marks})",
            params,
        ):
            if n:
                out.setdefault(int(cid), {})[str(kind)] = int(n)
    return out


def commands_redacted(conn: Reads) -> int:
    """How many commands have a redaction."""
    return int(conn.rows("SELECT count(DISTINCT command_id) FROM redaction")[0][0])


# -- files produced and consumed (shournal stats) --------------------------------------


def compute_usage(
    conn: Reads, *, criteria: Criteria | None = None, top: int = DEFAULT_TOP,
    bucket: str = "day",
) -> UsageStats:  # fmt: skip
    """What the commands matching ``criteria`` (all: None) produced and
    consumed, per ``bucket`` ("hour", "day", "month" of local time), their
    biggest writers, most reused inputs and most used programs; inside an
    open read transaction.

    :raises shournal.store.StoreError: the journal cannot be read.
    """
    if bucket not in _BUCKETS:
        raise ValueError(f"bucket must be one of {', '.join(_BUCKETS)}")
    if not 0 <= top <= INT64_MAX:
        raise ValueError(f"top must be between 0 and {INT64_MAX}")
    return _usage(conn, criteria, top, bucket)


_BUCKETS = ("hour", "day", "month")


def _bucket_start(moment: datetime, bucket: str) -> datetime:
    local = moment.astimezone()
    if bucket == "hour":
        return local.replace(minute=0, second=0, microsecond=0)
    if bucket == "day":
        return local.replace(hour=0, minute=0, second=0, microsecond=0)
    return local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def program_name(word: str) -> str:
    """A command line's first word as the program it names: its file name
    (``./run.sh`` and ``/usr/bin/make`` count as ``run.sh`` and ``make``)."""
    return word.rstrip("/").rsplit("/", 1)[-1] or word


def _usage(conn: Reads, criteria: Criteria | None, top: int, bucket: str) -> UsageStats:
    scope = None
    if criteria is not None and not criteria.is_empty():
        scope = matching_ids(conn, criteria)
    part: _Part = (None, scope)
    where_c, params = _restrict("command.id", part)
    where_w, _ = _restrict("write_event.command_id", part)
    where_r, _ = _restrict("read_event.command_id", part)
    out = UsageStats(bucket=bucket)

    # Per bucket (local time: the database knows no time zone, so by command).
    per_w = dict(conn.rows(
        "SELECT write_event.command_id, count(*) FROM write_event "
        f"WHERE {where_w}1 = 1 GROUP BY write_event.command_id", params))  # fmt: skip
    per_r = dict(conn.rows(
        "SELECT read_event.command_id, count(*) FROM read_event "
        f"WHERE {where_r}1 = 1 GROUP BY read_event.command_id", params))  # fmt: skip
    buckets: dict[datetime, list[int]] = {}
    for cid, start in conn.rows(
        f"SELECT command.id, command.start_time FROM command WHERE {where_c}1 = 1", params
    ):
        b = buckets.setdefault(_bucket_start(conn.time(start), bucket), [0, 0, 0])  # type: ignore[arg-type]
        b[0] += 1
        b[1] += per_w.get(cid, 0)
        b[2] += per_r.get(cid, 0)
    out.series = [UsageBucket(k, *v) for k, v in sorted(buckets.items())]

    # Distinct files (by path) written and read, and the bytes written.
    ((out.produced,),) = conn.rows(
        "SELECT count(*) FROM (SELECT DISTINCT write_event.directory_id, write_event.basename "
        f"FROM write_event WHERE {where_w}1 = 1) AS written_paths",
        params,
    )
    ((written_bytes,),) = conn.rows(
        f"SELECT coalesce(sum(write_event.size), 0) FROM write_event WHERE {where_w}1 = 1",
        params,
    )
    out.written_bytes = int(written_bytes)
    ((out.consumed,),) = conn.rows(
        "SELECT count(*) FROM (SELECT DISTINCT read_file.directory_id, read_file.basename "
        "FROM read_file JOIN read_event ON read_event.read_file_id = read_file.id "
        f"WHERE {where_r}1 = 1) AS read_paths",
        params,
    )

    # The biggest writers, by files and by bytes (ties: the smaller id).
    grouped = (
        "SELECT write_event.command_id, count(*) AS files, "
        "coalesce(sum(write_event.size), 0) AS bytes FROM write_event "
        f"WHERE {where_w}1 = 1 GROUP BY write_event.command_id"
    )
    top_params = {**params, "top": top}
    by_files = conn.rows(f"{grouped} ORDER BY files DESC, write_event.command_id LIMIT :top",
                         top_params)  # fmt: skip
    by_bytes = conn.rows(f"{grouped} ORDER BY bytes DESC, write_event.command_id LIMIT :top",
                         top_params)  # fmt: skip
    wanted = sorted({r[0] for r in (*by_files, *by_bytes)})
    texts: dict[int, str] = {}
    if wanted:
        marks, id_params = in_list("id", wanted)
        texts = dict(conn.rows(f"SELECT id, text FROM command WHERE id IN ({marks})", id_params))
    out.writers_by_files = [WriterEntry(r[0], texts[r[0]], r[1], int(r[2])) for r in by_files]
    out.writers_by_bytes = [WriterEntry(r[0], texts[r[0]], r[1], int(r[2])) for r in by_bytes]

    # The inputs most commands read: by path, over all its versions.
    rows = conn.rows(
        "SELECT read_file.directory_id, read_file.basename, "
        "count(DISTINCT read_event.command_id) AS n FROM read_file "
        "JOIN read_event ON read_event.read_file_id = read_file.id "
        f"WHERE {where_r}1 = 1 GROUP BY read_file.directory_id, read_file.basename "
        "ORDER BY n DESC, read_file.directory_id, read_file.basename LIMIT :top",
        top_params,
    )
    dirs: dict[int, bytes] = {}
    if rows:
        marks, id_params = in_list("id", sorted({r[0] for r in rows}))
        dirs = dict(conn.rows(f"SELECT id, path FROM directory WHERE id IN ({marks})",
                              id_params))  # fmt: skip
    out.reused_inputs = [InputEntry(bytes(dirs[d]) + bytes(b), n) for d, b, n in rows]

    # The most used programs: the first word, cut in SQL (a row per
    # distinct word, not per command), merged by file name here.
    if conn.dialect == "sqlite":
        first = "substr(ltrim(command.text), 1, instr(ltrim(command.text) || ' ', ' ') - 1)"
    else:
        first = "split_part(ltrim(command.text), ' ', 1)"
    counts: dict[str, int] = {}
    for word, n in conn.rows(
        f"SELECT {first} AS word, count(*) FROM command WHERE {where_c}1 = 1 GROUP BY word",
        params,
    ):
        name = program_name(word.split("\n", 1)[0].split("\t", 1)[0])
        if name:
            counts[name] = counts.get(name, 0) + n
    out.programs = [
        ProgramEntry(p, n) for p, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    ]
    return out
