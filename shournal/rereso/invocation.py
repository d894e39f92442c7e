"""How a recorded command invoked its tool: which part of the command line
is the tool, and which arguments named files it read or wrote.

``python3 analyze.py data/in1.csv out1.json`` that read ``analyze.py`` and
``data/in1.csv`` and wrote ``out1.json`` is the tool ``analyze.py`` (run by
``python3``) with the pattern ``analyze.py [input.csv] [output.json]`` (the
ReReSo paper's placeholder form).
An argument names a file when, resolved against the command's working
directory, it is the path of a recorded read or write (also after ``=`` in
``--opt=PATH``).  Files the command read that no argument names (helper
modules, a config file found by the script) belong to the tool.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shournal.rereso.content import FileVersion

if TYPE_CHECKING:
    from shournal.data import CommandView, FileEventView

INPUT = "input"
OUTPUT = "output"

# Programs whose first non-option argument is the tool (a script).
_INTERPRETER = re.compile(
    r"^(python[0-9.]*|pypy[0-9.]*|bash|sh|dash|zsh|ksh|perl[0-9.]*|ruby[0-9.]*|Rscript"
    r"|node|nodejs|julia|php[0-9.]*|tclsh[0-9.]*|lua[0-9.]*)$"
)

# A placeholder as written into a command's name: [input.csv], [output2.json]
# (and <input.csv>, as bundles of earlier versions wrote them).
PLACEHOLDER = re.compile(r"^(?:\[(input|output)([0-9]*)((?:\.[^\[\]/]+)?)\]"
                         r"|<(input|output)([0-9]*)((?:\.[^<>/]+)?)>)$")


class InvocationError(Exception):
    """The command cannot be described (one-line message)."""


@dataclass(frozen=True, slots=True)
class FileArg:
    """An argument that named a file the command read or wrote."""

    index: int  # in argv
    prefix: str  # "--out=" for --out=PATH, else ""
    role: str  # INPUT or OUTPUT
    version: FileVersion
    placeholder: str = ""  # "[input.csv]", set once all are known

    @property
    def extension(self) -> str:
        base = os.fsdecode(self.version.path).rsplit("/", 1)[-1]
        stem, ext = os.path.splitext(base)
        # A placeholder is a plain file name, so recombine can name the
        # output after it.
        return ext if stem and re.fullmatch(r"\.[A-Za-z0-9_+-]+", ext) else ""


@dataclass(slots=True)
class Invocation:
    command: CommandView
    argv: list[str]  # without leading NAME=value assignments
    tool: tuple[str, ...]  # identity: ("python3", "/abs/analyze.py") or ("/abs/prog",)
    shown: str  # the tool as named in descriptors: "analyze.py"
    prefix_len: int  # argv[:prefix_len] runs the tool
    files: list[FileArg] = field(default_factory=list)
    assignments: list[str] = field(default_factory=list)  # FOO=1 before the program
    tool_reads: list[FileVersion] = field(default_factory=list)  # read, named by no argument

    @property
    def inputs(self) -> list[FileArg]:
        return [f for f in self.files if f.role == INPUT]

    @property
    def outputs(self) -> list[FileArg]:
        return [f for f in self.files if f.role == OUTPUT]

    def pattern(self) -> str:
        """The command's name: the tool, then its arguments with each file
        argument replaced by its placeholder."""
        by_index = {f.index: f for f in self.files}
        words = [shlex.quote(w) for w in self.shown.split(" ")]
        for i in range(self.prefix_len, len(self.argv)):
            f = by_index.get(i)
            words.append(shlex.quote(self.argv[i]) if f is None else f.prefix + f.placeholder)
        return " ".join(words)


def _resolve(cwd: str, arg: str) -> bytes:
    return os.fsencode(os.path.normpath(os.path.join(cwd, arg)))


def _latest(events: list[FileEventView]) -> dict[bytes, FileEventView]:
    """Path -> its last recorded version (by mtime; a path may be listed
    twice when it changed while the command ran)."""
    found: dict[bytes, FileEventView] = {}
    for ev in events:
        old = found.get(ev.path)
        if old is None or ev.mtime_ns >= old.mtime_ns:
            found[ev.path] = ev
    return found


def _tool_prefix(argv: list[str], cwd: str) -> tuple[tuple[str, ...], str, int]:
    prog = argv[0]
    base = prog.rsplit("/", 1)[-1]
    if _INTERPRETER.match(base):
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            if argv[i] in ("-m", "-c", "-e"):  # python -m mod, sh -c TEXT, perl -e CODE
                if i + 1 >= len(argv):
                    break
                return (base, argv[i], argv[i + 1]), f"{base} {argv[i]} {argv[i + 1]}", i + 2
            i += 1
        if i < len(argv):
            script = _resolve(cwd, argv[i])
            return (base, os.fsdecode(script)), argv[i].rsplit("/", 1)[-1], i + 1
        return (base,), base, len(argv)
    ident = os.fsdecode(_resolve(cwd, prog)) if "/" in prog else prog
    return (ident,), base, 1


_OPERATOR_CHARS = frozenset("();<>|&")

# An environment assignment before the program: LC_ALL=C sort ...
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _shell_operators(text: str) -> list[str]:
    """The shell control and redirection operators in ``text`` (outside
    quotes): ``|``, ``>``, ``&&``, ``;`` ..."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    return [t for t in lex if t and set(t) <= _OPERATOR_CHARS]


