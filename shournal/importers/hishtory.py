"""hishtory's JSON lines export (``hishtory export-json``): one object per
line with ``command``, ``current_working_directory`` (``~`` for
``home_directory``), ``exit_code``, ``start_time`` and ``end_time``
(RFC 3339, nanoseconds), ``hostname`` and ``local_username``.  hishtory has
no sessions.  There is no default path: export first, then import the file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from shournal.data import RETURN_VALUE_UNKNOWN
from shournal.importers import History, ImportFailed, identity
from shournal.importers.entries import check_time
from shournal.record import CommandRecord

KIND = "hishtory"
WHAT = "a hishtory JSON export"

_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|z|[+-]\d\d:\d\d)"
)


def default_path() -> None:
    return None


def rfc3339_ns(value: object) -> int | None:
    """An RFC 3339 time -> ns since the epoch (exact to the nanosecond);
    None for Go's zero time (year 1: not set)."""
    from datetime import UTC, datetime, timedelta

    m = _RFC3339.fullmatch(str(value))
    if m is None:
        raise ValueError(f"time {value!r} is not RFC 3339")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if year == 1:
        return None
    zone = m.group(8)
    offset = timedelta(0)
    if zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        offset = sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC) - offset
    seconds = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(seconds=1)
    fraction = int((m.group(7) or "0").ljust(9, "0"))
    return seconds * 1_000_000_000 + fraction


def _record(obj: object, where: str) -> CommandRecord:
    if not isinstance(obj, dict) or not isinstance(obj.get("command"), str):
        raise ImportFailed(f"{where}: not {WHAT}: no command")
    try:
        start = rfc3339_ns(obj.get("start_time"))
        end = rfc3339_ns(obj["end_time"]) if obj.get("end_time") is not None else None
    except ValueError as e:
        raise ImportFailed(f"{where}: not {WHAT}: {e}") from None
    if start is None:
        raise ImportFailed(f"{where}: not {WHAT}: no start_time")
    check_time(start, where)
    if end is not None:
        check_time(end, where)
    cwd = str(obj.get("current_working_directory") or "")
    home = str(obj.get("home_directory") or "")
    if home and (cwd == "~" or cwd.startswith("~/")):
        cwd = home.rstrip("/") + cwd[1:]
    exit_code = obj.get("exit_code")
    return CommandRecord(
        text=obj["command"],
        return_value=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool)
        else RETURN_VALUE_UNKNOWN,
        start_ns=start,
        end_ns=max(end if end is not None else start, start),
        working_dir=cwd,
        username=str(obj.get("local_username") or ""),
        hostname=str(obj.get("hostname") or ""),
        session_uuid=None,
        hash_chunk_size=None,
        hash_max_reads=None,
    )


def parse(data: bytes, name: str) -> list[CommandRecord]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ImportFailed(f"{name}: not {WHAT}: not UTF-8 text") from None
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name}: line {number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise ImportFailed(f"{where}: not {WHAT}: not a JSON object") from None
        records.append(_record(obj, where))
    records.sort(key=lambda r: r.start_ns)
    identity.assign(KIND, records, [True] * len(records))
    return records


def read(path: Path) -> History:
    return History(parse(path.read_bytes(), str(path)))
