"""The self-contained HTML report (``--output-format html``).

One file that works offline: the stylesheet and the script under
``html_assets/`` are inlined at render time, the commands travel as JSON in
a ``<script type="application/json">`` block, and the statistics are drawn
here as static SVG.  A Content-Security-Policy admits only our own script
and stylesheet (by hash) and forbids every fetch, so even a bug in the
escaping could not run injected code or phone home.

Everything from the journal is user data: command lines and paths may hold
``</script>``, quotes or bytes that are not UTF-8.  Text is made valid
Unicode first (undecodable bytes become ``\\xNN``), then escaped for its
context; the output is pure ASCII.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta, tzinfo
from html import escape
from importlib import resources
from typing import Any, TextIO

from shournal.data import CommandView, FileEventView, JournalStats, lost_reason_parts

__all__ = ["TOP_N", "commands_per_day", "render_html", "write_html"]

# Entries per statistics chart (the top= the CLI computes JournalStats with).
TOP_N = 10
# Longest run of days drawn one bar per day; longer spans are drawn per week.
MAX_DAY_BARS = 120

_STAT_LABELS = {"U": "up to date", "M": "modified", "N": "missing", "E": "error", "ERROR": "error"}


# -- text hygiene --------------------------------------------------------------


def clean_text(text: str) -> str:
    """Valid Unicode for display: lone surrogates (undecodable bytes kept by
    surrogateescape) become ``\\xNN`` like undecodable bytes in paths."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # surrogates outside the escape range
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def clean_path(path: bytes) -> str:
    return path.decode("utf-8", "backslashreplace")


def _html(text: str) -> str:
    """Escaped for element content and quoted attributes, ASCII only."""
    return escape(clean_text(text), quote=True).encode("ascii", "xmlcharrefreplace").decode()


