"""The table of commands (shournal.cli._commands): the application built
with one command, or none, answers as the one with every command — the
top-level help lists the table's lines, equal to the real commands'."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from shournal.cli import app
from shournal.cli._app import build
from shournal.cli._commands import COMMANDS, first_word

runner = CliRunner()


def _help(application: object, argv: list[str]) -> str:
    res = runner.invoke(application, argv)  # type: ignore[arg-type]
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("argv", [["--help"], ["-h"]])
def test_top_level_help_from_the_table_is_the_full_one(argv):
    lazy = _help(build(()), argv)
    assert lazy == _help(app, argv)
    for name in COMMANDS:
        assert f"\n  {name} " in lazy


def test_top_level_help_with_one_command_built_is_the_full_one():
    full = _help(app, ["--help"])
    for name in COMMANDS:
        assert _help(build((name,)), ["--help"]) == full, name


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_built_alone_is_the_full_ones(name):
    alone = build((name,))
    assert _help(alone, [name, "--help"]) == _help(app, [name, "--help"])


def test_the_table_is_every_command():
    """Every command and group of the full application is in the table, in
    its help order (typer lists the groups last)."""
    built = [c.name for c in app.registered_commands]
    groups = [g.name for g in app.registered_groups]
    assert list(COMMANDS) == built + groups


@pytest.mark.parametrize(
    ("argv", "word"),
    [
        ([], None),
        (["--help"], None),
        (["--version", "query", "--cwd", "x"], "query"),
        (["-h", "stats"], "stats"),
        (["lineage", "f"], "lineage"),
        (["nosuch", "query"], "nosuch"),
        (["-", "query"], "-"),
        (["--", "query"], "query"),
        (["--version", "--"], None),
    ],
)
def test_first_word(argv, word):
    assert first_word(argv) == word
