"""Colour, wrapping, --stat labels, statistics sections and the original's
line format, on fixed commands."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest
from test_render import SESSION, human, many_files, readme_command

from shournal.data import (
    CommandModifications,
    DirectoryActivity,
    JournalStats,
    SessionCommands,
    WorkingDirCommands,
)
from shournal.report.human import render_stats, use_color
from shournal.report.shournal_json import render_shournal_json


def test_color_only_when_asked() -> None:
    plain = human(readme_command(return_value=1))
    assert "\x1b[" not in plain
    colored = human(readme_command(return_value=1), color=True)
    assert "\x1b[31m$?=1\x1b[0m" in colored
    # Stripping the escapes gives the plain text back.
    import re

    assert re.sub(r"\x1b\[[0-9;]*m", "", colored) == plain


def test_use_color_respects_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_color(Tty()) is True
    assert use_color(io.StringIO()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(Tty()) is False


def test_status_labels_and_80_columns() -> None:
    cmd = readme_command(
        writes=many_files(12), write_count=12, working_dir="/very/long/" + "d" * 120
    )
    for i, ev in enumerate(cmd.writes):
        ev.status = "UMN"[i % 3]
    text = human(cmd, width=80)
    lines = text.splitlines()
    assert lines[0].startswith("cmd-id 2 $?=0 ")  # the header is never wrapped
    assert all(len(line) <= 80 for line in lines[1:])
    assert "[up to date]" in text and "[modified]" in text and "[missing]" in text
    assert "... and 2 more files." in text


def stats() -> JournalStats:
    t = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    return JournalStats(
        commands=6, sessions=1, written_events=9, read_events=4, first_start=t, last_start=t,
        most_modifications=[CommandModifications(i, f"cmd {i}", 10 - i) for i in range(1, 7)],
        sessions_most_commands=[SessionCommands(SESSION, 6, t, t)],
        busiest_working_dirs=[WorkingDirCommands("/w", 6)],
        busiest_directories=[DirectoryActivity(b"/w/", 9, 4)],
    )  # fmt: skip


def test_stats_sections_thresholds() -> None:
    text = render_stats(stats(), tz=UTC)
    # Only the section with at least 5 entries, with at most 5 of them.
    assert text.splitlines()[0] == "Commands with most file modifications:"
    assert "  cmd-id 1: 9 written files $ cmd 1" in text and "cmd 6" not in text
    assert "Sessions with most commands" not in text
    full = render_stats(stats(), min_count=1, max_count=10, totals=True, tz=UTC)
    assert full.startswith("6 commands in 1 session, 9 written and 4 read file events")
    assert "  puLvkEizEe6CgvXjQlmnIQ==: 6 commands, 2024-05-01 10:00" in full
    assert "  6 commands in /w" in full
    assert "  Total 13 (9 written, 4 read) files at /w/" in full
    assert render_stats(JournalStats()) == ""


def test_shournal_json_format() -> None:
    cmd = readme_command(return_value=2**31 - 1, session_uuid=None, hash_chunk_size=None,
                         hash_max_reads=None)  # fmt: skip
    cmd.reads[0].status = "U"
    cmd.writes[0].path = b"/home/user/\xffout.log"
    text = render_shournal_json([cmd], path_to_read_files="/d/readFiles")
    lines = text.split("\n")
    assert lines[0] == 'HEADER:{"pathToReadFiles":"/d/readFiles"}'
    assert lines[-1] == ""  # ends with a newline, no blank line
    obj = json.loads(lines[1].removeprefix("COMMAND:"))
    assert obj["returnValue"] == 2**31 - 1 and obj["sessionUuid"] is None
    assert obj["hashChunkSize"] is None and obj["hashMaxCountOfReads"] is None
    assert obj["fileReadEvents"][0] == {
        "hash": "13559791986335963073", "id": 1, "isStoredToDisk": True,
        "mtime": datetime.fromtimestamp(1667897000).strftime("%Y-%m-%dT%H:%M:%S"),
        "path": "/home/user/demo.sh", "size": 42, "status": "U",
    }  # fmt: skip
    assert obj["fileWriteEvents"][0]["path"] == "/home/user/\ufffdout.log"
    assert "isStoredToDisk" not in obj["fileWriteEvents"][0]
    assert " " not in lines[1].split('"command"')[0]  # compact
