"""The human-readable listing (layout of the original's §9.1)."""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterable, Sequence
from datetime import datetime, tzinfo

from shournal.query import CommandView, FileEventView

NO_RESULTS = "No results found matching the query."

_INDENT_SECTION = "  "
_INDENT_FILE = "     "
_INDENT_CONTENT = "          "

# File names and archived scripts may contain terminal escape sequences or
# newlines; those must never reach the terminal raw.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c != 0x09}


def printable(text: str) -> str:
    return text.translate(_CONTROL)


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


def _file_line(ev: FileEventView, with_id: bool) -> str:
    digest = "-" if ev.hash is None else str(ev.hash)
    line = f"{_INDENT_FILE}{_path(ev)} ({format_size(ev.size)}) Hash: {digest}"
    return f"{line} id {ev.id}" if with_id else line


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


def render_command(
    cmd: CommandView,
    *,
    max_files: int = 10,
    max_lines: int = 5,
    local_hostname: str | None = None,
    tz: tzinfo | None = None,
) -> list[str]:
    head = f"cmd-id {cmd.id} "
    if cmd.return_value_known:
        head += f"$?={cmd.return_value} "
    # The command line is shown as typed, never escaped or wrapped.
    lines = [f"{head}{_time_range(cmd.start_time, cmd.end_time, tz)} $ {cmd.text}"]
    lines.append(f"Working directory: {printable(cmd.working_dir)}")
    if cmd.session_uuid is not None:
        lines.append(f"session-uuid {base64.b64encode(cmd.session_uuid).decode('ascii')}")
    if cmd.hostname != (local_hostname if local_hostname is not None else socket.gethostname()):
        lines.append(f"Hostname: {printable(cmd.hostname)}")
    lines += _section(cmd.writes, cmd.write_count, "written", max_files, max_lines, False)
    lines += _dropped(cmd.dropped_writes, "write")
    lines += _section(cmd.reads, cmd.read_count, "read", max_files, max_lines, True)
    lines += _dropped(cmd.dropped_reads, "read")
    if cmd.lost_events > 0:
        lines.append(
            f"{_INDENT_SECTION}({_plural(cmd.lost_events, 'file event')} lost: "
            "kernel queue overflow or file not readable)"
        )
    return lines


def render_human(
    commands: Iterable[CommandView],
    *,
    max_files: int = 10,
    max_lines: int = 5,
    local_hostname: str | None = None,
    tz: tzinfo | None = None,
) -> str:
    """All commands, separated by blank lines.  ``tz`` None means local
    time; ``local_hostname`` None means this machine's name."""
    if local_hostname is None:
        local_hostname = socket.gethostname()
    blocks = [
        "\n".join(
            render_command(
                cmd,
                max_files=max_files,
                max_lines=max_lines,
                local_hostname=local_hostname,
                tz=tz,
            )
        )
        for cmd in commands
    ]
    return "\n\n".join(blocks) + "\n" if blocks else ""
