"""The reading commands run without typer (whose import costs more than
the command; bench/cli_startup.py): ``shournal query|lineage|status|stats|
history ...`` whose arguments are plain is parsed here, from the options
typer would parse (shournal/cli/_spec.py, written from the typer
application by scripts/cli_spec.py), and the command's own function is
called with what typer would have given it.

A path is given to the command as text, spelled as typer's
``pathlib.Path`` would print it (pathlib costs `lineage` and `status`
their start-up): the commands take paths as ``str`` or ``Path``.

Plain: long options as ``--opt VALUE`` or ``--opt=VALUE``, short ones as
``-o VALUE``, flags, the command's file arguments; a value that typer
would take as it is (no empty value, none starting with ``-``, integers
as digits in range, a choice by its exact name, a path typer would not
refuse).  Anything else — --help, an unknown or repeated option, a bad
value, ``--`` — returns None before anything is done, and the typer CLI
answers it (its messages and statuses).
"""

from __future__ import annotations

from shournal.cli._spec import SPEC, TOP_HELP

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# the largest value the journal compares (shournal.data.INT64_MAX; not
# imported: shournal.data costs every command)
_INT_MAX = 2**63 - 1


def _convert(kind: str | None, detail: Any, value: str) -> Any:
    """``value`` as typer converts it, or None when typer must see it."""
    if kind == "str":
        return value
    if kind == "int":
        if value.isascii() and value.isdigit() and detail <= int(value) <= _INT_MAX:
            return int(value)
        return None
    if kind == "path":
        import os

        # typer refuses a path that exists but cannot be read
        if detail and os.path.exists(value) and not os.access(value, os.R_OK):
            return None
        return path_text(value)
    if kind == "choice":
        module, _, name = detail.partition(":")
        for member in getattr(_module(module), name):
            if str(member.value) == value:
                return member
    return None


def path_text(value: str) -> str:
    """``value`` as ``str(pathlib.Path(value))`` spells it: repeated and
    trailing slashes and ``.`` components dropped, exactly two leading
    slashes kept (POSIX leaves their meaning to the system), ``.`` for
    nothing left."""
    root = ""
    if value.startswith("/"):
        root = "//" if value.startswith("//") and not value.startswith("///") else "/"
    parts = [p for p in value.split("/") if p and p != "."]
    return root + "/".join(parts) if root or parts else "."


def _module(name: str) -> Any:
    """The module ``name``, imported (importlib's import_module, without
    importing importlib)."""
    import sys

    __import__(name)
    return sys.modules[name]


def parse(name: str, args: list[str]) -> dict[str, Any] | None:
    """The keyword arguments typer would call command ``name`` with (the
    ones given; the rest are the function's defaults, as typer's), or None."""
    _where, options, argument = SPEC[name]
    kwargs: dict[str, Any] = {}
    positional: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("-") and arg:
            positional.append(arg)
            continue
        flag, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        found = options.get(flag)
        if found is None:
            return None
        param, kind, detail, multiple = found
        if kind == "flag":
            if eq or param in kwargs:
                return None
            kwargs[param] = True
            continue
        if not eq:
            if not rest:
                return None
            value = rest.pop(0)
        if not value or value.startswith("-"):
            return None
        converted = _convert(kind, detail, value)
        if converted is None:
            return None
        if multiple:
            kwargs.setdefault(param, []).append(converted)
        elif param in kwargs:
            return None
        else:
            kwargs[param] = converted
    if positional or (argument is not None and argument[3]):
        if argument is None:
            return None
        param, kind, detail, _required = argument
        values = [_convert(kind, detail, v) for v in positional]
        if not values or None in values:
            return None
        kwargs[param] = values
    return kwargs


def _help_as_written() -> bool:
    """Whether typer would print TOP_HELP byte for byte: the program is
    called `shournal` (click names it after argv[0]) and click's help is
    at its widest (it wraps to the terminal's width below 80 columns)."""
    import os
    import shutil
    import sys

    return (os.path.basename(sys.argv[0]) == "shournal"
            and shutil.get_terminal_size().columns >= 80)  # fmt: skip


def answer(argv: list[str]) -> int | None:
    """Run ``shournal ARGV`` and return its exit status (the command's
    SystemExit passes through), or None (nothing done) when typer must."""
    if argv in (["--help"], ["-h"]) and _help_as_written():
        print(TOP_HELP, end="")
        return 0
    if not argv or argv[0] not in SPEC:
        return None
    kwargs = parse(argv[0], argv[1:])
    if kwargs is None:
        return None
    module, _, name = SPEC[argv[0]][0].partition(":")
    getattr(_module(module), name)(**kwargs)
    return 0
