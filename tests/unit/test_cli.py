"""Every command is documented; init prints the rc lines; errors are one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shournal import _paths
from shournal.cli import app

runner = CliRunner()

COMMANDS = sorted(c.name for c in app.registered_commands)


def test_all_commands_registered():
    assert {"query", "run", "init", "doctor", "version"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help(name):
    res = runner.invoke(app, [name, "--help"])
    assert res.exit_code == 0, res.output
    assert "Usage:" in res.output
    cmd = next(c for c in app.registered_commands if c.name == name)
    assert cmd.help and len(cmd.help) > 10


@pytest.mark.parametrize(
    "name",
    [*COMMANDS, "describe tool", "describe benchmark", "server init", "server add-user",
     "server import", ""],
)
def test_h_is_help_everywhere(name):
    """-h as --help: for the top level, every command and sub-command."""
    res = runner.invoke(app, [*name.split(), "-h"])
    assert res.exit_code == 0, res.output
    assert res.output == runner.invoke(app, [*name.split(), "--help"]).output


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_is_in_the_readme(name):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f"shournal {name}" in readme


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_init_prints_the_two_rc_lines(shell):
    res = runner.invoke(app, ["init", shell])
    assert res.exit_code == 0
    lines = [ln for ln in res.output.splitlines() if not ln.startswith("#")]
    assert lines == [f"source {_paths.shell_dir() / f'shournal.{shell}'}", "SHOURNAL_ENABLE"]
    # where they belong, and why (appended as they are, the comment is harmless)
    assert f"at the top of ~/.{shell}rc" in res.output and "runs twice" in res.output
    assert (_paths.shell_dir() / f"shournal.{shell}").exists()


def test_init_unknown_shell_is_a_usage_error():
    res = subprocess.run(
        [sys.executable, "-m", "shournal", "init", "fish"], capture_output=True, text=True
    )
    assert res.returncode == 2
    assert res.stderr.strip() == "shournal: unsupported shell 'fish' (bash or zsh)"


def test_query_missing_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOURNAL_DB_URL", f"sqlite:///{tmp_path}/j.sqlite")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    res = subprocess.run(
        [sys.executable, "-m", "shournal", "query", "--wfile", str(tmp_path / "nope")],
        capture_output=True, text=True,
    )
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1
    assert res.stderr.startswith("shournal: ")
    assert not (tmp_path / "j.sqlite").exists()  # nothing on disk changed


@pytest.mark.parametrize(
    "argv",
    [["query", "--history", "x"], ["nosuchcmd"], ["query", "--nosuch"], ["query", "--history"]],
)
def test_usage_errors_from_the_parser_are_one_line(argv, tmp_path):
    """Not click's framed box: one line, status 2 (the real process)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "shournal", *argv], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 2, r
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("shournal: "), r.stderr


def test_closed_stdout_is_not_a_traceback(tmp_path):
    """`shournal ... | head` : the reader went away before we wrote."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    r_fd, w_fd = os.pipe()
    os.close(r_fd)
    try:
        p = subprocess.run([sys.executable, "-m", "shournal", "--help"], stdout=w_fd,
                           stderr=subprocess.PIPE, text=True, env=env)
    finally:
        os.close(w_fd)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode != 0


def _imported(argv: list[str], tmp_path) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `shournal ARGV` in a fresh interpreter; the top-level packages it imported."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "shournal", *argv],
                       capture_output=True, text=True, env=env)
    mods = {line.rsplit("|", 1)[1].strip().split(".")[0]
            for line in r.stderr.splitlines() if line.startswith("import time:")}
    return r, mods


@pytest.mark.parametrize("argv", [["init", "bash"], ["version"], ["--version"]])
def test_cheap_commands_import_neither_the_parser_nor_the_store(argv, tmp_path):
    """Start-up time: these are answered before typer (and pydantic, rich)
    or SQLAlchemy are imported."""
    r, mods = _imported(argv, tmp_path)
    assert r.returncode == 0, r.stderr
    assert not mods & {"sqlalchemy", "typer", "click", "pydantic", "rich"}, mods


@pytest.mark.parametrize("argv", [["--help"], ["query", "--help"]])
def test_help_imports_neither_the_store_nor_rich(argv, tmp_path):
    r, mods = _imported(argv, tmp_path)
    assert r.returncode == 0 and "Usage:" in r.stdout, r
    assert not mods & {"sqlalchemy", "rich"}, mods


def test_version_option_and_command_agree(tmp_path):
    from shournal import __version__

    fast = subprocess.run([sys.executable, "-m", "shournal", "--version"], capture_output=True,
                          text=True)
    assert fast.returncode == 0 and fast.stdout == f"shournal {__version__}\n"
    res = runner.invoke(app, ["--version"])  # through the parser
    assert res.exit_code == 0 and res.output == fast.stdout
    assert runner.invoke(app, ["version"]).output == fast.stdout


def test_doctor_without_the_parser_answers_as_with_it(tmp_path):
    """`shournal doctor` is answered before typer is imported; `shournal --
    doctor` goes through the parser: the same report and status."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path),
           "XDG_RUNTIME_DIR": str(tmp_path)}
    fast, full = (subprocess.run([sys.executable, "-m", "shournal", *argv], capture_output=True,
                                 text=True, env=env) for argv in (["doctor"], ["--", "doctor"]))
    assert "Usage:" not in full.stdout + full.stderr
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        full.returncode, full.stdout, full.stderr)
    r, mods = _imported(["doctor"], tmp_path)
    assert "Usage:" not in r.stdout and r.returncode == fast.returncode
    assert not mods & {"typer", "click"}, mods


def test_doctor_imports_only_what_its_checks_need(tmp_path):
    """Start-up time of `shournal doctor` (docs/benchmarks.md): the doctor
    process imports no dataclasses (inspect, ast, dis), subprocess
    (locale, threading, selectors), shutil, ctypes (the user-namespace
    check imports it in its child only), socket or json when no store
    daemon runs and no push state exists."""
    from shournal.store import Store

    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    Store(url).close()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path),
           "XDG_RUNTIME_DIR": str(tmp_path), "SHOURNAL_DB_URL": url}
    code = ("import sys\nfrom shournal.cli import run_doctor\nrun_doctor()\n"
            "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert f"ok   store: {tmp_path / 'journal.sqlite'}" in r.stdout, r
    mods = set(r.stderr.split())
    assert "shournal.doctor" in mods and "shournal.journal" in mods, r.stderr
    assert not mods & {"dataclasses", "inspect", "subprocess", "shutil", "ctypes", "socket",
                       "json", "typer", "sqlalchemy"}, mods
