"""``shournal recombine``: run a tool bundle's commands on every benchmark
of every benchmark set that satisfies their input constraint (the paper's
term), each run journaled through ``shournal run``.  Any ReReSo 0.3 tool
bundle: the descriptor and its container are all it needs.

A command's ``name`` is its invocation.  Its placeholders, ``[name.ext]``
(the paper's form) or ``<name.ext>`` (the schema's example), are its
files: one named ``input…``/``in`` is an input, one named ``output…``/
``out`` an output, and the others are, in order, inputs until there are as
many inputs as ``input-formats``, then outputs.  The i-th input
placeholder is the file of the i-th input format.

A set satisfies an input format when its media type is the format's and
it declares every schema the format lists (the format's schemas are a
subset of the set's).  The benchmark fills the first input placeholder
whose format the set satisfies; every other input placeholder needs a
file given as ``--input NAME=PATH``.  A command whose input formats
outnumber its input placeholders cannot be run with those inputs (nothing
says where they go).
"""

from __future__ import annotations

import bz2
import json
import lzma
import os
import re
import shlex
import stat
import subprocess
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shournal.confined import Confined, ConfinedError, UnsafePath
from shournal.rereso import schema
from shournal.rereso.mediatype import by_content
from shournal.terminal import printable

INPUT = "input"
OUTPUT = "output"

# A placeholder word, maybe after --opt=: [input.tar], <logFile>.  Its name
# becomes a file name under OUT_DIR, so only a plain file name is one.
_PLACEHOLDER = re.compile(
    r"^(?P<pre>-[A-Za-z0-9_.-]*=)?(?:\[(?P<a>[A-Za-z0-9_][A-Za-z0-9._+-]*)\]"
    r"|<(?P<b>[A-Za-z0-9_][A-Za-z0-9._+-]*)>)$"
)
_ROLE = re.compile(r"^(?:(?P<i>input|in(?![a-z]))|(?P<o>output|out(?![a-z])))", re.IGNORECASE)

# Compression layers by their magic, and the media types that declare the
# compressed file itself.
LAYERS: dict[str, tuple[bytes, frozenset[str], str]] = {
    "xz": (b"\xfd7zXZ\x00", frozenset({"application/x-xz"}), ".xz"),
    "zstd": (b"\x28\xb5\x2f\xfd", frozenset({"application/zstd", "application/x-zstd"}), ".zst"),
    "gzip": (b"\x1f\x8b", frozenset({"application/gzip", "application/x-gzip"}), ".gz"),
    "bzip2": (b"BZh", frozenset({"application/x-bzip2"}), ".bz2"),
}
_VAGUE = frozenset({"text/plain", "application/octet-stream", "application/x-empty",
                    "inode/x-empty"})
_SNIFF = 1 << 16

# Pair states.
RUNS = "match"
NEEDS = "needs"
NO_MATCH = "no match"
CANNOT = "cannot run"


class RecombineError(Exception):
    """Bad bundles, inputs or output directory (one-line message)."""


@dataclass(frozen=True, slots=True)
class Bundle:
    path: Path
    doc: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True, slots=True)
class Slot:
    """A placeholder in a command's name."""

    word: int  # index in the command's words
    prefix: str  # "--out=" for --out=[output.json]
    name: str  # "automaton.dot"
    role: str  # INPUT or OUTPUT
    format: int | None  # inputs: the index of its input format, None beyond them


@dataclass(frozen=True, slots=True)
class Command:
    number: int  # 1 = first in rereso-tool.yml
    name: str
    words: tuple[str, ...]
    slots: tuple[Slot, ...]
    inputs: tuple[dict[str, Any], ...]
    outputs: tuple[dict[str, Any], ...]
    error: str | None = None  # the name cannot be split into words

    def input_slot(self, fmt: int) -> Slot | None:
        return next((s for s in self.slots if s.role == INPUT and s.format == fmt), None)


