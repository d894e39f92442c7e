"""``shournal recombine``: run a tool bundle's commands on every benchmark
of every benchmark set whose format they accept (the paper's "input
constraint"), each run journaled through ``shournal run``.

A command accepts a set when it takes exactly one input file (one input
placeholder in its name), the set's media type is one of its input
formats, and the set declares every schema that input format lists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shournal.confined import Confined, ConfinedError, UnsafePath
from shournal.rereso import schema
from shournal.rereso.image import RUNNER, RUNNER_IN_CONTAINER
from shournal.rereso.invocation import INPUT, OUTPUT, placeholders
from shournal.terminal import printable


class RecombineError(Exception):
    """Bad bundles or output directory (one-line message)."""


@dataclass(frozen=True, slots=True)
class Bundle:
    path: Path
    doc: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True, slots=True)
class Pair:
    bench: Bundle
    number: int  # the command's number, 1 = first in rereso-tool.yml
    command: str
    reason: str | None  # None: it matches

    @property
    def matches(self) -> bool:
        return self.reason is None

    def describe(self) -> str:
        """One printable line (names and commands come from the bundles)."""
        head = f"{self.bench.name} x command {self.number} ({self.command}): "
        return printable(head + ("match" if self.matches else f"no match: {self.reason}"))


@dataclass(slots=True)
class Plan:
    tool: Bundle
    benches: list[Bundle]
    out: Path
    pairs: list[Pair] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Run:
    benchmark: str  # set/path
    number: int
    command: str
    status: int
    outputs: tuple[str, ...]  # the outputs that exist after the run
    log: str


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


def _schemas(fmt: dict[str, Any]) -> set[str]:
    return set(fmt.get("schemas") or ())


def accepts(command: dict[str, Any], bench_format: dict[str, Any]) -> str | None:
    """None when ``command`` accepts a benchmark of ``bench_format``,
    else why not."""
    slots = placeholders(command["name"])
    n_in = sum(1 for role, _ext in slots if role == INPUT)
    if n_in != 1:
        return (f"it takes {n_in} input files; a benchmark is one file" if n_in
                else "it takes no input file")
    media = bench_format["media-type"]
    formats = command.get("input-formats") or []
    same = [f for f in formats if f["media-type"] == media]
    if not same:
        wanted = ", ".join(f["media-type"] for f in formats) or "nothing declared"
        return f"it accepts {wanted}; the set is {media}"
    for f in same:
        missing = _schemas(f) - _schemas(bench_format)
        if not missing:
            return None
    return f"the set does not declare the schemas {', '.join(sorted(missing))}"


def plan(tool_dir: Path, bench_dirs: list[Path], out: Path) -> Plan:
    """Load and validate the bundles and match every command against every
    benchmark set.

    :raises RecombineError: a bundle is missing or invalid, or the tool
        bundle has no runner.
    """
    tool = load_bundle(tool_dir, schema.TOOL_DESCRIPTOR, schema.TOOL_SCHEMA)
    if not os.access(tool.path / RUNNER, os.X_OK):
        raise RecombineError(
            f"{tool.path} has no executable {RUNNER}: recombine runs bundles made by "
            "shournal describe tool"
        )
    benches = [load_bundle(b, schema.BENCHMARK_DESCRIPTOR, schema.BENCHMARK_SCHEMA)
               for b in bench_dirs]
    names = [b.name for b in benches]
    if len(set(names)) != len(names):
        raise RecombineError("two benchmark sets have the same directory name")
    result = Plan(tool, benches, Path(os.path.abspath(out)))
    for bench in benches:
        for n, command in enumerate(tool.doc["commands"], 1):
            reason = accepts(command, bench.doc["format"])
            result.pairs.append(Pair(bench, n, command["name"], reason))
    return result


def _shournal_run() -> list[str]:
    """How to start ``shournal run`` with this very installation."""
    return [sys.executable, "-m", "shournal", "run", "--"]


def image_of(tool: Bundle) -> Path:
    """The tool bundle's SIF image (``container`` in rereso-tool.yml).

    :raises RecombineError: it names no image file inside the bundle."""
    rel = str(tool.doc["container"])
    sif = (tool.path / rel).resolve()
    if not sif.is_relative_to(tool.path.resolve()) or not sif.is_file():
        raise RecombineError(
            f"{tool.path}: the container {rel} is not a file inside the bundle (describe tool "
            "builds it from runs recorded with shournal run --apparatus); use --host to run "
            "the host's programs"
        )
    return sif


def run_plan(the_plan: Plan, rootfs: Path | None = None) -> list[Run]:
    """Run every matching pair on each of its set's benchmarks through
    ``shournal run`` (so each run is journaled): inside the tool's image
    unpacked at ``rootfs`` (:mod:`shournal.rereso.sandbox`), or with the
    host's programs when ``rootfs`` is None; outputs in
    ``OUT/<set>/<benchmark stem>/`` (the whole benchmark path when two
    benchmarks of a set share a stem); stdout and stderr of each run in
    ``command-N.log`` there."""
    runs: list[Run] = []
    matching = [p for p in the_plan.pairs if p.matches]
    per_set: dict[str, int] = {}
    for p in matching:
        per_set[p.bench.name] = per_set.get(p.bench.name, 0) + 1
    for pair in matching:
        slots = placeholders(pair.command)
        items = [item["path"] for item in pair.bench.doc["benchmarks"]]
        stems = [Path(rel).stem or Path(rel).name for rel in items]
        for rel, stem in zip(items, stems, strict=True):
            if stems.count(stem) > 1:  # a.csv and a.tsv: the whole path names the results
                stem = rel.replace("/", "_")
            src = (pair.bench.path / rel).resolve()
            if not src.is_relative_to(pair.bench.path.resolve()) or not src.is_file():
                raise RecombineError(f"{pair.bench.name}: benchmark {rel} is not a file "
                                     "inside the bundle")
            # Below OUT_DIR only, never through a symlink (shournal.confined):
            # the names come from the bundles.
            sub = f"{pair.bench.name}/{stem}"
            try:
                with Confined(the_plan.out, create=True) as out:
                    out.mkdirs(sub)
                    log_fd = out.open(f"{sub}/command-{pair.number}.log",
                                      os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            except (ConfinedError, UnsafePath) as e:
                raise RecombineError(f"{pair.bench.name}: benchmark {rel}: {e}") from None
            where = the_plan.out / pair.bench.name / stem
            prefix = f"command-{pair.number}-" if per_set[pair.bench.name] > 1 else ""
            args, outputs, specs = [], [], []
            counts = {OUTPUT: sum(1 for r, _ in slots if r == OUTPUT)}
            n_out = 0
            for role, ext in slots:
                if role == INPUT:
                    args.append(str(src))
                    specs.append(f"in:{src}")
                else:
                    n_out += 1
                    number = str(n_out) if counts[OUTPUT] > 1 else ""
                    target = where / f"{prefix}output{number}{ext}"
                    args.append(str(target))
                    specs.append(f"out:{target}")
                    outputs.append(target)
            log = where / f"command-{pair.number}.log"
            if rootfs is None:
                argv = [*_shournal_run(), str(the_plan.tool.path / RUNNER), str(pair.number),
                        *args]
            else:
                argv = [*_shournal_run(), sys.executable, "-m", "shournal.rereso.sandbox",
                        str(rootfs), RUNNER_IN_CONTAINER, str(pair.number), *specs]
            with open(log_fd, "wb") as fh:
                status = subprocess.call(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh,
                                         cwd=where)
            runs.append(Run(
                benchmark=f"{pair.bench.name}/{rel}", number=pair.number, command=pair.command,
                status=status, outputs=tuple(str(o) for o in outputs if o.exists()),
                log=str(log),
            ))
    return runs


def render(the_plan: Plan, runs: list[Run], output_format: str) -> str:
    if output_format == "json":
        doc = {
            "tool": str(the_plan.tool.path),
            "pairs": [
                {"benchmark_set": str(p.bench.path), "command_number": p.number,
                 "command": p.command, "match": p.matches, "reason": p.reason}
                for p in the_plan.pairs
            ],
            "runs": [
                {"benchmark": r.benchmark, "command_number": r.number, "command": r.command,
                 "exit_status": r.status, "outputs": list(r.outputs), "log": r.log}
                for r in runs
            ],
        }
        return json.dumps(doc, indent=2) + "\n"
    if not runs:
        return "No benchmark set matches a command of the tool: nothing was run.\n"
    # Names and commands come from the bundles (foreign input): printable.
    rows = [("benchmark", "command", "exit status", "outputs")]
    rows += [(printable(r.benchmark), printable(f"{r.number}: {r.command}"), str(r.status),
              printable(" ".join(os.path.relpath(o, the_plan.out) for o in r.outputs) or "-"))
             for r in runs]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
             for row in rows]
    return "\n".join(lines) + f"\n(outputs under {printable(str(the_plan.out))})\n"
