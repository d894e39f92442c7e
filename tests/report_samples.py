"""Commands, file events and hostile strings for the HTML report's tests
(tests/unit/test_html_report.py and tests/system/test_html_browser.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from shournal.data import CommandView, FileEventView
from shournal.record import CommandRecord, FileEvent

T0 = datetime(2024, 3, 5, 9, 0, tzinfo=UTC)
XSS = '</script><img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
SESSION_A = b"\xaa" * 16
SESSION_B = b"\xbb" * 16
SCRIPT = b"#!/bin/sh\n# </script><script>window.__xss=3</script>\necho building\n"
NON_UTF8 = b"/srv/data/r\xe9sultat-\xff.csv"


def view(cid: int, text: str = "true", **kw: Any) -> CommandView:
    values: dict[str, Any] = {
        "id": cid,
        "text": text,
        "return_value": 0,
        "start_time": T0 + timedelta(minutes=cid),
        "end_time": T0 + timedelta(minutes=cid, seconds=5),
        "working_dir": "/home/u",
        "username": "u",
        "hostname": "box",
        "session_uuid": SESSION_A,
        "hash_chunk_size": 256,
        "hash_max_reads": 3,
    }
    values.update(kw)
    return CommandView(**values)


def fev(fid: int, path: bytes, size: int = 10, **kw: Any) -> FileEventView:
    return FileEventView(id=fid, path=path, size=size, mtime_ns=1_700_000_000 * 10**9,
                         hash=kw.pop("hash", 2**64 - 1), mode=0o100644, **kw)  # fmt: skip


def rec(text: str, start: datetime, seconds: float, session: bytes | None, **kw: Any):
    values: dict[str, Any] = {
        "text": text,
        "return_value": 0,
        "start_ns": int(start.timestamp() * 10**9),
        "end_ns": int((start + timedelta(seconds=seconds)).timestamp() * 10**9),
        "working_dir": "/home/u/project",
        "username": "u",
        "hostname": "box",
        "session_uuid": session,
        "hash_chunk_size": 256,
        "hash_max_reads": 3,
    }
    values.update(kw)
    return CommandRecord(**values)


def wev(path: bytes, size: int = 1234, content: bytes | None = None) -> FileEvent:
    return FileEvent(path=path, size=size, mtime_ns=1_709_629_200 * 10**9, mode=0o100644,
                     hash=0xFEDCBA9876543210, content=content)  # fmt: skip
