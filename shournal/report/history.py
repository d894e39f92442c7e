"""`shournal history`: one line per command, as a daily history tool shows
it -- when (relative), how long, how it ended, where, what, and whether it
wrote files, which no shell history knows.

Recorded text is made printable here (a colleague's journal may hold escape
sequences); colour is added only around our own fields.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from shournal.data import CommandView
from shournal.terminal import printable

# The fields of --format, in the order of the default line.
FIELDS = ("id", "when", "duration", "status", "wrote", "cwd", "command", "host", "user",
          "session", "start", "end", "read", "tags", "note", "imported")  # fmt: skip

_GREEN, _RED, _YELLOW, _CYAN, _RESET = (
    "\x1b[32m", "\x1b[31m", "\x1b[33m", "\x1b[36m", "\x1b[0m"
)  # fmt: skip


class FormatError(ValueError):
    """A --format that names an unknown field or is not a format string."""


def relative_time(moment: datetime, now: datetime) -> str:
    """``12s ago``, ``5m ago``, ``3h ago`` today; ``yesterday 14:02``; the
    weekday within a week; the date beyond (local time)."""
    secs = (now - moment).total_seconds()
    local, local_now = moment.astimezone(), now.astimezone()
    if 0 <= secs < 60:
        return f"{int(secs)}s ago"
    if 0 <= secs < 3600:
        return f"{int(secs // 60)}m ago"
    if 0 <= secs and local.date() == local_now.date():
        return f"{int(secs // 3600)}h ago"
    if local.date() == local_now.date() - timedelta(days=1):
        return f"yesterday {local:%H:%M}"
    if 0 <= secs < 7 * 86400:
        return f"{local:%a %H:%M}"
    if local.year == local_now.year:
        return f"{local:%b %d %H:%M}"
    return f"{local:%Y-%m-%d}"


def absolute_time(moment: datetime) -> str:
    return f"{moment.astimezone():%Y-%m-%d %H:%M:%S}"


def duration(cmd: CommandView) -> str:
    """``0.12s``, ``3.4s``, ``4m05s``, ``2h03m``; ``?`` when the end is not known."""
    if cmd.incomplete:
        return "?"
    secs = max(0.0, (cmd.end_time - cmd.start_time).total_seconds())
    if secs < 10:
        return f"{secs:.2f}s"
    if secs < 60:
        return f"{secs:.1f}s"
    if secs < 3600:
        return f"{int(secs // 60)}m{int(secs % 60):02d}s"
    return f"{int(secs // 3600)}h{int(secs % 3600 // 60):02d}m"


def status(cmd: CommandView) -> str:
    return str(cmd.return_value) if cmd.return_value_known else "?"


def short_dir(path: str, home: str | None) -> str:
    """``path`` with the home directory written ``~``."""
    if home and home != "/" and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "~" + path[len(home.rstrip("/")) :]
    return path


def one_line(text: str) -> str:
    """A command line on one line: its line breaks shown as ``↵``, every
    other control byte escaped."""
    return printable(text.strip("\n"), newlines=True).replace("\n", " ↵ ")


def fields(cmd: CommandView, now: datetime, *, absolute: bool, home: str | None) -> dict[str, str]:
    """The named fields of one command, printable, for --format."""
    session = cmd.session_uuid.hex() if cmd.session_uuid else ""
    return {
        "id": str(cmd.id),
        "when": absolute_time(cmd.start_time) if absolute else relative_time(cmd.start_time, now),
        "duration": duration(cmd),
        "status": status(cmd),
        "wrote": str(cmd.write_count),
        "read": str(cmd.read_count),
        "cwd": printable(short_dir(cmd.working_dir, home)),
        "command": one_line(cmd.text),
        "host": printable(cmd.hostname),
        "user": printable(cmd.username),
        "session": session,
        "start": absolute_time(cmd.start_time),
        "end": "" if cmd.incomplete else absolute_time(cmd.end_time),
        "tags": " ".join(printable(t) for t in cmd.tags),
        "note": "" if cmd.note is None else one_line(cmd.note),
        # the kind of history `shournal import` brought it from; "" if recorded
        "imported": cmd.imported_from or "",
    }


def check_format(template: str) -> None:
    """Raise :class:`FormatError` unless ``template`` names only FIELDS."""
    import string

    try:
        names = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as e:
        raise FormatError(f"--format: {e}") from None
    unknown = [n for n in names if n not in FIELDS]
    if unknown:
        raise FormatError(
            f"--format: unknown field {{{unknown[0]}}} (fields: {', '.join(FIELDS)})"
        )


def render_lines(
    commands: list[CommandView],
    *,
    now: datetime | None = None,
    absolute: bool = False,
    color: bool = False,
    width: int | None = None,
    template: str | None = None,
    home: str | None = None,
    me: tuple[str, str] | None = None,
) -> str:
    """The history view: one line per command (``template``: --format);
    ``user@host`` before the command line of one not the reader's own
    here (shournal.report.whose; ``me``: (user, host), default the reader's)."""
    from shournal.report.whose import not_own

    now = now or datetime.now().astimezone()
    home = home if home is not None else os.environ.get("HOME")
    rows = [fields(c, now, absolute=absolute, home=home) for c in commands]
    if template is not None:
        return "".join(template.format_map(row) + "\n" for row in rows)
    if not rows:
        return ""
    w_id = max(len(r["id"]) for r in rows)
    w_when = max(len(r["when"]) for r in rows)
    w_dur = max(len(r["duration"]) for r in rows)
    w_st = max(len(r["status"]) for r in rows)
    w_cwd = min(32, max(len(r["cwd"]) for r in rows))
    out = []
    for cmd, row in zip(commands, rows, strict=True):
        st = row["status"].rjust(w_st)
        if color:
            tint = _YELLOW if st.strip() == "?" else _GREEN if cmd.return_value == 0 else _RED
            st = f"{tint}{st}{_RESET}"
        wrote = f"w{cmd.write_count}" if cmd.write_count else ""
        cwd = row["cwd"]
        if len(cwd) > w_cwd:
            cwd = "…" + cwd[-(w_cwd - 1) :]
        head = (f"{row['id'].rjust(w_id)}  {row['when'].rjust(w_when)}  "
                f"{row['duration'].rjust(w_dur)}  ")  # fmt: skip
        mid = f"  {wrote:<5} {cwd:<{w_cwd}}  "
        text = row["command"]
        # tags before the command line (its end is what gets elided)
        tags = "".join(f"#{t} " for t in row["tags"].split())
        # a colleague's command, or one of another host: whose and where
        who = not_own(cmd.username, cmd.hostname, me)
        if who is not None:
            tags = f"{who} {tags}"
        if width is not None:
            room = width - len(head) - len(row["status"].rjust(w_st)) - len(mid) - len(tags)
            if room < 8:
                room = 8
            if len(text) > room:
                text = text[: room - 1] + "…"
        if tags and color:
            tags = f"{_CYAN}{tags}{_RESET}"
        out.append(f"{head}{st}{mid}{tags}{text}")
    return "\n".join(out) + "\n"


def render_print0(commands: list[CommandView]) -> bytes:
    """Each command line as typed, NUL-terminated (for fzf, xargs -0): the
    raw text, not made printable -- the reader is a program."""
    return b"".join(os.fsencode(c.text) + b"\0" for c in commands)
