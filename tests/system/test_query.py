"""Queries on synthetic journals, wait_for_pending, and the query CLI."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from synthetic import MINUTE, T0, file_event, record
from typer.testing import CliRunner

from shournal.cli._app import _resolved
from shournal.cli.query import query
from shournal.criteria import session_id_bytes
from shournal.data import (
    BadSessionId,
    CommandView,
    QueryError,
    QueryFileError,
)
from shournal.journal import Journal
from shournal.query.pending import wait_for_pending
from shournal.store import Store


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 'journal.sqlite'}") as s:
        yield s


def texts(commands: list[CommandView]) -> list[str]:
    return [c.text for c in commands]


# -- --wfile / --rfile --------------------------------------------------------


def test_wfile_found_after_rename(journal: Journal, tmp_path: Path) -> None:
    out = tmp_path / "out.log"
    out.write_bytes(b"result 42\n" * 100)
    other = tmp_path / "other.txt"
    other.write_bytes(b"unrelated")
    journal.add(record("./produce", writes=[file_event(out)], reads=[file_event(other)]))
    journal.add(record("cat other.txt", reads=[file_event(other)]))
    renamed = tmp_path / "sub" / "renamed.log"
    renamed.parent.mkdir()
    out.rename(renamed)
    [cmd] = journal.find(wfile=renamed)
    assert cmd.text == "./produce"
    # All files of the command come along, not only the matching one.
    assert [w.path for w in cmd.writes] == [os.fsencode(out)]
    assert [r.path for r in cmd.reads] == [os.fsencode(other)]
    # Reading is not writing.
    assert journal.find(rfile=renamed) == []
    assert texts(journal.find(rfile=other)) == ["./produce", "cat other.txt"]


def test_wfile_mtime_preferred_then_content_fallback(journal: Journal, tmp_path: Path) -> None:
    f = tmp_path / "data.bin"
    f.write_bytes(os.urandom(5000))
    first = file_event(f)
    os.utime(f, ns=(T0, T0 + 5 * MINUTE))
    second = file_event(f)
    journal.add(record("first", writes=[first]))
    journal.add(record("second", start_ns=T0 + MINUTE, writes=[second]))
    # Exact mtime: only the command that left the file as it is now.
    assert texts(journal.find(wfile=f)) == ["second"]
    # An mtime nobody recorded, within no run of a writer of that content
    # (an unrecorded copy): written outside the journal, as `lineage` says.
    os.utime(f, ns=(T0, T0 + 99 * MINUTE))
    assert journal.find(wfile=f) == []
    # An mtime nobody recorded within a writer's run (+- 2 s): that writer.
    os.utime(f, ns=(T0, T0 + MINUTE + 2 * 10**9))
    assert texts(journal.find(wfile=f)) == ["second"]
    os.utime(f, ns=(T0, T0 + 10**9 // 2))
    assert texts(journal.find(wfile=f)) == ["first"]
    # Different content of the same size: nothing.
    f.write_bytes(os.urandom(5000))
    assert journal.find(wfile=f) == []


def test_empty_file_matched_by_mtime(journal: Journal, tmp_path: Path) -> None:
    f = tmp_path / "empty"
    f.touch()
    os.utime(f, ns=(T0, T0))
    old = file_event(f)
    os.utime(f, ns=(T0, T0 + MINUTE))
    new = file_event(f)
    assert old.hash is None and new.hash is None
    journal.add(record("touch old", writes=[old]))
    journal.add(record("touch new", start_ns=T0 + MINUTE, writes=[new]))
    assert texts(journal.find(wfile=f)) == ["touch new"]
    os.utime(f, ns=(T0, T0 + 7 * MINUTE))
    assert journal.find(wfile=f) == []  # no content fallback for empty files


def test_file_hashed_with_every_stored_setting(journal: Journal, tmp_path: Path) -> None:
    f = tmp_path / "big"
    f.write_bytes(os.urandom(100_000))
    ev = file_event(f, chunk=4096, max_reads=2)
    journal.add(
        record("custom settings", hash_chunk_size=4096, hash_max_reads=2, writes=[ev])
    )
    journal.add(record("default settings", writes=[file_event(tmp_path / "big")]))
    assert texts(journal.find(wfile=f)) == ["custom settings", "default settings"]


def test_file_from_command_without_hashing(journal: Journal, tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"content")
    ev = file_event(f)
    ev.hash = None
    journal.add(record("nohash", hash_chunk_size=None, hash_max_reads=None, writes=[ev]))
    assert texts(journal.find(wfile=f)) == ["nohash"]


def test_missing_or_odd_file(journal: Journal, tmp_path: Path) -> None:
    with pytest.raises(QueryFileError) as info:
        journal.find(wfile=tmp_path / "nope")
    assert "\n" not in str(info.value) and "nope" in str(info.value)
    with pytest.raises(QueryFileError, match="regular file"):
        journal.find(rfile=tmp_path)


# -- other criteria -----------------------------------------------------------


def test_history_ordering_and_filters(journal: Journal) -> None:
    starts = [5, 1, 4, 2, 3]  # inserted out of order
    for s in starts:
        journal.add(record(f"cmd {s}", start_ns=T0 + s * MINUTE))
    assert texts(journal.find(history=3)) == ["cmd 3", "cmd 4", "cmd 5"]
    assert texts(journal.find(history=10)) == [f"cmd {s}" for s in range(1, 6)]
    assert texts(journal.find()) == [f"cmd {s}" for s in range(1, 6)]
    journal.add(record("make 0", start_ns=T0))
    assert texts(journal.find(history=2, command_text="cmd%")) == ["cmd 4", "cmd 5"]
    assert texts(journal.find(limit=2)) == ["make 0", "cmd 1"]
    assert journal.find(history=0) == []


def test_command_text_wildcards(journal: Journal) -> None:
    for t in ("make -j8", "cmake ..", "echo 100%", "ls a_b", "ls axb", "MAKE install"):
        journal.add(record(t))
    assert texts(journal.find(command_text="%make%")) == [
        "make -j8",
        "cmake ..",
        "MAKE install",
    ]
    assert texts(journal.find(command_text="make%")) == ["make -j8", "MAKE install"]
    assert texts(journal.find(command_text="make -j8")) == ["make -j8"]
    # Only % is a wildcard: _ is literal.
    assert texts(journal.find(command_text="ls a_b")) == ["ls a_b"]


def test_cwd_exact_or_like(journal: Journal) -> None:
    for d in ("/home/u/proj", "/home/u/proj/sub", "/home/u/pro_j"):
        journal.add(record(f"in {d}", working_dir=d))
    assert texts(journal.find(cwd="/home/u/proj")) == ["in /home/u/proj"]
    assert texts(journal.find(cwd="/home/u/proj%")) == [
        "in /home/u/proj",
        "in /home/u/proj/sub",
    ]
    assert texts(journal.find(cwd="/home/u/pro_j")) == ["in /home/u/pro_j"]
    assert texts(journal.find(cwd="ne:/home/u/proj")) == [
        "in /home/u/proj/sub",
        "in /home/u/pro_j",
    ]


def test_cwd_stored_once_and_found_as_typed(store: Store) -> None:
    """A storage fact (one row per directory) and how queries see it."""
    from sqlalchemy import func, select

    from shournal.store import models as m

    journal = Journal(store)
    odd = "/x/\udcfe y"  # an undecodable byte, as os.getcwd() returns it
    for i in range(3):
        journal.add(record(f"odd {i}", working_dir=odd))
    journal.add(record("home", working_dir="/home/u"))
    with store.reading() as conn:
        assert conn.execute(select(func.count()).select_from(m.WorkingDir)).scalar_one() == 2
    found = journal.find(cwd=odd)
    assert texts(found) == ["odd 0", "odd 1", "odd 2"]
    assert {c.working_dir for c in found} == {"/x/\\xfe y"}
    assert texts(journal.find(cwd="/x/%")) == ["odd 0", "odd 1", "odd 2"]


def test_session_id_and_command_id(journal: Journal) -> None:
    a = uuid.uuid4().bytes
    ida = journal.add(record("in a", session_uuid=a))
    journal.add(record("in b", session_uuid=uuid.uuid4().bytes))
    journal.add(record("no session", session_uuid=None))
    printed = base64.b64encode(a).decode()
    assert texts(journal.find(session_id=printed)) == ["in a"]
    assert texts(journal.find(session_id=printed.rstrip("="))) == ["in a"]
    assert texts(journal.find(session_id=str(uuid.UUID(bytes=a)))) == ["in a"]
    assert texts(journal.find(session_id=a)) == ["in a"]
    assert texts(journal.find(command_id=ida)) == ["in a"]
    assert journal.find(command_id=ida, command_text="in b") == []
    with pytest.raises(BadSessionId):
        journal.find(session_id="bm90IDE2IGJ5dGVz")  # valid base64, 12 bytes
    with pytest.raises(BadSessionId):
        session_id_bytes("!!!")
    with pytest.raises(QueryError):
        journal.find(history=-1)


# -- wait_for_pending ---------------------------------------------------------


@pytest.fixture
def rundir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    d = tmp_path / "shournal"
    d.mkdir(mode=0o700)  # as the preload library makes it; else it is not used
    return d


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_wait_for_pending_cleans_dead_markers(rundir: Path) -> None:
    pid = dead_pid()
    (rundir / f"{pid}.end").touch()
    (rundir / f"{pid}.run").touch()
    (rundir / f"{dead_pid()}.store").touch()
    (rundir / "unrelated.txt").touch()
    (rundir / f"{os.getpid()}.run").touch()  # running, e.g. this query itself
    started = time.monotonic()
    assert wait_for_pending(timeout=2) == 0
    assert time.monotonic() - started < 1
    assert sorted(p.name for p in rundir.iterdir()) == sorted(
        [f"{os.getpid()}.run", "unrelated.txt"]
    )


def test_wait_for_pending_waits_for_live_listener(rundir: Path) -> None:
    marker = rundir / f"{os.getpid()}.end"
    marker.touch()
    (rundir / f"{os.getppid()}.store").touch()
    started = time.monotonic()
    assert wait_for_pending(timeout=0.2) == 2
    (rundir / f"{os.getppid()}.store").unlink()
    assert time.monotonic() - started >= 0.2
    # A listener that commits removes its marker; the wait ends promptly.
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import os,time; time.sleep(0.3); os.unlink({str(marker)!r})"]
    )
    started = time.monotonic()
    assert wait_for_pending(timeout=5) == 0
    assert time.monotonic() - started < 3
    proc.wait()


def test_wait_for_pending_without_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "absent"))
    assert wait_for_pending(timeout=0.1) == 0


# -- the CLI ------------------------------------------------------------------


@pytest.fixture
def cli_env(tmp_path: Path, rundir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    monkeypatch.setenv("SHOURNAL_DB_URL", url)
    return url


def run_cli(*args: str) -> tuple[int, str, str]:
    app = typer.Typer()
    # the annotations resolved as the CLI resolves them (query's module
    # names typer and the shared options only under TYPE_CHECKING)
    app.command("query")(_resolved(query))
    app.command("other")(lambda: None)  # keep "query" a subcommand, as in the real CLI
    result = CliRunner().invoke(app, ["query", *args])
    return result.exit_code, result.stdout, result.stderr


def test_cli_found_and_json(cli_env: str, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_bytes(b"hi\n")
    with Store(cli_env) as s:
        s.add_command(record("echo hi > out.txt", writes=[file_event(out)]))
    code, stdout, stderr = run_cli("--wfile", str(out))
    assert code == 0, stderr
    assert stdout.startswith("cmd-id 1 $?=0 ") and "echo hi > out.txt" in stdout
    assert "Hash: 15349503233279147316" in stdout
    code, stdout, _ = run_cli("--history", "5", "--output-format", "json")
    assert code == 0
    [obj] = json.loads(stdout)
    assert obj["command"] == "echo hi > out.txt"


def test_cli_nothing_found(cli_env: str, tmp_path: Path) -> None:
    code, stdout, _ = run_cli("--command-text", "%nothing%")
    assert code == 1 and "Nothing has been recorded yet" in stdout
    assert not (tmp_path / "cli.sqlite").exists()  # a query creates no journal
    Store(cli_env).close()
    code, stdout, _ = run_cli("--command-text", "%nothing%")
    assert code == 1
    assert stdout.splitlines()[0] == "No results found matching the query."
    assert len(stdout.splitlines()) >= 2  # a hint
    code, stdout, _ = run_cli("--history", "3", "--output-format", "json")
    assert code == 1 and json.loads(stdout) == []


@pytest.mark.parametrize(
    "args",
    [
        ["--wfile", "/nonexistent/file"],
        ["--session-id", "###"],
        [],
        ["--history", "x"],
        ["--output-format", "xml", "--history", "1"],
    ],
)
def test_cli_usage_errors(cli_env: str, args: list[str]) -> None:
    code, stdout, stderr = run_cli(*args)
    assert code == 2
    assert stdout == ""
    if args and args[0] in ("--wfile", "--session-id"):
        assert stderr.startswith("shournal: ") and stderr.count("\n") == 1


def test_cli_store_errors(tmp_path: Path, rundir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "garbage.sqlite"
    bad.write_bytes(b"garbage" * 1000)
    monkeypatch.setenv("SHOURNAL_DB_URL", f"sqlite:///{bad}")
    code, stdout, stderr = run_cli("--history", "1")
    assert code == 3
    assert stderr.startswith("shournal: ") and stderr.count("\n") == 1
    assert "Traceback" not in stderr + stdout
    monkeypatch.setenv("SHOURNAL_DB_URL", f"postgresql+psycopg://x@/db?host={tmp_path}")
    code, _, stderr = run_cli("--history", "1")
    assert code == 3 and stderr.startswith("shournal: ") and stderr.count("\n") == 1
