"""The fast path of `shournal query` (shournal.cli._fast: argv without typer,
then shournal.Journal, which reads SQLite through sqlite3) against the full
typer CLI: the
same stdout, stderr and exit status, byte for byte, for every question it
answers and every one it hands back; and the questions it answers import
neither SQLAlchemy nor typer."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from synthetic import MINUTE, T0, file_event, record

from shournal.config import DEFAULT_CONFIG_TEXT
from shournal.data import RETURN_VALUE_UNKNOWN
from shournal.record import LOST_REASONS, FileEvent
from shournal.report.human import CONTENT_MATCH_TEXT
from shournal.store import Store, connection
from shournal.store.migrations import SCHEMA_VERSION

HEAVY = ("sqlalchemy", "typer")

# main() as the console script runs it, fast path on or off; afterwards the
# heavy modules the process had imported go to the file argv[1].
_SCRIPT = f"""\
import json, sys
marker, way = sys.argv[1], sys.argv[2]
sys.argv = ["shournal", *sys.argv[3:]]
from shournal.cli import main
try:
    main(fast_query=way != "full", direct=way == "direct")
finally:
    with open(marker, "w") as f:
        json.dump(sorted(m for m in {HEAVY!r} if m in sys.modules), f)
"""


class Run:
    def __init__(self, args: list[str], env: dict[str, str], cwd: Path, fast: bool,
                 way: str = "") -> None:
        fd, name = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        marker = Path(name)
        proc = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(marker), way or ("fast" if fast else "full"),
             *args],
            capture_output=True, env=env, cwd=cwd, stdin=subprocess.DEVNULL, timeout=120,
        )  # fmt: skip
        self.result = (proc.returncode, proc.stdout, proc.stderr)
        self.heavy = json.loads(marker.read_text())
        marker.unlink()


def compare(args: list[str], env: dict[str, str], cwd: Path, *, answered: bool) -> Run:
    """Run ``shournal ARGS`` both ways; the results must be identical, and
    the fast run must have answered it itself (``answered``) or handed it
    to the full CLI."""
    fast = Run(args, env, cwd, fast=True)
    full = Run(args, env, cwd, fast=False)
    assert fast.result == full.result, args
    assert full.heavy, "the full path imports the CLI and the store"
    assert (fast.heavy == []) is answered, (args, fast.heavy)
    return fast


@pytest.fixture
def env(cli_env: dict[str, str]) -> dict[str, str]:
    cli_env.pop("SHOURNAL_SESSION_ID", None)
    return cli_env


def _url_path(env: dict[str, str]) -> Path:
    return Path(env["SHOURNAL_DB_URL"].removeprefix("sqlite:///"))


@pytest.fixture
def work(env: dict[str, str], tmp_path: Path) -> Path:
    """A journal of a small project: foo written by two commands (same
    content), read with its content archived by a third, an empty file,
    a command that wrote more files than the human listing shows, lost
    and dropped events, a rerun, other sessions, hosts and directories
    (enough for the statistics sections of the human listing)."""
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    foo, empty, script = work / "foo", work / "empty", work / "run.sh"
    foo.write_bytes(b"stuff\n" * 100)
    empty.write_bytes(b"")
    script.write_bytes(b"#!/bin/sh\necho \x1b[31mred\n" + b"line\n" * 30)
    script.chmod(0o755)
    many = []
    for i in range(14):
        p = work / "sub" / f"out_{i}.txt"
        p.write_bytes(b"x" * i)
        many.append(file_event(p))
    with Store(env["SHOURNAL_DB_URL"]) as s:
        s.add_command(record("echo stuff > foo", working_dir=str(work), writes=[file_event(foo)]))
        s.add_command(
            record("sh run.sh", start_ns=T0 + MINUTE, working_dir=str(work),
                   reads=[FileEvent(os.fsencode(script), script.stat().st_size,
                                    script.stat().st_mtime_ns, script.stat().st_mode,
                                    file_event(script).hash, script.read_bytes())],
                   writes=[file_event(foo), file_event(empty)], return_value=3,
                   lost_events=2, lost_reasons={LOST_REASONS[0]: 2})
        )  # fmt: skip
        s.add_command(
            record("make all", start_ns=T0 + 2 * MINUTE, working_dir=str(work / "sub"),
                   writes=many, reads=[file_event(foo)], dropped_writes=5,
                   session_uuid=b"\x22" * 16, hostname="elsewhere",
                   incomplete=True, return_value=RETURN_VALUE_UNKNOWN)
        )  # fmt: skip
        for i in range(4):  # enough sessions and directories for statistics sections
            d = work / f"d{i}"
            d.mkdir()
            (d / "f").write_bytes(b"%d" % i)
            s.add_command(
                record(f"touch d{i}/f", start_ns=T0 + (2 * MINUTE + i), working_dir=str(d),
                       writes=[file_event(d / "f")], session_uuid=bytes([0x30 + i]) * 16)
            )  # fmt: skip
        s.add_command(
            record("rerun", start_ns=T0 + 3 * MINUTE, session_uuid=None, apparatus=b"{}",
                   derived_from=2, hash_chunk_size=None, hash_max_reads=None,
                   return_value=2**31 - 1)
        )  # fmt: skip
        s.add_command(record("cat foo", start_ns=T0 + 4 * MINUTE, reads=[file_event(foo)]))
    return work


CASES = [
    ["query", "--history", "0"],
    ["query", "--history", "1"],
    ["query", "--history", "5"],
    ["query", "--history", "00099"],
    ["query", "--history", "3", "--output-format", "json"],
    ["query", "--output-format=jsonl", "--history=4"],
    ["query", "--wfile", "foo"],
    ["query", "--wfile", "./sub/../foo", "--output-format", "json"],
    ["query", "--wfile=foo", "--history", "1"],
    ["query", "--wfile", "empty"],
    ["query", "--wfile", "run.sh"],  # never written: no results, with hints
    ["query", "--wfile", "sub/out_13.txt", "--output-format", "jsonl"],
    ["query", "--wfile", ".//sub/./out_13.txt/"],  # spelled as pathlib would not
]


@pytest.mark.parametrize("args", CASES, ids=" ".join)
def test_the_fast_path_answers_as_the_full_cli(
    work: Path, env: dict[str, str], args: list[str]
) -> None:
    compare(args, env, work, answered=True)


def test_the_absolute_path_of_a_file_written_by_several_commands(
    work: Path, env: dict[str, str]
) -> None:
    run = compare(["query", "--wfile", str(work / "foo"), "--output-format", "json"], env, work,
                  answered=True)  # fmt: skip
    code, out, _ = run.result
    assert code == 0
    assert [c["command"] for c in json.loads(out)] == ["echo stuff > foo", "sh run.sh"]


def test_a_file_with_another_mtime_is_found_by_its_content(
    work: Path, env: dict[str, str]
) -> None:
    code, out, _ = compare(["query", "--wfile", "foo"], env, work, answered=True).result
    assert code == 0 and CONTENT_MATCH_TEXT.encode() not in out
    code, out, _ = compare(["query", "--wfile", "foo", "--output-format", "json"], env, work,
                           answered=True).result  # fmt: skip
    assert {c["match"] for c in json.loads(out)} == {"exact"}
    code, out, _ = Run(["query", "--rfile", "foo", "--output-format", "jsonl"], env, work,
                       fast=False).result  # fmt: skip
    assert code == 0 and {json.loads(line)["match"] for line in out.splitlines()} == {"exact"}
    os.utime(work / "foo", ns=(T0, T0))
    code, out, _ = compare(["query", "--wfile", "foo"], env, work, answered=True).result
    assert code == 0 and b"echo stuff > foo" in out
    assert CONTENT_MATCH_TEXT.encode() in out  # marked: the mtime differs
    code, out, _ = compare(["query", "--wfile", "foo", "--output-format", "jsonl"], env, work,
                           answered=True).result  # fmt: skip
    assert [json.loads(line)["match"] for line in out.splitlines()] == ["content"]
    # within the run of "sh run.sh" (+- 2 s): that one only
    os.utime(work / "foo", ns=(T0, T0 + MINUTE + 2 * 10**9))
    code, out, _ = compare(["query", "--wfile", "foo"], env, work, answered=True).result
    assert code == 0 and b"sh run.sh" in out and b"echo stuff > foo" not in out
    assert CONTENT_MATCH_TEXT.encode() in out
    # --rfile (the full CLI): read with another mtime
    code, out, _ = Run(["query", "--rfile", "foo", "--output-format", "jsonl"], env, work,
                       fast=False).result  # fmt: skip
    assert code == 0 and {json.loads(line)["match"] for line in out.splitlines()} == {"content"}
    # within no writer's run (an unrecorded copy): written outside the journal
    os.utime(work / "foo", ns=(T0, T0 + 30 * MINUTE))
    code, out, _ = compare(["query", "--wfile", "foo"], env, work, answered=True).result
    assert code == 1 and b"echo stuff > foo" not in out


@pytest.mark.parametrize(
    "args",
    [
        ["query", "--wfile", "missing"],
        ["query", "--wfile", ".//sub//missing/"],
        ["query", "--wfile", "sub"],
        ["query", "--wfile", ""],
        ["query", "--history", "-1"],
        ["query", "--history", str(2**63)],
        ["query", "--history", "٣"],
        ["query", "--history", "5", "--reverse"],
        ["query", "--history", "5", "--history", "6"],
        ["query", "--history"],
        ["query", "--output-format", "json"],
        ["query", "--history", "5", "--output-format", "shournal-json"],
        ["query", "--history", "5", "--output-format", "xml"],
        ["query", "--history", "5", "extra"],
        ["query", "--help"],
    ],
    ids=" ".join,
)
def test_everything_else_goes_to_the_full_cli(
    work: Path, env: dict[str, str], args: list[str]
) -> None:
    compare(args, env, work, answered=False)


def test_an_empty_journal(env: dict[str, str], tmp_path: Path) -> None:
    Store(env["SHOURNAL_DB_URL"]).close()
    run = compare(["query", "--history", "5"], env, tmp_path, answered=True)
    code, out, _ = run.result
    assert code == 1 and out.startswith(b"No results found matching the query.\n")
    assert compare(["query", "--history", "5", "--output-format", "json"], env, tmp_path,
                   answered=True).result == (1, b"[\n]\n", b"")  # fmt: skip


def test_a_missing_journal(env: dict[str, str], tmp_path: Path) -> None:
    code, out, _ = compare(["query", "--history", "5"], env, tmp_path, answered=False).result
    assert code == 1 and b"Nothing has been recorded yet" in out
    assert not _url_path(env).exists()


def _to_schema_5(path: Path) -> None:
    with sqlite3.connect(path) as db:
        for reason in LOST_REASONS:
            db.execute(f"ALTER TABLE command DROP COLUMN lost_{reason}")
        db.execute("UPDATE schema_version SET version = 5")
    db.close()


def test_a_journal_of_an_older_schema(work: Path, env: dict[str, str], tmp_path: Path) -> None:
    """Handed to the full CLI, which upgrades it first: compared on two
    copies of the same old journal."""
    old = _url_path(env)
    _to_schema_5(old)
    copy = tmp_path / "copy.sqlite"
    shutil.copyfile(old, copy)
    args = ["query", "--history", "5"]
    fast = Run(args, env, work, fast=True)
    full = Run(args, {**env, "SHOURNAL_DB_URL": f"sqlite:///{copy}"}, work, fast=False)
    assert fast.result == full.result
    assert fast.result[0] == 0 and fast.heavy
    with sqlite3.connect(old) as db:
        assert db.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)
    db.close()


def test_a_journal_of_a_newer_schema(work: Path, env: dict[str, str]) -> None:
    with sqlite3.connect(_url_path(env)) as db:
        db.execute("UPDATE schema_version SET version = version + 1")
    db.close()
    code, _, err = compare(["query", "--history", "5"], env, work, answered=False).result
    assert code == 3 and err.startswith(b"shournal: ") and b"newer" in err


def test_not_a_database(env: dict[str, str], tmp_path: Path) -> None:
    _url_path(env).write_bytes(b"\x8f not a database \x00" * 4096)
    code, _, err = compare(["query", "--history", "5"], env, tmp_path, answered=False).result
    assert code == 3 and err.count(b"\n") == 1


@pytest.mark.parametrize(
    "url",
    ["postgresql://shournal@127.0.0.1:1/none", "mysql://nope", "sqlite+pysqlite:///{db}",
     "sqlite:///{db}?mode=ro", "sqlite://"],
)  # fmt: skip
def test_other_store_urls_go_to_the_full_cli(
    work: Path, env: dict[str, str], url: str
) -> None:
    env["SHOURNAL_DB_URL"] = url.format(db=_url_path(env))
    compare(["query", "--history", "5"], env, work, answered=False)


def test_the_configured_and_the_default_journal(work: Path, env: dict[str, str]) -> None:
    """Which journal: resolve_url's order (environment, config, default
    file) holds for the fast path too."""
    journal = _url_path(env)
    del env["SHOURNAL_DB_URL"]
    config = Path(env["XDG_CONFIG_HOME"]) / "shournal" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[store]\nurl = "sqlite:///{journal}"\n')
    code, out, _ = compare(["query", "--history", "1"], env, work, answered=True).result
    assert code == 0 and b"cat foo" in out
    config.unlink()
    default = Path(env["XDG_DATA_HOME"]) / "shournal" / "journal.sqlite"
    default.parent.mkdir(parents=True, mode=0o700)
    shutil.copyfile(journal, default)
    code, out, _ = compare(["query", "--history", "1"], env, work, answered=True).result
    assert code == 0 and b"cat foo" in out
    # the commented default config (shournal.journal tells it without the parser)
    config.write_text(DEFAULT_CONFIG_TEXT)
    code, out, _ = compare(["query", "--history", "1"], env, work, answered=True).result
    assert code == 0 and b"cat foo" in out
    config.write_text(DEFAULT_CONFIG_TEXT + "[store]\nurl = 5\n")
    code, _, err = compare(["query", "--history", "1"], env, work, answered=False).result
    assert code == 4 and b"config.toml" in err  # the config's status, not the journal's
    config.write_text(DEFAULT_CONFIG_TEXT)
    default.parent.chmod(0o777)  # not private: the full CLI says so
    code, _, err = compare(["query", "--history", "1"], env, work, answered=False).result
    assert code == 3 and err.startswith(b"shournal: ")


def test_the_console_script_imports_neither_sqlalchemy_nor_typer(
    work: Path, env: dict[str, str]
) -> None:
    for args in (["--history", "5"], ["--wfile", "foo"]):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "shournal", "query", *args],
            capture_output=True, text=True, env=env, cwd=work, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                    if line.startswith("import time:")}  # fmt: skip
        assert "shournal.store.connection" in imported
        assert not {name for name in imported if name.split(".")[0] in HEAVY}


# What the fast path must not import: every module is paid by each
# `shournal query --history N` (bench/cli_startup.py).  The data types are
# plain classes, not dataclasses; the renderers, the reader, the probe and
# the paths avoid typing, socket, base64 and pathlib (which import re: the
# installed launcher does not, scripts/write_installed.py); the criteria parser, the protocol and
# the capture records stay with the full CLI.
NOT_ON_THE_FAST_PATH = (
    "dataclasses", "inspect", "typing", "socket", "json", "re", "pathlib", "urllib",
    "base64", "enum",
    "shournal._criteria", "shournal.query.find", "shournal.criteria",
    "shournal.capture.protocol", "shournal.record", "shournal.config",
)  # fmt: skip


@pytest.mark.parametrize("journal", ["env", "default"])
@pytest.mark.parametrize(
    "args", [["--history", "5"], ["--wfile", "foo"], ["--history", "2", "--wfile", "foo"]],
    ids=" ".join,
)
def test_the_fast_path_imports_only_what_it_needs(
    work: Path, env: dict[str, str], args: list[str], journal: str
) -> None:
    """Without site (-S): no .pth file or editable-install hook imports
    anything first, so every module the run imports is shournal's doing.
    ``journal``: named by $SHOURNAL_DB_URL, or the default one with the
    default config file."""
    import sysconfig

    if journal == "default":
        default = Path(env["XDG_DATA_HOME"]) / "shournal" / "journal.sqlite"
        default.parent.mkdir(parents=True, mode=0o700)
        default.symlink_to(_url_path(env))
        del env["SHOURNAL_DB_URL"]
        config = Path(env["XDG_CONFIG_HOME"]) / "shournal" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(DEFAULT_CONFIG_TEXT)

    path = os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                            sysconfig.get_paths()["purelib"]])  # fmt: skip
    code = "import sys\nfrom shournal.cli import main\nmain()\n"
    proc = subprocess.run(
        [sys.executable, "-S", "-X", "importtime", "-c", code, "query", *args],
        capture_output=True, text=True, env={**env, "PYTHONPATH": path}, cwd=work, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}  # fmt: skip
    assert "shournal.store.connection" in imported
    assert "shournal.report.human" in imported
    found = sorted(n for n in imported if n in NOT_ON_THE_FAST_PATH
                   or n.split(".")[0] in (*HEAVY, *NOT_ON_THE_FAST_PATH))  # fmt: skip
    assert found == []


@pytest.mark.parametrize(
    "text", ["a", "/a//b/", "//a", "///a", "./x", "x/./y/", ".", "/", "//", "a/..//b", "~/p", ".//"]
)
def test_paths_are_spelled_as_pathlib_spells_them(text: str) -> None:
    from shournal._paths import clean

    assert clean(text) == str(Path(text))


def test_the_sqlite_reader_reads_the_current_schema() -> None:
    """A new schema version needs the readers' SQL reviewed (then
    READS_SCHEMA raised); until then every SQLite journal is read through
    the store (SQLAlchemy)."""
    assert connection.READS_SCHEMA == SCHEMA_VERSION


def test_no_results_name_the_commands_that_hit_the_write_cap(
    work: Path, env: dict[str, str]
) -> None:
    """A file written while "make all" (which dropped write events) ran is
    not in the journal: the hint names that command, on both paths."""
    lost = work / "sub" / "lost.o"
    lost.write_bytes(b"never recorded\n")
    os.utime(lost, ns=(T0, T0 + 2 * MINUTE + 5 * 10**8))
    code, out, _ = compare(["query", "--wfile", "sub/lost.o"], env, work, answered=True).result
    assert code == 1
    assert b"hit the cap of write events per command" in out and b"(cmd-id 3)" in out, out
    # written long after: no such hint
    os.utime(lost, ns=(T0, T0 + 60 * MINUTE))
    code, out, _ = compare(["query", "--wfile", "sub/lost.o"], env, work, answered=True).result
    assert code == 1 and b"cap of write events" not in out


def test_no_results_say_when_the_command_text_is_an_ignored_command(
    work: Path, env: dict[str, str]
) -> None:
    code, out, _ = Run(["query", "--command-text", "mount /dev/sdb1 /mnt"], env, work,
                       fast=False).result  # fmt: skip
    assert code == 1 and b"`mount /dev/sdb1 /mnt` is an ignored command" in out, out
    code, out, _ = Run(["query", "--command-text", "make"], env, work, fast=False).result
    assert code == 0 and b"ignored command" not in out


@pytest.mark.parametrize(
    "args",
    [
        ["query", "--cwd", ".", "--history", "5"],
        ["query", "--wname", "foo", "--output-format", "json"],
        ["query", "--rfile", "foo"],
        ["query", "--wfile", "missing"],
        ["query", "--command-text", "make", "--stat"],
        ["stats"],
        ["stats", "--cwd", ".", "--output-format", "json"],
        ["history"],
        ["history", "-n", "3", "--output-format", "jsonl"],
        ["history", "--wrote", "foo"],
        ["lineage", "foo"],
        ["lineage", "foo", "--output-format", "json", "--depth", "1"],
        ["lineage", "missing"],
        ["status", "foo", "empty"],
        ["status", "--output-format", "json", "foo"],
    ],
    ids=" ".join,
)
def test_the_reading_commands_without_typer_answer_as_typer(
    work: Path, env: dict[str, str], args: list[str]
) -> None:
    """shournal.cli._direct: the same stdout, stderr and status as the
    typer CLI, and neither typer nor SQLAlchemy imported."""
    direct = Run(args, env, work, fast=True, way="direct")
    full = Run(args, env, work, fast=False)
    assert direct.result == full.result, args
    assert direct.heavy == [], (args, direct.heavy)


@pytest.mark.parametrize("columns", ["80", "200", "79", "60"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_the_top_level_help_without_typer_is_typers(
    work: Path, env: dict[str, str], flag: str, columns: str
) -> None:
    """`shournal --help` from the written help (cli/_spec.py TOP_HELP) where
    typer would print it byte for byte; typer itself below 80 columns (click
    wraps to the terminal there)."""
    env = {**env, "COLUMNS": columns}
    direct = Run([flag], env, work, fast=True, way="direct")
    full = Run([flag], env, work, fast=False)
    assert direct.result == full.result
    assert direct.result[0] == 0 and b"Commands:" in direct.result[1]
    assert (direct.heavy == []) is (int(columns) >= 80), direct.heavy
