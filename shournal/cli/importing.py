"""``shournal import FORMAT [PATH]``: bring in the history people already
have (bash, zsh, atuin, the original shournal, hishtory).

Exit codes: 0 imported (or all already stored); 2 the file is missing,
unreadable, of another format, damaged or of a newer version, or no PATH
where the format has no default; 3 the journal cannot be used.  Nothing is
stored on any error (one transaction).  The parsers are
:mod:`shournal.importers`; the journal's writer is the recorder's.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from shournal.cli import EXIT_USAGE
from shournal.cli._common import errors_to_status, fail, note


class Format(StrEnum):
    bash = "bash"
    zsh = "zsh"
    atuin = "atuin"
    shournal = "shournal"
    hishtory = "hishtory"


def _plural(n: int) -> str:
    return f"{n} command{'' if n == 1 else 's'}"


def import_history(
    fmt: Annotated[
        Format,
        typer.Argument(
            metavar="FORMAT",
            help="bash, zsh, atuin (history.db), shournal (the original's database.db) "
            "or hishtory (its `hishtory export-json` output).",
        ),
    ],
    path: Annotated[
        Path | None,
        typer.Argument(
            help="The history to import (default: $HISTFILE or ~/.bash_history, "
            "~/.zsh_history, ~/.local/share/atuin/history.db, "
            "~/.local/share/shournal/database.db; hishtory: required).",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Only say how many would be imported; store nothing."),
    ] = False,
) -> None:
    """Import a history: each entry becomes a command marked as imported
    from FORMAT; entries already imported are skipped."""
    from shournal.config import load_config
    from shournal.importers import default_path, read_history, redacted
    from shournal.redact import patterns_for
    from shournal.terminal import printable

    if path is None:
        path = default_path(fmt.value)
        if path is None:
            fail(f"import {fmt.value} needs the PATH of the file to import", EXIT_USAGE)
    history = read_history(fmt.value, path)
    # Secrets in what is brought in are kept no more than in what is recorded.
    records = redacted(history.records, patterns_for(load_config(create=False).redact.patterns))
    with errors_to_status():
        from shournal.errors import StoreMissing
        from shournal.journal import Journal

        try:
            # (a dry run creates no journal: with none, all would be new)
            with Journal.open(create=not dry_run, read_only=dry_run) as journal:
                stored, skipped = journal.add_imported(records, dry_run=dry_run)
        except StoreMissing:
            if not dry_run:
                raise
            stored, skipped = len(records), 0
    for line in history.notes:
        note(line)
    done = "would import" if dry_run else "imported"
    typer.echo(
        f"{done} {_plural(stored)}, skipped {skipped} already stored, "
        f"from {printable(str(path))} ({fmt.value})"
    )
