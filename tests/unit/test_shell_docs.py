"""The build-time files of scripts/shell_docs.py: a man page per command that
`man -l` renders, completion files a shell accepts, and `-h` as `--help` on
every command of the tree (walked, so a new command is covered too)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from shournal import __version__
from shournal.cli import app

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("shell_docs", REPO / "scripts" / "shell_docs.py")
assert _spec and _spec.loader
shell_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shell_docs)

TREE = [" ".join(path[1:]) for path, _, _ in shell_docs._walk(get_command(app), ["shournal"])]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("share")
    subprocess.run([sys.executable, str(REPO / "scripts" / "shell_docs.py"), str(out)],
                   check=True, env={**os.environ, "SOURCE_DATE_EPOCH": "1764547200"})  # fmt: skip
    return out


def test_the_tree_has_every_command_and_sub_command() -> None:
    assert {"", "query", "history", "restore", "describe", "describe tool"} <= set(TREE)
    assert len(TREE) == len(set(TREE))


@pytest.mark.parametrize("name", TREE)
def test_h_is_help_on_every_command(name: str) -> None:
    runner = CliRunner()
    res = runner.invoke(app, [*name.split(), "-h"])
    assert res.exit_code == 0, res.output
    assert "Usage:" in res.output
    assert res.output == runner.invoke(app, [*name.split(), "--help"]).output


def test_every_command_has_a_man_page_and_no_other(out: Path) -> None:
    pages = sorted(p.name for p in (out / "man" / "man1").iterdir())
    assert pages == sorted("-".join(["shournal", *n.split()]) + ".1" for n in TREE)


@pytest.mark.skipif(shutil.which("man") is None, reason="needs man(1)")
@pytest.mark.parametrize("name", TREE)
def test_man_renders_each_page_without_warnings(out: Path, name: str) -> None:
    page = out / "man" / "man1" / ("-".join(["shournal", *name.split()]) + ".1")
    th = page.read_text().splitlines()[0]
    assert f'"shournal {__version__}"' in th and '"2025-12-01"' in th, th
    res = subprocess.run(["man", "--warnings", "-l", str(page)], capture_output=True, text=True,
                         env={**os.environ, "MANPAGER": "cat", "MANWIDTH": "1000"})  # fmt: skip
    assert res.returncode == 0 and res.stderr == "", res.stderr
    text = " ".join(res.stdout.split())
    assert f"shournal {name}".strip() in text
    # every option of the command is documented with its help
    if name == "query":
        assert "--command-text TEXT Command line contains TEXT" in text
        assert "--wfile" in text and "SEE ALSO" in text
    assert "-h, --help" in text  # as the command takes it


def test_the_top_page_lists_every_command_and_the_exit_statuses(out: Path) -> None:
    # wide: no name broken across lines
    env = {**os.environ, "MANPAGER": "cat", "MANWIDTH": "1000"}
    res = subprocess.run(["man", "-l", str(out / "man" / "man1" / "shournal.1")],
                         capture_output=True, text=True, env=env)  # fmt: skip
    text = " ".join(res.stdout.split())
    for name in TREE:
        if name and " " not in name:
            assert f"shournal-{name}(1)" in text, name
    assert "2 usage error" in text and "shournal init bash" in text


def test_the_completion_files_are_valid_and_lazy(out: Path) -> None:
    bash = out / "bash-completion" / "completions" / "shournal"
    res = subprocess.run(["bash", "-n", str(bash)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    text = bash.read_text()
    # nothing but a function and its registration: no program runs when
    # bash-completion (or an rc file) loads it
    assert "complete -o default -F _shournal_completion shournal" in text
    assert "_SHOURNAL_COMPLETE=complete_bash" in text
    zsh = (out / "zsh" / "vendor-completions" / "_shournal").read_text()
    assert zsh.startswith("#compdef shournal\n") and "compadd" in zsh
    if shutil.which("zsh"):
        res = subprocess.run(["zsh", "-n", str(out / "zsh" / "vendor-completions" / "_shournal")],
                             capture_output=True, text=True)  # fmt: skip
        assert res.returncode == 0, res.stderr


def _complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(cword),
           "_SHOURNAL_COMPLETE": "complete_bash"}  # fmt: skip
    # the console script: the completion variable is named after the program
    res = subprocess.run([str(Path(sys.executable).parent / "shournal")], capture_output=True,
                         text=True, env=env, cwd=REPO)  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def test_the_cli_answers_the_completion_protocol() -> None:
    assert _complete("shournal que", 1) == ["query"]
    assert _complete("shournal query --wf", 2) == ["--wfile"]
    assert set(_complete("shournal describe ", 2)) == {"tool", "benchmark"}
