"""What `shournal query` prints, without typer: the output formats, the
human listing with its statistics, and the "no results" hints.  The CLI
(:mod:`shournal.cli.query`) and its fast path for the common read-only
questions (:mod:`shournal.cli._fast`) both print through here, so their
output is the same byte for byte."""

from __future__ import annotations

import os
import sys

# Not typing.TYPE_CHECKING: the fast path prints through here, and typing
# and pathlib cost it ~5 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

HUMAN_MAX_FILES = 10

# --stat-counts MIN,MAX: statistics sections need MIN entries and show MAX.
STAT_COUNTS = "5,5"


def write(text: str) -> None:
    """``text`` to stdout; a reader that went away (``| head``) is not an
    error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Exit quietly instead of failing again when Python flushes stdout
        # at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def stat_counts(text: str) -> tuple[int, int]:
    from shournal.data import QueryError

    parts = text.split(",")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 2 or min(values) < 0:
        raise QueryError(f"--stat-counts: expected MIN,MAX such as 5,5, got {text!r}")
    return values[0], values[1]


def render(
    fmt: str,
    commands: list[Any],
    stats: Any,
    max_files: int,
    min_stats: int,
    max_stats: int,
    output: Path | None,
    restored: Any = None,
) -> str:
    # an OutputFormat of shournal.cli.query, or its value (the fast path,
    # which does not import enum): a StrEnum member equals its value
    if fmt == "json":
        from shournal.report.json import render_json

        return render_json(commands)
    if fmt == "jsonl":
        from shournal.report.json import render_jsonl

        return render_jsonl(commands)
    if fmt == "shournal-json":
        from shournal.report.shournal_json import render_shournal_json

        if restored is None:
            return render_shournal_json(commands)
        return render_shournal_json(
            commands, restore_path=os.fspath(restored.dest), restored_files=restored.count
        )
    from shournal.report.human import render_human, render_stats, use_color

    tty = output is None and use_color(sys.stdout)
    width = None
    if output is None and sys.stdout.isatty():
        import shutil  # only here: with bz2 and lzma, ~5 ms of every start-up

        width = shutil.get_terminal_size().columns
    text = render_human(commands, max_files=max_files, color=tty, width=width)
    if stats is not None and max_stats > 0:
        section = render_stats(
            stats, min_count=min_stats, max_count=max_stats, color=tty, width=width
        )
        if section:
            text += "\n" + section
    return text


def no_results(
    missing: str,
    pending: int,
    wfile: Path | None,
    rfile: Path | None,
    capped: list[int] | None = None,
    command_text: str | None = None,
) -> str:
    """The human "no results" text with what is known of why: ``capped``,
    the commands that hit the write event cap when ``wfile`` was written;
    ``command_text`` a --command-text that names an ignored command."""
    from shournal.report.human import NO_RESULTS

    lines = [NO_RESULTS]
    hints = excluded_hints(wfile, rfile, command_text)
    if capped:
        shown = ", ".join(str(i) for i in capped[-5:])
        hints.append(
            f"{len(capped)} command(s) that ran when {wfile} was written hit the cap of write "
            f"events per command and dropped some (cmd-id {shown}); its writer may be one of "
            "them ([write_events] max_event_count)."
        )
    if missing:
        hints.append(f"Nothing has been recorded yet: {missing}.")
    if not os.environ.get("SHOURNAL_SESSION_ID"):
        hints.append(
            "Recording is off in this shell (no SHOURNAL_SESSION_ID): "
            "`shournal init bash` prints the lines that enable it."
        )
    if pending:
        hints.append(
            f"{pending} finished command(s) were still being stored; try again in a moment."
        )
    if not hints:
        hints.append(
            "--wfile/--rfile match a file's content (size, hash, mtime), not its name; "
            "--history 10 lists the latest commands."
        )
    lines += [f"Hint: {h}" for h in hints]
    return "\n".join(lines) + "\n"


def note_pending(pending: int, commands: list[Any], human: bool) -> None:
    """Say on stderr that finished commands still being stored are not in
    the result (a human "no results" text says it as a hint instead)."""
    if pending and not (human and not commands):
        print(
            f"shournal: {pending} finished command(s) not in the journal yet (still being "
            "stored), so not in this result; try again in a moment",
            file=sys.stderr,
        )


def excluded_hints(
    wfile: Path | None, rfile: Path | None, command_text: str | None = None
) -> list[str]:
    """Why a file given to --wfile/--rfile, or a command line given to
    --command-text, may never have been recorded."""
    if wfile is None and rfile is None and command_text is None:
        return []
    from shournal.capture.filters import IgnoredCommands, PathRule
    from shournal.config import ConfigError, load_config

    try:
        config = load_config(create=False)
    except ConfigError:
        return []
    hints = []
    if command_text is not None:
        from shournal.criteria import split_operator

        # the command line it names (a substring or a pattern: its words)
        op, rest = split_operator(command_text)
        line = (rest if op is not None else command_text).replace("%", " ").strip()
        try:
            ignored = IgnoredCommands.from_config(config.ignore_commands).matches_line(line)
        except ValueError:
            ignored = False
        if ignored:
            hints.append(
                f"`{line}` is an ignored command ([ignore_commands] commands, or built in: "
                "mount*, shournal*), so it is never recorded."
            )
    for path, section, flag, key in (
        (wfile, config.write_events, "--wfile", "write_events"),
        (rfile, config.read_events, "--rfile", "read_events"),
    ):
        if path is None:
            continue
        real = os.fsencode(os.path.realpath(path))
        if not PathRule.from_config(section).match(real):
            hints.append(
                f"{os.fsdecode(real)} is not recorded by the configuration "
                f"([{key}] include/exclude paths or hidden files), so {flag} cannot find it."
            )
        elif key == "read_events" and not config.read_events.enable:
            hints.append("read events are disabled in the configuration ([read_events] enable).")
    return hints
