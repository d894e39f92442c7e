"""`shournal query` and `shournal stats` through the real CLI: criteria,
exit statuses, one-line errors, output formats, --stat, and the original's
line format read by shournal-to-snakemake from PyPI."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic import T0, file_event, record
from typer.testing import CliRunner

from shournal.cli import app
from shournal.store import Store


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("SHOURNAL_SESSION_ID", raising=False)
    url = f"sqlite:///{tmp_path / 'j.sqlite'}"
    monkeypatch.setenv("SHOURNAL_DB_URL", url)
    return url


def cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture
def project(env: str, tmp_path: Path) -> Path:
    """A small workflow: `echo stuff > foo`, `cat foo > bar`, a failing grep."""
    work = tmp_path / "work"
    work.mkdir()
    foo, bar = work / "foo", work / "bar"
    foo.write_bytes(b"stuff\n")
    bar.write_bytes(b"stuff\n" * 3000)
    with Store(env) as s:
        s.add_command(record("echo stuff > foo", working_dir=str(work), writes=[file_event(foo)]))
        s.add_command(
            record("cat foo > bar", start_ns=T0 + 60 * 10**9, working_dir=str(work),
                   reads=[file_event(foo)], writes=[file_event(bar)])
        )  # fmt: skip
        s.add_command(
            record("grep nothing bar", start_ns=T0 + 120 * 10**9, working_dir=str(work),
                   return_value=1, reads=[file_event(bar)])
        )  # fmt: skip
    return work


def test_criteria_and_exit_statuses(project: Path) -> None:
    code, out, err = cli("query", "--wsize", ">10KiB")
    assert code == 0, err
    assert "cat foo > bar" in out and "echo stuff" not in out
    code, out, _ = cli("query", "--exit-code", "-ne 0", "--output-format", "jsonl")
    assert code == 0 and [json.loads(line)["command"] for line in out.splitlines()] == [
        "grep nothing bar"
    ]
    code, out, _ = cli("query", "--rname", "foo", "--cwd", str(project), "--output-format", "json")
    assert [c["command"] for c in json.loads(out)] == ["cat foo > bar"]
    code, out, _ = cli("query", "--history", "2", "--reverse", "--output-format", "jsonl")
    assert [json.loads(x)["id"] for x in out.splitlines()] == [3, 2]
    code, out, _ = cli("query", "--since", "2000-01-01", "--limit", "1", "--output-format", "json")
    assert code == 0 and [c["id"] for c in json.loads(out)] == [1]
    code, out, _ = cli("query", "--wname", "nothing-like-this")
    assert code == 1 and out.startswith("No results found matching the query.\n")
    assert "Hint: " in out and "SHOURNAL_SESSION_ID" in out
    code, out, _ = cli("query", "--command-text", "%absent%", "--output-format", "jsonl")
    assert code == 1 and out == ""


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--wsize", "bigger:1"], "unknown operator 'bigger'"),
        (["--wsize", "10 parsecs"], "invalid size"),
        (["--since", "last tuesday"], "cannot read the time"),
        (["--since", "3 fortnights"], "unknown time unit"),
        (["--whash", "abc"], "invalid hash"),
        (["--command-id", "like:%1%"], "not allowed"),
        (["--exit-code", "x"], "invalid number"),
        (["--session-id", "###"], "invalid session id"),
        (["--wfile", "/nonexistent/file"], "cannot open /nonexistent/file"),
        (["--history", "1", "--stat-counts", "5"], "--stat-counts"),
        (["--history", "1", "--output-format", "html"], "needs -o"),
        ([], "empty query"),
    ],
)
def test_bad_input_is_one_line_exit_2(project: Path, args: list[str], fragment: str) -> None:
    db = Path(os.environ["SHOURNAL_DB_URL"].removeprefix("sqlite:///"))
    before = db.read_bytes()
    code, out, err = cli("query", *args)
    assert code == 2 and out == ""
    assert err.startswith("shournal: ") and err.count("\n") == 1, err
    assert fragment in err
    assert db.read_bytes() == before


def test_html_report_from_the_cli(project: Path, tmp_path: Path) -> None:
    """The CLI writes the report atomically; its content is checked in a real
    browser by tests/system/test_html_browser.py."""
    report = tmp_path / "r.html"
    code, out, err = cli("query", "--history", "5", "--output-format", "html", "-o", str(report))
    assert (code, out, err) == (0, "", ""), err
    html = report.read_text(encoding="ascii")
    assert html.startswith("<!DOCTYPE html>") and "application/json" in html
    assert "echo stuff" in html
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    # an unwritable target: one line, nothing left behind
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, out, err = cli("query", "--history", "5", "--output-format", "html", "-o",
                         str(locked / "r.html"))
    if os.geteuid() != 0:
        assert code == 2 and err.startswith("shournal: cannot write"), err
        assert list(locked.iterdir()) == []


def _shournal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shournal", *args], capture_output=True, text=True, timeout=60
    )


def test_corrupt_and_newer_journal_unchanged(env: str, tmp_path: Path) -> None:
    db = tmp_path / "j.sqlite"
    db.write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    before = db.read_bytes()
    res = _shournal("query", "--history", "1")
    assert res.returncode == 3 and res.stdout == ""
    assert res.stderr.startswith("shournal: ") and res.stderr.count("\n") == 1
    assert db.read_bytes() == before
    db.unlink()
    Store(env).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE schema_version SET version = 999")
    conn.close()
    before = db.read_bytes()
    for args in (("query", "--history", "1"), ("stats",)):
        res = _shournal(*args)
        assert res.returncode == 3, res.stderr
        assert "newer" in res.stderr and res.stderr.count("\n") == 1
        assert db.read_bytes() == before


def test_stat_shows_up_to_date_modified_missing(project: Path) -> None:
    code, out, _ = cli("query", "--command-id", "2", "--stat")
    assert code == 0
    assert f"{project}/foo (6 bytes) Hash: " in out and "[up to date]" in out
    (project / "foo").write_bytes(b"STUFF\n")  # same size, new content and mtime
    os.utime(project / "foo", ns=(T0, os.stat(project / "bar").st_mtime_ns))
    (project / "bar").unlink()
    code, out, _ = cli("query", "--command-id", "2", "--stat", "--output-format", "json")
    [cmd] = json.loads(out)
    assert [e["status"] for e in cmd["fileReadEvents"]] == ["M"]
    assert [e["status"] for e in cmd["fileWriteEvents"]] == ["N"]
    code, out, _ = cli("query", "--command-id", "2", "--output-format", "json")
    assert json.loads(out)[0]["fileReadEvents"][0]["status"] == "NA"
    code, out, _ = cli("query", "--command-id", "2", "--stat")
    assert "[modified]" in out and "[missing]" in out and "\x1b[" not in out


def test_stat_same_size_and_mtime_rehashes(project: Path) -> None:
    foo = project / "foo"
    st = foo.stat()
    foo.write_bytes(b"STUFF\n")
    os.utime(foo, ns=(st.st_atime_ns, st.st_mtime_ns))
    code, out, _ = cli("query", "--command-id", "1", "--stat", "--output-format", "jsonl")
    assert json.loads(out)["fileWriteEvents"][0]["status"] == "M"


def test_human_statistics_sections(project: Path) -> None:
    code, out, _ = cli("query", "--history", "10", "--stat-counts", "1,2")
    assert code == 0
    assert "Commands with most file modifications:" in out
    assert "Working directories with most commands:\n  3 commands in " in out
    assert "Directories with most input/output-activity:" in out
    assert "Total 4 (2 written, 2 read) files at " in out
    code, out, _ = cli("query", "--history", "10")  # default: sections need 5 entries
    assert "Commands with most file modifications" not in out
    code, out, _ = cli("query", "--history", "10", "--stat-counts", "0,0")
    assert "Working directories with most" not in out


def test_stats_command(project: Path) -> None:
    code, out, _ = cli("stats")
    assert code == 0
    # what the commands produced and consumed first (tests/system/test_stats_usage.py)
    assert out.startswith("Files produced: 2 (")
    assert "\n3 commands in 1 session, 2 written and 2 read file events" in out
    assert "Sessions with most commands:\n  ERERERERERERERERERERE" in out
    code, out, _ = cli("stats", "--output-format", "json", "--top", "1")
    obj = json.loads(out)
    assert obj["commands"] == 3 and len(obj["mostModifications"]) == 1
    assert obj["busiestWorkingDirs"] == [{"path": str(project), "commands": 3}]
    code, out, _ = cli("stats", "--since", "1d")
    assert code == 1 and out.startswith("0 commands")
    code, _, err = cli("stats", "--since", "whenever")
    assert code == 2 and err.count("\n") == 1


def test_output_file(project: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    code, out, _ = cli("query", "--history", "3", "--output-format", "jsonl", "-o", str(target))
    assert code == 0 and out == ""
    assert len(target.read_text().splitlines()) == 3


def test_shournal_json_lines(project: Path) -> None:
    code, out, _ = cli("query", "--history", "3", "--output-format", "shournal-json")
    lines = out.splitlines()
    assert lines[0].startswith('HEADER:{"pathToReadFiles":')
    assert [x.split(":", 1)[0] for x in lines] == ["HEADER", "COMMAND", "COMMAND", "COMMAND",
                                                    "FOOTER"]  # fmt: skip
    assert lines[-1] == 'FOOTER:{"countOfRestoredFiles":0,"restorePath":null}'
    cmd = json.loads(lines[2].removeprefix("COMMAND:"))
    assert list(cmd) == sorted(cmd)  # Qt writes keys sorted
    assert cmd["command"] == "cat foo > bar" and cmd["returnValue"] == 0
    assert cmd["fileReadEvents"][0]["hash"] == str(int(cmd["fileReadEvents"][0]["hash"]))
    assert cmd["fileReadEvents"][0]["status"] == "NA"
    assert cmd["fileReadEvents"][0]["isStoredToDisk"] is False
    assert "T" in cmd["startTime"] and "+" not in cmd["startTime"]


def test_shournal_to_snakemake_reads_our_output(project: Path, tmp_path: Path) -> None:
    """The original's consumer, installed from PyPI (test extra), turns our
    shournal-json into Snakemake rules."""
    tool = Path(sys.executable).parent / "shournal-to-snakemake"
    if not tool.exists():
        pytest.fail("shournal-to-snakemake is not installed (pip install -e '.[test]')")
    code, out, _ = cli("query", "--history", "10", "--output-format", "shournal-json")
    assert code == 0
    res = subprocess.run([str(tool)], input=out, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    snakefile = res.stdout
    assert "rule undefined_1:" in snakefile and "rule undefined_2:" in snakefile
    # Files are replaced by {input}/{output} in the commands, paths listed.
    assert '"echo stuff > {output}"' in snakefile
    assert '"cat {input} > {output}"' in snakefile
    assert "foo" in snakefile and "bar" in snakefile
    # The failing grep wrote nothing: no rule for it.
    assert "grep nothing" not in snakefile
    (tmp_path / "Snakefile").write_text(snakefile)
