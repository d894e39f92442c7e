"""``shournal note`` and ``shournal tag``: what the user adds to a command.

Exit statuses: 0 done (or shown), 1 nothing to show (no note, no tags, no
journal yet), 2 usage error (unknown id, a value that is no note or tag:
nothing changed), 3 the journal cannot be used or written (read-only).
Registered by the CLI package (:mod:`shournal.cli._app`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from shournal.cli import EXIT_FOUND, EXIT_NOT_FOUND
from shournal.cli._common import errors_to_status, open_journal, write
from shournal.cli._common import fail as _fail
from shournal.cli._options import BoundedInt

if TYPE_CHECKING:
    from shournal.journal import Journal

@contextmanager
def _open(write: bool) -> Iterator[Journal]:
    """The journal, for writing when ``write``: one it cannot write (a
    read-only file, directory or mount) is refused as read-only, in one
    line, whether opening it or the first write (which opens its store)
    finds out."""
    from shournal.errors import StoreReadOnly, StoreUnavailable

    try:
        with open_journal(read_only=not write) as journal:
            yield journal
    except StoreUnavailable as e:
        if write and not isinstance(e, StoreReadOnly) and "readonly" in str(e).lower():
            raise StoreReadOnly(f"{e} (the journal is read-only here: nothing stored)") from None
        raise


CommandId = Annotated[
    int, typer.Argument(click_type=BoundedInt(0), metavar="ID", help="The command's id.")
]


def note(
    command_id: CommandId,
    text: Annotated[
        str | None,
        typer.Argument(metavar="[TEXT]", help="The note; without it, the note is shown.",
                       show_default=False),
    ] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the command's note.")] = False,
) -> None:
    """Set, show (no TEXT) or remove (--clear) the note of a command: its
    description in every output and in the RO-Crate and PROV exports."""
    from shournal.data import QueryError, check_note
    from shournal.terminal import printable

    with errors_to_status(missing="nothing to annotate: "):
        if clear and text is not None:
            raise QueryError("--clear takes no TEXT")
        if text is not None:
            text = check_note(text)  # before the journal is opened
        with _open(text is not None or clear) as journal:
            if text is None and not clear:
                shown = journal.note(command_id)
                if shown is None:
                    _fail(f"command {command_id} has no note", EXIT_NOT_FOUND)
                write(printable(shown, newlines=True) + "\n")
                raise typer.Exit(EXIT_FOUND)
            journal.set_note(command_id, None if clear else text)
    raise typer.Exit(EXIT_FOUND)


def tag(
    command_id: Annotated[
        int | None,
        typer.Argument(click_type=BoundedInt(0), metavar="[ID]",
                       help="The command's id; without it, every tag with its count.",
                       show_default=False),
    ] = None,
    tags: Annotated[
        list[str] | None,
        typer.Argument(metavar="[TAG]...", help="Tags to add (one word each); without "
                       "any, the command's tags are listed.", show_default=False),
    ] = None,
    remove: Annotated[
        bool, typer.Option("--remove", help="Take the TAGs off the command instead.")
    ] = False,
) -> None:
    """Add tags to a command (``shournal tag 42 fig3 paper2``), take them off
    (--remove), or list a command's tags (no TAG) or every tag (no ID).
    ``query --tag`` and ``history --tag`` find the commands of a tag."""
    from shournal.data import QueryError, check_tag
    from shournal.terminal import printable

    tags = tags or []
    with errors_to_status(missing="nothing to tag: "):
        if remove and not tags:
            raise QueryError("--remove needs the TAGs to take off")
        for t in tags:
            check_tag(t)  # before the journal is opened
        with _open(bool(tags)) as journal:
            if not tags:
                listed = journal.tags(command_id)
                if command_id is None:
                    lines = [f"{n:>6}  {printable(t)}" for t, n in listed]
                else:
                    lines = [printable(t) for t, _n in listed]
                write("".join(line + "\n" for line in lines))
                raise typer.Exit(EXIT_FOUND if listed else EXIT_NOT_FOUND)
            assert command_id is not None
            if remove:
                journal.remove_tags(command_id, tags)
            else:
                journal.add_tags(command_id, tags)
    raise typer.Exit(EXIT_FOUND)
