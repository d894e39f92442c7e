"""The human-readable listing (layout of the original's §9.1)."""

from __future__ import annotations

import binascii
import os
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, tzinfo

from shournal.data import MATCH_CONTENT, CommandView, FileEventView, lost_reason_parts
from shournal.terminal import printable

# Not typing.TYPE_CHECKING: `shournal query` renders through here, and
# importing typing costs it ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

    from shournal.data import JournalStats

NO_RESULTS = "No results found matching the query."


def _b64(data: bytes) -> str:
    """base64.b64encode(data) as text, without importing base64 (which
    imports re, ~5 ms of a listing when nothing else needs it)."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _hostname() -> str:
    """This machine's name: socket.gethostname() (glibc answers it from
    uname(2)) without importing socket, ~2 ms of every listing."""
    return os.uname().nodename

_INDENT_SECTION = "  "
_INDENT_FILE = "     "
_INDENT_CONTENT = "          "

def format_size(size: int) -> str:
    if size < 1024:
        return f"{size} byte" if size == 1 else f"{size} bytes"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.2f} {unit}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _time_range(start: datetime, end: datetime, tz: tzinfo | None) -> str:
    # Minutes only: seconds are dropped before comparing, as the original does.
    start = start.astimezone(tz).replace(second=0, microsecond=0)
    end = end.astimezone(tz).replace(second=0, microsecond=0)
    text = start.strftime("%Y-%m-%d %H:%M")
    if end == start:
        return text
    if end.date() == start.date():
        return f"{text}-{end:%H:%M}"
    return f"{text} - {end:%Y-%m-%d %H:%M}"


def _path(ev: FileEventView) -> str:
    return printable(ev.path.decode("utf-8", "backslashreplace"))


# --stat: the original's letters, spelled out for readers.
STATUS_LABELS = {"U": "[up to date]", "M": "[modified]", "N": "[missing]", "ERROR": "[error]"}

_RESET = "\x1b[0m"
_STYLE = {
    "header": "\x1b[1m",
    "ok": "\x1b[32m",
    "fail": "\x1b[31m",
    "warn": "\x1b[33m",
    "dim": "\x1b[2m",
}
_STATUS_STYLE = {"U": "ok", "M": "warn", "N": "fail", "ERROR": "fail"}


def use_color(stream: TextIO | None = None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set
    (https://no-color.org: any non-empty value)."""
    stream = stream if stream is not None else sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


def _paint(text: str, style: str, color: bool) -> str:
    return f"{_STYLE[style]}{text}{_RESET}" if color else text


def _file_line(ev: FileEventView, with_id: bool) -> str:
    digest = "-" if ev.hash is None else str(ev.hash)
    line = f"{_INDENT_FILE}{_path(ev)} ({format_size(ev.size)}) Hash: {digest}"
    if with_id:
        line += f" id {ev.id}"
    if ev.status is not None:
        line += f" {STATUS_LABELS.get(ev.status, ev.status)}"
    return line


def _content_lines(ev: FileEventView, max_lines: int) -> list[str]:
    preview = ev.content_preview
    if preview is None or max_lines <= 0:
        return []
    if b"\x00" in preview:
        return [f"{_INDENT_CONTENT}Not printing content (binary data)"]
    truncated = ev.content_size is not None and ev.content_size > len(preview)
    text = preview.decode("utf-8", "replace")
    lines = text.split("\n")
    if truncated and len(lines) > 1:
        lines.pop()  # cut mid-line by the preview limit
    shown = [line.rstrip("\r") for line in lines if line.strip()]
    out = [f"{_INDENT_CONTENT}{printable(line)}" for line in shown[:max_lines]]
    if len(shown) > max_lines or truncated:
        out.append(f"{_INDENT_CONTENT}...")
    return out


def _section(
    events: Sequence[FileEventView],
    total: int,
    word: str,
    max_files: int,
    max_lines: int,
    is_read: bool,
) -> list[str]:
    if total == 0:
        return []
    header = f"{_INDENT_SECTION}{total} {word} file{'' if total == 1 else 's'}"
    if max_files <= 0:
        return [f"{header}."]
    out = [f"{header}:"]
    for ev in events[:max_files]:
        out.append(_file_line(ev, with_id=is_read))
        if is_read:
            out.extend(_content_lines(ev, max_lines))
    hidden = total - min(len(events), max_files)
    if hidden > 0:
        out.append(f"{_INDENT_FILE}... and {hidden} more files.")
    return out


