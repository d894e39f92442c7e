"""What the commands share: failing with one line and a status, mapping the
library's errors to exit statuses, opening the journal, and the options
several commands take (declared once here).

The exit statuses themselves are documented in :mod:`shournal.cli`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from shournal.cli import EXIT_STORE, EXIT_USAGE
from shournal.cli._output import write as write
from shournal.data import INT64_MAX

if TYPE_CHECKING:
    from shournal.journal import Journal


def note(message: str) -> None:
    """``shournal: MESSAGE`` on one line of stderr.  Messages may quote
    journal text (paths, names, command lines): never raw controls."""
    from shournal.terminal import printable

    typer.echo(f"shournal: {printable(' '.join(message.split()))}", err=True)


def fail(message: str, code: int) -> NoReturn:
    """:func:`note`, then exit with ``code``."""
    note(message)
    raise typer.Exit(code)


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
    from shournal.data import NotArchived, QueryError
    from shournal.errors import StoreError, StoreMissing
    from shournal.restore import RestoreError

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


# -- options shared by several commands -------------------------------------------------


def option(flag: str, help: str, metavar: str = "VALUE", *extra: str) -> Any:
    return typer.Option(flag, *extra, help=help, show_default=False, metavar=metavar)


try:  # typer >= 0.2x vendors click as typer._click
    from typer._click.types import ParamType  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - older typer on plain click
    from click.types import ParamType  # type: ignore[no-redef]


class BoundedInt(ParamType):  # type: ignore[misc]
    """An integer the journal can compare with (64-bit): a larger value is
    a usage error, not an overflow deep in the database driver."""

    name = "integer"

    def __init__(self, low: int | None) -> None:
        self.low = -INT64_MAX - 1 if low is None else low

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            number = value
        else:
            try:
                number = int(str(value).strip(), 10)
            except ValueError:
                self.fail(f"{value!r} is not a valid integer.", param, ctx)
        if not self.low <= number <= INT64_MAX:
            self.fail(f"{number} is out of range ({self.low}..{INT64_MAX}).", param, ctx)
        return number


def int_option(
    flag: str, help: str, *, low: int | None = 0, metavar: str = "N", **kw: Any
) -> Any:
    """An option taking a :class:`BoundedInt`.  ``low`` None: no lower
    bound (the command says what a negative value means)."""
    return typer.Option(flag, click_type=BoundedInt(low), help=help, metavar=metavar, **kw)


OPERATORS = "Operators: >, >=, <, <=, =, != or gt:, ge:, lt:, le:, eq:, ne:, and A..B (between)."

Since = Annotated[
    str | None,
    option("--since", "Started at or after: ISO date/time or an age such as 2h, 3d, 1y.", "TIME"),
]
Until = Annotated[
    str | None,
    option(
        "--until",
        "Started before the end of: a date includes that whole day; an age such as 3d.",
        "TIME",
    ),
]
Cwd = Annotated[
    str | None,
    option(
        "--cwd",
        "Working directory equals this path (relative paths and ~ are resolved), or matches "
        "it when it contains % ('DIR/%': the whole tree).",
        "DIR",
    ),
]
SessionId = Annotated[
    str | None, option("--session-id", "Shell session id as printed (base64), or a UUID.", "ID")
]
Host = Annotated[
    str | None, option("--host", "Recorded on this host (case-insensitive, % wildcard).", "NAME")
]
User = Annotated[str | None, option("--user", "Run by this user (% wildcard).", "NAME")]
ExitCode = Annotated[
    str | None, option("--exit-code", "Exit status, e.g. 0, '!=0', '>1'.", "N")
]
CommandText = Annotated[
    str | None,
    option(
        "--command-text",
        "Command line contains TEXT (case-insensitive); with % a LIKE pattern "
        "('make%': starts with make); eq:TEXT for exact.",
        "TEXT",
    ),
]
Tag = Annotated[
    list[str] | None,
    typer.Option(
        "--tag",
        metavar="TAG",
        help="Commands tagged TAG (shournal tag); repeated: carrying every one.",
        show_default=False,
    ),
]
LineageOf = Annotated[
    Path | None,
    typer.Option(
        "--lineage-of",
        metavar="FILE",
        help="Commands in the lineage of FILE's version on disk (as `shournal lineage` "
        "walks it: its writer, the writers of what that read, ...).",
        show_default=False,
    ),
]


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


HumanOrJsonFormat = Annotated[
    HumanOrJson, typer.Option("--output-format", help="human or json.")
]


# -- the sandbox of replay and rerun (shournal.reproduce) ---------------------------------

SandboxOutputDir = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output-dir",
        help="Where its writes go (new or empty; default: a new directory under $TMPDIR).",
        show_default=False,
        metavar="OUTDIR",
    ),
]
ShareNet = Annotated[bool, typer.Option("--share-net", help="Let the command use the network.")]

LocalAll = Annotated[
    bool,
    typer.Option("--local-all", help="Programs and libraries from the host, not from the archive."),
]
Local = Annotated[
    list[str] | None,
    typer.Option(
        "--local",
        help="This program or library from the host (repeatable; a path or a file name).",
        show_default=False,
        metavar="PROGRAM",
    ),
]
Archived = Annotated[
    list[str] | None,
    typer.Option(
        "--archived",
        help="This program or library from the archive, even with --local-all (repeatable).",
        show_default=False,
        metavar="PROGRAM",
    ),
]
