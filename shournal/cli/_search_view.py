"""What the search screen shows that needs no prompt_toolkit: the filters'
scopes, the status line, a match's columns, and the first screen drawn
with plain escape sequences while prompt_toolkit is still being imported
(:mod:`shournal.cli._search_screen` draws the rest)."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from shournal.search_query import Scope
from shournal.terminal import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from shournal.journal import Searcher
    from shournal.search_query import Hit

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
        from shournal.criteria import BadSessionId, session_id_bytes

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

    moment = hit.start_time
    text = printable(" ".join(hit.text.split("\n")))
    return f"{relative_time(moment, now):>14} ", f"{hit.return_value:>3} ", text


def first_screen(
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

    from shournal.search_query import parse_query

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