def parse_command(number: int, doc: dict[str, Any]) -> Command:
    """The words and placeholders of a descriptor's command ``doc``."""
    name = str(doc["name"])
    inputs = tuple(doc.get("input-formats") or ())
    outputs = tuple(doc.get("output-formats") or ())
    try:
        words = tuple(shlex.split(name))
    except ValueError as e:
        return Command(number, name, (), (), inputs, outputs, f"its name cannot be split ({e})")
    found = []
    for i, word in enumerate(words):
        m = _PLACEHOLDER.match(word)
        if m:
            pname = m["a"] or m["b"]
            r = _ROLE.match(pname)
            role = None if r is None else INPUT if r["i"] else OUTPUT
            found.append((i, m["pre"] or "", pname, role))
    n_in = len(inputs) - sum(1 for *_x, role in found if role == INPUT)
    slots, k = [], 0
    for i, pre, pname, role in found:
        if role is None:
            role = INPUT if n_in > 0 else OUTPUT
            n_in -= role == INPUT
        fmt = None
        if role == INPUT:
            fmt = k if k < len(inputs) else None
            k += 1
        slots.append(Slot(i, pre, pname, role, fmt))
    return Command(number, name, words, tuple(slots), inputs, outputs)


def _schemas(fmt: dict[str, Any]) -> set[str]:
    return set(fmt.get("schemas") or ())


