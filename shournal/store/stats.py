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
from typing import TYPE_CHECKING, Any

from shournal.data import (
    DEFAULT_TOP,
    INT64_MAX,
    Criteria,
    JournalStats,
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
