"""``shournal delete``: remove commands (and everything only they
referenced) from the journal.

Exit codes: 0 deleted (or, with --dry-run, something would be); 1 nothing
matches, no journal yet, or the prompt was declined; 2 usage error (no
criterion, unparsable age or date, bad session id, stdin not a terminal
without --yes); 3 the journal cannot be used.  Nothing changes on any error.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from shournal.maintenance import CommandSummary, DeleteResult

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_STORE = 3

# Commands listed before the confirmation prompt (all with --dry-run).
_PROMPT_LIST = 20


def _fail(message: str, code: int) -> NoReturn:
    from shournal.render.human import printable

    # Messages may quote journal text (paths, names): never raw controls.
    typer.echo(f"shournal: {printable(' '.join(message.split()))}", err=True)
    raise typer.Exit(code)


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def _command_line(cmd: CommandSummary) -> str:
    started = cmd.start_time.astimezone().strftime("%Y-%m-%d %H:%M")
    from shournal.render.human import printable

    text = printable(cmd.text.replace("\n", "\\n"))
    return f"cmd-id {cmd.id} {started} {printable(cmd.working_dir)} $ {text}"


def _summary(result: DeleteResult) -> str:
    line = (
        f"Deleted {_plural(result.commands, 'command')} and {_plural(result.events, 'file event')}."
    )
    names = {
        "directory": ("directory", "directories"),
        "content": ("archived file", None),
        "shell_session": ("session", None),
    }
    collected = [
        _plural(result.collected.get(key, 0), word, plural)
        for key, (word, plural) in names.items()
        if result.collected.get(key, 0)
    ]
    if collected:
        line += f" Removed {', '.join(collected)} no longer referenced."
    return line


def delete(
    command_id: Annotated[
        list[int] | None,
        typer.Option(
            "--command-id", metavar="ID", help="Delete the command with this id (repeatable)."
        ),
    ] = None,
    session_id: Annotated[
        str | None,
        typer.Option(
            "--session-id",
            metavar="ID",
            help="Commands of this shell session (base64 as printed, or a UUID).",
            show_default=False,
        ),
    ] = None,
    cwd: Annotated[
        str | None,
        typer.Option(
            "--cwd",
            metavar="DIR",
            help="Working directory equals this path, or matches it when it contains %.",
            show_default=False,
        ),
    ] = None,
    command_text: Annotated[
        str | None,
        typer.Option(
            "--command-text",
            metavar="TEXT",
            help="Command line matches this text; % is a wildcard (e.g. '%secret%').",
            show_default=False,
        ),
    ] = None,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Commands started longer ago than this: N and a unit y, m (months), w, d, h, "
            "min, s (e.g. 1y, 3d, 2h).",
            show_default=False,
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            metavar="DATE",
            help="Commands started before this ISO date or time (local time unless a zone "
            "is given), e.g. 2024-01-31 or 2024-01-31T14:00.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Only list what would be deleted."),
    ] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes", "-y", help="Do not ask for confirmation (needed when not on a terminal)."
        ),
    ] = False,
) -> None:
    """Delete commands matching all given criteria, their file events, and
    the paths, archived files and sessions nothing references any more."""
    from shournal.maintenance import (
        DeleteError,
        delete_commands,
        make_criteria,
        plan_delete,
    )
    from shournal.store import Store, StoreError, StoreMissing, db_url

    # Usage errors first: a refused deletion must not touch the journal.
    try:
        criteria = make_criteria(
            command_ids=command_id or (),
            session_id=session_id,
            cwd=cwd,
            command_text=command_text,
            older_than=older_than,
            until=until,
            now=datetime.now().astimezone(),
        )
    except DeleteError as e:
        _fail(str(e), EXIT_USAGE)
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    if not (dry_run or yes or interactive):
        _fail("refusing to delete without confirmation: stdin is not a terminal (use --yes)", 2)

    try:
        with Store(db_url(), create=False) as store:
            if yes and not dry_run:
                result = delete_commands(store, criteria)
                if result.commands == 0:
                    _fail("no commands match the criteria; nothing deleted", EXIT_NOT_FOUND)
                typer.echo(_summary(result))
                raise typer.Exit(EXIT_OK)
            plan = plan_delete(store, criteria)
            if not plan.commands:
                _fail("no commands match the criteria; nothing deleted", EXIT_NOT_FOUND)
            totals = f"{_plural(len(plan.commands), 'command')} and " + _plural(
                plan.event_count, "file event"
            )
            if dry_run:
                for cmd in plan.commands:
                    typer.echo(_command_line(cmd))
                typer.echo(f"Would delete {totals} (dry run, nothing deleted).")
                raise typer.Exit(EXIT_OK)
            for cmd in plan.commands[:_PROMPT_LIST]:
                typer.echo(_command_line(cmd), err=True)
            if len(plan.commands) > _PROMPT_LIST:
                typer.echo(f"... and {len(plan.commands) - _PROMPT_LIST} more.", err=True)
            try:
                confirmed = typer.confirm(f"Delete {totals}?", default=False, err=True)
            except typer.Abort:
                typer.echo("", err=True)
                confirmed = False
            if not confirmed:
                _fail("nothing deleted", EXIT_NOT_FOUND)
            # Exactly what was shown: commands stored meanwhile are kept.
            result = delete_commands(store, criteria, only_ids=plan.command_ids)
    except StoreMissing as e:
        _fail(f"nothing to delete: {e}", EXIT_NOT_FOUND)
    except StoreError as e:
        _fail(str(e), EXIT_STORE)
    typer.echo(_summary(result))
    raise typer.Exit(EXIT_OK)
