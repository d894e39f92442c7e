"""``shournal delete``: remove commands (and everything only they
referenced) from the journal.

Exit codes: 0 deleted (or, with --dry-run, something would be); 1 nothing
matches, no journal yet, or the prompt was declined; 2 usage error (no
criterion, unparsable age or date, bad session id, stdin not a terminal
without --yes); 3 the journal cannot be used.  Nothing changes on any error.
The criteria are those of ``shournal query`` (:mod:`shournal.criteria`).
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from shournal.cli import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE
from shournal.cli._common import check_files, errors_to_status, fail, note, open_journal
from shournal.cli._options import CommandText, Cwd, LineageOf, SessionId, Until, int_option, option

if TYPE_CHECKING:
    from shournal.deletion import CommandSummary, DeleteResult

# Commands listed before the confirmation prompt (all with --dry-run).
_PROMPT_LIST = 20


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def _command_line(cmd: CommandSummary) -> str:
    started = cmd.start_time.astimezone().strftime("%Y-%m-%d %H:%M")
    from shournal.terminal import printable

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
    if result.archive_blobs:
        line += " Freed " + _archive_bytes(result.archive_bytes, result.archive_blobs) + "."
    return line


def _archive_bytes(size: int, blobs: int) -> str:
    return f"{size} bytes of the apparatus archive ({_plural(blobs, 'archived blob')})"


def delete(
    command_id: Annotated[
        list[int] | None,
        int_option("--command-id", metavar="ID",
                   help="Delete the command with this id (repeatable)."),
    ] = None,
    session_id: SessionId = None,
    cwd: Cwd = None,
    command_text: CommandText = None,
    older_than: Annotated[
        str | None,
        option(
            "--older-than",
            "Commands started longer ago than this: N and a unit y, m (months), w, d, h, "
            "min, s (e.g. 1y, 3d, 2h).",
            "AGE",
        ),
    ] = None,
    until: Until = None,
    lineage_of: LineageOf = None,
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
    from shournal.criteria import parse_criteria
    from shournal.deletion import NO_CRITERIA, DeleteError
    from shournal.provenance import resolve_lineage

    # Usage errors first: a refused deletion must not touch the journal.
    with errors_to_status():
        # Relative ages are resolved once: the set of commands does not grow
        # while the user confirms.
        criteria = parse_criteria(
            command_id=command_id or None,
            session_id=session_id,
            cwd=cwd,
            command_text=command_text,
            older_than=older_than,
            until=until,
            lineage_of=lineage_of,
            now=datetime.now().astimezone(),
        )
        check_files(lineage_of)
        if criteria.is_empty():
            raise DeleteError(NO_CRITERIA)
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    if not (dry_run or yes or interactive):
        fail(
            "refusing to delete without confirmation: stdin is not a terminal (use --yes)",
            EXIT_USAGE,
        )

    with errors_to_status(missing="nothing to delete: "), open_journal(read_only=False) as journal:
        criteria = resolve_lineage(journal, criteria)
        if yes and not dry_run:
            result = journal.delete(criteria)
            if result.commands == 0:
                fail("no commands match the criteria; nothing deleted", EXIT_NOT_FOUND)
            _report(result)
        plan = journal.plan_delete(criteria)
        if not plan.commands:
            fail("no commands match the criteria; nothing deleted", EXIT_NOT_FOUND)
        totals = f"{_plural(len(plan.commands), 'command')} and " + _plural(
            plan.event_count, "file event"
        )
        if plan.archive_blobs:
            totals += ", and free " + _archive_bytes(plan.archive_bytes, plan.archive_blobs)
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
            fail("nothing deleted", EXIT_NOT_FOUND)
        # Exactly what was shown: commands stored meanwhile are kept.
        result = journal.delete(criteria, only_ids=plan.command_ids)
    _report(result)


def _report(result: DeleteResult) -> NoReturn:
    typer.echo(_summary(result))
    if result.archive_kept:
        note(result.archive_kept)
    raise typer.Exit(EXIT_OK)