def analyze(cmd: CommandView) -> Invocation:
    """The invocation of ``cmd`` (placeholders not yet numbered: see
    :func:`number_placeholders`).

    :raises InvocationError: its command line cannot be split, uses shell
        operators (pipes, redirections, lists), or it read no files.
    """
    try:
        argv = shlex.split(cmd.text)
    except ValueError as e:
        raise InvocationError(f"command {cmd.id}: cannot split its command line ({e})") from None
    if not argv:
        raise InvocationError(f"command {cmd.id} has an empty command line")
    operators = _shell_operators(cmd.text)
    if operators:
        raise InvocationError(
            f"command {cmd.id} ({cmd.text}) is not one program run (it uses the shell's "
            f"{' '.join(dict.fromkeys(operators))}): describe a command that names its files "
            "as arguments"
        )
    if not cmd.reads:
        raise InvocationError(
            f"command {cmd.id} ({cmd.text}) read no recorded files: nothing to describe "
            "(read events are recorded only where [read_events] allows)"
        )
    n_assign = 0
    while n_assign < len(argv) - 1 and _ASSIGNMENT.match(argv[n_assign]):
        n_assign += 1
    assignments, argv = argv[:n_assign], argv[n_assign:]
    tool, shown, prefix_len = _tool_prefix(argv, cmd.working_dir)
    inv = Invocation(cmd, argv, tool, shown, prefix_len, assignments=assignments)
    reads, writes = _latest(cmd.reads), _latest(cmd.writes)
    named: set[bytes] = set()
    for i in range(prefix_len, len(argv)):
        arg = argv[i]
        prefix, value = "", arg
        if arg.startswith("-") and "=" in arg:
            cut = arg.index("=") + 1
            prefix, value = arg[:cut], arg[cut:]
        if not value:
            continue
        path = _resolve(cmd.working_dir, value)
        if path in writes:
            version = FileVersion.of(cmd, writes[path], read=False)
            inv.files.append(FileArg(i, prefix, OUTPUT, version))
        elif path in reads:
            version = FileVersion.of(cmd, reads[path], read=True)
            inv.files.append(FileArg(i, prefix, INPUT, version))
        else:
            continue
        named.add(path)
    inv.tool_reads = [
        FileVersion.of(cmd, ev, read=True) for path, ev in reads.items() if path not in named
    ]
    number_placeholders(inv)
    return inv


def number_placeholders(inv: Invocation) -> None:
    """``[input.csv]`` when a role occurs once, ``[input1.csv]``,
    ``[input2.csv]`` ... when several times."""
    for role in (INPUT, OUTPUT):
        mine = [f for f in inv.files if f.role == role]
        for n, f in enumerate(mine, 1):
            number = str(n) if len(mine) > 1 else ""
            placeholder = f"[{role}{number}{f.extension}]"
            inv.files[inv.files.index(f)] = FileArg(f.index, f.prefix, f.role, f.version,
                                                    placeholder)


def placeholders(name: str) -> list[tuple[str, str]]:
    """The (role, extension) of each placeholder in a command name, in
    order (as :meth:`Invocation.pattern` writes them)."""
    found = []
    for word in name.split():
        word = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
        m = PLACEHOLDER.match(word)
        if m:
            found.append((m.group(1) or m.group(4), m.group(3) or m.group(6) or ""))
    return found
