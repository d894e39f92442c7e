"""JSON output: one array of command objects (``json``), or one object per
line (``jsonl``), with the original's field
names (plus droppedWriteEvents, droppedReadEvents, lostEvents, mtimeNs;
and uuid, derivedFrom, incomplete, note, tags and importedFrom when a
command has them; ``"match": "exact"|"content"`` for a query by a file, ``--wfile``/
``--rfile``: ``content`` when no recorded version has the file's mtime).

Paths are decoded with os.fsdecode and written with ensure_ascii, so
undecodable bytes appear as \\udcXX escapes: the output is plain ASCII, and
``os.fsencode(json.loads(...)[i]["path"])`` gives back the exact bytes.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

from shournal.data import CommandView, FileEventView, uuid_text
from shournal.report.shournal_json import command_fields, event_object

# Not typing.TYPE_CHECKING: `shournal query` renders through here, and
# importing typing costs it ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, TextIO


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _ns_iso(ns: int) -> str:
    seconds, rest = divmod(ns, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest // 1000)
    return _iso(moment)


def _event(ev: FileEventView, is_read: bool) -> dict[str, Any]:
    return event_object(
        ev, is_read, os.fsdecode(ev.path), mtime=_ns_iso(ev.mtime_ns), mtimeNs=ev.mtime_ns
    )


def command_object(cmd: CommandView) -> dict[str, Any]:
    obj = _command_fields(cmd)
    if cmd.uuid is not None:  # only then: the original's format otherwise
        obj["uuid"] = uuid_text(cmd.uuid)
    if cmd.derived_from is not None:  # only then: the original's format otherwise
        obj["derivedFrom"] = cmd.derived_from
    if cmd.incomplete:  # likewise
        obj["incomplete"] = True
    if cmd.note is not None:  # likewise (shournal note, shournal tag)
        obj["note"] = cmd.note
    if cmd.tags:
        obj["tags"] = list(cmd.tags)
    if cmd.imported_from is not None:  # likewise: `shournal import`
        obj["importedFrom"] = cmd.imported_from
    if cmd.match is not None:  # a query by a file's content (--wfile/--rfile)
        obj["match"] = cmd.match
    return obj


def _command_fields(cmd: CommandView) -> dict[str, Any]:
    return {
        **command_fields(
            cmd,
            return_value=cmd.return_value if cmd.return_value_known else None,
            time=_iso,
            event=_event,
        ),
        "droppedWriteEvents": cmd.dropped_writes,
        "droppedReadEvents": cmd.dropped_reads,
        "lostEvents": cmd.lost_events,
        # by reason (shournal.record.LOST_REASONS), those with a count
        "lostEventReasons": dict(cmd.lost_reasons),
    }


def write_json(commands: Iterable[CommandView], out: TextIO) -> None:
    """Stream one JSON array, one command object per line."""
    out.write("[")
    for i, cmd in enumerate(commands):
        out.write(",\n" if i else "\n")
        out.write(json.dumps(command_object(cmd), ensure_ascii=True, separators=(",", ":")))
    out.write("\n]\n")


def write_jsonl(commands: Iterable[CommandView], out: TextIO) -> None:
    """One command object per line and nothing else: streamable, and
    ``jq -c`` / ``while read`` friendly.  No results: no output."""
    for cmd in commands:
        out.write(json.dumps(command_object(cmd), ensure_ascii=True, separators=(",", ":")))
        out.write("\n")


def render_jsonl(commands: Iterable[CommandView]) -> str:
    import io

    buf = io.StringIO()
    write_jsonl(commands, buf)
    return buf.getvalue()


def render_json(commands: Iterable[CommandView]) -> str:
    import io

    buf = io.StringIO()
    write_json(commands, buf)
    return buf.getvalue()
