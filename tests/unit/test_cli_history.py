"""`shournal history`: the daily one-line view, its shortcuts, formats and
bad input, through the real CLI on a real journal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from pathlib import Path

import pytest
from synthetic import file_event, record
from typer.testing import CliRunner

from shournal.cli import app
from shournal.data import CommandView
from shournal.report.history import duration, one_line, relative_time, render_lines, short_dir
from shournal.store import Store

S = 10**9


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SHOURNAL_SESSION_ID", raising=False)
    url = f"sqlite:///{tmp_path / 'j.sqlite'}"
    monkeypatch.setenv("SHOURNAL_DB_URL", url)
    return url


def cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


_day_now = 0  # the `day` fixture's now, in ns


@pytest.fixture
def day(env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A day's work: in ~/proj and ~/proj/sub, one failure, one older line."""
    proj = tmp_path / "proj"
    sub = proj / "sub"
    sub.mkdir(parents=True)
    out = proj / "out.txt"
    out.write_text("x\n")
    now = time.time_ns()
    monkeypatch.setattr(sys.modules[__name__], "_day_now", now)
    with Store(env) as s:
        s.add_command(record("make old", start_ns=now - 400 * 86400 * S, working_dir=str(proj)))
        s.add_command(record("echo x > out.txt", start_ns=now - 300 * S, working_dir=str(proj),
                             writes=[file_event(out)]))  # fmt: skip
        s.add_command(record("cat out.txt", start_ns=now - 200 * S, working_dir=str(sub),
                             reads=[file_event(out)]))  # fmt: skip
        s.add_command(record("false", start_ns=now - 100 * S, working_dir=str(tmp_path),
                             return_value=1))  # fmt: skip
        s.add_command(record("printf '\x1b]0;pwned\x07'\nsecond line",
                             start_ns=now - 50 * S, working_dir=str(tmp_path)))  # fmt: skip
    monkeypatch.chdir(proj)
    return proj


def _ids(out: str) -> list[int]:
    return [int(line.split()[0]) for line in out.splitlines()]


def test_one_line_per_command_newest_last(day: Path) -> None:
    code, out, err = cli("history")
    assert code == 0, err
    assert _ids(out) == [1, 2, 3, 4, 5]
    lines = out.splitlines()
    assert "m ago" in lines[1] and "~/proj" in lines[1] and " w1 " in lines[1]
    assert lines[1].rstrip().endswith("echo x > out.txt")
    assert " 1 " in lines[3] and lines[3].rstrip().endswith("false")
    # the old one by date, the duration of each
    assert datetime.now().year - 1 >= int(lines[0].split()[1][:4]) or "-" in lines[0]
    assert all("1.00s" in line for line in lines)
    # a recorded escape sequence never reaches the terminal; one line each
    assert "\x1b" not in out and "\x07" not in out
    assert "printf '\\x1b]0;pwned\\x07' ↵ second line" in out


def test_shortcuts(day: Path) -> None:
    assert _ids(cli("history", "--here")[1]) == [1, 2]
    assert _ids(cli("history", "--here", "-r")[1]) == [1, 2, 3]
    assert _ids(cli("history", "--failed")[1]) == [4]
    # minutes after midnight some of the day's lines were yesterday's
    midnight_ns = datetime.combine(date.today(), dtime.min).timestamp() * 1e9
    ago = {2: 300, 3: 200, 4: 100, 5: 50}
    today = [cid for cid, s in ago.items() if _day_now - s * S >= midnight_ns]
    assert _ids(cli("history", "--today")[1]) == today
    assert _ids(cli("history", "--wrote", "out.txt")[1]) == [2]
    assert _ids(cli("history", "--read", str(day / "out.txt"))[1]) == [3]
    assert _ids(cli("history", "-n", "2")[1]) == [4, 5]
    assert _ids(cli("history", "-n", "2", "--reverse")[1]) == [5, 4]
    assert _ids(cli("history", "--command-text", "%out%")[1]) == [2, 3]
    code, out, _ = cli("history", "--wrote", "nothing-here")
    assert code == 1 and out == ""


