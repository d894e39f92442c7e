"""Write shournal/cli/_spec.py: the options and arguments of the commands
that run without typer (shournal.cli._commands.DIRECT), read from the
typer application, so that each option is declared once (in its command's
signature).  tests/unit/test_cli_direct.py fails when the file is not
what this script writes.

    .venv/bin/python scripts/cli_spec.py
"""

from __future__ import annotations

import enum
import sys
import typing
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "shournal" / "cli" / "_spec.py"

HEADER = '''# ruff: noqa: E501
"""Written by scripts/cli_spec.py from the typer application: do not edit.

The options and arguments of the commands that run without typer
(:mod:`shournal.cli._direct`).  Per command: its function ("module:name"),
{option: (parameter, kind, detail, multiple)} and the argument (parameter,
kind, detail, required) or None.  Kinds: flag, str, path (detail: checked
readable), int (detail: the lowest value), choice (detail: "module:Enum"),
None (only typer parses it).  TOP_HELP: what `shournal --help` prints when
click's help is 78 columns wide (a terminal of 80 columns or more, or
none).
"""

'''


def _enum_of(hint: Any) -> type[enum.Enum] | None:
    for arg in typing.get_args(hint) or (hint,):
        if isinstance(arg, type) and issubclass(arg, enum.Enum):
            return arg
    return None


def kind_of(param: Any, hint: Any) -> tuple[str | None, Any]:
    """(kind, detail) of a click parameter as typer made it; (None, None)
    for anything the direct parser does not take."""
    from typer.models import TyperPath

    from shournal.cli._options import BoundedInt

    t = param.type
    if (getattr(param, "envvar", None) or param.callback is not None or param.is_eager
            or getattr(param, "prompt", None) or getattr(param, "count", False)):
        return None, None
    if getattr(param, "is_flag", False):
        if param.secondary_opts or param.default is not False:
            return None, None
        return "flag", None
    if param.param_type_name == "option" and param.nargs != 1:
        return None, None
    name = type(t).__name__
    if name == "StringParamType":
        return "str", None
    if isinstance(t, TyperPath):
        plain = (not t.exists and t.file_okay and t.dir_okay and not t.writable
                 and not t.resolve_path and not t.allow_dash and t.type is None)
        return ("path", t.readable) if plain else (None, None)
    if isinstance(t, BoundedInt):
        return "int", t.low if t.low >= 0 else None
    if name == "IntParamType":
        return "int", 0  # the direct parser takes digits only: never below 0
    if (name == "IntRange" and t.max is None and not t.min_open and not t.clamp
            and t.min is not None and t.min >= 0):
        return "int", t.min
    if name == "TyperChoice":
        cls = _enum_of(hint)
        if cls is None or not t.case_sensitive or [str(m.value) for m in cls] != list(t.choices):
            return None, None
        return "choice", f"{cls.__module__}:{cls.__qualname__}"
    return None, None


def spec() -> dict[str, Any]:
    import importlib

    from typer.main import get_command

    from shournal.cli._app import build
    from shournal.cli._commands import COMMANDS, DIRECT

    out: dict[str, Any] = {}
    for name in DIRECT:
        where = COMMANDS[name][0]
        command = get_command(build((name,))).commands[name]  # type: ignore[attr-defined]
        module, _, attr = where.partition(":")
        hints = typing.get_type_hints(getattr(importlib.import_module(module), attr),
                                      include_extras=True)
        options: dict[str, tuple[Any, ...]] = {}
        argument = None
        for p in command.params:
            kind, detail = kind_of(p, hints[p.name])
            if p.param_type_name == "argument":
                if argument is not None or p.nargs != -1:
                    kind = None
                argument = (p.name, kind, detail, bool(p.required))
                continue
            for opt in [*p.opts, *p.secondary_opts]:
                options[opt] = (p.name, kind, detail, bool(p.multiple))
        out[name] = (where, options, argument)
    return out


def top_help() -> str:
    """`shournal --help` as the typer CLI prints it, in a process of its own
    as the console script runs (click's width comes from the terminal)."""
    import os
    import subprocess

    code = ("import sys; sys.argv = ['shournal', '--help']\n"
            "from shournal.cli import main\nmain(fast_query=False)")
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True, stdin=subprocess.DEVNULL)  # fmt: skip
    return proc.stdout


def render() -> str:
    lines = [HEADER, f"TOP_HELP = {top_help()!r}\n\n", "SPEC: dict = {\n"]
    for name, (where, options, argument) in spec().items():
        lines.append(f"    {name!r}: (\n        {where!r},\n        {{\n")
        lines.extend(f"            {opt!r}: {value!r},\n" for opt, value in options.items())
        lines.append(f"        }},\n        {argument!r},\n    ),\n")
    lines.append("}\n")
    return "".join(lines)


def main() -> int:
    SPEC.write_text(render())
    print(f"wrote {SPEC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
