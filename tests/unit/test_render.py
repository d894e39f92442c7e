"""Human and JSON output for fixed commands."""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, datetime, timedelta

import pytest

from shournal.data import CommandView, FileEventView
from shournal.report.human import INCOMPLETE_TEXT, NO_RESULTS, format_size, render_human
from shournal.report.json import render_json
from shournal.terminal import printable

SCRIPT = b"#!/usr/bin/env bash\necho hi | tee out.log\n"
START = datetime(2022, 11, 8, 8, 46, 12, 345000, tzinfo=UTC)
SESSION = base64.b64decode("puLvkEizEe6CgvXjQlmnIQ==")


def readme_command(**overrides: object) -> CommandView:
    """The original README's example (original-shournal.md §9.1)."""
    out = FileEventView(
        id=7, path=b"/home/user/out.log", size=3, mtime_ns=1667897172_000000000,
        hash=15349503233279147316, mode=0o100644,
    )  # fmt: skip
    script = FileEventView(
        id=1, path=b"/home/user/demo.sh", size=42, mtime_ns=1667897000_500000000,
        hash=13559791986335963073, mode=0o100755, content_id=3,
        content_preview=SCRIPT, content_size=len(SCRIPT),
    )  # fmt: skip
    values: dict[str, object] = {
        "id": 2,
        "text": "./demo.sh",
        "return_value": 0,
        "start_time": START,
        "end_time": START + timedelta(seconds=20),
        "working_dir": "/home/user",
        "username": "user",
        "hostname": "myhost",
        "session_uuid": SESSION,
        "hash_chunk_size": 256,
        "hash_max_reads": 3,
        "writes": [out],
        "reads": [script],
        "write_count": 1,
        "read_count": 1,
    }
    values.update(overrides)
    return CommandView(**values)  # type: ignore[arg-type]


def human(*commands: CommandView, **kw: object) -> str:
    kw.setdefault("tz", UTC)
    kw.setdefault("local_hostname", "myhost")
    kw.setdefault("local_user", "user")
    return render_human(commands, **kw)  # type: ignore[arg-type]


def test_human_readme_example_exact() -> None:
    assert human(readme_command()) == (
        "cmd-id 2 $?=0 2022-11-08 08:46 $ ./demo.sh\n"
        "Working directory: /home/user\n"
        "session-uuid puLvkEizEe6CgvXjQlmnIQ==\n"
        "  1 written file:\n"
        "     /home/user/out.log (3 bytes) Hash: 15349503233279147316\n"
        "  1 read file:\n"
        "     /home/user/demo.sh (42 bytes) Hash: 13559791986335963073 id 1\n"
        "          #!/usr/bin/env bash\n"
        "          echo hi | tee out.log\n"
    )


def test_human_names_whose_a_command_is_when_not_the_readers() -> None:
    def whose(**overrides: object) -> list[str]:
        lines = human(readme_command(session_uuid=None, **overrides)).splitlines()
        return [ln for ln in lines if ln.startswith(("User: ", "Hostname: "))]

    assert whose() == []  # the reader's own, here
    assert whose(hostname="elsewhere") == ["Hostname: elsewhere"]  # own, elsewhere
    assert whose(username="bob") == ["User: bob", "Hostname: myhost"]  # a colleague's
    assert whose(username="bob", hostname="ws2") == ["Hostname: ws2", "User: bob"]
    assert whose(username="b\x1bob") == ["User: b\\x1bob", "Hostname: myhost"]


def test_not_own_is_user_at_host_for_another_user_or_host() -> None:
    from shournal.report.whose import not_own, reader

    me = reader()
    assert not_own(*me) is None
    assert not_own("bob", me[1]) == f"bob@{me[1]}"
    assert not_own(me[0], "ws2", me) == f"{me[0]}@ws2"


def test_human_header_variants() -> None:
    unknown = readme_command(return_value=2**31 - 1, session_uuid=None, hostname="elsewhere")
    lines = human(unknown).splitlines()
    assert lines[0] == "cmd-id 2 2022-11-08 08:46 $ ./demo.sh"
    assert lines[1:3] == ["Working directory: /home/user", "Hostname: elsewhere"]
    same_day = readme_command(end_time=START + timedelta(minutes=75))
    assert human(same_day).splitlines()[0] == "cmd-id 2 $?=0 2022-11-08 08:46-10:01 $ ./demo.sh"
    next_day = readme_command(end_time=START + timedelta(days=1))
    assert (
        human(next_day).splitlines()[0]
        == "cmd-id 2 $?=0 2022-11-08 08:46 - 2022-11-09 08:46 $ ./demo.sh"
    )
    berlin = human(readme_command(), tz=__import__("zoneinfo").ZoneInfo("Europe/Berlin"))
    assert berlin.startswith("cmd-id 2 $?=0 2022-11-08 09:46 $")