def _dropped(count: int, kind: str) -> list[str]:
    if count <= 0:
        return []
    verb = "was" if count == 1 else "were"
    return [
        f"{_INDENT_SECTION}({_plural(count, f'{kind} event')} beyond the per-command cap "
        f"{verb} not stored)"
    ]


def _wrap(lines: list[str], width: int | None) -> list[str]:
    """Lines longer than ``width`` continue on the next line, indented two
    more than their own indent (paths break anywhere: they have no blanks)."""
    if not width or width < 20:
        return lines
    import textwrap  # only for a terminal: `shournal query` start-up (shournal.cli._fast)

    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip(" "))]
        out.extend(
            textwrap.wrap(
                line,
                width,
                subsequent_indent=indent + "  ",
                break_on_hyphens=False,
                drop_whitespace=True,
            )
            or [line]
        )
    return out


def _colorize(line: str) -> str:
    for status, label in STATUS_LABELS.items():
        if line.endswith(label):
            return line[: -len(label)] + _paint(label, _STATUS_STYLE[status], True)
    return line


def render_command(
    cmd: CommandView,
    *,
    max_files: int = 10,
    max_lines: int = 5,
    local_hostname: str | None = None,
    tz: tzinfo | None = None,
    color: bool = False,
    width: int | None = None,
    local_user: str | None = None,
) -> list[str]:
    """The lines of one command.  ``width``: wrap every line but the header
    (the command line is shown as typed) at this many columns.  A command
    of another host than ``local_hostname``, or of another user than
    ``local_user`` (default: the reader, shournal.report.whose), says
    where and whose it is."""
    head = _paint(f"cmd-id {cmd.id}", "header", color) + " "
    if cmd.return_value_known:
        status = f"$?={cmd.return_value}"
        head += _paint(status, "ok" if cmd.return_value == 0 else "fail", color) + " "
    if cmd.incomplete:
        head += _paint("incomplete", "fail", color) + " "
    # The command line is shown as typed (on its lines), never wrapped.
    text = printable(cmd.text, newlines=True)
    lines = [f"{head}{_time_range(cmd.start_time, cmd.end_time, tz)} $ {text}"]
    if local_user is None:
        from shournal.report.whose import reader

        local_user = reader()[0]
    body = _command_body(cmd, max_files, max_lines, local_hostname, tz, local_user)
    body = _wrap(body, width)
    if color:
        body = [_colorize(line) for line in body]
    return lines + body


# What an incomplete command (shournal.record.CommandRecord.incomplete) is.
INCOMPLETE_TEXT = (
    "Incomplete: no prompt reported its end (exec, exit or hangup); exit status unknown, "
    "ended when its last process did"
)


# What a content-only match (shournal.data.MATCH_CONTENT) is.
CONTENT_MATCH_TEXT = (
    "Matched by content only: same size and hash, but the file's mtime is none recorded "
    "(copied, touched or unpacked since)"
)


def _command_body(
    cmd: CommandView,
    max_files: int,
    max_lines: int,
    local_hostname: str | None,
    tz: tzinfo | None,
    local_user: str,
) -> list[str]:
    lines: list[str] = []
    lines.append(f"Working directory: {printable(cmd.working_dir)}")
    if cmd.note is not None:
        first, *rest = printable(cmd.note, newlines=True).split("\n")
        lines.append(f"Note: {first}")
        lines += [f"      {line}" for line in rest]
    if cmd.tags:
        lines.append(f"Tags: {' '.join(printable(t) for t in cmd.tags)}")
    if cmd.incomplete:
        lines.append(INCOMPLETE_TEXT)
    if cmd.session_uuid is not None:
        lines.append(f"session-uuid {_b64(cmd.session_uuid)}")
    if cmd.hostname != (local_hostname if local_hostname is not None else _hostname()):
        lines.append(f"Hostname: {printable(cmd.hostname)}")
        if cmd.username != local_user:
            lines.append(f"User: {printable(cmd.username)}")
    elif cmd.username != local_user:
        # a colleague's command (a lab store): whose, and where
        lines.append(f"User: {printable(cmd.username)}")
        lines.append(f"Hostname: {printable(cmd.hostname)}")
    if cmd.derived_from is not None:
        lines.append(f"Derived from command {cmd.derived_from} (shournal rerun)")
    if cmd.imported_from is not None:
        lines.append(f"Imported from a {printable(cmd.imported_from)} history (shournal import)")
    if cmd.match == MATCH_CONTENT:
        lines.append(CONTENT_MATCH_TEXT)
    lines += _section(cmd.writes, cmd.write_count, "written", max_files, max_lines, False)
    lines += _dropped(cmd.dropped_writes, "write")
    lines += _section(cmd.reads, cmd.read_count, "read", max_files, max_lines, True)
    lines += _dropped(cmd.dropped_reads, "read")
    if cmd.lost_events > 0:
        parts = lost_reason_parts(cmd.lost_events, cmd.lost_reasons)
        why = ", ".join(f"{n} {text}" for text, n in parts)
        lines.append(f"{_INDENT_SECTION}({_plural(cmd.lost_events, 'file event')} lost: {why})")
    return lines


