"""Statistics of the journal (the original's four sections, plus totals).

:func:`compute_stats` is the library entry point; the human output of
``shournal query``, ``shournal stats`` and the HTML report all render the
same :class:`JournalStats`.  Everything is counted in SQL (GROUP BY), so the
whole journal of 10^7 file events is summarised without loading it.

Scope: the whole journal, the commands matching a
:class:`shournal.data.Criteria`, or an explicit list of command ids (the
commands a query found).  Ties are broken by the smaller id or path so the
result is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shournal.data import (
    DEFAULT_TOP,
    INT64_MAX,
    Criteria,
    InputEntry,
    JournalStats,
    ProgramEntry,
    UsageBucket,
    UsageStats,
    WriterEntry,
)
from shournal.store.light import StatsTally

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from shournal.store.db import Store

_IN_BATCH = 500


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
    with store.reading() as conn:
        return compute_stats_conn(conn, command_ids=command_ids, criteria=criteria, top=top)


def compute_stats_conn(
    conn: Connection,
    *,
    command_ids: Iterable[int] | None = None,
    criteria: Criteria | None = None,
    top: int = DEFAULT_TOP,
) -> JournalStats:
    """:func:`compute_stats` inside an open read transaction."""
    from shournal.store.reader import matching_ids

    if not 0 <= top <= INT64_MAX:
        raise ValueError(f"top must be between 0 and {INT64_MAX}")
    scope: Any = None
    if criteria is not None and not criteria.is_empty():
        scope = matching_ids(conn, criteria).scalar_subquery()
    if command_ids is None:
        return _stats(conn, [scope], top, limit_in_sql=True)
    ids = sorted(set(command_ids))
    batches: list[Any] = []
    for start in range(0, len(ids), _IN_BATCH):
        batches.append((ids[start : start + _IN_BATCH], scope))
    if not batches:
        return JournalStats()
    return _stats(conn, batches, top, limit_in_sql=False)


def _restrict(column: Any, part: Any) -> list[Any]:
    """WHERE terms limiting ``column`` (a command id) to one scope part:
    None (everything), a subquery, or (id batch, subquery or None)."""
    if part is None:
        return []
    if isinstance(part, tuple):
        batch, sub = part
        terms = [column.in_(batch)]
        if sub is not None:
            terms.append(column.in_(sub))
        return terms
    return [column.in_(part)]


def _stats(conn: Connection, parts: Sequence[Any], top: int, *, limit_in_sql: bool) -> JournalStats:
    from sqlalchemy import func, literal, select, union_all

    from shournal.store import models as m
    from shournal.store.redaction import counts_by_kind

    c, we, re_, rf = m.Command, m.WriteEvent, m.ReadEvent, m.ReadFile
    out = JournalStats()
    tally = StatsTally()
    limit = top if limit_in_sql else None
    for part in parts:
        where_c = _restrict(c.id, part)
        where_w = _restrict(we.command_id, part)
        where_r = _restrict(re_.command_id, part)
        n, first, last, nsess = conn.execute(
            select(
                func.count(c.id),
                func.min(c.start_time),
                func.max(c.start_time),
                func.count(func.distinct(c.session_id)),
            ).where(*where_c)
        ).one()
        out.commands += n
        if limit_in_sql:
            out.sessions = nsess
        tally.starts(out, first, last)
        out.written_events += conn.execute(
            select(func.count()).select_from(we).where(*where_w)
        ).scalar_one()
        out.read_events += conn.execute(
            select(func.count()).select_from(re_).where(*where_r)
        ).scalar_one()

        # Commands with most file modifications.
        cnt = func.count().label("n")
        q = (
            select(we.command_id, cnt)
            .where(*where_w)
            .group_by(we.command_id)
            .order_by(cnt.desc(), we.command_id)
        )
        q = q.limit(limit) if limit is not None else q
        for cid, count in conn.execute(q):
            tally.modifications[cid] += count

        # Sessions with most commands.
        cnt = func.count().label("n")
        q = (
            select(c.session_id, cnt, func.min(c.start_time), func.max(c.end_time))
            .where(c.session_id.is_not(None), *where_c)
            .group_by(c.session_id)
            .order_by(cnt.desc(), c.session_id)
        )
        if limit_in_sql:
            q = q.limit(limit)
        else:
            tally.session_ids.update(
                conn.execute(
                    select(c.session_id).where(c.session_id.is_not(None), *where_c).distinct()
                ).scalars()
            )
        for sid, count, lo, hi in conn.execute(q):
            tally.session(sid, count, lo, hi)

        # Working directories with most commands.
        per_cwd = (
            select(c.cwd_id, func.count().label("n"))
            .where(*where_c)
            .group_by(c.cwd_id)
            .subquery()
        )
        wd = m.WorkingDir
        q = (
            select(wd.path, per_cwd.c.n)
            .join(per_cwd, per_cwd.c.cwd_id == wd.id)
            .order_by(per_cwd.c.n.desc(), wd.path)
        )
        q = q.limit(limit) if limit is not None else q
        for path, count in conn.execute(q):
            tally.cwds[path] += count

        # Directories with most input/output activity.
        # Every event once: writes, and reads through their read file.
        events = union_all(
            select(we.directory_id, literal(1).label("w")).where(*where_w),
            select(rf.directory_id, literal(0).label("w"))
            .select_from(re_)
            .join(rf, rf.id == re_.read_file_id)
            .where(*where_r),
        ).subquery()
        cnt = func.count().label("n")
        written = func.sum(events.c.w)
        q = (
            select(events.c.directory_id, written, cnt)
            .group_by(events.c.directory_id)
            .order_by(cnt.desc(), events.c.directory_id)
        )
        q = q.limit(limit) if limit is not None else q
        for did, w, total in conn.execute(q):
            tally.directory(did, w, total)

        for kind, count in counts_by_kind(conn, _restrict(m.Redaction.command_id, part)).items():
            out.redactions[kind] = out.redactions.get(kind, 0) + count
    if not limit_in_sql:
        out.sessions = len(tally.session_ids)

    def by_id(table: str, column: str, wanted: list[Any]) -> dict[Any, Any]:
        t = m.Base.metadata.tables[table]
        return dict(conn.execute(select(t.c.id, t.c[column]).where(t.c.id.in_(wanted))).all())

    return tally.finish(out, top, by_id)


# -- files produced and consumed (shournal stats) --------------------------------------


def compute_usage(
    store: Store, *, criteria: Criteria | None = None, top: int = DEFAULT_TOP,
    bucket: str = "day",
) -> UsageStats:  # fmt: skip
    """What the commands matching ``criteria`` (all: None) produced and
    consumed, per ``bucket`` ("hour", "day", "month" of local time), their
    biggest writers, most reused inputs and most used programs.

    :raises shournal.store.StoreError: the journal cannot be read.
    """
    if bucket not in _BUCKETS:
        raise ValueError(f"bucket must be one of {', '.join(_BUCKETS)}")
    if not 0 <= top <= INT64_MAX:
        raise ValueError(f"top must be between 0 and {INT64_MAX}")
    with store.reading() as conn:
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


def _usage(conn: Connection, criteria: Criteria | None, top: int, bucket: str) -> UsageStats:
    from sqlalchemy import distinct, func, select

    from shournal.store import models as m
    from shournal.store.reader import matching_ids

    c, we, re_, rf = m.Command, m.WriteEvent, m.ReadEvent, m.ReadFile
    scope: Any = None
    if criteria is not None and not criteria.is_empty():
        scope = matching_ids(conn, criteria).scalar_subquery()
    where_c = _restrict(c.id, scope)
    where_w = _restrict(we.command_id, scope)
    where_r = _restrict(re_.command_id, scope)
    out = UsageStats(bucket=bucket)

    # Per bucket (local time: the database knows no time zone, so by command).
    per_w = dict(
        conn.execute(select(we.command_id, func.count()).where(*where_w).group_by(we.command_id))
        .all()
    )  # fmt: skip
    per_r = dict(
        conn.execute(select(re_.command_id, func.count()).where(*where_r).group_by(re_.command_id))
        .all()
    )  # fmt: skip
    buckets: dict[datetime, list[int]] = {}
    for cid, start in conn.execute(select(c.id, c.start_time).where(*where_c)):
        b = buckets.setdefault(_bucket_start(start, bucket), [0, 0, 0])
        b[0] += 1
        b[1] += per_w.get(cid, 0)
        b[2] += per_r.get(cid, 0)
    out.series = [UsageBucket(k, *v) for k, v in sorted(buckets.items())]

    # Distinct files (by path) written and read, and the bytes written.
    written_paths = select(we.directory_id, we.basename).where(*where_w).distinct().subquery()
    out.produced = conn.execute(select(func.count()).select_from(written_paths)).scalar_one()
    out.written_bytes = int(
        conn.execute(select(func.coalesce(func.sum(we.size), 0)).where(*where_w)).scalar_one()
    )
    read_paths = (
        select(rf.directory_id, rf.basename)
        .join(re_, re_.read_file_id == rf.id)
        .where(*where_r)
        .distinct()
        .subquery()
    )
    out.consumed = conn.execute(select(func.count()).select_from(read_paths)).scalar_one()

    # The biggest writers, by files and by bytes (ties: the smaller id).
    files, size = func.count().label("files"), func.coalesce(func.sum(we.size), 0).label("bytes")
    grouped = select(we.command_id, files, size).where(*where_w).group_by(we.command_id)
    by_files = conn.execute(grouped.order_by(files.desc(), we.command_id).limit(top)).all()
    by_bytes = conn.execute(grouped.order_by(size.desc(), we.command_id).limit(top)).all()
    wanted = sorted({r[0] for r in (*by_files, *by_bytes)})
    texts = dict(conn.execute(select(c.id, c.text).where(c.id.in_(wanted))).all())
    out.writers_by_files = [WriterEntry(r[0], texts[r[0]], r[1], int(r[2])) for r in by_files]
    out.writers_by_bytes = [WriterEntry(r[0], texts[r[0]], r[1], int(r[2])) for r in by_bytes]

    # The inputs most commands read: by path, over all its versions.
    readers = func.count(distinct(re_.command_id)).label("n")
    rows = conn.execute(
        select(rf.directory_id, rf.basename, readers)
        .join(re_, re_.read_file_id == rf.id)
        .where(*where_r)
        .group_by(rf.directory_id, rf.basename)
        .order_by(readers.desc(), rf.directory_id, rf.basename)
        .limit(top)
    ).all()
    dirs = dict(
        conn.execute(
            select(m.Directory.id, m.Directory.path).where(
                m.Directory.id.in_(sorted({r[0] for r in rows}))
            )
        ).all()
    )  # fmt: skip
    out.reused_inputs = [InputEntry(bytes(dirs[d]) + bytes(b), n) for d, b, n in rows]

    # The most used programs: the first word, cut in SQL (a row per
    # distinct word, not per command), merged by file name here.
    text = func.ltrim(c.text)
    if conn.dialect.name == "sqlite":
        first = func.substr(text, 1, func.instr(text + " ", " ") - 1)
    else:
        first = func.split_part(text, " ", 1)
    counts: dict[str, int] = {}
    for word, n in conn.execute(select(first, func.count()).where(*where_c).group_by(first)):
        name = program_name(word.split("\n", 1)[0].split("\t", 1)[0])
        if name:
            counts[name] = counts.get(name, 0) + n
    out.programs = [
        ProgramEntry(p, n) for p, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    ]
    return out