def test_incomplete_command_is_shown_as_such() -> None:
    """A line stored from its start (no prompt reported its end): status
    unknown and marked, in human and json output."""
    cmd = readme_command(return_value=2**31 - 1, incomplete=True)
    lines = human(cmd).splitlines()
    assert lines[0] == "cmd-id 2 incomplete 2022-11-08 08:46 $ ./demo.sh"
    assert lines[2] == INCOMPLETE_TEXT
    [obj] = json.loads(render_json([cmd]))
    assert obj["returnValue"] is None and obj["incomplete"] is True
    [complete] = json.loads(render_json([readme_command()]))
    assert "incomplete" not in complete  # the original's format otherwise


def many_files(n: int, start_id: int = 100) -> list[FileEventView]:
    return [
        FileEventView(
            id=start_id + i,
            path=f"/w/f{i}".encode(),
            size=2048,
            mtime_ns=0,
            hash=None if i else 5,
            mode=0o100644,
        )
        for i in range(n)
    ]


def test_human_caps_counts_and_dropped_events() -> None:
    cmd = readme_command(
        writes=many_files(10),
        write_count=25,
        reads=[],
        read_count=0,
        dropped_writes=1200,
        dropped_reads=1,
        lost_events=4,
        lost_reasons={"relay": 1, "overflow": 2},
    )
    text = human(cmd)
    lines = text.splitlines()
    start = lines.index("  25 written files:")
    assert lines[start + 1] == "     /w/f0 (2.00 KiB) Hash: 5"
    assert lines[start + 2] == "     /w/f1 (2.00 KiB) Hash: -"
    assert lines[start + 11] == "     ... and 15 more files."
    assert lines[start + 12] == "  (1200 write events beyond the per-command cap were not stored)"
    assert lines[start + 13] == "  (1 read event beyond the per-command cap was not stored)"
    # by reason; what no reason accounts for (an older journal) says so
    assert lines[start + 14] == (
        "  (4 file events lost: 2 kernel queue overflow, 1 event relay ended early, "
        "1 reason not recorded)"
    )
    assert "read file" not in text
    # A smaller cap (what -wfc 3 would ask for).
    capped = human(cmd, max_files=3).splitlines()
    assert "     ... and 22 more files." in capped


def test_human_content_preview_rules() -> None:
    content = b"\n".join(f"line {i}".encode() for i in range(1, 9)) + b"\n"
    body = b"\n\n   \n" + content  # blank lines are skipped
    script = FileEventView(
        id=9, path=b"/s.sh", size=len(body), mtime_ns=0, hash=1, mode=0o100644,
        content_id=1, content_preview=body, content_size=len(body),
    )  # fmt: skip
    lines = human(readme_command(reads=[script])).splitlines()
    i = lines.index("     /s.sh (62 bytes) Hash: 1 id 9")
    assert lines[i + 1 : i + 7] == [f"          line {n}" for n in range(1, 6)] + ["          ..."]
    binary = FileEventView(
        id=9, path=b"/bin.dat", size=4, mtime_ns=0, hash=1, mode=0o100644,
        content_id=1, content_preview=b"\x00\x01\x02\x03", content_size=4,
    )  # fmt: skip
    assert "          Not printing content (binary data)" in human(readme_command(reads=[binary]))


def test_human_escapes_hostile_and_undecodable_paths() -> None:
    evil = FileEventView(
        id=1, path=b"/tmp/\x1b[31mred\nx\xff", size=1, mtime_ns=0, hash=None, mode=0o100644
    )
    text = human(readme_command(writes=[evil], reads=[], read_count=0))
    assert "     /tmp/\\x1b[31mred\\x0ax\\xff (1 byte) Hash: -" in text.splitlines()


# OSC 52 sets the clipboard of the terminal that shows it; BEL ends it.
OSC52 = "\x1b]52;c;aGk=\x07"


def _raw_controls(text: str) -> set[str]:
    """The C0/C1 controls in ``text`` other than tab and newline."""
    return {c for c in text if c not in "\t\n" and (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0)}


def test_printable_escapes_c0_and_c1_but_tab_and_optionally_newline() -> None:
    assert printable("a\tb\x1b[1m\r\x7f\x9b\x85\n") == "a\tb\\x1b[1m\\x0d\\x7f\\x9b\\x85\\x0a"
    assert printable("l1\nl2\x07", newlines=True) == "l1\nl2\\x07"
    assert printable("caf\u00e9 \u2603") == "caf\u00e9 \u2603"


def test_human_command_text_never_reaches_the_terminal_raw() -> None:
    text = human(readme_command(text=f"echo $'{OSC52}' \r\x9b2J"))
    assert _raw_controls(text) == set()
    assert "$ echo $'\\x1b]52;c;aGk=\\x07' \\x0d\\x9b2J" in text.splitlines()[0]


def test_human_multi_line_command_keeps_its_lines() -> None:
    text = human(readme_command(text="cat <<EOF\nline \x1b[2J\nEOF"))
    lines = text.splitlines()
    assert lines[0].endswith("$ cat <<EOF")
    assert lines[1:3] == ["line \\x1b[2J", "EOF"]


def test_stats_command_text_is_escaped() -> None:
    from shournal.data import CommandModifications, JournalStats
    from shournal.report.human import render_stats

    stats = JournalStats(
        most_modifications=[CommandModifications(command_id=1, text=f"x{OSC52}", written=2)]
    )
    text = render_stats(stats, min_count=1)
    assert _raw_controls(text) == set()
    assert "cmd-id 1: 2 written files $ x\\x1b]52;c;aGk=\\x07" in text