def render_human(
    commands: Iterable[CommandView],
    *,
    max_files: int = 10,
    max_lines: int = 5,
    local_hostname: str | None = None,
    tz: tzinfo | None = None,
    color: bool = False,
    width: int | None = None,
    local_user: str | None = None,
) -> str:
    """All commands, separated by blank lines.  ``tz`` None means local
    time; ``local_hostname`` None means this machine's name; ``color``
    adds ANSI colours (see :func:`use_color`); ``width`` wraps long lines."""
    if local_hostname is None:
        local_hostname = _hostname()
    if local_user is None:
        from shournal.report.whose import reader

        local_user = reader()[0]
    blocks = [
        "\n".join(
            render_command(
                cmd,
                max_files=max_files,
                max_lines=max_lines,
                local_hostname=local_hostname,
                tz=tz,
                color=color,
                width=width,
                local_user=local_user,
            )
        )
        for cmd in commands
    ]
    return "\n\n".join(blocks) + "\n" if blocks else ""


# -- statistics -----------------------------------------------------------------

STATS_MIN = 5  # as the original's --stat-counts default: sections need 5 entries
STATS_MAX = 5


def _when(moment: datetime | None, tz: tzinfo | None) -> str:
    return "-" if moment is None else moment.astimezone(tz).strftime("%Y-%m-%d %H:%M")


def redactions_line(counts: dict[str, int]) -> str:
    """``3 secrets redacted: github-token 2, stripe-key 1`` (shournal.redact)."""
    total = sum(counts.values())
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda e: (-e[1], e[0])))
    return f"{_plural(total, 'secret')} redacted: {kinds}"


def render_stats(
    stats: JournalStats,
    *,
    min_count: int = STATS_MIN,
    max_count: int = STATS_MAX,
    totals: bool = False,
    tz: tzinfo | None = None,
    color: bool = False,
    width: int | None = None,
) -> str:
    """The original's four statistics sections; each is shown only when it
    has at least ``min_count`` entries, with at most ``max_count`` of them.
    ``totals`` adds a summary line first (``shournal stats``)."""
    lines: list[str] = []
    if totals:
        lines.append(
            f"{_plural(stats.commands, 'command')} in {_plural(stats.sessions, 'session')}, "
            f"{stats.written_events} written and {stats.read_events} read file events, "
            f"{_when(stats.first_start, tz)} to {_when(stats.last_start, tz)}"
        )
        if stats.redactions:
            lines.append(redactions_line(stats.redactions))

    def section(title: str, entries: list[str]) -> None:
        if len(entries) < max(min_count, 1):
            return
        if lines:
            lines.append("")
        lines.append(_paint(title, "header", color))
        lines.extend(_wrap([f"{_INDENT_SECTION}{e}" for e in entries[:max_count]], width))

    section(
        "Commands with most file modifications:",
        [
            f"cmd-id {e.command_id}: {_plural(e.written, 'written file')} $ "
            f"{printable(e.text, newlines=True)}"
            for e in stats.most_modifications
        ],
    )
    section(
        "Sessions with most commands:",
        [
            f"{_b64(e.session_uuid)}: "
            f"{_plural(e.commands, 'command')}, "
            f"{_time_range(e.first_start, e.last_end, tz)}"
            for e in stats.sessions_most_commands
        ],
    )
    section(
        "Working directories with most commands:",
        [
            f"{_plural(e.commands, 'command')} in {printable(e.path)}"
            for e in stats.busiest_working_dirs
        ],
    )
    section(
        "Directories with most input/output-activity:",
        [
            f"Total {e.total} ({e.written} written, {e.read} read) files at "
            f"{printable(e.path.decode('utf-8', 'backslashreplace'))}"
            for e in stats.busiest_directories
        ],
    )
    return "\n".join(lines) + "\n" if lines else ""
