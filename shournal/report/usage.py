"""`shournal stats`: what the commands produced and consumed (files per
period, biggest writers, most reused inputs, most used programs), as text
and as JSON-ready values.  Journal text is made printable here."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from shournal.data import UsageStats
from shournal.report.human import _plural, format_size
from shournal.terminal import printable

_LABEL = {"hour": "%Y-%m-%d %H:00", "day": "%Y-%m-%d %a", "month": "%Y-%m"}
_BAR = 30


def _path(path: bytes) -> str:
    return printable(path.decode("utf-8", "backslashreplace"))


def _first_line(text: str, limit: int = 70) -> str:
    line = printable(text.strip().split("\n", 1)[0])
    return line if len(line) <= limit else line[: limit - 1] + "…"


def render_usage(u: UsageStats, *, top: int) -> str:
    """The sections, each only when it has an entry, each ended by a blank
    line."""
    lines: list[str] = []

    def section(title: str, entries: list[str]) -> None:
        if entries:
            lines.extend([title, *(f"  {e}" for e in entries[:top]), ""])

    lines.append(
        f"Files produced: {u.produced} ({format_size(u.written_bytes)} written); "
        f"files consumed: {u.consumed}"
    )
    lines.append("")
    peak = max((b.written + b.read for b in u.series), default=0)
    series = []
    for b in u.series:
        bar = "" if not peak else "#" * max(1, round(_BAR * (b.written + b.read) / peak))
        if b.written + b.read == 0:
            bar = ""
        series.append(f"{b.start:{_LABEL[u.bucket]}}  {b.commands:>6} cmds  "
                      f"{b.written:>7} written  {b.read:>7} read  {bar}")  # fmt: skip
    if series:
        lines.extend([f"Per {u.bucket}:", *(f"  {s}" for s in series), ""])
    section("Biggest writers (files):", [
        f"cmd-id {e.command_id}: {_plural(e.files, 'file')}, {format_size(e.bytes)} "
        f"$ {_first_line(e.text)}"
        for e in u.writers_by_files
    ])  # fmt: skip
    section("Biggest writers (bytes):", [
        f"cmd-id {e.command_id}: {format_size(e.bytes)}, {_plural(e.files, 'file')} "
        f"$ {_first_line(e.text)}"
        for e in u.writers_by_bytes if e.bytes
    ])  # fmt: skip
    section("Most reused inputs (read by most commands):", [
        f"{_plural(e.commands, 'command'):>13}  {_path(e.path)}" for e in u.reused_inputs
    ])  # fmt: skip
    section("Most used programs:", [
        f"{e.commands:>5}  {printable(e.program)}" for e in u.programs
    ])  # fmt: skip
    return "\n".join(lines)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def usage_object(u: UsageStats) -> dict[str, Any]:
    """UsageStats as JSON-ready values (paths via os.fsdecode, bucket starts
    ISO in local time with their offset)."""
    def writer(e: Any) -> dict[str, Any]:
        return {"id": e.command_id, "command": e.text, "files": e.files, "bytes": e.bytes}

    return {
        "bucket": u.bucket,
        "filesProduced": u.produced,
        "bytesWritten": u.written_bytes,
        "filesConsumed": u.consumed,
        "series": [
            {"start": _iso(b.start), "commands": b.commands, "written": b.written, "read": b.read}
            for b in u.series
        ],
        "biggestWritersByFiles": [writer(e) for e in u.writers_by_files],
        "biggestWritersByBytes": [writer(e) for e in u.writers_by_bytes],
        "mostReusedInputs": [
            {"path": os.fsdecode(e.path), "commands": e.commands} for e in u.reused_inputs
        ],
        "mostUsedPrograms": [{"program": e.program, "commands": e.commands} for e in u.programs],
    }
