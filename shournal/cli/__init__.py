"""The `shournal` command: a thin typer layer over the library.

Exit statuses (documented in the README):
  0 success / something found     1 nothing found, or a check failed
  2 usage error (bad option, missing file, bad value)
  3 the store cannot be used (locked, corrupted, newer schema)
  `shournal run` exits with the command's own status (128+N on signal N).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from shournal.cli.delete import delete
from shournal.cli.query import query
from shournal.cli.restore import restore
from shournal.cli.stats import stats

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    help="shournal: a journal of every shell command and the files it read and wrote.",
)

app.command("query", help="Find commands by the files they wrote or read, text, directory...")(
    query
)
app.command("stats", help="Statistics: busiest commands, sessions and directories, totals.")(
    stats
)
app.command("restore", help="Restore one archived read file (by its file id) into this directory.")(
    restore
)
app.command("delete", help="Delete commands and what only they referenced from the journal.")(
    delete
)


@app.command(
    "run",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    help="Run CMD observed (its whole process tree) and store it; exits with CMD's status.",
)
def run(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments.")],
) -> None:
    from shournal.runner import RunError, run_observed

    try:
        status = run_observed(command)
    except RunError as exc:
        print(f"shournal: {exc}", file=sys.stderr)
        raise typer.Exit(exc.status) from None
    raise typer.Exit(status)


@app.command("init", help="Print the two lines to add to ~/.bashrc or ~/.zshrc.")
def init(
    shell: Annotated[str, typer.Argument(help="bash or zsh")],
) -> None:
    from shournal import _paths

    if shell not in ("bash", "zsh"):
        print(f"shournal: unsupported shell '{shell}' (bash or zsh)", file=sys.stderr)
        raise typer.Exit(2)
    script = _paths.shell_dir() / f"shournal.{shell}"
    print(f"source {script}")
    print("SHOURNAL_ENABLE")


@app.command("doctor", help="Check everything recording needs and print the fix for each failure.")
def doctor() -> None:
    from shournal.doctor import print_report, run_checks

    raise typer.Exit(0 if print_report(run_checks()) else 1)


@app.command("version", help="Print the version.")
def version() -> None:
    from shournal import __version__

    print(f"shournal {__version__}")


def _one_line(exc: BaseException) -> str:
    fmt = getattr(exc, "format_message", None)
    return " ".join((fmt() if fmt else str(exc)).split())


def main() -> None:
    try:  # typer >= 0.2x vendors click as typer._click
        from typer._click import exceptions as click  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - older typer on plain click
        from click import exceptions as click  # type: ignore[no-redef]
    usage = click.UsageError
    no_args = getattr(click, "NoArgsIsHelpError", ())
    abort = getattr(click, "Abort", ())
    try:
        rv = app(standalone_mode=False)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        # `shournal query | head`: the reader is gone; no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except Exception as exc:
        if no_args and isinstance(exc, no_args):
            ctx = getattr(exc, "ctx", None)
            print(ctx.get_help() if ctx else str(exc), file=sys.stderr)
            sys.exit(2)
        if isinstance(exc, usage):
            # click's framed multi-line box is not for scripts: one line, status 2
            print(f"shournal: {_one_line(exc)}", file=sys.stderr)
            sys.exit(2)
        if abort and isinstance(exc, abort):
            sys.exit(130)
        if isinstance(exc, click.ClickException):
            print(f"shournal: {_one_line(exc)}", file=sys.stderr)
            sys.exit(getattr(exc, "exit_code", 1) or 1)
        raise
    sys.exit(rv if isinstance(rv, int) else 0)
