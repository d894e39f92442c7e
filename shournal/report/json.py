"""JSON output: one array of command objects (``json``), or one object per
line (``jsonl``), with the original's field
names (plus droppedWriteEvents, droppedReadEvents, lostEvents, mtimeNs).

Paths are decoded with os.fsdecode and written with ensure_ascii, so
undecodable bytes appear as \\udcXX escapes: the output is plain ASCII, and
``os.fsencode(json.loads(...)[i]["path"])`` gives back the exact bytes.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, datetime

from shournal.data import CommandView, FileEventView

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
    obj: dict[str, Any] = {
        "id": ev.id,
        "path": os.fsdecode(ev.path),
        "size": ev.size,
        "mtime": _ns_iso(ev.mtime_ns),
        "mtimeNs": ev.mtime_ns,
        "hash": None if ev.hash is None else str(ev.hash),
        # --stat result (U, M, N, ERROR); "NA" when not checked, as the original.
        "status": ev.status or "NA",
    }
    if is_read:
        obj["isStoredToDisk"] = ev.is_stored
    return obj


def command_object(cmd: CommandView) -> dict[str, Any]:
    obj = _command_fields(cmd)
    if cmd.derived_from is not None:  # only then: the original's format otherwise
        obj["derivedFrom"] = cmd.derived_from
    if cmd.incomplete:  # likewise
        obj["incomplete"] = True
    return obj


def _command_fields(cmd: CommandView) -> dict[str, Any]:
    return {
        "id": cmd.id,
        "command": cmd.text,
        "returnValue": cmd.return_value if cmd.return_value_known else None,
        "username": cmd.username,
        "hostname": cmd.hostname,
        "hashChunkSize": cmd.hash_chunk_size,
        "hashMaxCountOfReads": cmd.hash_max_reads,
        "sessionUuid": (
            None if cmd.session_uuid is None else base64.b64encode(cmd.session_uuid).decode()
        ),
        "startTime": _iso(cmd.start_time),
        "endTime": _iso(cmd.end_time),
        "workingDir": cmd.working_dir,
        "fileReadEvents": [_event(ev, True) for ev in cmd.reads],
        "fileWriteEvents": [_event(ev, False) for ev in cmd.writes],
        "droppedWriteEvents": cmd.dropped_writes,
        "droppedReadEvents": cmd.dropped_reads,
        "lostEvents": cmd.lost_events,
        # by reason (shournal.capture.record.LOST_REASONS), those with a count
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
