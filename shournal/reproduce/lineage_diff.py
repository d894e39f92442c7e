"""`shournal diff --lineage F1 F2`: why do two results differ?

The two files' lineages (shournal.provenance) are aligned from the
results back: the commands that wrote F1 and F2 form the first pair; a
pair's read files are matched by their path relative to the command's
working directory (so that ``run1/out`` and ``run2/out`` made the same way
align); a matched input whose content differs and that recorded commands
made on both sides aligns their writers as the next pair upstream.

Each pair's own differences are the program, the parameters (the other
words of the command line), a script or an input (a file no recorded
command made on that side) whose content differs, and an input read on one
side only.  A differing input made on both sides is not an own
difference: it is explained upstream.  The first steps where the
lineages diverge are the pairs with own differences, most upstream first.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any

from shournal.provenance.export import program_of
from shournal.provenance.graph import FileNode, Lineage
from shournal.reproduce.diff import classify_read
from shournal.terminal import printable


def _rel(path: bytes, cwd: str) -> str:
    p = os.fsdecode(path)
    if p == cwd or p.startswith(cwd.rstrip("/") + "/"):
        return os.path.relpath(p, cwd)
    return p


def _version(n: FileNode) -> dict[str, Any]:
    return {"path": os.fsdecode(n.path), "size": n.size,
            "hash": None if n.hash is None else f"{n.hash:016x}"}


def _same(a: FileNode, b: FileNode) -> bool | None:
    if a.size != b.size:
        return False
    if a.hash is not None and b.hash is not None:
        return a.hash == b.hash
    return True if a.size == 0 else None


def _command(lin: Lineage, cid: int) -> dict[str, Any]:
    c = lin.commands[cid]
    return {"id": cid, "command": c.text, "working_dir": c.working_dir,
            "derivedFrom": c.derived_from}


def align(lin_a: Lineage, lin_b: Lineage) -> dict[str, Any]:
    """The aligned steps of two single-target lineages and where they
    diverge (see the module)."""
    steps: list[dict[str, Any]] = []
    queue = deque([(lin_a.targets[0], lin_b.targets[0], 1)])
    seen: set[tuple[int, int]] = set()
    while queue:
        fa, fb, depth = queue.popleft()
        ea, eb = lin_a.writer(fa), lin_b.writer(fb)
        if ea is None and eb is None:
            continue
        if ea is None or eb is None:
            steps.append({"depth": depth,
                          "a": None if ea is None else _command(lin_a, ea.command_id),
                          "b": None if eb is None else _command(lin_b, eb.command_id),
                          "own": [{"what": "maker", "detail": "no recorded command made the "
                                   f"file on side {'a' if ea is None else 'b'}"}],
                          "upstream": []})
            continue
        pair = (ea.command_id, eb.command_id)
        if pair in seen:
            continue
        seen.add(pair)
        ca, cb = lin_a.commands[pair[0]], lin_b.commands[pair[1]]
        own: list[dict[str, Any]] = []
        upstream: list[dict[str, Any]] = []
        (prog_a, args_a), (prog_b, args_b) = program_of(ca.text), program_of(cb.text)
        if prog_a != prog_b:
            own.append({"what": "program", "a": prog_a, "b": prog_b})
        elif ca.text != cb.text:
            own.append({"what": "parameters", "a": args_a, "b": args_b,
                        "command": {"a": ca.text, "b": cb.text}})
        reads_a = {_rel(n.path, ca.working_dir): n for n in lin_a.reads(pair[0])}
        reads_b = {_rel(n.path, cb.working_dir): n for n in lin_b.reads(pair[1])}
        for key in sorted(reads_a.keys() | reads_b.keys()):
            na, nb = reads_a.get(key), reads_b.get(key)
            if na is None or nb is None:
                own.append({"what": "input", "path": key,
                            "change": "read by b only" if na is None else "read by a only"})
                continue
            same = _same(na, nb)
            if same:
                continue
            wa, wb = lin_a.writer(na.id), lin_b.writer(nb.id)
            entry = {"path": key, "a": _version(na), "b": _version(nb)}
            if same is None:
                entry["note"] = "content not comparable (no hash)"
            if wa is not None and wb is not None:
                upstream.append({**entry, "made_by": {"a": wa.command_id, "b": wb.command_id}})
                queue.append((na.id, nb.id, depth + 1))
                continue
            mode = (na.event or nb.event).mode if (na.event or nb.event) else 0
            kind = classify_read(os.fsdecode(na.path), mode)
            what = "script" if kind == "scripts" else (
                "program or library" if kind == "programs_libraries" else "input")
            own.append({"what": what, **entry})
        steps.append({"depth": depth, "a": _command(lin_a, pair[0]),
                      "b": _command(lin_b, pair[1]), "own": own, "upstream": upstream})
    first = sorted((s for s in steps if s["own"]), key=lambda s: -s["depth"])
    return {"steps": steps, "first_divergence": first,
            "differs": any(s["own"] or s["upstream"] for s in steps)}


def render_human(rep: dict[str, Any], f1: str, f2: str) -> str:
    """The report for a terminal: recorded names and command text made
    printable."""
    if not rep["differs"]:
        return printable(f"the lineages of {f1} and {f2} do not differ") + "\n"
    lines = [f"the lineages of {f1} and {f2} diverge first at "
             f"{len(rep['first_divergence'])} step(s):"]

    def name(c: dict[str, Any] | None) -> str:
        return "(none)" if c is None else f"command {c['id']} `{c['command']}`"

    for s in rep["first_divergence"]:
        lines.append(f"depth {s['depth']}: {name(s['a'])} vs {name(s['b'])}")
        for d in s["own"]:
            if d["what"] in ("program", "parameters"):
                a, b = d["a"], d["b"]
                if d["what"] == "parameters":
                    a, b = " ".join(a), " ".join(b)
                lines.append(f"  {d['what']}: {a} -> {b}")
            elif "change" in d:
                lines.append(f"  input {d['path']}: {d['change']}")
            elif "detail" in d:
                lines.append(f"  {d['detail']}")
            else:
                lines.append(f"  {d['what']} {d['path']}: content differs "
                             f"(size {d['a']['size']} -> {d['b']['size']})")
    later = [s for s in rep["steps"] if not s["own"] and s["upstream"]]
    for s in sorted(later, key=lambda s: -s["depth"]):
        paths = ", ".join(u["path"] for u in s["upstream"])
        lines.append(f"then depth {s['depth']}: {name(s['a'])} vs {name(s['b'])}: "
                     f"differs only by its inputs made upstream ({paths})")
    return "".join(printable(line) + "\n" for line in lines)
