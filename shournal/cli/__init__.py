"""The `shournal` command: a thin typer layer over the library.

Exit statuses (the table in the README, "Exit statuses"):
  0 success / something found     1 nothing found, or a check failed
  2 usage error (bad option, bad value, a path that cannot be read or written)
  3 the journal cannot be used (locked, corrupted, newer schema, unreachable)
  4 the config file cannot be used (unknown key, bad value, unreadable)
  70 internal error (a bug: one line, SHOURNAL_DEBUG=1 for the traceback)
  130 interrupted (Ctrl-C)        141 the output pipe was closed
  `shournal run` exits with the command's own status (128+N on signal N).
Every error ends in one `shournal:` line; :func:`error_status` is the one
place that turns an exception into that line and its status.

Start-up time matters (`shournal query` is typed interactively): this
module imports nothing heavy.  The typer application lives in
:mod:`shournal.cli._app` and is imported on first use (``main()``, which
builds it with only the command run, or ``from shournal.cli import app``,
every command); `shournal version` (`--version`), `shournal init SHELL`
and `shournal doctor` are answered without it, and the commands import
the store (SQLAlchemy) inside their functions.  `shournal query --history
N` and `--wfile F` are answered without either (:mod:`shournal.cli._fast`).
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
EXIT_CONFIG = 4
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141


def error_status(exc: BaseException) -> tuple[str, int] | None:
    """The one line (without "shournal: ") and exit status for an error
    that reached a command, or None for one that is no error (an exit)."""
    from shournal.config import ConfigError
    from shournal.data import NotArchived, QueryError
    from shournal.errors import ConfigUnusable, StoreError, StoreMissing
    from shournal.importers import ImportFailed
    from shournal.restore import RestoreError

    if isinstance(exc, SystemExit):
        return None
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", EXIT_INTERRUPTED
    # The library's errors say their own line; the first match wins
    # (StoreMissing is a StoreError).
    for kind, status in (
        (ConfigError | ConfigUnusable, EXIT_CONFIG),
        (StoreMissing, EXIT_NOT_FOUND),
        (StoreError, EXIT_STORE),
        (QueryError, EXIT_USAGE),
        (NotArchived, EXIT_NOT_FOUND),
        (RestoreError, EXIT_USAGE),
        (ImportFailed, EXIT_USAGE),
    ):
        if isinstance(exc, kind):
            return str(exc), status
    if isinstance(exc, OSError):
        # A path given (or derived from one given) that cannot be used.
        where = exc.filename if exc.filename is not None else ""
        reason = exc.strerror or str(exc)
        return (f"{where}: {reason}" if where != "" else reason), EXIT_USAGE
    if isinstance(exc, Exception):
        return (f"internal error: {type(exc).__name__}: {exc} (a bug; please report it; "
                "SHOURNAL_DEBUG=1 shows where)"), EXIT_INTERNAL
    return None


def _exit_on_error(exc: BaseException) -> None:
    """Print `exc` as its one line and exit with its status; return if it is
    not one (the caller re-raises it)."""
    if isinstance(exc, BrokenPipeError):
        # `shournal query | head`: the reader is gone; no message either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_PIPE)
    if os.environ.get("SHOURNAL_DEBUG") == "1" and not isinstance(exc, KeyboardInterrupt):
        import traceback

        traceback.print_exception(exc)
    found = error_status(exc)
    if found is None:
        return
    message, status = found
    if status != EXIT_INTERRUPTED:
        from shournal.terminal import printable

        print(f"shournal: {printable(' '.join(message.split()))}", file=sys.stderr)
    sys.exit(status)


def print_version() -> None:
    from shournal import __version__

    print(f"shournal {__version__}")


def print_init(shell: str, *, ctrl_r: bool = False) -> int:
    """The two rc lines for SHELL (``ctrl_r``: and the line binding Ctrl-R
    to the search); the exit status."""
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
    if ctrl_r:
        print("# Ctrl-R: shournal search; Enter puts the chosen command on the prompt")
        print("SHOURNAL_BIND_SEARCH '\\C-r'" if shell == "bash" else "SHOURNAL_BIND_SEARCH '^R'")
    return 0


def run_doctor() -> int:
    """`shournal doctor`: the report; the exit status."""
    from shournal.doctor import print_report, run_checks

    return EXIT_OK if print_report(run_checks()) else EXIT_NOT_FOUND


def _fast_path(argv: list[str]) -> int | None:
    """Exit status for the commands answered without the parser, or None.
    Only exact argument lists: anything else (--help, extra arguments,
    errors) goes through typer as before."""
    if argv in (["version"], ["--version"]):
        print_version()
        return 0
    if len(argv) == 2 and argv[0] == "init" and not argv[1].startswith("-"):
        return print_init(argv[1])
    if argv == ["doctor"]:
        return run_doctor()
    if argv[:1] == ["search"]:
        from shournal.cli.search import answer

        return answer(argv[1:])
    return None


def __getattr__(name: str) -> Any:
    if name == "app":
        from shournal.cli._app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _one_line(exc: BaseException) -> str:
    fmt = getattr(exc, "format_message", None)
    return " ".join((fmt() if fmt else str(exc)).split())


def main(*, fast_query: bool = True, direct: bool = True) -> None:
    """The console entry point.  ``fast_query`` False: every reading
    command through the full CLI (typer); ``direct`` False: without
    :mod:`shournal.cli._direct` (the tests compare the ways)."""
    if not sys.argv[1:] and sys.stdout.isatty() and sys.stdin.isatty():
        # bare `shournal` typed at a terminal: the daily view (in a script
        # or a pipe it still prints the help)
        sys.argv.append("history")
    try:
        _main(fast_query, direct)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - the one place errors become a line
        _exit_on_error(exc)
        raise


def _main(fast_query: bool, direct: bool) -> None:
    status = _fast_path(sys.argv[1:])
    if status is None and fast_query:
        # The common read-only queries, without typer and SQLAlchemy.
        from shournal.cli._fast import answer

        status = answer(sys.argv[1:])
        if status is None and direct:
            # The other reading commands with plain arguments, without typer.
            from shournal.cli import _direct

            status = _direct.answer(sys.argv[1:])
    if status is not None:
        sys.stdout.flush()
        sys.exit(status)
    from shournal.cli._commands import COMMANDS, first_word

    # Only the command run is built (its module imported, its signature
    # read by typer); none for the top-level help (it lists the table);
    # every one for an unknown command (the parser suggests the nearest)
    # and for completion.
    word = first_word(sys.argv[1:])
    names: tuple[str, ...] = (
        () if word is None else (word,) if word in COMMANDS else tuple(COMMANDS)
    )
    if os.environ.get("_SHOURNAL_COMPLETE"):
        # a TAB in a shell (scripts/shell_docs.py writes the completion
        # files): typer's completion classes, registered only then
        from typer.completion import completion_init

        completion_init()
        names = tuple(COMMANDS)
    from shournal.cli._app import build

    app = build(names)

    try:  # typer >= 0.2x vendors click as typer._click
        from typer._click import exceptions as click  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - older typer on plain click
        from click import exceptions as click  # type: ignore[no-redef]
    usage = click.UsageError
    no_args = getattr(click, "NoArgsIsHelpError", ())
    abort = getattr(click, "Abort", ())
    try:
        rv = app(standalone_mode=False)
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
            sys.exit(EXIT_INTERRUPTED)
        if isinstance(exc, click.ClickException):
            print(f"shournal: {_one_line(exc)}", file=sys.stderr)
            sys.exit(getattr(exc, "exit_code", 1) or 1)
        raise
    sys.exit(rv if isinstance(rv, int) else 0)
