"""A lineage as a workflow that rebuilds its targets from their leaf
inputs: ``DIR/Snakefile`` (Snakemake) or ``DIR/Makefile`` (GNU make).

* One rule per command of the lineage, named after what it ran (the
  script, else the program and its first output: ``analyze_py``,
  ``sort_samples``; unique).  A command that read a file and wrote it
  again in place (``sed -i f``) joins the rule of the command that wrote
  the version it read: a rule cannot have its output as its input.
* Inputs and outputs are relative to a root (``--root``; default: the
  deepest directory holding the targets, all their files and the
  working directories).  A rule's outputs are the versions that a later
  rule reads or that are targets; a version read under another path than
  the one it was written to (an unrecorded ``mv``) is moved there at the
  end of the rule.
* The shell part is the recorded command line, run in its recorded
  working directory relative to the root, each command in a subshell;
  a command that exited with 0 must do so again, the status of one that
  did not is not checked (as it was recorded).  Absolute paths under the
  root in the command line are made relative to that directory, so the
  workflow runs in a copy of the root.
* Scripts (read files whose content the journal archived) are copied
  from the journal into ``DIR/scripts/`` and the command line's argument
  naming the script is replaced by that copy, so the workflow runs what
  ran, even after the script was edited; the commands that wrote the
  scripts are not part of the workflow.  ``current_scripts`` uses the
  files on disk instead (as inputs under the root).
* What cannot be expressed (interactive programs, files or directories
  outside the root, an input rewritten in place that no recorded command
  wrote, paths the format cannot spell) is listed in the result and as
  comments in the file, never dropped silently; when nothing can be,
  :class:`Unexportable` says why and nothing is written.
* A Makefile rule runs its shell part from ``DIR/steps/RULE.sh``: make
  would strip the indent of a heredoc's body and read ``$ @ - +``.
* A path written in several versions is kept per version under
  :data:`VERSIONS_DIR` and copied into place for each reader (a target
  by a last rule); also read in a version no rule makes:
  :class:`Unexportable`.
* Leaf inputs and scripts on disk that are not the version that ran are
  listed (:class:`Changed`): a rebuild cannot guarantee those steps unless
  the archived version runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from shournal.data import CommandView, QueryError
from shournal.provenance.graph import FileNode, Lineage

if TYPE_CHECKING:
    from shournal.provenance.readers import JournalReader

Format = Literal["snakemake", "make"]

FILE_NAMES: dict[str, str] = {"snakemake": "Snakefile", "make": "Makefile"}

# Programs that need a person at the terminal.
INTERACTIVE = frozenset(
    "vi vim nvim view vimdiff nano pico emacs joe mcedit less more most man top htop "
    "watch tmux screen ssh ftp sftp ipython jupyter".split()
)
# Interactive when run without arguments (a REPL).
REPL = frozenset("python python2 python3 R bash sh zsh node perl irb ghci julia".split())
# Words before the program that do not name it.
_WRAPPERS = frozenset("env time nohup command exec nice ionice".split())

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Shell word boundaries.
_WORD_EDGE = r"\s;&|()<>"


class ExportError(QueryError):
    """The export cannot be written as asked (one-line message)."""


class Unexportable(ExportError):
    """No workflow that rebuilds the targets can be written: every step is
    inexpressible, or a file's versions cannot be told apart (one line
    naming why)."""


# Where the versions of a file the workflow writes several times are kept
# (relative to the root), each copied into place for the step that reads it.
VERSIONS_DIR = ".shournal-versions"


@dataclass(slots=True)
class Skipped:
    command_ids: list[int]
    texts: list[str]
    reason: str


@dataclass(slots=True)
class ScriptCopy:
    name: str  # under DIR/scripts/
    file_id: int  # the archived read file
    path: bytes  # where it was read
    data: bytes
    executable: bool


@dataclass(slots=True)
class Rule:
    name: str
    commands: list[CommandView]
    inputs: list[str]  # relative to the root
    outputs: list[str]
    scripts: list[ScriptCopy]  # inputs from DIR/scripts/, in marker order
    lines: list[str]  # shell lines; "\0N\0" marks script N's path
    notes: list[str] = field(default_factory=list)
    # scripts the commands read without naming them (an imported module, a
    # sourced file): (command id, path relative to the root, copy)
    unnamed: list[tuple[int, str, ScriptCopy]] = field(default_factory=list)
    # the file versions behind ``inputs`` and ``outputs`` (the final copy
    # of a file in several versions has none)
    input_nodes: list[FileNode] = field(default_factory=list)
    output_nodes: list[FileNode] = field(default_factory=list)
    script_nodes: list[FileNode] = field(default_factory=list)


@dataclass(slots=True)
class Changed:
    """A leaf input or script on disk that is not the version that ran."""

    path: str  # relative to the root
    command_ids: list[int]  # the commands that read the recorded version
    copy: str | None  # scripts/NAME: the archived version the workflow runs


@dataclass(slots=True)
class ExportResult:
    path: str  # the written Snakefile or Makefile
    root: str
    rules: list[Rule]
    skipped: list[Skipped]
    leaf_inputs: list[str]  # what the working directory must hold
    scripts: list[ScriptCopy]
    targets: list[str]
    changed: list[Changed] = field(default_factory=list)
    versioned: list[str] = field(default_factory=list)  # files kept in several versions


# -- planning --------------------------------------------------------------------


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split()


def program_of(text: str) -> tuple[str, list[str]]:
    """The program a command line runs and its arguments (first simple
    command; assignments and wrappers such as ``env`` skipped)."""
    words = _words(text.splitlines()[0] if text else "")
    while words and (_ASSIGNMENT.match(words[0]) or words[0] in _WRAPPERS):
        words = words[1:]
    if not words:
        return "", []
    rest = []
    for w in words[1:]:
        if w in ("|", "||", "&&", ";", "&") or w.startswith((">", "<", "|")):
            break
        rest.append(w)
    return os.path.basename(words[0]), rest


def _interactive(text: str) -> bool:
    program, args = program_of(text)
    return program in INTERACTIVE or (program in REPL and not args and "<" not in text)


def _identifier(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_") or "step"
    return name if not name[0].isdigit() else f"step_{name}"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _spellings(path: str, cwd: str) -> list[str]:
    """How a command line in ``cwd`` may name ``path``, longest first."""
    out = {path}
    rel = os.path.relpath(path, cwd)
    out.add(rel)
    if not rel.startswith(".."):
        out.add("./" + rel)
    return sorted(out, key=len, reverse=True)


def _substitute(text: str, spelling: str, marker: str) -> tuple[str, bool]:
    """Replace ``spelling`` where it is a whole shell word (bare or quoted)."""
    pattern = re.compile(
        rf"(^|[{_WORD_EDGE}])(?P<q>['\"]?){re.escape(spelling)}(?P=q)(?=$|[{_WORD_EDGE}])",
        re.MULTILINE,
    )
    new, count = pattern.subn(lambda m: m.group(1) + marker, text)
    return new, count > 0


def _relative_root(text: str, root: str, cwd: str) -> str:
    """Absolute paths under ``root`` in a command line, relative to ``cwd``."""
    if root == "/":
        return text
    rel = os.path.relpath(root, cwd)
    pattern = re.compile(rf"(?<![^{_WORD_EDGE}'\"=:]){re.escape(root)}(?=/|$|[{_WORD_EDGE}'\"])")
    return pattern.sub(lambda m: rel, text)


class _Union:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


_MAKE_UNSAFE = re.compile(r"[\s:#%;=\\*?\[\]$|'\"]")
_SNAKE_UNSAFE = re.compile(r"[{}]")


def plan_export(
    lin: Lineage,
    reader: JournalReader,
    fmt: Format,
    *,
    root: str | None = None,
    current_scripts: bool = False,
) -> tuple[str, list[Rule], list[Skipped], list[ScriptCopy]]:
    """The root, the rules (in start-time order of their first command),
    what could not be expressed, and the script copies."""
    # The lineage's one writer of each version (never another edge).
    writer = {f: e for f in lin.files if (e := lin.writer(f)) is not None}

    def is_script(node: FileNode) -> bool:
        return node.archived_id is not None

    # The commands the workflow needs: from the targets through every input
    # that is not a script (scripts come from the archive or the disk).
    needed: dict[int, None] = {}  # ordered set
    todo = [writer[t].command_id for t in lin.targets if t in writer]
    while todo:
        cid = todo.pop()
        if cid in needed or cid not in lin.commands:
            continue
        needed[cid] = None
        for node in lin.reads(cid):
            if not is_script(node) and node.id in writer:
                todo.append(writer[node.id].command_id)
    cmds = {cid: lin.commands[cid] for cid in needed}

    # A command that rewrote in place what another one wrote joins its rule.
    union = _Union()
    in_place_leaf: dict[int, bytes] = {}
    for cid, cmd in cmds.items():
        union.find(cid)
        written_paths = {ev.path for ev in cmd.writes}
        for node in lin.reads(cid):
            if is_script(node) or node.path not in written_paths:
                continue
            edge = writer.get(node.id)
            if edge is not None and edge.command_id in cmds:
                union.join(cid, edge.command_id)
            elif edge is None:
                in_place_leaf[cid] = node.path
    groups: dict[int, list[CommandView]] = {}
    for cid, cmd in cmds.items():
        groups.setdefault(union.find(cid), []).append(cmd)
    ordered = sorted(
        (sorted(g, key=lambda c: (c.start_time, c.id)) for g in groups.values()),
        key=lambda g: (g[0].start_time, g[0].id),
    )
    group_of = {c.id: i for i, g in enumerate(ordered) for c in g}
    consumers: dict[str, set[int]] = {}
    for cid in cmds:
        for node in lin.reads(cid):
            consumers.setdefault(node.id, set()).add(group_of[cid])

    # Files of each group: inputs, outputs and moves (as absolute bytes).
    plans = []
    for gi, members in enumerate(ordered):
        ids = {c.id for c in members}
        inputs: list[FileNode] = []
        scripts: list[FileNode] = []
        outputs: list[FileNode] = []
        moves: list[tuple[bytes, bytes]] = []
        for c in members:
            for node in lin.reads(c.id):
                edge = writer.get(node.id)
                if edge is not None and edge.command_id in ids:
                    continue  # made inside this rule
                if is_script(node):
                    if node not in scripts:
                        scripts.append(node)
                elif node not in inputs:
                    inputs.append(node)
            for node, edge in lin.written(c.id):
                used_outside = node.target or bool(consumers.get(node.id, set()) - {gi})
                if used_outside and node not in outputs:
                    outputs.append(node)
                    if edge.written_path is not None:
                        moves.append((edge.written_path, node.path))
        plans.append((members, inputs, scripts, outputs, moves))

    # The root: every path and working directory of the workflow.
    if root is None:
        dirs = set()
        for members, inputs, scripts, outputs, moves in plans:
            dirs.update(c.working_dir for c in members)
            files = [n.path for n in (*inputs, *outputs)] + [p for m in moves for p in m]
            if current_scripts:
                files += [n.path for n in scripts]
            dirs.update(os.path.dirname(os.fsdecode(p)) for p in files)
        for t in lin.targets:
            dirs.add(os.path.dirname(os.fsdecode(lin.files[t].path)))
        root = os.path.commonpath(sorted(dirs)) if dirs else os.getcwd()
    root = os.path.abspath(root)

    def rel(path: bytes) -> str:
        return os.path.relpath(os.fsdecode(path), root)

    unsafe = _MAKE_UNSAFE if fmt == "make" else _SNAKE_UNSAFE
    rules: list[Rule] = []
    skipped: list[Skipped] = []
    names: set[str] = set()
    copies: dict[int, ScriptCopy] = {}
    copy_names: set[str] = set()
    for members, inputs, scripts, outputs, moves in plans:
        reason = _reason(
            members, inputs, outputs, moves, scripts if current_scripts else [],
            root, in_place_leaf, unsafe, fmt,
        )  # fmt: skip
        if reason:
            skipped.append(Skipped([c.id for c in members], [c.text for c in members], reason))
            continue
        rule_scripts: list[ScriptCopy] = []
        lines: list[str] = []
        notes: list[str] = []
        unnamed: list[tuple[int, str, ScriptCopy]] = []
        for c in members:
            text = c.text
            for node in scripts:
                if c.id not in lin.readers(node.id):
                    continue
                if current_scripts:
                    continue
                copy = copies.get(node.archived_id)  # type: ignore[arg-type]
                if copy is None:
                    copy = _script_copy(node, reader, copy_names)
                    copies[node.archived_id] = copy  # type: ignore[index]
                if copy not in rule_scripts:
                    rule_scripts.append(copy)
                marker = f"\0{rule_scripts.index(copy)}\0"
                found = False
                for spelling in _spellings(os.fsdecode(node.path), c.working_dir):
                    text, hit = _substitute(text, spelling, marker)
                    found = found or hit
                if not found:
                    unnamed.append((c.id, rel(node.path), copy))
                    notes.append(
                        f"command {c.id} read the script {rel(node.path)} without naming it: "
                        f"the copy must hold it (the version that ran: scripts/{copy.name})"
                    )
            text = _relative_root(text, root, c.working_dir)
            cwd = os.path.relpath(c.working_dir, root)
            status = c.return_value if c.return_value_known else "unknown"
            lines.append(f"# command {c.id} ({_when(c.start_time)}, exit status {status})")
            lines.append("(" if cwd == "." else f"(cd {shlex.quote(cwd)} || exit 1")
            lines.extend(text.splitlines() or [""])
            if c.return_value == 0:
                lines.append(") || exit $?")
            else:
                lines.append(f")  # recorded exit status {status}: not checked")
        out_paths = _unique(rel(n.path) for n in outputs)
        for src, dst in moves:
            keep = rel(src) in out_paths
            verb = "cp -p" if keep else "mv -f"
            lines.append(
                f"mkdir -p -- {shlex.quote(os.path.dirname(rel(dst)) or '.')} && "
                f"{verb} -- {shlex.quote(rel(src))} {shlex.quote(rel(dst))}"
            )
        mkdirs = _unique(
            [os.path.relpath(c.working_dir, root) for c in members]
            + [os.path.dirname(p) for p in out_paths]
        )
        mkdirs = [d for d in mkdirs if d not in (".", "")]
        if mkdirs:
            lines.insert(0, "mkdir -p -- " + " ".join(shlex.quote(d) for d in mkdirs))
        in_paths = _unique(rel(n.path) for n in inputs)
        if current_scripts:
            in_paths += _unique(rel(n.path) for n in scripts if rel(n.path) not in in_paths)
        name = _rule_name(members[0], rule_scripts, scripts, out_paths, names)
        rules.append(
            Rule(name, members, in_paths, out_paths, rule_scripts, lines, notes, unnamed,
                 _first_by_path(inputs, in_paths, rel), _first_by_path(outputs, out_paths, rel),
                 list(scripts))  # fmt: skip
        )
    if not rules:
        reasons = "; ".join(
            f"command {', '.join(str(i) for i in s.command_ids)}: {s.reason}" for s in skipped
        )
        raise Unexportable(
            f"no step of the lineage can be written as a {FILE_NAMES[fmt]}: {reasons}"
        )
    _separate_versions(rules, root, names)
    return root, rules, skipped, list(copies.values())


def _first_by_path(
    nodes: list[FileNode], paths: list[str], rel: Callable[[bytes], str]
) -> list[FileNode]:
    """The first node of each of ``paths`` (in their order; paths without
    a node, the scripts on disk, are left out at the end)."""
    out = []
    for path in paths:
        node = next((n for n in nodes if rel(n.path) == path), None)
        if node is None:
            break
        out.append(node)
    return out


def _separate_versions(rules: list[Rule], root: str, names: set[str]) -> None:
    """A path the workflow writes in several versions (``config.json``
    edited between two runs of a step) would be the output of several
    rules, which neither make nor Snakemake accept.  Each version is kept
    under :data:`VERSIONS_DIR` by the rule that makes it and copied into
    place by each rule that reads it; a version that is a target is copied
    to its name by a last rule that runs after every other.

    :raises Unexportable: a path also read in a version no rule makes (it
        would be overwritten before it is read)."""
    versions: dict[str, list[FileNode]] = {}
    for rule in rules:
        for path, node in [*zip(rule.inputs, rule.input_nodes, strict=False),
                           *zip(rule.outputs, rule.output_nodes, strict=True)]:  # fmt: skip
            found = versions.setdefault(path, [])
            if all(n.id != node.id for n in found):
                found.append(node)
    produced = {n.id for r in rules for n in r.output_nodes}
    kept: dict[str, str] = {}  # node id -> where the version is kept
    for path, nodes in versions.items():
        if len(nodes) < 2:
            continue
        if any(n.id not in produced for n in nodes):
            raise Unexportable(
                f"{os.path.join(root, path)} is read in a version that no step of the workflow "
                f"makes and is written by one of its steps: the workflow cannot keep both"
            )
        ordered = sorted(nodes, key=lambda n: (n.mtime_ns, int(n.id[1:])))
        for k, node in enumerate(ordered, 1):
            kept[node.id] = f"{VERSIONS_DIR}/{k}/{path}"
    if not kept:
        return
    finals: list[Rule] = []
    everything = _unique(kept.get(n.id, o) for r in rules
                         for o, n in zip(r.outputs, r.output_nodes, strict=True))  # fmt: skip
    for rule in rules:
        before: list[str] = []
        for i, node in enumerate(rule.input_nodes):
            where = kept.get(node.id)
            if where is not None:
                path, rule.inputs[i] = rule.inputs[i], where
                before.append(_copy_line(where, path))
        for i, node in enumerate(rule.output_nodes):
            where = kept.get(node.id)
            if where is None:
                continue
            path, rule.outputs[i] = rule.outputs[i], where
            rule.lines.append(_copy_line(path, where))
            if node.target:
                name = _identifier(f"final_{path}")
                unique, n = name, 2
                while unique in names:
                    unique, n = f"{name}_{n}", n + 1
                names.add(unique)
                finals.append(Rule(unique, [], _unique([where, *everything]), [path], [],
                                   [_copy_line(where, path)]))  # fmt: skip
        rule.lines[:0] = before
    rules.extend(finals)


def _copy_line(src: str, dst: str) -> str:
    return (
        f"mkdir -p -- {shlex.quote(os.path.dirname(dst) or '.')} && "
        f"cp -p -- {shlex.quote(src)} {shlex.quote(dst)} || exit 1"
    )


def _unique(items: object) -> list[str]:
    out: list[str] = []
    for x in items:  # type: ignore[attr-defined]
        if x not in out:
            out.append(x)
    return out


def _when(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


def _reason(
    members: list[CommandView],
    inputs: list[FileNode],
    outputs: list[FileNode],
    moves: list[tuple[bytes, bytes]],
    disk_scripts: list[FileNode],
    root: str,
    in_place_leaf: dict[int, bytes],
    unsafe: re.Pattern[str],
    fmt: Format,
) -> str | None:
    """Why this rule cannot be expressed, or None."""
    for c in members:
        if _interactive(c.text):
            return f"{program_of(c.text)[0]} is interactive"
        if c.id in in_place_leaf:
            return (
                f"rewrites its input {os.fsdecode(in_place_leaf[c.id])} in place, "
                "and no recorded command wrote the version it read"
            )
        if not _inside(c.working_dir, root):
            return f"runs in {c.working_dir}, outside the root {root}"
    if not outputs:
        return "writes nothing a later command read"
    paths = [n.path for n in (*inputs, *outputs, *disk_scripts)] + [p for m in moves for p in m]
    for p in paths:
        text = os.fsdecode(p)
        if not _inside(text, root):
            kind = "reads" if any(n.path == p for n in inputs) else "writes"
            return f"{kind} {text}, outside the root {root}"
        if unsafe.search(os.path.relpath(text, root)):
            return f"the path {text} cannot be written in a {FILE_NAMES[fmt]}"
    if {n.path for n in inputs} & {n.path for n in outputs}:
        return "reads and rewrites one file in place"
    return None


def _script_copy(node: FileNode, reader: JournalReader, taken: set[str]) -> ScriptCopy:
    base = os.path.basename(os.fsdecode(node.path)) or "script"
    base = re.sub(r"[^A-Za-z0-9._+-]", "_", base).lstrip(".") or "script"
    name = base
    if name in taken:
        stem, ext = os.path.splitext(base)
        name = f"{stem}-{node.archived_id}{ext}"
    taken.add(name)
    assert node.archived_id is not None and node.event is not None
    data = reader.archived(node.archived_id)
    return ScriptCopy(name, node.archived_id, node.path, data, bool(node.event.mode & 0o111))


# Programs whose first operand is the script that runs (python3 x.py).
_INTERPRETERS = re.compile(
    r"(python|pypy|perl|ruby|node|julia|Rscript|bash|sh|zsh|dash|ksh|php|lua|tclsh)"
    r"[0-9.]*"
)


def _script_argument(program: str, args: list[str]) -> str | None:
    """The stem of the script an interpreter runs (``python3 -u a.py`` ->
    ``a``), when the script is no archived read file."""
    if not _INTERPRETERS.fullmatch(program):
        return None
    for arg in args:
        if arg.startswith("-"):
            if arg in ("-c", "-e", "-m", "--eval", "-E"):
                return None  # inline code or a module, no script file
            continue
        stem, ext = os.path.splitext(os.path.basename(arg))
        return stem if ext and stem else None
    return None


def _rule_name(
    first: CommandView,
    copies: list[ScriptCopy],
    scripts: list[FileNode],
    outputs: list[str],
    taken: set[str],
) -> str:
    # Named after what ran: the script a command line names (`python3
    # countwords.py isles.txt isles.dat` is countwords_isles), else the program.
    program, args = program_of(first.text)
    tool = os.path.basename(program)
    for node in scripts:
        base = os.path.basename(os.fsdecode(node.path))
        if any(os.path.basename(a) == base for a in [program, *args]):
            tool = os.path.splitext(base)[0] or base
            break
    else:
        script = _script_argument(tool, args)
        if script is not None:
            tool = script
    stem = os.path.splitext(os.path.basename(outputs[0]))[0] if outputs else ""
    name = _identifier(f"{tool}_{stem}" if stem and stem != tool else tool)
    unique, n = name, 2
    while unique in taken or unique == "all":
        unique, n = f"{name}_{n}", n + 1
    taken.add(unique)
    return unique


# -- writing ----------------------------------------------------------------------


def _py(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _py_block(text: str) -> str:
    return '"""\n' + text.replace("\\", "\\\\").replace('"', '\\"') + '\n"""'


def _comment(text: str, prefix: str = "# ") -> list[str]:
    return [prefix + line for line in text.splitlines() or [""]]


def _header(result_targets: list[str], root: str, fmt: Format, leaves: list[str],
            scripts: list[ScriptCopy], skipped: list[Skipped],
            rules: list[Rule]) -> list[str]:  # fmt: skip
    run = (
        "snakemake -s THIS_FILE -d COPY_OF_ROOT --cores 1"
        if fmt == "snakemake"
        else "make -C COPY_OF_ROOT -f THIS_FILE"
    )
    out = [
        f"# Written by `shournal export {fmt}` from the commands the journal recorded.",
        f"# Targets: {' '.join(result_targets)}",
        f"# Paths are relative to the root {root}; run in a copy of it:",
        f"#   {run}",
        "# Leaf inputs (no recorded command wrote them; the copy must hold them):",
    ]
    out += [f"#   {p}" for p in leaves] or ["#   (none)"]
    unnamed = _unique(f"#   {p} (the version that ran: scripts/{c.name})"
                      for r in rules for _, p, c in r.unnamed)  # fmt: skip
    if unnamed:
        out.append("# Scripts read without being named in the command line (the copy must")
        out.append("# hold them too):")
        out += unnamed
    if scripts:
        out.append("# Archived script versions, copied from the journal into scripts/:")
        out += [
            f"#   scripts/{s.name}: {os.fsdecode(s.path)} (shournal restore --file-id {s.file_id})"
            for s in scripts
        ]
    if skipped:
        out.append(f"# NOT EXPRESSED ({len(skipped)}): see the comments at the end.")
    return out


def _skipped_comments(skipped: list[Skipped]) -> list[str]:
    out: list[str] = []
    for s in skipped:
        ids = ", ".join(str(i) for i in s.command_ids)
        out.append("")
        out.append(f"# Not expressed: command {ids}: {s.reason}")
        for text in s.texts:
            out += _comment(text, "#   $ ")
    return out


def render_snakefile(rules: list[Rule], targets: list[str], header: list[str],
                     skipped: list[Skipped]) -> str:  # fmt: skip
    out = [
        *header,
        "",
        "import os",
        "",
        'SCRIPTS = os.path.join(workflow.basedir, "scripts")',
        "# the recorded command lines ran in an interactive bash, not in strict mode",
        'shell.executable("bash")',
        'shell.prefix("")',
        "",
        "rule all:",
        "    input: " + (", ".join(_py(t) for t in targets) or "[]"),
    ]
    for rule in rules:
        out.append("")
        out += _comment("\n".join(rule.notes)) if rule.notes else []
        out.append(f"rule {rule.name}:")
        ins = [_py(p) for p in rule.inputs]
        ins += [
            f"script_{i}=os.path.join(SCRIPTS, {_py(s.name)})" for i, s in enumerate(rule.scripts)
        ]
        if ins:
            out.append("    input: " + ", ".join(ins))
        out.append("    output: " + ", ".join(_py(p) for p in rule.outputs))
        body = "\n".join(rule.lines).replace("{", "{{").replace("}", "}}")
        for i in range(len(rule.scripts)):
            body = body.replace(f"\0{i}\0", f"{{input.script_{i}:q}}")
        out.append("    shell: " + _py_block(body))
    out += _skipped_comments(skipped)
    return "\n".join(out) + "\n"


def _make_path(path: str) -> str:
    return path.replace("$", "$$")


# The environment variable a Makefile's step files find the scripts by.
_SCRIPTS_VAR = "SHOURNAL_SCRIPTS"


def make_steps(rules: list[Rule]) -> dict[str, str]:
    """The shell part of each Makefile rule, as a file ``steps/NAME.sh``
    the rule runs: make would strip the leading whitespace of recipe lines
    (a heredoc's indented body) and read ``$``, ``@``, ``-`` and ``+``, so
    the recorded text goes to bash byte for byte through a file."""
    out: dict[str, str] = {}
    for rule in rules:
        body = "\n".join(rule.lines)
        for i, s in enumerate(rule.scripts):
            body = body.replace(f"\0{i}\0", f'"${_SCRIPTS_VAR}"/{s.name}')
        out[rule.name] = f"# shournal export: the shell part of rule {rule.name}\n{body}\n"
    return out


def render_makefile(rules: list[Rule], targets: list[str], header: list[str],
                    skipped: list[Skipped]) -> str:  # fmt: skip
    """The Makefile; each rule runs ``steps/NAME.sh`` (:func:`make_steps`)."""
    here = "$(abspath $(dir $(lastword $(MAKEFILE_LIST))))"
    out = [
        *header,
        "",
        f"SCRIPTS := {here}/scripts",
        f"STEPS := {here}/steps",
        "# the recorded command lines ran in an interactive bash",
        "SHELL := /bin/bash",
        ".DELETE_ON_ERROR:",
        ".PHONY: all",
        "all: " + " ".join(_make_path(t) for t in targets),
    ]
    if any(o.startswith(VERSIONS_DIR + "/") for r in rules for o in r.outputs):
        # a file in several versions is copied into place for each step
        out.insert(len(header) + 5, ".NOTPARALLEL:")
    for rule in rules:
        out.append("")
        out.append(f"# rule {rule.name}")
        out += _comment("\n".join(rule.notes)) if rule.notes else []
        prereqs = [_make_path(p) for p in rule.inputs]
        prereqs += [f"$(SCRIPTS)/{s.name}" for s in rule.scripts]
        prereqs.append(f"$(STEPS)/{rule.name}.sh")
        sep = " &: " if len(rule.outputs) > 1 else ": "
        out.append(" ".join(_make_path(p) for p in rule.outputs) + sep + " ".join(prereqs))
        out.append(f'\t{_SCRIPTS_VAR}="$(SCRIPTS)" $(SHELL) "$(STEPS)/{rule.name}.sh"')
    out += _skipped_comments(skipped)
    return "\n".join(out) + "\n"


def export_workflow(
    lin: Lineage,
    reader: JournalReader,
    fmt: Format,
    out_dir: str,
    *,
    root: str | None = None,
    current_scripts: bool = False,
    force: bool = False,
) -> ExportResult:
    """Write ``out_dir/Snakefile`` or ``out_dir/Makefile`` (and
    ``out_dir/scripts/``) for the lineage's targets.

    :raises ExportError: nothing to export, or the file exists (without
        ``force``), or ``out_dir`` cannot be written.
    """
    if not any(e.kind == "wrote" and e.file in lin.targets for e in lin.edges):
        raise ExportError("no recorded command wrote the targets: nothing to export")
    root_dir, rules, skipped, copies = plan_export(
        lin, reader, fmt, root=root, current_scripts=current_scripts
    )
    targets = [
        os.path.relpath(os.fsdecode(lin.files[t].path), root_dir)
        for t in lin.targets
        if any(os.fsdecode(lin.files[t].path) == os.path.join(root_dir, o)
               for r in rules for o in r.outputs)
    ]  # fmt: skip
    produced = {o for r in rules for o in r.outputs}
    leaves = sorted({i for r in rules for i in r.inputs if i not in produced})
    changed = _changed(rules, root_dir, copies, current_scripts)
    header = _header(targets, root_dir, fmt, leaves, copies, skipped, rules)
    header += _changed_comments(changed)
    versioned = _unique(o.split("/", 2)[2] for r in rules for o in r.outputs
                        if o.startswith(VERSIONS_DIR + "/"))  # fmt: skip
    if versioned:
        header.append(
            f"# Written in several versions, kept under {VERSIONS_DIR}/ and copied into place "
            "for each step (run one job at a time): " + " ".join(versioned)
        )
    steps: dict[str, str] = {}
    if fmt == "snakemake":
        text = render_snakefile(rules, targets, header, skipped)
    else:
        text = render_makefile(rules, targets, header, skipped)
        steps = make_steps(rules)
    path = os.path.join(out_dir, FILE_NAMES[fmt])
    try:
        os.makedirs(out_dir, exist_ok=True)
        if os.path.lexists(path) and not force:
            raise ExportError(f"{path} exists (use --force to replace it)")
        if copies:
            scripts_dir = os.path.join(out_dir, "scripts")
            os.makedirs(scripts_dir, exist_ok=True)
            for copy in copies:
                _write_new(os.path.join(scripts_dir, copy.name), copy.data,
                           0o755 if copy.executable else 0o644)  # fmt: skip
        if steps:
            steps_dir = os.path.join(out_dir, "steps")
            os.makedirs(steps_dir, exist_ok=True)
            for name, body in steps.items():
                _write_new(os.path.join(steps_dir, f"{name}.sh"),
                           body.encode("utf-8", "surrogateescape"), 0o644)  # fmt: skip
        _write_new(path, text.encode("utf-8", "surrogateescape"), 0o644)
    except OSError as e:
        raise ExportError(f"cannot write {e.filename or out_dir}: {e.strerror}") from None
    return ExportResult(path, root_dir, rules, skipped, leaves, copies, targets, changed, versioned)


def _same_content(node: FileNode) -> bool | None:
    """Whether the file at the node's path holds the node's content (size
    and partial hash; the mtime does not matter to a rebuild); None: it
    cannot be read (missing: the header lists it as an input to provide)."""
    from shournal.hashing import partial_xxh64

    try:
        fd = os.open(node.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != node.size:
            return False
        if node.hash is None or not node.hash_chunk_size or not node.hash_max_reads:
            return st.st_mtime_ns == node.mtime_ns  # no hash: the mtime must tell
        digest = partial_xxh64(fd, st.st_size, node.hash_chunk_size, node.hash_max_reads)
        return digest == node.hash
    except OSError:
        return None
    finally:
        os.close(fd)


def _changed(
    rules: list[Rule], root: str, copies: list[ScriptCopy], current_scripts: bool
) -> list[Changed]:
    """The leaf inputs and scripts whose file on disk is not the version
    the commands read: what a rebuild from the disk would get wrong."""
    produced = {n.id for r in rules for n in r.output_nodes}
    by_file = {c.file_id: c for c in copies}
    found: dict[str, Changed] = {}
    for rule in rules:
        nodes = [n for n in rule.input_nodes if n.id not in produced] + rule.script_nodes
        for node in nodes:
            if _same_content(node) is not False:
                continue
            copy = None
            if not current_scripts and node.archived_id is not None:
                archived = by_file.get(node.archived_id)
                copy = None if archived is None else f"scripts/{archived.name}"
            path = os.path.relpath(os.fsdecode(node.path), root)
            entry = found.setdefault(path, Changed(path, [], copy))
            entry.command_ids += [c.id for c in rule.commands if c.id not in entry.command_ids]
    return list(found.values())


def _changed_comments(changed: list[Changed]) -> list[str]:
    out = []
    for c in changed:
        ids = ", ".join(str(i) for i in c.command_ids)
        if c.copy is not None:
            out.append(f"# CHANGED since command {ids} ran it: {c.path} (this workflow runs the "
                       f"version that ran, {c.copy})")  # fmt: skip
        else:
            out.append(f"# CHANGED since command {ids} read it: {c.path}; the workflow runs the "
                       "file on disk: that step cannot be guaranteed")  # fmt: skip
    return out


def changed_message(result: ExportResult) -> list[str]:
    """One line per leaf input or script on disk that is not the version
    that ran."""
    out = []
    for c in result.changed:
        ids = ", ".join(str(i) for i in c.command_ids)
        if c.copy is not None:
            out.append(f"{c.path} changed since command {ids} ran it: the workflow runs the "
                       f"archived version that ran ({c.copy})")  # fmt: skip
        else:
            out.append(f"{c.path} differs from the version command {ids} read and the "
                       "workflow runs the file on disk (no archived copy of that version is "
                       "used): it cannot guarantee that step")  # fmt: skip
    return out


def _write_new(path: str, data: bytes, mode: int) -> None:
    """Write beside ``path`` and rename over it: never through a planted
    symbolic link, never half a file."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".shournal-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def unnamed_message(result: ExportResult) -> str | None:
    """One line naming the scripts the copy must hold because their
    commands do not name them."""
    found = [(cid, path) for r in result.rules for cid, path, _ in r.unnamed]
    if not found:
        return None
    listed = ", ".join(f"{path} (command {cid})" for cid, path in found)
    return (
        f"{len(found)} script(s) were read without being named in the command line and are "
        f"run from the working directory, which must hold them: {listed}"
    )


def skipped_message(result: ExportResult, fmt: Format) -> str | None:
    """One line naming every command that could not be expressed."""
    if not result.skipped:
        return None
    count = sum(len(s.command_ids) for s in result.skipped)
    parts = [
        f"{', '.join(str(i) for i in s.command_ids)} "
        f"({' ; '.join(t.splitlines()[0] if t else '' for t in s.texts)}): {s.reason}"
        for s in result.skipped
    ]
    return (
        f"{count} command(s) could not be expressed in the {FILE_NAMES[fmt]} and are "
        f"left there as comments: " + "; ".join(parts)
    )
