"""``shournal search``: the interactive search (full screen, on the
terminal), and what the shells' Ctrl-R binding runs.

Exit statuses: 0 a command was chosen (printed on stdout, nothing else
is), 1 left without one (Esc, Ctrl-C) or no journal yet, 2 usage error
(no terminal, a bad option), 3 the journal cannot be searched.

Start-up counts (the first screen's budget is 150 ms with Python's own
start): the plain argument lists are answered by :func:`answer` without
typer, which is imported only for ``--help`` and errors (the typer
command is in :mod:`shournal.cli._app`).
"""

from __future__ import annotations

import os
import sys

from shournal.cli import EXIT_FOUND, EXIT_NOT_FOUND, EXIT_USAGE
from shournal.terminal import printable

_OPTIONS = ("--query", "--mode", "--filter")


def _parse(argv: list[str]) -> dict[str, str] | None:
    """``search [--query Q] [--mode M] [--filter F]`` (``--opt=value`` too)
    -> the values, or None for anything else (typer answers it)."""
    from shournal.search_query import MODES, SCOPES

    values: dict[str, str] = {}
    rest = list(argv)
    while rest:
        flag = rest.pop(0)
        name, eq, value = flag.partition("=")
        if name not in _OPTIONS or name in values:
            return None
        if not eq:
            if not rest:
                return None
            value = rest.pop(0)
        values[name] = value
    if values.get("--mode", MODES[0]) not in MODES:
        return None
    if values.get("--filter", SCOPES[0]) not in SCOPES:
        return None
    return values


def run_search(query: str, mode: str, scope: str) -> int:
    """Show the search screen; print the chosen command line; the status."""

    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        print("shournal: search needs a terminal (/dev/tty cannot be opened)", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _search_on(tty, query, mode, scope)
    finally:
        os.close(tty)


def _search_on(tty: int, query: str, mode: str, scope: str) -> int:
    import termios

    from shournal.cli import error_status
    from shournal.journal import Journal
    from shournal.query.pending import wait_for_pending

    # the command line just run may still be on its way into the journal
    wait_for_pending()
    try:
        searcher = Journal.searcher()
    except Exception as exc:  # noqa: BLE001 - error_status maps the library's errors
        found = error_status(exc)
        if found is None:
            raise
        message, status = found
        print(f"shournal: {printable(message)}", file=sys.stderr)
        return status
    session = os.environ.get("SHOURNAL_SESSION_ID")
    saved = termios.tcgetattr(tty)
    taken_over = False
    try:
        with searcher:
            from shournal.cli._search_view import first_screen

            first_screen(tty, searcher, query, mode, scope, session)
            from shournal.cli._search_screen import SearchScreen

            screen = SearchScreen(searcher, query=query, mode=mode, scope=scope, session=session)
            taken_over = True
            chosen = screen.run()
    finally:
        if not taken_over:
            os.write(tty, b"\x1b[?1049l")
        # as the shell had it (prompt_toolkit restores what it found: raw)
        termios.tcsetattr(tty, termios.TCSANOW, saved)
    if chosen is None:
        return EXIT_NOT_FOUND
    sys.stdout.write(chosen)
    sys.stdout.flush()
    return EXIT_FOUND


def answer(argv: list[str]) -> int | None:
    """The status of ``shournal search ARGV`` (``argv`` after ``search``),
    or None when typer must answer (help, a bad option)."""
    values = _parse(argv)
    if values is None:
        return None
    from shournal.search_query import MODES, SCOPES

    return run_search(
        values.get("--query", ""),
        values.get("--mode", MODES[0]),
        values.get("--filter", SCOPES[0]),
    )
