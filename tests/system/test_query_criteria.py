"""Criterion parsing (operators, sizes, times) and every criterion run as SQL
on real SQLite and PostgreSQL journals."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from synthetic import MINUTE, T0, file_event, record
from test_query import texts

from shournal.criteria import (
    Condition,
    CriteriaError,
    Period,
    parse_criteria,
    parse_hash,
    parse_int,
    parse_size,
    parse_text,
    parse_time,
    parse_time_value,
)
from shournal.journal import Journal
from shournal.record import FileEvent

NOW = datetime(2024, 5, 10, 12, 0, tzinfo=UTC)
NS = 10**9


# -- parsing ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("4096", Condition("eq", 4096)),
        (">10KiB", Condition("gt", 10240)),
        (">=2G", Condition("ge", 2 * 1024**3)),
        ("<1.5M", Condition("lt", int(1.5 * 1024**2))),
        ("<= 3 kb", Condition("le", 3072)),
        ("!=0", Condition("ne", 0)),
        ("gt:1k", Condition("gt", 1024)),
        ("-gt 1k", Condition("gt", 1024)),
        ("GE:1", Condition("ge", 1)),
        ("1M..2G", Condition("between", 1024**2, 2 * 1024**3)),
        ("between:1..2", Condition("between", 1, 2)),
        ("-between 1 2", Condition("between", 1, 2)),
    ],
)
def test_sizes_and_operators(raw: str, expected: Condition) -> None:
    assert parse_size("--wsize", raw) == expected


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("10XB", "invalid size"),
        ("bigger:10", "unknown operator 'bigger'"),
        ("-bigger 10", "unknown operator"),
        ("like:10", "not allowed"),
        ("1..", "between needs two values"),
        (">", "empty value"),
        ("", "empty value"),
    ],
)
def test_bad_sizes(raw: str, fragment: str) -> None:
    with pytest.raises(CriteriaError) as info:
        parse_size("--wsize", raw)
    assert fragment in str(info.value)
    assert str(info.value).startswith("--wsize") and "\n" not in str(info.value)


def test_text_defaults_and_operators() -> None:
    assert parse_text("--wname", "out.log") == Condition("eq", "out.log")
    assert parse_text("--wname", "%.log") == Condition("like", "%.log")
    assert parse_text("--wname", "ne:out.log") == Condition("ne", "out.log")
    assert parse_text("--command-text", "make", default="like") == Condition("like", "make")
    assert parse_text("--command-text", "-like %make%") == Condition("like", "%make%")
    # A command may start with an operator-like word or contain ':'.
    assert parse_text("--command-text", "ne foo") == Condition("eq", "ne foo")
    assert parse_text("--command-text", "echo:x") == Condition("eq", "echo:x")
    with pytest.raises(CriteriaError, match="not allowed"):
        parse_text("--wname", "gt:x")


def test_int_and_hash() -> None:
    assert parse_int("--exit-code", "-1") == Condition("eq", -1)
    assert parse_int("--command-id", "5..9") == Condition("between", 5, 9)
    assert parse_hash("--whash", "15349503233279147316") == Condition("eq", 15349503233279147316)
    assert parse_hash("--whash", "ne:0x10") == Condition("ne", 16)
    with pytest.raises(CriteriaError, match="not allowed"):
        parse_hash("--whash", ">5")
    with pytest.raises(CriteriaError, match="64-bit"):
        parse_hash("--whash", str(2**64))
    with pytest.raises(CriteriaError, match="invalid number"):
        parse_int("--exit-code", "zero")


def test_times() -> None:
    now_ns = int(NOW.timestamp()) * NS
    assert parse_time_value("--since", "2h", now=NOW) == Period(now_ns - 2 * 3600 * NS,
                                                                now_ns - 2 * 3600 * NS + 1)
    assert parse_time_value("--since", "3d", now=NOW).start_ns == now_ns - 3 * 86400 * NS
    assert parse_time_value("--since", "90min", now=NOW).start_ns == now_ns - 90 * 60 * NS
    one_year = parse_time_value("--since", "1y", now=NOW).start_ns
    assert one_year == int(datetime(2023, 5, 10, 12, tzinfo=UTC).timestamp()) * NS
    month = parse_time_value("--since", "1m", now=datetime(2024, 3, 31, tzinfo=UTC))
    assert month.start_ns == int(datetime(2024, 2, 29, tzinfo=UTC).timestamp()) * NS
    # Precision decides the period's length.
    utc = parse_time_value("--until", "2024-05-01T10:00Z")
    assert utc.start_ns == int(datetime(2024, 5, 1, 10, tzinfo=UTC).timestamp()) * NS
    assert utc.end_ns - utc.start_ns == 60 * NS
    second = parse_time_value("x", "2024-05-01T10:00:05+02:00")
    assert second.end_ns - second.start_ns == NS
    day = parse_time_value("--until", "2024-05-01")
    local_midnight = datetime(2024, 5, 1).astimezone()
    assert day.start_ns == int(local_midnight.timestamp()) * NS
    assert day.end_ns - day.start_ns in (23 * 3600 * NS, 24 * 3600 * NS, 25 * 3600 * NS)
    assert parse_time("--wmtime", ">yesterday", now=NOW).op == "gt"
    for bad, fragment in (("3 fortnights", "unknown time unit"), ("2024-13-01", "cannot read"),
                          ("soon", "cannot read"), ("gt:", "empty value")):  # fmt: skip
        with pytest.raises(CriteriaError, match=fragment):
            parse_time("--wmtime", bad, now=NOW)


def test_until_before_since_is_an_error() -> None:
    with pytest.raises(CriteriaError, match="before --since"):
        parse_criteria(since="2024-05-02", until="2024-05-01")


# -- SQL ------------------------------------------------------------------------


def ev(path: str, size: int, mtime_ns: int = T0, digest: int | None = 7) -> FileEvent:
    return FileEvent(path=path.encode(), size=size, mtime_ns=mtime_ns, mode=0o100644, hash=digest)


@pytest.fixture
def filled(journal: Journal) -> Journal:
    day = 86400 * NS
    journal.add(record("make all", start_ns=T0, working_dir="/src/proj", return_value=0,
                             writes=[ev("/src/proj/out.o", 20_000, digest=111),
                                     ev("/src/proj/Out.log", 10)],
                             reads=[ev("/src/proj/main.c", 900, digest=222)]))  # fmt: skip
    journal.add(record("gzip big.tar", start_ns=T0 + day, working_dir="/data",
                             return_value=1, hostname="cluster7", username="bob",
                             writes=[ev("/data/big.tar.gz", 3 * 1024**3, mtime_ns=T0 + day)],
                             reads=[ev("/data/big.tar", 5 * 1024**3)]))  # fmt: skip
    journal.add(record("echo 100% done > /tmp/x_y", start_ns=T0 + 2 * day,
                             working_dir="/src/proj/sub", return_value=2**31 - 1,
                             writes=[ev("/tmp/x_y", 9, mtime_ns=T0 + 2 * day)]))  # fmt: skip
    return journal


@pytest.mark.parametrize(
    ("criteria", "expected"),
    [
        ({"wsize": ">10KiB"}, ["make all", "gzip big.tar"]),
        ({"wsize": ">=3G"}, ["gzip big.tar"]),
        ({"wsize": "1K..1M"}, ["make all"]),
        ({"rsize": "<1k"}, ["make all"]),
        ({"wname": "out.o"}, ["make all"]),
        ({"wname": "out.log"}, []),  # names are case-sensitive
        ({"wname": "%.gz"}, ["gzip big.tar"]),
        ({"wname": "x_y"}, ["echo 100% done > /tmp/x_y"]),
        ({"wname": "x%y"}, ["echo 100% done > /tmp/x_y"]),
        ({"wname": "ne:out.o"}, ["make all", "gzip big.tar", "echo 100% done > /tmp/x_y"]),
        ({"wpath": "/src/proj"}, ["make all"]),
        ({"wpath": "/src/proj/"}, ["make all"]),
        ({"wpath": "/src/%"}, ["make all"]),
        ({"wpath": "%"}, ["make all", "gzip big.tar", "echo 100% done > /tmp/x_y"]),
        ({"rpath": "/data"}, ["gzip big.tar"]),
        ({"whash": "111"}, ["make all"]),
        ({"rhash": "222"}, ["make all"]),
        ({"rhash": "ne:222"}, ["gzip big.tar"]),
        # One and the same file must meet all file conditions.
        ({"wname": "out.o", "wsize": "<1k"}, []),
        ({"wname": "Out.log", "wsize": "<1k"}, ["make all"]),
        ({"command_text": "%GZIP%"}, ["gzip big.tar"]),
        ({"command_text": "eq:GZIP big.tar"}, []),
        ({"command_text": "%100\\%%"}, []),
        ({"command_text": "echo 100% done%"}, ["echo 100% done > /tmp/x_y"]),
        # Without an operator and without %: a substring, case-insensitive,
        # and `_` is no wildcard in it.
        ({"command_text": "GZIP"}, ["gzip big.tar"]),
        ({"command_text": "all"}, ["make all"]),
        ({"command_text": "x_y"}, ["echo 100% done > /tmp/x_y"]),
        ({"command_text": "0_ done"}, []),
        ({"command_text": "like:make"}, []),
        ({"command_text": "like:MAKE ALL"}, ["make all"]),
        ({"command_text": "eq:make"}, []),
        ({"cwd": "/src/proj"}, ["make all"]),
        ({"cwd": "/src/proj%"}, ["make all", "echo 100% done > /tmp/x_y"]),
        ({"cwd": "/SRC/proj%"}, []),
        ({"exit_code": "0"}, ["make all"]),
        ({"exit_code": "!=0"}, ["gzip big.tar"]),  # unknown exit status excluded
        ({"host": "cluster%"}, ["gzip big.tar"]),
        ({"host": "CLUSTER7"}, ["gzip big.tar"]),
        ({"user": "bob"}, ["gzip big.tar"]),
        ({"user": "ne:bob"}, ["make all", "echo 100% done > /tmp/x_y"]),
        ({"command_id": ">1"}, ["gzip big.tar", "echo 100% done > /tmp/x_y"]),
        ({"command_id": "1..2"}, ["make all", "gzip big.tar"]),
        ({"wmtime": f">{datetime.fromtimestamp(T0 / NS, UTC).isoformat()}"},
         ["gzip big.tar", "echo 100% done > /tmp/x_y"]),  # fmt: skip
        ({"wsize": ">1k", "cwd": "/data"}, ["gzip big.tar"]),
    ],
)
def test_criteria_in_sql(filled: Journal, criteria: dict[str, str], expected: list[str]) -> None:
    assert texts(filled.find(parse_criteria(**criteria))) == expected


def test_since_until_and_order(filled: Journal) -> None:
    start = datetime.fromtimestamp(T0 / NS, UTC)
    day_after = (start + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S%z")
    assert texts(filled.find(parse_criteria(since=day_after))) == [
        "gzip big.tar",
        "echo 100% done > /tmp/x_y",
    ]
    assert texts(filled.find(parse_criteria(until=start.isoformat()))) == ["make all"]
    # Relative ages: everything is older than a day from now, younger than 100 years.
    assert filled.find(parse_criteria(since="1d")) == []
    assert len(filled.find(parse_criteria(since="100y"))) == 3
    newest = filled.find(reverse=True, limit=2)
    assert texts(newest) == ["echo 100% done > /tmp/x_y", "gzip big.tar"]
    assert texts(filled.find(history=2, reverse=True)) == texts(newest)
    assert texts(filled.find(history=2)) == ["gzip big.tar", "echo 100% done > /tmp/x_y"]


def test_stats_scope(filled: Journal) -> None:
    s = filled.stats()
    assert (s.commands, s.written_events, s.read_events, s.sessions) == (3, 4, 2, 1)
    assert [(e.command_id, e.written) for e in s.most_modifications] == [(1, 2), (2, 1), (3, 1)]
    assert [(e.path, e.commands) for e in s.busiest_working_dirs][0] == ("/data", 1)
    assert [(d.path, d.written, d.read) for d in s.busiest_directories][0] == (b"/src/proj/", 2, 1)
    [sess] = s.sessions_most_commands
    assert sess.commands == 3 and sess.session_uuid == b"\x11" * 16
    part = filled.stats(command_ids=[2, 3])
    assert (part.commands, part.written_events, part.read_events) == (2, 2, 1)
    assert filled.stats(parse_criteria(user="bob")).commands == 1
    assert filled.stats(command_ids=[]).commands == 0
    top1 = filled.stats(top=1)
    assert len(top1.most_modifications) == 1 and len(top1.busiest_directories) == 1


def test_file_criteria_with_real_file(journal: Journal, tmp_path: Path) -> None:
    f = tmp_path / "a b.txt"
    f.write_bytes(b"x" * 5000)
    journal.add(record("write", writes=[file_event(f)], start_ns=T0 + MINUTE))
    got = journal.find(parse_criteria(wname="a b.txt", wpath=str(tmp_path)))
    assert texts(got) == ["write"]
    assert os.fsdecode(got[0].writes[0].path) == str(f)
