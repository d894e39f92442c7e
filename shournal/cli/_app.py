"""The typer application behind `shournal` (see :mod:`shournal.cli`),
built from the table of commands (:mod:`shournal.cli._commands`) with
only the command being run.

Imported only when a command needs the parser: typer and its
dependencies cost more start-up time than most commands themselves.
The commands without a module of their own are here.
"""

from __future__ import annotations

import importlib
import sys
import typing
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from shournal.cli._commands import COMMANDS

if TYPE_CHECKING:
    from collections.abc import Iterable

    from typer._click import Command, Context


class _Group(TyperGroup):
    """The top level: lists every command of the table, the ones not built
    by their table entry (help and short help: the line they would give)."""

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        built = self.commands.get(cmd_name)
        if built is not None or cmd_name not in COMMANDS:
            return built
        _where, help_, short_help, _settings = COMMANDS[cmd_name]
        return TyperCommand(name=cmd_name, help=help_, short_help=short_help,
                            callback=_not_built)


def _not_built() -> None:
    # main() builds the command it runs; reaching this is a bug
    raise RuntimeError("a command of the help listing was run without being built")


def build(names: Iterable[str]) -> typer.Typer:
    """The application with the commands ``names`` of the table (each
    module imported, each signature read by typer); the top-level --help
    lists all of them either way."""
    app = typer.Typer(
        cls=_Group,
        no_args_is_help=True,
        # plain click help: rich (a typer dependency) costs ~50 ms to import
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        pretty_exceptions_show_locals=False,
        add_completion=False,
        # -h as well: what people type first (every command and sub-command)
        context_settings={"help_option_names": ["-h", "--help"]},
        help="shournal: a journal of every shell command and the files it read and wrote.",
    )
    app.callback()(_options)
    for name in names:
        where, help_, short_help, settings = COMMANDS[name]
        module, _, attr = where.partition(":")
        target = getattr(importlib.import_module(module), attr)
        if isinstance(target, typer.Typer):
            app.add_typer(target, name=name, help=help_)
        else:
            app.command(name, help=help_, short_help=short_help,
                        context_settings=settings)(_resolved(target))
    return app


def _resolved(command: Any) -> Any:
    """``command`` with its annotations evaluated: the modules of the
    commands that also run without typer (shournal.cli._direct) import
    neither typer nor the shared options (shournal.cli._options) but under
    TYPE_CHECKING (nor typing and pathlib), so their names are given here."""
    from shournal.cli import _options

    if any(isinstance(a, str) for a in command.__annotations__.values()):
        from pathlib import Path

        names = {"Annotated": Annotated, "Any": Any, "Path": Path, **vars(_options),
                 "typer": typer, **command.__globals__}  # fmt: skip
        command.__annotations__ = typing.get_type_hints(command, globalns=names,
                                                        include_extras=True)
    return command


@cache
def _full() -> typer.Typer:
    return build(COMMANDS)


def __getattr__(name: str) -> Any:
    # ``app``: every command (the tests, the completion files)
    if name == "app":
        return _full()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _print_version(value: bool) -> None:
    if value:
        from shournal.cli import print_version

        print_version()
        raise typer.Exit(0)


def _options(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", is_eager=True,
                     callback=_print_version),
    ] = False,
) -> None:
    pass


def run(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments.")],
    apparatus: Annotated[
        bool,
        typer.Option(
            "--apparatus",
            help="Also archive every file it read (content), the digests of what it wrote, "
            "its environment: for `shournal replay` and `shournal diff`.",
        ),
    ] = False,
    archive_outputs: Annotated[
        bool,
        typer.Option("--archive-outputs",
                     help="With --apparatus: archive the content of written files too."),
    ] = False,
) -> None:
    from shournal.capture.runner import RunError, run_observed

    if archive_outputs and not apparatus:
        print("shournal: --archive-outputs needs --apparatus", file=sys.stderr)
        raise typer.Exit(2)
    try:
        status = run_observed(command, apparatus=apparatus, archive_outputs=archive_outputs)
    except RunError as exc:
        print(f"shournal: {exc}", file=sys.stderr)
        raise typer.Exit(exc.status) from None
    raise typer.Exit(status)


def init(
    shell: Annotated[str, typer.Argument(help="bash or zsh")],
    ctrl_r: Annotated[
        bool,
        typer.Option("--ctrl-r", help="Also bind Ctrl-R to `shournal search` (Enter puts "
                     "the chosen command on the prompt)."),
    ] = False,
) -> None:
    from shournal.cli import print_init

    raise typer.Exit(print_init(shell, ctrl_r=ctrl_r))


def search(
    query: Annotated[
        str,
        typer.Option("--query", help="Start with this search text "
                     "(w:NAME: wrote a file NAME, r:NAME: read one)."),
    ] = "",
    mode: Annotated[
        str,
        typer.Option("--mode", help="Text matching: substring, fuzzy or prefix (Ctrl-S cycles)."),
    ] = "substring",
    filter_: Annotated[
        str,
        typer.Option("--filter", help="Start with this filter: all, host, session, directory "
                     "or repository (Ctrl-R cycles)."),
    ] = "all",
) -> None:
    from shournal.cli.search import run_search
    from shournal.search_query import MODES, SCOPES

    for name, value, known in (("--mode", mode, MODES), ("--filter", filter_, SCOPES)):
        if value not in known:
            print(f"shournal: {name}: unknown value {value!r} (one of {', '.join(known)})",
                  file=sys.stderr)
            raise typer.Exit(2)
    raise typer.Exit(run_search(query, mode, filter_))


def doctor() -> None:
    from shournal.cli import run_doctor

    raise typer.Exit(run_doctor())


def version() -> None:
    from shournal.cli import print_version

    print_version()