def _kind(n: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(n, f"{n}th")


@dataclass(frozen=True, slots=True)
class Pair:
    bench: Bundle
    command: Command
    state: str  # RUNS, NEEDS, NO_MATCH or CANNOT
    reason: str | None  # why not RUNS
    slot: Slot | None = None  # the placeholder the benchmark fills
    extra: tuple[tuple[Slot, Path], ...] = ()  # other inputs, from --input

    @property
    def number(self) -> int:
        return self.command.number

    @property
    def matches(self) -> bool:
        """The set satisfies the command's input constraint."""
        return self.state in (RUNS, NEEDS)

    @property
    def runs(self) -> bool:
        return self.state == RUNS

    def describe(self) -> str:
        """One printable line (names and commands come from the bundles)."""
        head = f"{self.bench.name} x command {self.number} ({self.command.name}): "
        if self.state == RUNS:
            given = "".join(f", with --input {s.name}={p}" for s, p in self.extra)
            return printable(head + "match" + given)
        if self.state == NEEDS:
            return printable(head + str(self.reason))
        return printable(head + f"{self.state}: {self.reason}")


def match(command: Command, bench_format: dict[str, Any],
          given: dict[str, Path] | None = None) -> tuple[str, str | None, Slot | None,
                                                          tuple[tuple[Slot, Path], ...]]:
    """(state, reason, the benchmark's slot, the other inputs) of
    ``command`` against a set of ``bench_format``; ``given``: files of
    ``--input NAME=PATH``."""
    given = given or {}
    if command.error:
        return CANNOT, command.error, None, ()
    if not command.inputs and not command.outputs:
        return NO_MATCH, "it declares no input or output formats: no set can satisfy it", None, ()
    if not command.inputs:
        return NO_MATCH, "it declares no input formats: it takes no benchmark", None, ()
    media = bench_format["media-type"]
    fits: list[int] = []
    missing: set[str] | None = None
    for i, fmt in enumerate(command.inputs):
        if fmt["media-type"] != media:
            continue
        lack = _schemas(fmt) - _schemas(bench_format)
        if not lack:
            fits.append(i)
        elif missing is None or len(lack) < len(missing):
            missing = lack
    if not fits:
        if missing is None:
            wanted = ", ".join(dict.fromkeys(f["media-type"] for f in command.inputs))
            return NO_MATCH, f"it accepts {wanted}; the set is {media}", None, ()
        return (NO_MATCH, "the set does not declare the schemas "
                f"{', '.join(sorted(missing))} (its {media} input needs them)", None, ())
    slot = next((s for i in fits if (s := command.input_slot(i)) is not None), None)
    if slot is None:
        return (CANNOT, f"the set fits its {_kind(fits[0] + 1)} input ({media}), but its name "
                "has no placeholder for it", None, ())
    need: list[str] = []
    extra: list[tuple[Slot, Path]] = []
    for i, fmt in enumerate(command.inputs):
        if i == slot.format or command.input_slot(i) is not None:
            continue
        return (CANNOT, f"it needs {len(command.inputs)} inputs "
                f"({', '.join(f['media-type'] for f in command.inputs)}); a benchmark gives "
                f"one, and its name has no placeholder for the {_kind(i + 1)} "
                f"({fmt['media-type']})", None, ())
    for s in command.slots:
        if s.role != INPUT or s is slot:
            continue
        if s.name in given:
            extra.append((s, given[s.name]))
        else:
            what = command.inputs[s.format]["media-type"] if s.format is not None else "a file"
            need.append(f"--input {s.name}=PATH ({what})")
    if need:
        return NEEDS, "needs " + " and ".join(need), slot, ()
    return RUNS, None, slot, tuple(extra)


def accepts(command: dict[str, Any], bench_format: dict[str, Any]) -> str | None:
    """None when the descriptor's ``command`` (number 1) runs on a
    benchmark of ``bench_format`` as it is, else why not."""
    state, reason, _slot, _extra = match(parse_command(1, command), bench_format)
    return None if state == RUNS else reason


# -- benchmark files ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BenchFile:
    rel: str  # as the descriptor lists it
    path: Path | None  # None: not a file inside the bundle
    stem: str  # names its results folder
    layer: str | None = None  # a compression layer to take off before the run
    problem: str | None = None  # why it is not run
    note: str | None = None  # content and declaration disagree (run as declared)


def compression_of(head: bytes) -> str | None:
    return next((k for k, (magic, _t, _s) in LAYERS.items() if head.startswith(magic)), None)


def _inner_head(path: Path, layer: str) -> bytes:
    """The first bytes of the content under the compression ``layer``."""
    with open(path, "rb") as fh:
        data = fh.read(_SNIFF)
    try:
        if layer == "xz":
            return lzma.LZMADecompressor().decompress(data, max_length=_SNIFF)
        if layer == "gzip":
            return zlib.decompressobj(wbits=47).decompress(data, _SNIFF)
        if layer == "bzip2":
            return bz2.BZ2Decompressor().decompress(data, max_length=_SNIFF)
        res = subprocess.run(["zstd", "-dcq", "--", str(path)], capture_output=True,
                             check=False, stdin=subprocess.DEVNULL, timeout=60)
        return res.stdout[:_SNIFF]
    except (lzma.LZMAError, zlib.error, OSError, ValueError, EOFError,
            subprocess.SubprocessError):
        return b""


def check_file(bench: Bundle, rel: str) -> BenchFile:
    """Whether the benchmark ``rel`` of ``bench`` can be run, and how:
    matched by its declared media type; a compression layer the
    declaration does not name is taken off; other disagreements between
    the content and the declaration are noted."""
    stem = _stem(rel)
    src = (bench.path / rel).resolve()
    if not src.is_relative_to(bench.path.resolve()):
        return BenchFile(rel, None, stem, problem=f"{rel} is outside the set's folder")
    if not src.is_file():
        why = "is missing" if not os.path.lexists(src) else "is not a regular file"
        return BenchFile(rel, None, stem, problem=f"{rel} {why}")
    try:
        with open(src, "rb") as fh:
            head = fh.read(_SNIFF)
    except OSError as e:
        return BenchFile(rel, None, stem, problem=f"{rel} cannot be read: {e.strerror}")
    declared = bench.doc["format"]["media-type"]
    layer = compression_of(head)
    if layer is not None and declared in LAYERS[layer][1]:
        layer = None  # the set declares the compressed file
    if layer is not None:
        inner = by_content(_inner_head(src, layer))
        note = None
        if inner is not None and inner not in _VAGUE and inner != declared:
            note = (f"{bench.name}/{rel}: declared {declared}, but its content under the "
                    f"{layer} layer is {inner} (run as declared)")
        return BenchFile(rel, src, stem, layer, note=note)
    found = by_content(head)
    note = None
    if found is not None and found not in _VAGUE and found != declared:
        note = (f"{bench.name}/{rel}: declared {declared}, but its content is {found} "
                "(run as declared)")
    return BenchFile(rel, src, stem, note=note)


def _stem(rel: str) -> str:
    """``flow_one_compartment`` of ``flow_one_compartment.tar.xz``."""
    base = rel.rstrip("/").rsplit("/", 1)[-1]
    for _magic, _types, suffix in LAYERS.values():
        if base.endswith(suffix) and len(base) > len(suffix):
            base = base[: -len(suffix)]
            break
    stem, dot, _ext = base.rpartition(".")
    stem = stem if dot and stem else base
    return stem if stem not in ("", ".", "..") else "benchmark"


# -- the plan ----------------------------------------------------------------------


@dataclass(slots=True)
class Plan:
    tool: Bundle
    benches: list[Bundle]
    out: Path | None
    commands: list[Command] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    files: dict[str, list[BenchFile]] = field(default_factory=dict)  # per set folder

    @property
    def notes(self) -> list[str]:
        return [f.note for fs in self.files.values() for f in fs if f.note]

    def lines(self) -> list[str]:
        """The plan as printed: one line per pair, then notes on files."""
        out = [p.describe() for p in self.pairs]
        for name, files in self.files.items():
            if not any(p.runs for p in self.pairs if p.bench.name == name):
                continue
            for f in files:
                if f.problem:
                    out.append(f"{name}/{f.rel}: not run: {f.problem}")
                elif f.layer:
                    out.append(f"{name}/{f.rel}: {f.layer}-compressed, "
                               f"decompressed for each run")
        # (set folders and file names come from the bundles: printable)
        return [printable(line) for line in out + [f"note: {n}" for n in self.notes]]


def load_bundle(path: Path, descriptor: str, schema_file: str) -> Bundle:
    import yaml

    file = path / descriptor
    try:
        text = file.read_text("utf-8")
    except OSError as e:
        raise RecombineError(f"{file}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise RecombineError(f"{file} is not UTF-8") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise RecombineError(f"{file} is not YAML: {' '.join(str(e).split())}") from None
    try:
        schema.check(doc, schema_file, str(file))
    except schema.DescriptorInvalid as e:
        raise RecombineError(str(e)) from None
    return Bundle(Path(os.path.abspath(path)), doc)


def parse_inputs(texts: list[str]) -> dict[str, Path]:
    """``--input NAME=PATH`` values as NAME -> absolute PATH.

    :raises RecombineError: no ``=``, or PATH is not a readable file."""
    found: dict[str, Path] = {}
    for text in texts:
        name, sep, path = text.partition("=")
        name = name.strip("[]<>")
        if not sep or not name or not path:
            raise RecombineError(f"--input {text}: give NAME=PATH (NAME: a placeholder, "
                                 "as automaton.dot)")
        p = Path(os.path.abspath(path))
        if not p.is_file() or not os.access(p, os.R_OK):
            raise RecombineError(f"--input {text}: {p} is not a readable file")
        found[name] = p
    return found


def plan(tool_dir: Path, bench_dirs: list[Path], out: Path | None,
         given: dict[str, Path] | None = None) -> Plan:
    """Load and validate the bundles and match every command against every
    benchmark set, without running anything.

    :raises RecombineError: a bundle is missing or invalid, two sets have
        the same folder name, or an ``--input`` names no placeholder.
    """
    given = given or {}
    tool = load_bundle(tool_dir, schema.TOOL_DESCRIPTOR, schema.TOOL_SCHEMA)
    benches = [load_bundle(b, schema.BENCHMARK_DESCRIPTOR, schema.BENCHMARK_SCHEMA)
               for b in bench_dirs]
    names = [b.name for b in benches]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise RecombineError(f"two benchmark sets are folders named {dup}: results are "
                             "kept apart by the set's folder name")
    result = Plan(tool, benches, Path(os.path.abspath(out)) if out is not None else None)
    result.commands = [parse_command(n, c) for n, c in enumerate(tool.doc["commands"], 1)]
    known = {s.name for c in result.commands for s in c.slots if s.role == INPUT}
    for name in given:
        if name not in known:
            raise RecombineError(f"--input {name}=…: no command of {tool.name} has an input "
                                 f"placeholder [{name}]")
    for bench in benches:
        for command in result.commands:
            state, reason, slot, extra = match(command, bench.doc["format"], given)
            result.pairs.append(Pair(bench, command, state, reason, slot, extra))
        if any(p.runs for p in result.pairs if p.bench is bench):
            result.files[bench.name] = [check_file(bench, str(item["path"]))
                                        for item in bench.doc["benchmarks"]]
    return result


# -- containers -------------------------------------------------------------------


def container_of(tool: Bundle) -> Path:
    """The tool bundle's container (``container`` in rereso-tool.yml).

    :raises RecombineError: it is not a readable file inside the bundle."""
    rel = str(tool.doc["container"])
    sif = (tool.path / rel).resolve()
    inside = sif.is_relative_to(tool.path.resolve())
    if not inside or not sif.is_file() or not os.access(sif, os.R_OK):
        why = ("is not inside the bundle" if not inside else "is missing" if not sif.exists()
               else "is not a readable file")
        raise RecombineError(
            f"{tool.path}: the container {rel} {why}; use --host to run the host's programs"
        )
    return sif


def container_runtime() -> str | None:
    """Apptainer (or Singularity) when installed."""
    import shutil

    return shutil.which("apptainer") or shutil.which("singularity")


# -- running ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    set: str
    benchmark: str  # set/path
    number: int
    command: str
    invocation: tuple[str, ...]  # the words the tool was started with
    status: int
    outputs: tuple[str, ...]  # the files under its results folder after the run
    log: str


@dataclass(frozen=True, slots=True)
class NotRun:
    set: str
    benchmark: str | None  # None: the whole pair
    number: int
    command: str
    reason: str


def _shournal_run() -> list[str]:
    """How to start ``shournal run`` with this very installation."""
    return [sys.executable, "-m", "shournal", "run", "--"]


def not_run(the_plan: Plan) -> list[NotRun]:
    found = []
    for p in the_plan.pairs:
        if not p.runs:
            found.append(NotRun(p.bench.name, None, p.number, p.command.name,
                                p.describe().split("): ", 1)[1]))
            continue
        for f in the_plan.files.get(p.bench.name, []):
            if f.problem:
                found.append(NotRun(p.bench.name, f"{p.bench.name}/{f.rel}", p.number,
                                    p.command.name, str(f.problem)))
    return found


def specs_of(pair: Pair, src: BenchFile) -> list[str]:
    """The sandbox's arguments for ``pair`` on ``src`` (see
    :mod:`shournal.rereso.sandbox`)."""
    by_word = {s.word: s for s in pair.command.slots}
    extra = {s.word: p for s, p in pair.extra}
    specs = []
    for i, word in enumerate(pair.command.words):
        s = by_word.get(i)
        if s is None:
            specs.append(f"arg:{word}")
        elif s is pair.slot:
            assert src.path is not None
            specs.append(f"in{'+' + src.layer if src.layer else ''}:{s.prefix}|{src.path}")
        elif s.role == INPUT:
            specs.append(f"in:{s.prefix}|{extra[i]}")
        else:
            specs.append(f"out:{s.prefix}|{s.name}")
    return specs


def _files(where: Path) -> dict[Path, tuple[int, int, int]]:
    """The regular files below ``where`` (no symbolic links), each with
    its inode, size and mtime."""
    found = {}
    for p in where.rglob("*"):
        try:
            st = p.lstat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found[p] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return found


def run_plan(the_plan: Plan, mode: str, target: str) -> list[Run]:
    """Run every runnable pair on each benchmark of its set through
    ``shournal run`` (so each run is journaled), by way of
    :mod:`shournal.rereso.sandbox` in ``mode`` (``host``, ``bwrap`` on the
    unpacked image ``target``, ``apptainer`` with the runtime and image
    ``target`` as ``RUNTIME|SIF``).  Results in
    ``OUT/<set>/<benchmark>/`` (``command-N/`` below it when several
    commands run on the set); stdout and stderr of each run in
    ``command-N.log`` there."""
    from shournal.rereso.sandbox import invocation

    assert the_plan.out is not None
    runs: list[Run] = []
    runnable = [p for p in the_plan.pairs if p.runs]
    per_set: dict[str, int] = {}
    for p in runnable:
        per_set[p.bench.name] = per_set.get(p.bench.name, 0) + 1
    env = dict(os.environ)
    tool_bin = the_plan.tool.path / "bin"
    if mode == "host" and tool_bin.is_dir():  # launchers a bundle ships for its commands
        env["PATH"] = f"{tool_bin}:{env.get('PATH', '/usr/bin:/bin')}"
    for pair in runnable:
        files = [f for f in the_plan.files[pair.bench.name] if f.problem is None]
        stems = [f.stem for f in files]
        for f in files:
            stem = f.stem if stems.count(f.stem) == 1 else f.rel.replace("/", "_")
            # Below OUT_DIR only, never through a symlink (shournal.confined):
            # the names come from the bundles.
            sub = f"{pair.bench.name}/{stem}"
            if per_set[pair.bench.name] > 1:
                sub += f"/command-{pair.number}"
            where = the_plan.out / sub
            log = where / f"command-{pair.number}.log"
            try:
                with Confined(the_plan.out, create=True) as out:
                    out.mkdirs(sub)
                    log_fd = out.open(f"{sub}/{log.name}",
                                      os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            except (ConfinedError, UnsafePath) as e:
                raise RecombineError(f"{pair.bench.name}: benchmark {f.rel}: {e}") from None
            specs = specs_of(pair, f)
            words = invocation(mode, where, specs)
            if mode == "host" and all(not s.startswith("in+") for s in specs):
                argv = [*_shournal_run(), *words]  # the tool itself is the journaled command
            else:
                argv = [*_shournal_run(), sys.executable, "-m", "shournal.rereso.sandbox",
                        mode, target, str(where), *specs]
            before = _files(where)
            with open(log_fd, "wb") as fh:
                status = subprocess.call(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh,
                                         cwd=where, env=env)
            # What this run made or changed, not what an earlier run left.
            outputs = sorted(str(p) for p, st in _files(where).items()
                             if p != log and before.get(p) != st)
            runs.append(Run(pair.bench.name, f"{pair.bench.name}/{f.rel}", pair.number,
                            pair.command.name, tuple(words), status, tuple(outputs), str(log)))
    return runs


def render(the_plan: Plan, runs: list[Run], output_format: str,
           planned_only: bool = False) -> str:
    if output_format == "json":
        doc: dict[str, Any] = {
            "tool": str(the_plan.tool.path),
            "pairs": [
                {"set": p.bench.name, "benchmark_set": str(p.bench.path),
                 "command_number": p.number, "command": p.command.name, "match": p.matches,
                 "runs": p.runs, "reason": p.reason,
                 "inputs": {s.name: str(path) for s, path in p.extra}}
                for p in the_plan.pairs
            ],
            "notes": the_plan.notes,
            "not_run": [
                {"set": n.set, "benchmark": n.benchmark, "command_number": n.number,
                 "command": n.command, "reason": n.reason}
                for n in not_run(the_plan)
            ],
        }
        if not planned_only:
            doc["runs"] = [
                {"set": r.set, "benchmark": r.benchmark, "command_number": r.number,
                 "command": r.command, "invocation": list(r.invocation),
                 "exit_status": r.status, "outputs": list(r.outputs), "log": r.log}
                for r in runs
            ]
        return json.dumps(doc, indent=2) + "\n"
    if planned_only or not runs:
        return ""
    assert the_plan.out is not None
    # Names and commands come from the bundles (foreign input): printable.
    rows = [("benchmark", "command", "exit status", "outputs")]
    rows += [(printable(r.benchmark), printable(f"{r.number}: {r.command}"), str(r.status),
              printable(" ".join(os.path.relpath(o, the_plan.out) for o in r.outputs) or "-"))
             for r in runs]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
             for row in rows]
    lines += [printable(f"ran: {r.benchmark}: {shlex.join(r.invocation)}") for r in runs]
    lines += [printable(f"not run: {n.benchmark or n.set} x command {n.number}: {n.reason}")
              for n in not_run(the_plan)]
    return "\n".join(lines) + f"\n(outputs under {printable(str(the_plan.out))})\n"
