"""The options several commands take, declared once, and the integer
type of the options that the journal compares (typer's declarations).

The commands that also run without typer (:mod:`shournal.cli._direct`)
name these only in their annotations; :func:`shournal.cli._app.build`
resolves the annotations against this module when it registers them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from shournal.cli._common import HumanOrJson
from shournal.data import INT64_MAX


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