def test_here_recursive_does_not_take_a_sibling_with_the_same_prefix(
    env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "project2").mkdir()
    with Store(env) as s:
        s.add_command(record("in proj", working_dir=str(tmp_path / "proj")))
        s.add_command(record("in project2", working_dir=str(tmp_path / "project2")))
    monkeypatch.chdir(tmp_path / "proj")
    assert _ids(cli("history", "--here", "-r")[1]) == [1]


def test_session(day: Path, env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    sid = uuid.uuid4()
    with Store(env) as s:
        s.add_command(record("in my shell", session_uuid=sid.bytes, start_ns=time.time_ns()))
    monkeypatch.setenv("SHOURNAL_SESSION_ID", str(sid))
    assert _ids(cli("history", "--session")[1]) == [6]
    monkeypatch.delenv("SHOURNAL_SESSION_ID")
    code, _, err = cli("history", "--session")
    assert code == 2 and "not recorded" in err


def test_formats(day: Path) -> None:
    code, out, _ = cli("history", "--format", "{id}|{status}|{wrote}|{command}", "-n", "2")
    assert code == 0
    assert out.splitlines()[0] == "4|1|0|false"
    code, out, _ = cli("history", "--output-format", "json", "-n", "3")
    objs = json.loads(out)
    assert [o["command"] for o in objs][:2] == ["cat out.txt", "false"]
    code, out, _ = cli("history", "--output-format", "jsonl", "--here")
    assert [json.loads(line)["command"] for line in out.splitlines()] == [
        "make old", "echo x > out.txt"]  # fmt: skip
    res = CliRunner().invoke(app, ["history", "--print0", "-n", "2"])
    assert res.stdout_bytes == b"false\0printf '\x1b]0;pwned\x07'\nsecond line\0"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--format", "{nope}"], "unknown field {nope}"),
        (["--format", "{id"], "--format"),
        (["-n", "0"], "0"),
        (["-r"], "--recursive goes with --here"),
        (["--failed", "--exit-code", "2"], "exclude each other"),
        (["--since", "yesterday-ish"], ""),
    ],
)
def test_bad_input_is_one_line_and_status_2(day: Path, args: list[str], needle: str) -> None:
    res = subprocess.run([sys.executable, "-m", "shournal", "history", *args],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    code, out, err = res.returncode, res.stdout, res.stderr
    assert code == 2, (code, out, err)
    assert out == "" and needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_no_journal_yet_is_status_1(env: str) -> None:
    code, out, err = cli("history")
    assert code == 1 and out == "" and err.startswith("shournal:")


def _view(**kw: object) -> CommandView:
    t = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    values: dict = dict(id=7, text="ls", return_value=0, start_time=t,
                        end_time=t + timedelta(seconds=1), working_dir="/home/u/p",
                        username="u", hostname="h", session_uuid=None, hash_chunk_size=None,
                        hash_max_reads=None)  # fmt: skip
    values.update(kw)
    return CommandView(**values)


def test_pieces() -> None:
    now = datetime(2026, 11, 28, 12, 0, 30, tzinfo=UTC)
    assert relative_time(now - timedelta(seconds=12), now) == "12s ago"
    assert relative_time(now - timedelta(minutes=5), now) == "5m ago"
    assert relative_time(now - timedelta(days=400), now).count("-") == 2
    t = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    assert duration(_view(end_time=t + timedelta(minutes=4, seconds=5))) == "4m05s"
    assert duration(_view(end_time=t + timedelta(hours=2, minutes=3))) == "2h03m"
    assert duration(_view(incomplete=True)) == "?"
    assert short_dir("/home/u/p", "/home/u") == "~/p"
    assert short_dir("/home/user2", "/home/u") == "/home/user2"
    assert one_line("a\nb\x1b[2J") == "a ↵ b\\x1b[2J"
    text = render_lines([_view(text="x" * 300)], now=now, width=80, home="/home/u")
    assert len(text.rstrip("\n")) <= 80 and text.rstrip().endswith("…")
    coloured = render_lines([_view(return_value=1)], now=now, color=True, home="/")
    assert "\x1b[31m1\x1b[0m" in coloured
    assert os.linesep == "\n"
