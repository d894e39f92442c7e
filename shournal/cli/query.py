"""``shournal query``: find commands and the files they read and wrote.

Exit codes: 0 something found, 1 nothing found, 2 usage error (bad
option, missing file, bad session id), 3 the journal cannot be used.
Registered by the CLI package with ``app.command("query")(query)``.
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer

EXIT_FOUND = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_STORE = 3

HUMAN_MAX_FILES = 10


class OutputFormat(StrEnum):
    human = "human"
    json = "json"


def _fail(message: str, code: int) -> NoReturn:
    # One line, whatever the exception text looked like.
    typer.echo(f"shournal: {' '.join(message.split())}", err=True)
    raise typer.Exit(code)


def _write(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # `shournal query ... | head`: the reader is gone; exit quietly
        # instead of failing again when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def query(
    wfile: Annotated[
        Path | None,
        typer.Option(
            "--wfile",
            help="Commands that wrote this file's content (matched by size, hash "
            "and mtime, not by name: renamed files are found).",
            show_default=False,
        ),
    ] = None,
    rfile: Annotated[
        Path | None,
        typer.Option(
            "--rfile",
            help="Commands that read this file's content (matched like --wfile).",
            show_default=False,
        ),
    ] = None,
    history: Annotated[
        int | None,
        typer.Option(
            "--history",
            min=0,
            help="Only the last N matching commands by start time; alone, the last N commands.",
            show_default=False,
        ),
    ] = None,
    command_text: Annotated[
        str | None,
        typer.Option(
            "--command-text",
            help="Command line matches this text; % is a wildcard (e.g. '%make%').",
            show_default=False,
        ),
    ] = None,
    cwd: Annotated[
        str | None,
        typer.Option(
            "--cwd",
            help="Working directory equals this path, or matches it when it contains %.",
            show_default=False,
        ),
    ] = None,
    session_id: Annotated[
        str | None,
        typer.Option(
            "--session-id",
            help="Shell session id as printed (base64), or as a UUID.",
            show_default=False,
        ),
    ] = None,
    command_id: Annotated[
        int | None,
        typer.Option("--command-id", help="The command with this id.", show_default=False),
    ] = None,
    output_format: Annotated[
        OutputFormat,
        typer.Option("--output-format", help="human or json (one JSON array)."),
    ] = OutputFormat.human,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", min=0, help="At most N commands (the oldest matches).", show_default=False
        ),
    ] = None,
) -> None:
    """Find commands by the files they wrote or read, their text, directory,
    session or id."""
    filters = (wfile, rfile, command_text, cwd, session_id, command_id)
    if history is None and all(f is None for f in filters):
        _fail("empty query: give a filter (e.g. --wfile FILE) or --history N", EXIT_USAGE)

    from shournal.query import (
        QueryError,
        check_file,
        find_commands,
        session_id_bytes,
        wait_for_pending,
    )
    from shournal.store import Store, StoreError, StoreMissing, db_url

    try:
        # Usage errors first: a failing query must not touch the journal.
        for path in (wfile, rfile):
            if path is not None:
                check_file(path)
        if session_id is not None:
            session_id_bytes(session_id)
    except QueryError as e:
        _fail(str(e), EXIT_USAGE)

    # A command that just finished may still be on its way into the journal.
    pending = wait_for_pending()
    human = output_format is OutputFormat.human
    missing = ""
    try:
        with Store(db_url(), create=False) as store:
            commands = find_commands(
                store,
                wfile=wfile,
                rfile=rfile,
                history=history,
                command_text=command_text,
                cwd=cwd,
                session_id=session_id,
                command_id=command_id,
                limit=limit,
                max_files=HUMAN_MAX_FILES if human else None,
            )
    except QueryError as e:
        _fail(str(e), EXIT_USAGE)
    except StoreMissing as e:
        commands, missing = [], str(e)
    except StoreError as e:
        _fail(str(e), EXIT_STORE)

    if human:
        from shournal.render.human import NO_RESULTS, render_human

        if commands:
            _write(render_human(commands, max_files=HUMAN_MAX_FILES))
        else:
            lines = [
                NO_RESULTS,
                "Hint: --wfile/--rfile match a file's content (size, hash, mtime), not its "
                "name; --history 10 lists the latest commands.",
            ]
            if missing:
                lines.append(f"Nothing has been recorded yet: {missing}.")
            if pending:
                lines.append(
                    f"Note: {pending} finished command(s) were still being stored; "
                    "try again in a moment."
                )
            _write("\n".join(lines) + "\n")
    else:
        from shournal.render.json import render_json

        _write(render_json(commands))
    raise typer.Exit(EXIT_FOUND if commands else EXIT_NOT_FOUND)