def json_for_script(value: Any) -> str:
    """JSON that can sit inside a ``<script>`` element: ASCII only, and no
    ``<``, ``>`` or ``&`` so that neither ``</script>`` nor ``<!--`` can
    appear (JSON.parse reads the \\u escapes back)."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# -- statistics ----------------------------------------------------------------


def _session_text(raw: bytes | None) -> str:
    return "(no session)" if raw is None else base64.b64encode(raw).decode("ascii")


def commands_per_day(
    commands: Sequence[CommandView], tz: tzinfo | None = None
) -> list[tuple[date, int]]:
    """How many of ``commands`` started on each day from the first to the
    last (``tz`` None: local days of this machine), for the day chart
    beside the timeline."""
    per_day: Counter[date] = Counter(c.start_time.astimezone(tz).date() for c in commands)
    days: list[tuple[date, int]] = []
    if per_day:
        day, last = min(per_day), max(per_day)
        while day <= last:
            days.append((day, per_day.get(day, 0)))
            day += timedelta(days=1)
    return days


# -- the data block ------------------------------------------------------------


def _ms(moment: datetime) -> float:
    # Milliseconds with microsecond precision; JSON numbers are doubles.
    return round(moment.timestamp() * 1000, 3)


def _status(ev: FileEventView) -> str | None:
    # --stat may attach a status (added by the query layer); absent: None.
    value = getattr(ev, "stat", None)
    if value is None:
        return None
    value = getattr(value, "value", value)  # an Enum
    text = clean_text(str(value))
    return _STAT_LABELS.get(text, text)


def _is_binary(data: bytes) -> bool:
    if b"\x00" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        # A multi-byte character cut by the preview limit is still text.
        return e.start < len(data) - 3
    return False


class _Payload:
    """Builds the JSON object the page script reads."""

    def __init__(self) -> None:
        self.contents: list[dict[str, Any]] = []
        self._content_index: dict[int, int] = {}

    def content(self, ev: FileEventView) -> int | None:
        if ev.content_id is None:
            return None
        index = self._content_index.get(ev.content_id)
        if index is None:
            preview = ev.content_preview or b""
            size = ev.content_size if ev.content_size is not None else len(preview)
            binary = _is_binary(preview)
            self.contents.append(
                {
                    "size": size,
                    "shown": 0 if binary else len(preview),
                    "binary": binary,
                    "text": None if binary else preview.decode("utf-8", "replace"),
                }
            )
            index = self._content_index[ev.content_id] = len(self.contents) - 1
        return index

    def event(self, ev: FileEventView, is_read: bool) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "id": ev.id,
            "p": clean_path(ev.path),
            "sz": ev.size,
            # Decimal string: a uint64 does not fit a JavaScript number.
            "h": None if ev.hash is None else str(ev.hash),
            "mt": ev.mtime_ns // 1_000_000,
            "st": _status(ev),
        }
        if is_read:
            obj["c"] = self.content(ev)
        return obj


def _stack(commands: Sequence[CommandView]) -> dict[int, int]:
    """Row within its lane for each command (by position): overlapping
    commands of one session go to separate rows, first free row wins."""
    rows: dict[int, int] = {}
    ends: dict[bytes | None, list[float]] = {}
    order = sorted(range(len(commands)), key=lambda i: (commands[i].start_time, commands[i].id))
    for i in order:
        cmd = commands[i]
        start, end = _ms(cmd.start_time), max(_ms(cmd.end_time), _ms(cmd.start_time) + 1)
        lane = ends.setdefault(cmd.session_uuid, [])
        for row, busy_until in enumerate(lane):
            if busy_until <= start:
                lane[row] = end
                rows[i] = row
                break
        else:
            rows[i] = len(lane)
            lane.append(end)
    return rows


def build_payload(
    commands: Sequence[CommandView],
    *,
    title: str,
    generated_at: datetime | None,
    session_firsts: dict[bytes, CommandView] | None = None,
) -> dict[str, Any]:
    """The report's data block.  ``session_firsts``: the first recorded
    command of each session (``Journal.session_firsts``), whose host, start
    and directory label the session's lane: when the terminal started and
    where; a session missing from it is labelled by its first command in
    the report."""
    firsts = session_firsts or {}
    rows = _stack(commands)
    lane_of: dict[bytes | None, int] = {}
    sessions: list[dict[str, Any]] = []
    hosts: list[set[str]] = []
    users: list[set[str]] = []
    # Lanes in order of each session's first command.
    for i in sorted(range(len(commands)), key=lambda i: (commands[i].start_time, commands[i].id)):
        cmd = commands[i]
        if cmd.session_uuid not in lane_of:
            lane_of[cmd.session_uuid] = len(sessions)
            first = firsts.get(cmd.session_uuid, cmd) if cmd.session_uuid else cmd
            sessions.append(
                {
                    "id": None if cmd.session_uuid is None else _session_text(cmd.session_uuid),
                    "rows": 0,
                    "n": 0,
                    # the lane's label: where and when the terminal started
                    "start": _ms(first.start_time),
                    "host": clean_text(first.hostname),
                    "cwd": clean_text(first.working_dir),
                    "startInReport": first is cmd,
                }
            )
            hosts.append(set())
            users.append(set())
        lane = lane_of[cmd.session_uuid]
        sessions[lane]["rows"] = max(sessions[lane]["rows"], rows[i] + 1)
        sessions[lane]["n"] += 1
        hosts[lane].add(clean_text(cmd.hostname))
        users[lane].add(clean_text(cmd.username))
    for lane, session in enumerate(sessions):
        session["hosts"] = sorted(hosts[lane])
        session["users"] = sorted(users[lane])

    payload = _Payload()
    cmds = []
    for i, cmd in enumerate(commands):
        cmds.append(
            {
                "id": cmd.id,
                "text": clean_text(cmd.text),
                "rv": cmd.return_value if cmd.return_value_known else None,
                "inc": cmd.incomplete,
                "s": _ms(cmd.start_time),
                "e": _ms(cmd.end_time),
                "cwd": clean_text(cmd.working_dir),
                "user": clean_text(cmd.username),
                "host": clean_text(cmd.hostname),
                "lane": lane_of[cmd.session_uuid],
                "row": rows[i],
                "hcs": cmd.hash_chunk_size,
                "hmr": cmd.hash_max_reads,
                "wc": max(cmd.write_count, len(cmd.writes)),
                "rc": max(cmd.read_count, len(cmd.reads)),
                "dw": cmd.dropped_writes,
                "dr": cmd.dropped_reads,
                "lost": cmd.lost_events,
                "lostWhy": lost_reason_parts(cmd.lost_events, cmd.lost_reasons),
                "note": None if cmd.note is None else clean_text(cmd.note),
                "tags": [clean_text(t) for t in cmd.tags],
                "w": [payload.event(ev, False) for ev in cmd.writes],
                "r": [payload.event(ev, True) for ev in cmd.reads],
            }
        )
    return {
        "version": 1,
        "title": clean_text(title),
        "generated": None if generated_at is None else _ms(generated_at),
        "sessions": sessions,
        "commands": cmds,
        "contents": payload.contents,
    }


# -- statistics charts (static SVG) -------------------------------------------

# Two charts side by side on a 1400 px wide window.
_CHART_W = 640
_BAR_H = 20
_LABEL_W = 280
_LABEL_CHARS = 36  # 12 px monospace: about 7.3 px a character
_VALUE_W = 130  # room right of the longest bar for its value text
_MAX_COLUMN_W = 48


def _short(text: str, limit: int = _LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short_path(path: str, limit: int = _LABEL_CHARS) -> str:
    # The end of a path says most about it.
    return path if len(path) <= limit else "..." + path[len(path) - limit + 3 :]


def _bar_chart(
    chart_id: str,
    title: str,
    rows: list[tuple[str, list[int], str]],
    legend: list[str],
    paths: bool = False,
) -> str:
    """Horizontal bars; each row is (label, stacked values, value text)."""
    out = [f'<figure class="chart" id="{chart_id}"><figcaption>{_html(title)}</figcaption>']
    if not rows:
        out.append('<p class="empty">Nothing to show.</p></figure>')
        return "".join(out)
    biggest = max(sum(values) for _, values, _ in rows) or 1
    plot_w = _CHART_W - _LABEL_W - _VALUE_W
    height = len(rows) * _BAR_H + (18 if len(legend) > 1 else 4)
    out.append(
        f'<svg viewBox="0 0 {_CHART_W} {height}" width="{_CHART_W}" height="{height}" '
        f'role="img" aria-label="{_html(title)}">'
    )
    for i, (label, values, value_text) in enumerate(rows):
        y = i * _BAR_H
        out.append(
            f'<g class="bar"><title>{_html(label)}: {_html(value_text)}</title>'
            f'<text class="label" x="{_LABEL_W - 8}" y="{y + 14}" text-anchor="end">'
            f"{_html(_short_path(label) if paths else _short(label))}</text>"
        )
        x = float(_LABEL_W)
        for part, value in enumerate(values):
            w = value / biggest * plot_w
            out.append(
                f'<rect class="s{part}" x="{x:.1f}" y="{y + 3}" width="{w:.1f}" '
                f'height="{_BAR_H - 6}"/>'
            )
            x += w
        out.append(f'<text class="value" x="{x + 6:.1f}" y="{y + 14}">{_html(value_text)}</text>')
        out.append("</g>")
    if len(legend) > 1:
        y = len(rows) * _BAR_H + 4
        for part, name in enumerate(legend):
            x = _LABEL_W + part * 110
            out.append(
                f'<rect class="s{part}" x="{x}" y="{y}" width="10" height="10"/>'
                f'<text class="legend" x="{x + 14}" y="{y + 9}">{_html(name)}</text>'
            )
    out.append("</svg></figure>")
    return "".join(out)


def _day_chart(chart_id: str, title: str, days: list[tuple[date, int]]) -> str:
    out = [f'<figure class="chart" id="{chart_id}"><figcaption>{_html(title)}</figcaption>']
    if not days:
        out.append('<p class="empty">Nothing to show.</p></figure>')
        return "".join(out)
    unit = "day"
    buckets = [(d.isoformat(), n) for d, n in days]
    if len(days) > MAX_DAY_BARS:
        unit = "week"
        weekly: dict[str, int] = {}
        for d, n in days:
            monday = (d - timedelta(days=d.weekday())).isoformat()
            weekly[monday] = weekly.get(monday, 0) + n
        buckets = list(weekly.items())
    biggest = max(n for _, n in buckets) or 1
    top, plot_h, left = 14, 150, 40
    plot_w = _CHART_W - left - 10
    height = top + plot_h + 34
    step = plot_w / len(buckets)
    bar_w = max(min(step * 0.8, _MAX_COLUMN_W), 1)
    out.append(
        f'<svg viewBox="0 0 {_CHART_W} {height}" width="{_CHART_W}" height="{height}" '
        f'role="img" aria-label="{_html(title)}">'
        f'<text class="value" x="{left - 6}" y="{top + 4}" text-anchor="end">{biggest}</text>'
        f'<text class="value" x="{left - 6}" y="{top + plot_h}" text-anchor="end">0</text>'
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{_CHART_W - 10}" '
        f'y2="{top + plot_h}"/>'
    )
    label_every = max(1, round(len(buckets) / 8))
    for i, (label, n) in enumerate(buckets):
        h = n / biggest * plot_h
        x = left + i * step
        what = "command" if n == 1 else "commands"
        out.append(
            f'<g class="bar"><title>{unit} {label}: {n} {what}</title>'
            f'<rect class="s0" x="{x + (step - bar_w) / 2:.1f}" y="{top + plot_h - h:.1f}" '
            f'width="{bar_w:.1f}" height="{h:.1f}"/></g>'
        )
        if i % label_every == 0 or i == len(buckets) - 1 and len(buckets) < 8:
            out.append(
                f'<text class="tick" x="{x + step / 2:.1f}" y="{top + plot_h + 16}" '
                f'text-anchor="middle">{label}</text>'
            )
    out.append("</svg></figure>")
    return "".join(out)


def render_charts(stats: JournalStats | None, days: list[tuple[date, int]]) -> str:
    """The statistics as static SVG: the four sections of ``stats`` (None:
    not computed, said so) and the commands per day."""

    def plural(n: int, word: str) -> str:
        return f"{n} {word}" if n == 1 else f"{n} {word}s"

    day_chart = _day_chart("chart-days", "Commands per day", days)
    if stats is None:
        return '<p class="empty">Statistics were not computed for this report.</p>' + day_chart
    return "".join(
        [
            _bar_chart(
                "chart-modifications",
                "Commands with most file modifications",
                [
                    (f"#{e.command_id} {clean_text(e.text)}", [e.written],
                     plural(e.written, "file"))
                    for e in stats.most_modifications
                ],
                ["written files"],
            ),
            _bar_chart(
                "chart-sessions",
                "Sessions with most commands",
                [
                    (_session_text(e.session_uuid), [e.commands], plural(e.commands, "command"))
                    for e in stats.sessions_most_commands
                ],
                ["commands"],
            ),
            _bar_chart(
                "chart-cwds",
                "Working directories with most commands",
                [
                    (clean_text(e.path), [e.commands], plural(e.commands, "command"))
                    for e in stats.busiest_working_dirs
                ],
                ["commands"],
                paths=True,
            ),
            _bar_chart(
                "chart-dirs",
                "Directories with most input/output activity",
                [
                    (clean_path(e.path), [e.written, e.read], f"{e.written} written, {e.read} read")
                    for e in stats.busiest_directories
                ],
                ["written", "read"],
                paths=True,
            ),
            day_chart,
        ]
    )


# -- the page ------------------------------------------------------------------


@functools.cache
def _asset(name: str) -> str:
    text = (resources.files("shournal.report") / "html_assets" / name).read_text("utf-8")
    # Inlined verbatim: a closing tag inside would end the element early.
    lowered = text.lower()
    if "</script" in lowered or "</style" in lowered or not text.isascii():
        raise RuntimeError(f"html asset {name} cannot be inlined (closing tag or non-ASCII)")
    return text


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def write_html(
    commands: Sequence[CommandView],
    fp: TextIO,
    *,
    stats: JournalStats | None = None,
    title: str = "shournal report",
    generated_at: datetime | None = None,
    session_firsts: dict[bytes, CommandView] | None = None,
) -> None:
    """Write the report for ``commands`` to ``fp`` (pure ASCII text).

    ``stats``: the statistics to draw, e.g. ``Journal.stats(command_ids=
    [c.id for c in commands], top=TOP_N)``; None draws only the commands
    per day.  ``generated_at`` None: now.  ``session_firsts``: see
    :func:`build_payload`.
    """
    if generated_at is None:
        generated_at = datetime.now(UTC)
    css, js = _asset("report.css"), _asset("report.js")
    data = json_for_script(
        build_payload(
            commands, title=title, generated_at=generated_at, session_firsts=session_firsts
        )
    )
    charts = render_charts(stats, commands_per_day(commands))
    csp = (
        f"default-src 'none'; script-src {_csp_hash(js)}; style-src {_csp_hash(css)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    head = _html(title)
    count = len(commands)
    fp.write(
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="shournal">\n'
        '<link rel="icon" href="data:,">\n'
        f"<title>{head}</title>\n<style>{css}</style>\n</head>\n<body>\n"
        f'<header><h1>{head}</h1><p class="meta" id="meta">'
        f"{count} command{'' if count == 1 else 's'}</p></header>\n"
        '<noscript><p class="warn">The timeline and the command details need JavaScript; '
        "the statistics below do not.</p></noscript>\n"
        '<section id="timeline-section"><h2>Timeline</h2>'
        '<div class="toolbar"><button type="button" id="zoom-in" title="Zoom in">+</button>'
        '<button type="button" id="zoom-out" title="Zoom out">&#8722;</button>'
        '<button type="button" id="zoom-fit" title="Show everything">fit</button>'
        '<span class="hint">wheel: zoom, drag: pan, click: details</span></div>'
        '<div id="timeline"></div></section>\n'
        '<div id="main"><section id="list-section"><h2>Commands</h2>'
        '<input type="search" id="filter" placeholder="filter: command, directory, path"'
        ' aria-label="filter commands">'
        '<div id="list-wrap"><table id="cmdlist"><thead><tr><th>id</th><th>start</th>'
        "<th>$?</th><th>command</th><th>working directory</th></tr></thead>"
        "<tbody></tbody></table></div></section>\n"
        '<section id="details" aria-live="polite"><h2>Details</h2>'
        '<p class="empty">Click a command in the timeline or the list.</p></section></div>\n'
        f'<section id="stats"><h2>Statistics</h2>{charts}</section>\n'
        '<script type="application/json" id="shournal-data">'
    )
    fp.write(data)
    fp.write(f"</script>\n<script>{js}</script>\n</body></html>\n")


def render_html(commands: Sequence[CommandView], **kw: Any) -> str:
    import io

    buf = io.StringIO()
    write_html(commands, buf, **kw)
    return buf.getvalue()
