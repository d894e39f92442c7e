"""The `shournal` command: a thin typer layer over the library.

Exit statuses (documented in the README):
  0 success / something found     1 nothing found, or a check failed
  2 usage error (bad option, missing file, bad value)
  3 the store cannot be used (locked, corrupted, newer schema)
  `shournal run` exits with the command's own status (128+N on signal N).

Start-up time matters (`shournal query` is typed interactively): this
module imports nothing heavy.  The typer application lives in
:mod:`shournal.cli._app` and is imported on first use (``main()`` or
``from shournal.cli import app``); `shournal version` (`--version`) and
`shournal init SHELL` are answered without it, and the commands import the store
(SQLAlchemy) inside their functions.  `shournal query --history N` and
`--wfile F` are answered without either (:mod:`shournal.cli._fast`).
"""

from __future__ import annotations

import os
import sys

# Not typing.TYPE_CHECKING: importing typing costs every command ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The exit statuses above, for every command.
EXIT_OK = 0
EXIT_FOUND = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_STORE = 3


def print_version() -> None:
    from shournal import __version__

    print(f"shournal {__version__}")


def print_init(shell: str) -> int:
    """The two rc lines for SHELL; the exit status."""
    from shournal import _paths

    if shell not in ("bash", "zsh"):
        print(f"shournal: unsupported shell '{shell}' (bash or zsh)", file=sys.stderr)
        return EXIT_USAGE
    script = _paths.shell_dir() / f"shournal.{shell}"
    print(f"# shournal: put these lines at the top of ~/.{shell}rc.  SHOURNAL_ENABLE")
    print("# restarts the shell once to preload the recorder, so every line above")
    print("# it runs twice (banners, conda init, module load, ssh-agent, PATH+=).")
    print(f"source {script}")
    print("SHOURNAL_ENABLE")
    return 0


def _fast_path(argv: list[str]) -> int | None:
    """Exit status for the commands answered without the parser, or None.
    Only exact argument lists: anything else (--help, extra arguments,
    errors) goes through typer as before."""
    if argv in (["version"], ["--version"]):
        print_version()
        return 0
    if len(argv) == 2 and argv[0] == "init" and not argv[1].startswith("-"):
        return print_init(argv[1])
    return None


def __getattr__(name: str) -> Any:
    if name == "app":
        from shournal.cli._app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _one_line(exc: BaseException) -> str:
    fmt = getattr(exc, "format_message", None)
    return " ".join((fmt() if fmt else str(exc)).split())


def main(*, fast_query: bool = True) -> None:
    """The console entry point.  ``fast_query`` False: `shournal query`
    always through the full CLI (the fast path's tests compare the two)."""
    if not sys.argv[1:] and sys.stdout.isatty() and sys.stdin.isatty():
        # bare `shournal` typed at a terminal: the daily view (in a script
        # or a pipe it still prints the help)
        sys.argv.append("history")
    status = _fast_path(sys.argv[1:])
    if status is None and fast_query:
        # The common read-only queries, without typer and SQLAlchemy.
        from shournal.cli._fast import answer

        try:
            status = answer(sys.argv[1:])
        except KeyboardInterrupt:
            sys.exit(130)
    if status is not None:
        sys.stdout.flush()
        sys.exit(status)
    from shournal.cli._app import app

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
            sys.exit(EXIT_USAGE)
        if isinstance(exc, usage):
            # click's framed multi-line box is not for scripts: one line, status 2
            print(f"shournal: {_one_line(exc)}", file=sys.stderr)
            sys.exit(EXIT_USAGE)
        if abort and isinstance(exc, abort):
            sys.exit(130)
        if isinstance(exc, click.ClickException):
            print(f"shournal: {_one_line(exc)}", file=sys.stderr)
            sys.exit(getattr(exc, "exit_code", 1) or 1)
        raise
    sys.exit(rv if isinstance(rv, int) else 0)
