"""The original's line-oriented JSON (``--output-format shournal-json``).

Tools written for shournal 3.x, such as ``shournal-to-snakemake``, read::

    HEADER:{"pathToReadFiles":"<data dir>/readFiles"}
    COMMAND:{...one compact object per command...}
    FOOTER:{"countOfRestoredFiles":0,"restorePath":null}

so this writer reproduces it exactly: compact objects with sorted keys (as
Qt writes them), times as local ISO time without zone and in whole seconds,
hashes as quoted decimal strings, ``returnValue`` 2147483647 when unknown,
``status`` ``NA`` unless ``--stat`` ran, full file lists.  Paths that are not
UTF-8 are written with U+FFFD replacements (the original could not store
them at all); use ``--output-format json`` for exact bytes.

Archived read files live in the journal, not in a ``readFiles`` directory:
``pathToReadFiles`` names where the original would keep them, only so that
consumers that read the key keep working.
"""

from __future__ import annotations

import base64
import io
import json
import os
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TextIO

from shournal import _paths
from shournal.data import CommandView, FileEventView


def _local(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%dT%H:%M:%S")


def _ns_local(ns: int) -> str:
    return datetime.fromtimestamp(ns // 1_000_000_000).strftime("%Y-%m-%dT%H:%M:%S")


def event_object(ev: FileEventView, is_read: bool, path: str, **times: Any) -> dict[str, Any]:
    """A file event in the original's fields, with the caller's ``path``
    and time fields (the ``json`` output writes them its own way)."""
    obj: dict[str, Any] = {
        "id": ev.id,
        "path": path,
        "size": ev.size,
        **times,
        "hash": None if ev.hash is None else str(ev.hash),
        # --stat result (U, M, N, ERROR); "NA" when not checked, as the original.
        "status": ev.status or "NA",
    }
    if is_read:
        obj["isStoredToDisk"] = ev.is_stored
    return obj


def _event(ev: FileEventView, is_read: bool) -> dict[str, Any]:
    return event_object(
        ev, is_read, ev.path.decode("utf-8", "replace"), mtime=_ns_local(ev.mtime_ns)
    )


def command_fields(
    cmd: CommandView,
    *,
    return_value: int | None,
    time: Callable[[datetime], str],
    event: Callable[[FileEventView, bool], dict[str, Any]],
) -> dict[str, Any]:
    """A command in the original's fields, with the caller's conversions
    (the ``json`` output writes null for an unknown exit status and UTC
    times)."""
    return {
        "id": cmd.id,
        "command": cmd.text,
        "returnValue": return_value,
        "username": cmd.username,
        "hostname": cmd.hostname,
        "hashChunkSize": cmd.hash_chunk_size,
        "hashMaxCountOfReads": cmd.hash_max_reads,
        "sessionUuid": (
            None if cmd.session_uuid is None else base64.b64encode(cmd.session_uuid).decode()
        ),
        "startTime": time(cmd.start_time),
        "endTime": time(cmd.end_time),
        "workingDir": cmd.working_dir,
        "fileReadEvents": [event(ev, True) for ev in cmd.reads],
        "fileWriteEvents": [event(ev, False) for ev in cmd.writes],
    }


def command_object(cmd: CommandView) -> dict[str, Any]:
    return command_fields(cmd, return_value=cmd.return_value, time=_local, event=_event)


def _line(tag: str, obj: dict[str, Any]) -> str:
    # Qt's compact JSON: sorted keys, no blanks, UTF-8 (not \u escapes).
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    # A command text may hold a lone surrogate (undecodable shell input):
    # make it printable rather than failing on write.
    text = text.encode("utf-8", "replace").decode("utf-8")
    return f"{tag}:{text}\n"


def write_shournal_json(
    commands: Iterable[CommandView],
    out: TextIO,
    *,
    path_to_read_files: str | None = None,
    restore_path: str | None = None,
    restored_files: int = 0,
) -> None:
    """Write HEADER, one COMMAND line per command, and FOOTER.  The restore
    fields go into the footer (``--restore-rfiles`` fills them)."""
    if path_to_read_files is None:
        path_to_read_files = os.fspath(_paths.data_dir() / "readFiles")
    out.write(_line("HEADER", {"pathToReadFiles": path_to_read_files}))
    for cmd in commands:
        out.write(_line("COMMAND", command_object(cmd)))
    out.write(
        _line("FOOTER", {"restorePath": restore_path, "countOfRestoredFiles": restored_files})
    )


def render_shournal_json(commands: Iterable[CommandView], **kw: Any) -> str:
    buf = io.StringIO()
    write_shournal_json(commands, buf, **kw)
    return buf.getvalue()
