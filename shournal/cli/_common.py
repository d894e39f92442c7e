"""What the commands share: failing with one line and a status, mapping the
library's errors to exit statuses, opening the journal (the options
several commands take: :mod:`shournal.cli._options`).  No typer here: the
reading commands also run without it (:mod:`shournal.cli._direct`).

The exit statuses themselves are documented in :mod:`shournal.cli`.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from enum import StrEnum

from shournal.cli import EXIT_STORE, EXIT_USAGE
from shournal.cli._output import write as write

# Not typing.TYPE_CHECKING: typing costs `lineage` and `status` their
# start-up (bench/cli_startup.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import NoReturn

    from shournal.journal import Journal


def note(message: str) -> None:
    """``shournal: MESSAGE`` on one line of stderr.  Messages may quote
    journal text (paths, names, command lines): never raw controls."""
    from shournal.terminal import printable

    print(f"shournal: {printable(' '.join(message.split()))}", file=sys.stderr, flush=True)


def fail(message: str, code: int) -> NoReturn:
    """:func:`note`, then exit with ``code``."""
    note(message)
    # SystemExit, not typer.Exit: the commands run without typer too
    # (shournal.cli._direct); both end in this status
    raise SystemExit(code)


def write_to(text: str, output: Path | None) -> None:
    """``text`` to the file ``output`` (``-o``), or to stdout when None; a
    file that cannot be written is a usage error."""
    if output is None:
        write(text)
        return
    try:
        with open(output, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
    except OSError as e:
        fail(f"cannot write {output}: {e.strerror}", EXIT_USAGE)


@contextmanager
def errors_to_status(missing: str = "") -> Iterator[None]:
    """Map the library's errors raised inside to one line and the
    documented status: bad criteria or arguments 2; no journal yet 1
    (``missing`` is put before the reason); a journal that cannot be used
    3; an archived file that is not there 1, one that cannot be restored 2."""
    from shournal.cli import error_status
    from shournal.data import NotArchived, QueryError, RestoreError
    from shournal.errors import StoreError, StoreMissing

    try:
        yield
    except (QueryError, StoreError, NotArchived, RestoreError) as e:
        # (the statuses are error_status's, as for every other error)
        message, code = error_status(e) or (str(e), EXIT_STORE)
        fail(f"{missing}{message}" if isinstance(e, StoreMissing) else message, code)


def open_journal(*, read_only: bool = True) -> Journal:
    """The journal every command reads (see :func:`shournal.journal.resolve_url`),
    never created by reading it, opened read-only unless the command writes
    it (``read_only`` False).  Call inside :func:`errors_to_status`."""

    from shournal.journal import Journal

    return Journal.open(create=False, read_only=read_only)


def check_files(*paths: Path | None) -> None:
    """Fail (a usage error, inside :func:`errors_to_status`) before the
    journal is opened when a file given to --wfile, --rfile or
    --lineage-of cannot be read."""
    from shournal.probe import check_file

    for path in paths:
        if path is not None:
            check_file(path)


class HumanOrJson(StrEnum):
    human = "human"
    json = "json"
