"""``shournal stats``: the statistics sections on their own.

Registered by the CLI package with ``app.command("stats")(stats)``.
Exit statuses as ``shournal query``: 0 something counted, 1 nothing
recorded (in the chosen scope), 2 usage error, 3 journal unusable.
"""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

import typer

from shournal.cli.query import EXIT_FOUND, EXIT_NOT_FOUND, EXIT_STORE, EXIT_USAGE, _fail, _write


class StatsFormat(StrEnum):
    human = "human"
    json = "json"


def _opt(flag: str, help: str, metavar: str) -> Any:
    return typer.Option(flag, help=help, show_default=False, metavar=metavar)


def stats(
    top: Annotated[int, typer.Option("--top", min=1, help="Entries per section.")] = 10,
    since: Annotated[
        str | None, _opt("--since", "Only commands started since (2024-05-01, 3d...).", "TIME")
    ] = None,
    until: Annotated[
        str | None, _opt("--until", "Only commands started until (a date: that whole day).", "TIME")
    ] = None,
    cwd: Annotated[
        str | None, _opt("--cwd", "Only commands run in this directory (% wildcard).", "DIR")
    ] = None,
    session_id: Annotated[
        str | None, _opt("--session-id", "Only this shell session (base64 or UUID).", "ID")
    ] = None,
    host: Annotated[str | None, _opt("--host", "Only commands from this host.", "NAME")] = None,
    user: Annotated[str | None, _opt("--user", "Only commands of this user.", "NAME")] = None,
    output_format: Annotated[
        StatsFormat, typer.Option("--output-format", help="human or json.")
    ] = StatsFormat.human,
) -> None:
    """Commands with most file modifications, sessions with most commands,
    busiest working directories and directories, and totals."""
    from shournal.query import QueryError, parse_criteria
    from shournal.store import Store, StoreError, StoreMissing, db_url

    try:
        criteria = parse_criteria(
            since=since, until=until, cwd=cwd, session_id=session_id, host=host, user=user
        )
    except QueryError as e:
        _fail(str(e), EXIT_USAGE)
    from shournal.stats import JournalStats, compute_stats

    try:
        with Store(db_url(), create=False) as store:
            result = compute_stats(store, criteria=criteria, top=top)
    except StoreMissing:
        result = JournalStats()
    except StoreError as e:
        _fail(str(e), EXIT_STORE)
    if output_format is StatsFormat.json:
        _write(json.dumps(stats_object(result), ensure_ascii=True, indent=1) + "\n")
    else:
        from shournal.render.human import render_stats, use_color

        _write(render_stats(result, min_count=1, max_count=top, totals=True, color=use_color()))
    raise typer.Exit(EXIT_FOUND if result.commands else EXIT_NOT_FOUND)


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
    }
