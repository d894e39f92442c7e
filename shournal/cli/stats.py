"""``shournal stats``: the statistics sections on their own.

Registered by the CLI package with ``app.command("stats")(stats)``.
Exit statuses as ``shournal query``: 0 something counted, 1 nothing
recorded (in the chosen scope), 2 usage error, 3 journal unusable.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from shournal.cli import EXIT_FOUND, EXIT_NOT_FOUND
from shournal.cli._common import HumanOrJson, check_files, errors_to_status, open_journal, write

if TYPE_CHECKING:

    from shournal.cli._options import (
        Cwd,
        Host,
        HumanOrJsonFormat,
        LineageOf,
        SessionId,
        Since,
        Tag,
        Until,
        User,
        int_option,
        option,
    )


def stats(
    top: Annotated[int, int_option("--top", low=1, help="Entries per section.")] = 10,
    since: Since = None,
    until: Until = None,
    cwd: Cwd = None,
    session_id: SessionId = None,
    host: Host = None,
    user: User = None,
    lineage_of: LineageOf = None,
    tag: Tag = None,
    period: Annotated[
        str | None,
        option("--period", "Only this period: today, week (since Monday), month, year, or a "
               "date (2026-05-01); files produced and consumed per hour, day or month.",
               "PERIOD"),
    ] = None,
    output_format: HumanOrJsonFormat = HumanOrJson.human,
) -> None:
    """Files produced and consumed (per period), the biggest writers, the
    most reused inputs, the most used programs; commands with most file
    modifications, sessions with most commands, busiest working
    directories and directories, and totals."""
    from dataclasses import replace

    from shournal.criteria import parse_criteria, parse_period
    from shournal.data import JournalStats, Period, QueryError, UsageStats
    from shournal.errors import StoreMissing
    from shournal.provenance import resolve_lineage

    with errors_to_status():
        criteria = parse_criteria(
            since=since, until=until, cwd=cwd, session_id=session_id, host=host, user=user,
            lineage_of=lineage_of, tag=tag or None,
        )  # fmt: skip
        bucket = "month"
        if period is not None:
            if since is not None or until is not None:
                raise QueryError("--period and --since/--until exclude each other")
            span, bucket = parse_period(period)
            criteria = replace(
                criteria,
                since=Period(span.start_ns, span.start_ns + 1),
                until=Period(span.end_ns - 1, span.end_ns),
            )
        elif since is not None or until is not None:
            bucket = "day"
        check_files(lineage_of)
        try:
            journal = open_journal()
        except StoreMissing:
            result, usage = JournalStats(), UsageStats(bucket=bucket)
        else:
            with journal:
                criteria = resolve_lineage(journal, criteria)
                result = journal.stats(criteria, top=top)
                usage = journal.usage(criteria, top=top, bucket=bucket)
    from shournal.report.usage import render_usage, usage_object

    if output_format is HumanOrJson.json:
        obj = {**stats_object(result), "usage": usage_object(usage)}
        write(json.dumps(obj, ensure_ascii=True, indent=1) + "\n")
    else:
        from shournal.report.human import render_stats, use_color

        text = render_stats(result, min_count=1, max_count=top, totals=True, color=use_color())
        # what no shell history knows first, then the original's sections
        write(render_usage(usage, top=top) + text if result.commands else text)
    raise SystemExit(EXIT_FOUND if result.commands else EXIT_NOT_FOUND)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="microseconds")


def stats_object(s: Any) -> dict[str, Any]:
    """JournalStats as JSON-ready values (paths via os.fsdecode, session
    ids base64, times ISO UTC)."""
    import base64
    import os

    return {
        "commands": s.commands,
        "sessions": s.sessions,
        "writtenEvents": s.written_events,
        "readEvents": s.read_events,
        "firstStart": _iso(s.first_start),
        "lastStart": _iso(s.last_start),
        "mostModifications": [
            {"id": e.command_id, "command": e.text, "written": e.written}
            for e in s.most_modifications
        ],
        "sessionsMostCommands": [
            {
                "sessionUuid": base64.b64encode(e.session_uuid).decode(),
                "commands": e.commands,
                "firstStart": _iso(e.first_start),
                "lastEnd": _iso(e.last_end),
            }
            for e in s.sessions_most_commands
        ],
        "busiestWorkingDirs": [
            {"path": e.path, "commands": e.commands} for e in s.busiest_working_dirs
        ],
        "busiestDirectories": [
            {"path": os.fsdecode(e.path), "written": e.written, "read": e.read}
            for e in s.busiest_directories
        ],
        "redactions": dict(sorted(s.redactions.items())),
    }
