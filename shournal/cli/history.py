"""``shournal history``: the daily view, one line per command.

Exit codes as ``query``: 0 something listed, 1 nothing (or no journal
yet), 2 usage error, 3 the journal cannot be used.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from shournal.cli import EXIT_FOUND, EXIT_NOT_FOUND
from shournal.cli._common import errors_to_status, open_journal
from shournal.cli._common import fail as _fail

if TYPE_CHECKING:
    import typer

    from shournal.cli._options import (
        BoundedInt,
        CommandText,
        Cwd,
        ExitCode,
        Host,
        SessionId,
        Since,
        Tag,
        Until,
        User,
        option,
    )

DEFAULT_LAST = 30


class HistoryFormat(StrEnum):
    human = "human"
    json = "json"
    jsonl = "jsonl"


def _path_criteria(path: Path) -> tuple[str, str]:
    """(directory, exact name) of a file named on the command line."""
    full = os.path.abspath(os.path.expanduser(str(path)))
    return os.path.dirname(full), "eq:" + os.path.basename(full)


def history(
    last: Annotated[
        int,
        typer.Option("--last", "-n", click_type=BoundedInt(1), metavar="N",
                     help="The last N matching commands."),
    ] = DEFAULT_LAST,
    all_: Annotated[bool, typer.Option("--all", help="Every matching command.")] = False,
    here: Annotated[
        bool, typer.Option("--here", help="Commands run in this directory.")
    ] = False,
    recursive: Annotated[
        bool, typer.Option("--recursive", "-r", help="With --here: and below it.")
    ] = False,
    session: Annotated[
        bool,
        typer.Option("--session", help="Commands of this shell ($SHOURNAL_SESSION_ID)."),
    ] = False,
    failed: Annotated[
        bool, typer.Option("--failed", help="Commands that ended with a non-zero status.")
    ] = False,
    today: Annotated[bool, typer.Option("--today", help="Commands started today.")] = False,
    wrote: Annotated[
        Path | None,
        option("--wrote", "Commands that wrote a file at this path (by name).", "PATH"),
    ] = None,
    read: Annotated[
        Path | None,
        option("--read", "Commands that read a file at this path (by name).", "PATH"),
    ] = None,
    command_text: CommandText = None,
    cwd: Cwd = None,
    session_id: SessionId = None,
    exit_code: ExitCode = None,
    tag: Tag = None,
    host: Host = None,
    user: User = None,
    since: Since = None,
    until: Until = None,
    reverse: Annotated[
        bool, typer.Option("--reverse", help="Newest first (default: newest last).")
    ] = False,
    absolute: Annotated[
        bool, typer.Option("--absolute", help="Start times as dates, not '3m ago'.")
    ] = False,
    output_format: Annotated[
        HistoryFormat,
        typer.Option("--output-format", help="human (one line each), json or jsonl."),
    ] = HistoryFormat.human,
    template: Annotated[
        str | None,
        option(
            "--format",
            "One line per command from named fields, e.g. '{id} {when} {command}'. Fields: "
            "id when duration status wrote read cwd command host user session start end tags note.",
            "TEMPLATE",
        ),
    ] = None,
    print0: Annotated[
        bool,
        typer.Option("--print0", help="The command lines as typed, each ended by a NUL byte."),
    ] = False,
    no_pager: Annotated[
        bool, typer.Option("--no-pager", help="Never page, even on a terminal.")
    ] = False,
) -> None:
    """One line per command: id, when, how long, exit status, files written,
    directory and command line; newest last."""
    from shournal.criteria import parse_criteria
    from shournal.data import QueryError
    from shournal.errors import StoreMissing
    from shournal.query.pending import wait_for_pending
    from shournal.report.history import FormatError, check_format

    with errors_to_status():
        if recursive and not here:
            raise QueryError("--recursive goes with --here")
        if here and cwd is not None:
            raise QueryError("--here and --cwd exclude each other")
        if session and session_id is not None:
            raise QueryError("--session and --session-id exclude each other")
        if failed and exit_code is not None:
            raise QueryError("--failed and --exit-code exclude each other")
        if today and since is not None:
            raise QueryError("--today and --since exclude each other")
        if wrote is not None and read is not None:
            raise QueryError("--wrote and --read: give one")
        if template is not None:
            try:
                check_format(template)
            except FormatError as e:
                raise QueryError(str(e)) from None
        if session:
            session_id = os.environ.get("SHOURNAL_SESSION_ID")
            if not session_id:
                raise QueryError("--session: this shell is not recorded (no SHOURNAL_SESSION_ID)")
        if failed:
            exit_code = "!=0"
        if today:
            since = datetime.now().astimezone().strftime("%Y-%m-%d")
        wpath = wname = rpath = rname = None
        if wrote is not None:
            wpath, wname = _path_criteria(wrote)
        if read is not None:
            rpath, rname = _path_criteria(read)
        here_dir = os.getcwd() if here else None
        base: dict[str, Any] = dict(
            command_text=command_text, exit_code=exit_code, host=host, user=user,
            since=since, until=until, session_id=session_id, wname=wname, wpath=wpath,
            rname=rname, rpath=rpath, tag=tag or None,
        )  # fmt: skip
        # --here -r: the directory itself, and its tree ('DIR/%'), merged
        cwds = [cwd] if here_dir is None else [here_dir]
        if here_dir is not None and recursive:
            cwds.append(here_dir.rstrip("/").replace("%", "\\%") + "/%")
        criteria = [parse_criteria(cwd=c, **base) for c in cwds]

    pending = wait_for_pending()
    commands: list[Any] = []
    missing = ""
    with errors_to_status():
        try:
            journal = open_journal()
        except StoreMissing as e:
            missing = str(e)
        else:
            with journal:
                human = output_format is HistoryFormat.human and not print0
                found: dict[int, Any] = {}
                for crit in criteria:
                    for c in journal.find(crit, history=None if all_ else last,
                                          max_files=0 if human else None):  # fmt: skip
                        found[c.id] = c
                commands = sorted(found.values(), key=lambda c: (c.start_time, c.id))
                if not all_:
                    commands = commands[-last:]
    if reverse:
        commands.reverse()
    _emit(commands, output_format, template, print0, absolute, no_pager)
    if not commands:
        if missing:
            _fail(missing, EXIT_NOT_FOUND)
        if pending and output_format is HistoryFormat.human:
            print(f"shournal: {pending} command(s) are still being stored", file=sys.stderr)
    raise SystemExit(EXIT_FOUND if commands else EXIT_NOT_FOUND)


def _emit(commands: list[Any], output_format: HistoryFormat, template: str | None,
          print0: bool, absolute: bool, no_pager: bool) -> None:  # fmt: skip
    if print0:
        from shournal.report.history import render_print0

        sys.stdout.flush()
        sys.stdout.buffer.write(render_print0(commands))
        sys.stdout.buffer.flush()
        return
    if output_format is HistoryFormat.json:
        from shournal.report.json import render_json

        sys.stdout.write(render_json(commands))
        return
    if output_format is HistoryFormat.jsonl:
        from shournal.report.json import render_jsonl

        sys.stdout.write(render_jsonl(commands))
        return
    from shournal.report.history import render_lines

    tty = sys.stdout.isatty()
    width = None
    if tty and template is None:
        import shutil

        width = shutil.get_terminal_size().columns
    color = tty and "NO_COLOR" not in os.environ
    text = render_lines(commands, absolute=absolute, color=color, width=width, template=template)
    if tty and not no_pager and _taller_than_the_screen(text):
        _page(text)
    else:
        sys.stdout.write(text)


def _taller_than_the_screen(text: str) -> bool:
    import shutil

    return text.count("\n") >= shutil.get_terminal_size().lines


def _page(text: str) -> None:
    """Through $PAGER (default ``less -FRX``: leaves short output on the
    screen, keeps the colours); without one, straight to the terminal."""
    import shlex

    pager = shlex.split(os.environ.get("PAGER") or "less -FRX")
    try:
        proc = subprocess.Popen(pager, stdin=subprocess.PIPE)
    except OSError:
        sys.stdout.write(text)
        return
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode("utf-8", "surrogateescape"))
        proc.stdin.close()
    except BrokenPipeError:
        pass
    proc.wait()
