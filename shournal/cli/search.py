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
from datetime import UTC, datetime

from shournal.cli import EXIT_FOUND, EXIT_NOT_FOUND, EXIT_USAGE
from shournal.store.search import Scope
from shournal.terminal import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from shournal.store.search import Hit, Searcher

_OPTIONS = ("--query", "--mode", "--filter")

KEYS_HELP = (
    "Enter: to prompt  Esc: cancel  ^R: filter  ^S: mode  Tab: next file  "
    "^O: lineage  ^T: --stat"
)
SCOPE_LABELS = {"all": "all", "host": "this host", "session": "this session",
                "directory": "this directory", "repository": "this git repository"}  # fmt: skip


def git_root(start: str) -> str | None:
    """The working tree of the git repository ``start`` is in (the
    nearest directory above it with a ``.git``), or None."""
    path = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def scope_for(kind: str, cwd: str, session: str | None) -> Scope | str:
    """The scope of filter ``kind`` here, or why there is none."""
    if kind == "all":
        return Scope()
    if kind == "host":
        return Scope("host", os.uname().nodename)  # socket.gethostname(), as recorded
    if kind == "directory":
        return Scope("directory", cwd)
    if kind == "session":
        if not session:
            return "this shell is not recorded (no SHOURNAL_SESSION_ID)"
        from shournal.query.criteria import BadSessionId, session_id_bytes

        try:
            return Scope("session", session_id_bytes(session))
        except BadSessionId as e:
            return str(e)
    root = git_root(cwd)
    if root is None:
        return "not in a git repository"
    return Scope("repository", root)


def status_line(matches: int, more: bool, mode: str, scope_kind: str) -> str:
    """The screen's status line (``more``: still searching)."""
    return (f" {matches}{'+' if more else ''} matches | mode: {mode} | "
            f"filter: {SCOPE_LABELS[scope_kind]} | {KEYS_HELP} ")  # fmt: skip


def hit_fields(hit: Hit, now: datetime) -> tuple[str, str, str]:
    """A match's columns in the list: when, exit status, the command line
    on one line (printable)."""
    from shournal.report.history import relative_time

    moment = datetime.fromisoformat(hit.start_time)
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    text = printable(" ".join(hit.text.split("\n")))
    return f"{relative_time(moment, now):>14} ", f"{hit.return_value:>3} ", text


def _first_screen(
    tty: int, searcher: Searcher, query: str, mode: str, scope_kind: str, session: str | None
) -> None:
    """The first screen (the search line, the status line, the newest
    matches) drawn with plain escape sequences while prompt_toolkit is
    still being imported: that import is most of the start-up.  The
    terminal goes raw first, so that keys typed meanwhile wait for the
    screen instead of being echoed; prompt_toolkit then draws the whole
    screen over it and reads them."""
    import termios
    import tty as tty_mode

    from shournal.store.search import parse_query

    tty_mode.setraw(tty, termios.TCSANOW)
    cols, rows = os.get_terminal_size(tty)
    scope = scope_for(scope_kind, os.getcwd(), session)
    hits: list[Hit] = []
    more = False
    if not isinstance(scope, str):
        hits, below = searcher.search(
            parse_query(query, mode), scope, limit=max(1, rows - 3), seconds=0.012
        )
        more = below > 0
    now = datetime.now(UTC)
    lines = [("search> " + printable(query))[:cols],
             "\x1b[7m" + status_line(len(hits), more, mode, scope_kind)[:cols] + "\x1b[0m"]
    for hit in hits[: rows - 3]:
        lines.append("".join(hit_fields(hit, now))[: max(0, cols // 2 - 1)])
    os.write(tty, ("\x1b[?1049h\x1b[H\x1b[2J" + "\r\n".join(lines)).encode("utf-8", "replace"))



def _parse(argv: list[str]) -> dict[str, str] | None:
    """``search [--query Q] [--mode M] [--filter F]`` (``--opt=value`` too)
    -> the values, or None for anything else (typer answers it)."""
    from shournal.store.search import MODES, SCOPES

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
            _first_screen(tty, searcher, query, mode, scope, session)
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
    from shournal.store.search import MODES, SCOPES

    return run_search(
        values.get("--query", ""),
        values.get("--mode", MODES[0]),
        values.get("--filter", SCOPES[0]),
    )
