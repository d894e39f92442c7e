"""``shournal restore --file-id ID``: write one archived read file (a
script the journal kept a copy of) back to disk.

Exit codes: 0 restored; 1 no such file id, its content was not archived
or is not readable here (docs/lab.md), no journal yet, or overwriting
declined at the prompt; 2 usage error (the target exists and stdin is
not a terminal, without --force; a target that is missing, unwritable or
not a directory where one is needed; a recorded path that is not
absolute and normalised); 3 the journal cannot be used.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from shournal.cli import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE
from shournal.cli._common import errors_to_status, fail, open_journal
from shournal.cli._options import int_option
from shournal.confined import UnsafePath, recorded_path, refusal

if TYPE_CHECKING:
    from shournal.data import ArchivedFile


def _target_for(item: ArchivedFile, output: Path | None) -> Path:
    """Where to write: a refused recorded path, or an ``--output`` that
    cannot be looked at, is one line and status 2."""
    if output is None or _is_dir(output):
        try:
            recorded_path(item.path)
        except UnsafePath as why:
            fail(refusal(f"file {item.file_id}", item.path, why), EXIT_USAGE)
        base = os.fsdecode(item.name)
        return (Path.cwd() if output is None else output) / base
    return output


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as e:
        fail(f"cannot use {path}: {e.strerror}", EXIT_USAGE)


def _confirm_overwrite(target: Path) -> bool:
    try:
        from shournal.terminal import printable

        question = f"{printable(str(target))} exists. Overwrite?"
        return typer.confirm(question, default=False, err=True)
    except typer.Abort:  # Ctrl-D / Ctrl-C at the prompt
        typer.echo("", err=True)
        return False


def restore(
    file_id: Annotated[
        int,
        int_option(
            "--file-id",
            low=None,  # a negative id is no such file (status 1), as an unknown one
            metavar="ID",
            help="Id of the read file, as shown after 'id' in shournal query's output.",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="PATH",
            help="Write here (a file name, or an existing directory) instead of the "
            "current directory under the file's original name.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", "-f", help="Overwrite an existing file without asking."),
    ] = False,
) -> None:
    """Restore one archived read file into the current directory under its
    original name, with its original permissions and mtime."""
    from shournal.restore import restore_file

    with errors_to_status(missing="nothing to restore: "), open_journal() as journal:
        item = journal.archived(file_id)

    target = _target_for(item, output)
    overwrite = force
    if not force and os.path.lexists(target):
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            fail(f"{target} exists (use --force to overwrite)", EXIT_USAGE)
        if not _confirm_overwrite(target):
            fail(f"not overwriting {target}", EXIT_NOT_FOUND)
        overwrite = True
    with errors_to_status():  # TargetExists: it appeared meanwhile
        restored = restore_file(item, target, overwrite=overwrite)
    from shournal.terminal import printable

    shown = printable(f"{os.fsdecode(item.path)} (file id {file_id}) to {restored.target}")
    typer.echo(f"Restored {shown}")
    raise typer.Exit(EXIT_OK)
