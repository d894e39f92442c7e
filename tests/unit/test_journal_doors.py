"""Every door to the journal agrees: the CLI commands, doctor and the
library read the journal the config names, query and delete select the
same commands for the same criteria, paths are resolved alike, huge
integers are usage errors, and the HTML report takes the statistics the
CLI computes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fixtures_cli import run_shournal
from synthetic import T0, record

from shournal.record import FileEvent
from shournal.store import Store

DAY = 86400 * 10**9
# 2024-05-01 10:00 UTC, and the day after at 10:00
MAY_1 = 1_714_557_600 * 10**9
MAY_2 = MAY_1 + DAY


def _ev(path: bytes) -> FileEvent:
    return FileEvent(path=path, size=3, mtime_ns=T0, mode=0o100644, hash=7)


@pytest.fixture
def env(cli_env: dict[str, str]) -> dict[str, str]:
    env = dict(cli_env)
    env.pop("SHOURNAL_SESSION_ID", None)
    env["SHOURNAL_SUID_PATH"] = "/nonexistent/shournal-suid"
    return env


def _config(env: dict[str, str], text: str) -> Path:
    path = Path(env["XDG_CONFIG_HOME"]) / "shournal" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- [store] url ----------------------------------------------------------------


def test_every_command_reads_the_journal_the_config_names(
    env: dict[str, str], tmp_path: Path
) -> None:
    """The listener writes to `[store] url`; query, stats, delete and
    restore must read that journal, not the default file."""
    configured = tmp_path / "lab.sqlite"
    with Store(f"sqlite:///{configured}") as s:
        s.add_command(
            record("./build.sh", reads=[FileEvent(path=b"/p/build.sh", size=3, mtime_ns=T0,
                                                   mode=0o100644, hash=7, content=b"ls\n")])
        )  # fmt: skip
    del env["SHOURNAL_DB_URL"]
    _config(env, f'[store]\nurl = "sqlite:///{configured}"\n')
    default = Path(env["XDG_DATA_HOME"]) / "shournal" / "journal.sqlite"

    res = run_shournal(["query", "--history", "5", "--output-format", "jsonl"], env)
    assert res.returncode == 0 and "./build.sh" in res.stdout, res
    res = run_shournal(["stats", "--output-format", "json"], env)
    assert res.returncode == 0 and '"commands": 1' in res.stdout, res
    res = run_shournal(["delete", "--command-text", "./build.sh", "--dry-run"], env)
    assert res.returncode == 0 and "Would delete 1 command" in res.stdout, res
    res = run_shournal(["restore", "--file-id", "1", "-o", str(tmp_path / "out.sh")], env)
    assert res.returncode == 0, res
    assert (tmp_path / "out.sh").read_bytes() == b"ls\n"
    assert not default.exists()


def test_the_environment_wins_over_the_config(env: dict[str, str], tmp_path: Path) -> None:
    with Store(env["SHOURNAL_DB_URL"]) as s:
        s.add_command(record("from-env"))
    _config(env, f'[store]\nurl = "sqlite:///{tmp_path / "other.sqlite"}"\n')
    res = run_shournal(["query", "--history", "5", "--output-format", "jsonl"], env)
    assert res.returncode == 0 and "from-env" in res.stdout, res


def _doctor_store_line(env: dict[str, str]) -> str:
    res = run_shournal(["doctor"], env)
    assert "Traceback" not in res.stderr, res.stderr
    lines = [line for line in res.stdout.splitlines() if " store: " in line]
    assert len(lines) == 1, res.stdout
    return lines[0]


def test_doctor_reports_a_bad_store_url_in_the_config(env: dict[str, str]) -> None:
    del env["SHOURNAL_DB_URL"]
    _config(env, '[store]\nurl = "mysql://nope"\n')
    line = _doctor_store_line(env)
    assert line.startswith("FAIL store: ") and "mysql" in line, line


def test_doctor_creates_nothing(env: dict[str, str], tmp_path: Path) -> None:
    del env["SHOURNAL_DB_URL"]
    line = _doctor_store_line(env)
    assert line.startswith("ok   store: "), line
    assert "no journal yet" in line
    assert not Path(env["XDG_DATA_HOME"]).exists()
    assert not Path(env["XDG_CONFIG_HOME"]).exists()


# -- query and delete agree ------------------------------------------------------


@pytest.fixture
def two_dirs(env: dict[str, str]) -> dict[str, str]:
    with Store(env["SHOURNAL_DB_URL"]) as s:
        s.add_command(record("a", start_ns=MAY_1, working_dir="/data/x"))
        s.add_command(record("b", start_ns=MAY_1 + 60 * 10**9, working_dir="/DATA/y"))
        s.add_command(record("c", start_ns=MAY_2, working_dir="/data/z"))
    return env


def _query_ids(env: dict[str, str], *args: str) -> list[str]:
    res = run_shournal(["query", *args, "--output-format", "shournal-json"], env)
    assert res.returncode in (0, 1) and "Traceback" not in res.stderr, res
    return [str(json.loads(line.partition(":")[2])["id"]) for line in res.stdout.splitlines()
            if line.startswith("COMMAND:")]  # fmt: skip


def _dry_run_ids(env: dict[str, str], *args: str) -> list[str]:
    res = run_shournal(["delete", *args, "--dry-run"], env)
    assert res.returncode in (0, 1) and "Traceback" not in res.stderr, res
    return [line.split()[1] for line in res.stdout.splitlines() if line.startswith("cmd-id ")]


@pytest.mark.parametrize(
    "args",
    [
        ("--cwd", "/data/%"),
        ("--until", "2024-05-01"),
        ("--command-text", "B"),
        ("--cwd", "/data/%", "--until", "2024-05-02"),
    ],
)
def test_query_and_delete_select_the_same_commands(
    two_dirs: dict[str, str], args: tuple[str, ...]
) -> None:
    assert _query_ids(two_dirs, *args) == _dry_run_ids(two_dirs, *args)


def test_until_a_date_includes_that_day_everywhere(two_dirs: dict[str, str]) -> None:
    assert _dry_run_ids(two_dirs, "--until", "2024-05-01") == ["1", "2"]
    assert _query_ids(two_dirs, "--cwd", "/data/%") == ["1", "3"]


# -- huge integers ---------------------------------------------------------------


HUGE = str(2**64)


@pytest.mark.parametrize(
    "args",
    [
        ["query", "--history", HUGE],
        ["query", "--command-id", HUGE],
        ["query", "--command-id", f">{HUGE}"],
        ["query", "--exit-code", HUGE],
        ["query", "--history", "1", "--max-files", HUGE],
        ["query", "--limit", HUGE, "--history", "1"],
        ["query", "--wsize", HUGE],
        ["query", "--rsize", "1..99999999999T"],
        ["stats", "--top", HUGE],
        ["delete", "--command-id", HUGE, "--dry-run"],
    ],
)
def test_huge_integers_are_usage_errors(two_dirs: dict[str, str], args: list[str]) -> None:
    res = run_shournal(args, two_dirs)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 2, res
    assert res.stderr.startswith("shournal: ") and res.stderr.count("\n") == 1, res.stderr


# -- relative paths --------------------------------------------------------------


@pytest.fixture
def project(env: dict[str, str], tmp_path: Path) -> Path:
    proj = tmp_path / "home" / "proj"
    (proj / "data").mkdir(parents=True)
    with Store(env["SHOURNAL_DB_URL"]) as s:
        s.add_command(record("make", working_dir=str(proj),
                             writes=[_ev(os.fsencode(proj / "data" / "out.csv"))]))  # fmt: skip
        s.add_command(record("ls", working_dir=str(tmp_path)))
    env["HOME"] = str(tmp_path / "home")
    return proj


@pytest.mark.parametrize(
    ("where", "args"),
    [
        ("proj", ["--cwd", "."]),
        ("proj", ["--cwd", "./"]),
        ("home", ["--cwd", "proj"]),
        ("home", ["--cwd", "proj/"]),
        ("data", ["--cwd", ".."]),
        ("data", ["--cwd", "~/proj/"]),
        ("data", ["--cwd", "~/proj"]),
        ("proj", ["--wpath", "data"]),
        ("data", ["--wpath", "."]),
        ("data", ["--wpath", "./%"]),
        ("home", ["--cwd", "ne:.", "--wpath", "proj/data/"]),
    ],
)
def test_relative_paths_are_resolved(
    env: dict[str, str], project: Path, where: str, args: list[str]
) -> None:
    cwd = {"proj": project, "home": project.parent, "data": project / "data"}[where]
    res = run_shournal(["query", *args, "--output-format", "jsonl"], env, cwd=cwd)
    assert res.returncode == 0, res
    assert [json.loads(line)["command"] for line in res.stdout.splitlines()] == ["make"]


# -- the import graph ------------------------------------------------------------


def _shournal_imports(module: str) -> set[str]:
    import ast

    import shournal

    path = Path(shournal.__file__).parent / (module.replace(".", "/") + ".py")
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {n for n in names if n == "shournal" or n.startswith("shournal.")}


def test_data_types_and_criteria_are_at_the_bottom_of_the_import_graph() -> None:
    """Every import, function-level ones included: no circle through
    query, criteria and the store's reader."""
    # shournal.data loads its dataclass half, shournal._criteria, on first use
    assert _shournal_imports("data") == {"shournal._criteria"}
    assert _shournal_imports("_criteria") == set()
    assert _shournal_imports("criteria") == {"shournal.data"}