def test_delete_listing_escapes_command_text_and_directory() -> None:
    from shournal.cli.delete import _command_line
    from shournal.deletion import CommandSummary

    line = _command_line(
        CommandSummary(id=4, start_time=START, working_dir="/w\x1b[8m", text=f"a\nb{OSC52}")
    )
    assert _raw_controls(line) == set() and "\n" not in line
    assert line.endswith("/w\\x1b[8m $ a\\nb\\x1b]52;c;aGk=\\x07")


def test_human_separates_commands() -> None:
    text = human(readme_command(), readme_command(id=3))
    assert "\n\ncmd-id 3 " in text
    assert human() == ""
    assert NO_RESULTS == "No results found matching the query."


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1023 bytes"),
        (1024, "1.00 KiB"),
        (1536, "1.50 KiB"),
        (5 * 1024**2, "5.00 MiB"),
        (3 * 1024**3 // 2, "1.50 GiB"),
        (2 * 1024**4, "2.00 TiB"),
        (3000 * 1024**4, "3000.00 TiB"),
    ],
)
def test_format_size(size: int, text: str) -> None:
    assert format_size(size) == text


def test_json_fields_and_types() -> None:
    out = render_json([readme_command()])
    assert out.isascii()
    [obj] = json.loads(out)
    assert set(obj) == {
        "id", "command", "returnValue", "username", "hostname", "hashChunkSize",
        "hashMaxCountOfReads", "sessionUuid", "startTime", "endTime", "workingDir",
        "fileReadEvents", "fileWriteEvents", "droppedWriteEvents", "droppedReadEvents",
        "lostEvents", "lostEventReasons",
    }  # fmt: skip
    assert obj["id"] == 2 and obj["command"] == "./demo.sh" and obj["returnValue"] == 0
    assert (obj["username"], obj["hostname"], obj["workingDir"]) == ("user", "myhost", "/home/user")
    assert (obj["hashChunkSize"], obj["hashMaxCountOfReads"]) == (256, 3)
    assert obj["sessionUuid"] == "puLvkEizEe6CgvXjQlmnIQ=="
    start = datetime.fromisoformat(obj["startTime"])
    assert start == START and start.utcoffset() is not None
    assert datetime.fromisoformat(obj["endTime"]) == START + timedelta(seconds=20)
    assert (obj["droppedWriteEvents"], obj["droppedReadEvents"], obj["lostEvents"]) == (0, 0, 0)
    assert obj["lostEventReasons"] == {}
    [w] = obj["fileWriteEvents"]
    assert set(w) == {"id", "path", "size", "mtime", "mtimeNs", "hash", "status"}
    assert w["status"] == "NA"  # --stat not asked for, as the original prints
    assert w["hash"] == "15349503233279147316" and isinstance(w["hash"], str)
    assert (w["id"], w["path"], w["size"]) == (7, "/home/user/out.log", 3)
    assert datetime.fromisoformat(w["mtime"]) == datetime(2022, 11, 8, 8, 46, 12, tzinfo=UTC)
    assert w["mtimeNs"] == 1667897172_000000000
    [r] = obj["fileReadEvents"]
    assert set(r) == {"id", "path", "size", "mtime", "mtimeNs", "hash", "isStoredToDisk", "status"}
    assert r["isStoredToDisk"] is True and r["id"] == 1
    assert r["hash"] == "13559791986335963073"


def test_json_nulls_and_full_lists() -> None:
    cmd = readme_command(
        return_value=2**31 - 1,
        session_uuid=None,
        hash_chunk_size=None,
        hash_max_reads=None,
        writes=many_files(25),
        write_count=25,
        dropped_writes=3,
    )
    [obj] = json.loads(render_json([cmd]))
    assert obj["returnValue"] is None and obj["sessionUuid"] is None
    assert obj["hashChunkSize"] is None and obj["hashMaxCountOfReads"] is None
    assert len(obj["fileWriteEvents"]) == 25
    assert obj["fileWriteEvents"][1]["hash"] is None
    assert obj["droppedWriteEvents"] == 3


def test_json_undecodable_path_round_trips() -> None:
    raw = b"/data/caf\xe9/\xff\xfe.txt"
    ev = FileEventView(id=1, path=raw, size=1, mtime_ns=-1_500_000_000, hash=None, mode=0)
    out = render_json([readme_command(writes=[ev], reads=[])])
    assert out.isascii()
    assert "\\udce9" in out  # surrogate escape, not a lossy replacement
    [obj] = json.loads(out)
    assert os.fsencode(obj["fileWriteEvents"][0]["path"]) == raw
    assert obj["fileWriteEvents"][0]["mtime"].startswith("1969-12-31T23:59:58.5")


def test_json_empty_and_many() -> None:
    assert json.loads(render_json([])) == []
    out = render_json([readme_command(id=i) for i in range(3)])
    assert [o["id"] for o in json.loads(out)] == [0, 1, 2]
    assert len(out.splitlines()) == 5  # "[", one line per command, "]"
