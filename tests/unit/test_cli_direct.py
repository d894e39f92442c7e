"""The reading commands without typer (shournal.cli._direct): the options
it parses are the typer application's (shournal/cli/_spec.py is what
scripts/cli_spec.py writes), it calls each command with the arguments
typer would, and it hands everything else back to typer untouched.
(The same stdout, stderr and status as typer's, on a journal:
tests/unit/test_cli_fast_path.py.)"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from shournal.cli import _direct
from shournal.cli._app import build
from shournal.cli._commands import DIRECT
from shournal.cli._spec import SPEC

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import cli_spec  # noqa: E402

runner = CliRunner()


def test_the_spec_is_what_the_script_writes():
    assert (REPO / "shournal" / "cli" / "_spec.py").read_text() == cli_spec.render(), (
        "run .venv/bin/python scripts/cli_spec.py"
    )
    assert tuple(SPEC) == DIRECT


def _function(name: str) -> Any:
    module, _, attr = SPEC[name][0].partition(":")
    build((name,))  # resolves the annotations, as for the CLI
    return getattr(importlib.import_module(module), attr)


def by_typer(name: str, args: list[str]) -> dict[str, Any]:
    """What typer calls command ``name`` with, for ``args``."""
    got: dict[str, Any] = {}

    @functools.wraps(_function(name))
    def capture(**kwargs: Any) -> None:
        got.update(kwargs)

    app = typer.Typer()
    app.command(name)(capture)
    res = runner.invoke(app, args)
    assert res.exit_code == 0, (args, res.output)
    return got


def by_direct(name: str, args: list[str]) -> dict[str, Any]:
    kwargs = _direct.parse(name, args)
    assert kwargs is not None, args
    bound = inspect.signature(_function(name)).bind(**kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _samples(name: str) -> list[list[str]]:
    """Argument lists using every option of ``name`` (each kind of value)."""
    _where, options, argument = SPEC[name]
    positional = ["a.txt", "./dir//b/"] if argument is not None else []
    every: list[str] = []
    samples = [positional]
    for opt, (_param, kind, detail, multiple) in options.items():
        if kind == "flag":
            values = [[opt]]
        elif kind == "int":
            values = [[opt, str(detail)], [f"{opt}=0{detail + 7}"]]
        elif kind == "choice":
            module, _, cls = detail.partition(":")
            members = list(getattr(importlib.import_module(module), cls))
            values = [[opt, str(m.value)] for m in members]
        elif kind == "path":
            values = [[opt, "some//file/"], [f"{opt}=./x y"]]
        elif kind == "str":
            values = [[opt, "a b%"], [f"{opt}=x=y"]]
        else:
            continue
        if not opt.startswith("--"):  # -o VALUE, not -o=VALUE
            values = [v for v in values if len(v) != 1 or kind == "flag"]
        if multiple:
            values.append([*values[0], *values[-1]])
        samples.extend([*positional, *v] for v in values)
        if not opt.startswith("--") or any(o[0] == options[opt][0] for o in every):
            continue
        every.extend(values[0])
    samples.append([*every, *positional])
    samples.append([*positional[:1], *every, *positional[1:]])
    return samples


def _as_text(value: Any) -> Any:
    """Typer's Path values as the text the direct path gives instead."""
    if isinstance(value, list):
        return [_as_text(v) for v in value]
    return str(value) if isinstance(value, Path) else value


@pytest.mark.parametrize("name", DIRECT)
def test_the_command_gets_what_typer_gives_it(name):
    """The same values, paths as text spelled as typer's Path prints them."""
    samples = _samples(name)
    assert len(samples) > 3
    for args in samples:
        direct = by_direct(name, args)
        assert direct == {k: _as_text(v) for k, v in by_typer(name, args).items()}, args
        assert not [v for v in direct.values() if isinstance(v, Path)], args


@pytest.mark.parametrize(
    "value",
    ["a", "a/b", "a//b", "a/b/", "./a", "a/./b", "a/../b", ".", "./", "..", "/", "//", "///",
     "//srv/x", "///srv/x", "/a//b/.", "a b/ c", "\udcff/x", "~/x", "-"],
)  # fmt: skip
def test_a_path_is_spelled_as_pathlib_spells_it(value):
    assert _direct.path_text(value) == str(Path(value))


@pytest.mark.parametrize(
    "argv",
    [
        ["query", "--help"],
        ["query", "-h"],
        ["query", "--nosuch"],
        ["query", "--history", "5", "--history", "6"],
        ["query", "--history", "-1"],
        ["query", "--history", "x"],
        ["query", "--history", str(2**63)],
        ["query", "--history", " 5"],
        ["query", "--history"],
        ["query", "--cwd", ""],
        ["query", "--cwd", "-x"],
        ["query", "--reverse=1"],
        ["query", "--output-format", "HUMAN"],
        ["query", "extra"],
        ["query", "--", "--cwd"],
        ["lineage"],
        ["lineage", "--depth", "0", "f"],
        ["lineage", "-", "f"],
        ["lineage", "f", "-o"],
        ["history", "-n", "0"],
        ["history", "-n5"],
        ["history", "-rn", "5"],
        ["stats", "--top", "0"],
        ["status", "--output-format", "dot"],
        ["delete", "--cwd", "x"],
        [],
    ],
    ids=" ".join,
)
def test_everything_else_is_left_to_typer(argv):
    assert _direct.answer(argv) is None


def test_an_unreadable_path_is_left_to_typer(tmp_path, monkeypatch):
    f = tmp_path / "secret"
    f.write_text("x")
    monkeypatch.setattr("os.access", lambda *_a, **_k: False)
    assert _direct.parse("status", [str(f)]) is None
    assert _direct.parse("status", [str(tmp_path / "absent")]) is not None
