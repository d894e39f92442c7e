"""`shournal diff A B` (Rex's expdiff): every difference between two
recorded commands.

Level 1 names the items that differ; level 2 details each (the command's
words, environment variables, files by path and by content, a file
matched across paths by its content); level 3 adds unified diffs of text
files archived on both sides.  Commands recorded with their apparatus are
compared on everything they read (programs and libraries included) by
full-content digest; otherwise on what the journal has (reads the config
recorded, partial hashes), and the report says what it could not compare.

The duration and the files' mtimes are shown, never counted as a
difference: two runs of the same experiment always differ there.  Nor are
shournal's own variables in a shell's environment (``_``, ``_SHOURNAL_*``,
``SHOURNAL_SESSION_ID``), which change with every command line.
"""

from __future__ import annotations

import difflib
import os
from typing import Any

from shournal.reproduce.experiment import Experiment
from shournal.store.archive import ArchiveError, Contents
from shournal.terminal import printable

# Level-1 items, in report order.
ITEMS = (
    "command",
    "environment",
    "working_directory",
    "exit_status",
    "host_user",
    "inputs",
    "scripts",
    "programs_libraries",
    "outputs",
)
_SCRIPT_EXTS = frozenset(
    ".py .sh .bash .zsh .pl .rb .r .jl .m .js .lua .tcl .awk .sed .mk .ipynb".split()
)
_SYSTEM_DIRS = ("/usr/", "/lib", "/bin/", "/sbin/", "/opt/", "/etc/ld.so", "/nix/")
# Largest text shown as a unified diff (per side).
_MAX_DIFF_BYTES = 1 << 20


def classify_read(path: str, mode: int) -> str:
    """inputs, scripts or programs_libraries (by where and what a file
    is; Rex's apparatus is the programs and libraries).  A program is
    also what lies in any bin directory (~/.local/bin, a venv's or a
    conda environment's bin, a project's bin): the tools a command runs
    from PATH, unless named as a script."""
    parent, _, base = path.rpartition("/")
    ext = os.path.splitext(base)[1].lower()
    if ".so" in base and (base.endswith(".so") or ".so." in base):
        return "programs_libraries"
    if path.startswith(_SYSTEM_DIRS):
        return "programs_libraries"
    if parent.rpartition("/")[2] in ("bin", "sbin") and ext not in _SCRIPT_EXTS:
        return "programs_libraries"
    if ext in _SCRIPT_EXTS or mode & 0o111:
        return "scripts"
    return "inputs"


def _same_content(a: dict[str, Any], b: dict[str, Any]) -> bool | None:
    """True/False when the content can be compared, None when not (a
    file without a digest or a partial hash on one side)."""
    if a["digest"] and b["digest"]:
        return a["digest"] == b["digest"]
    if a["size"] != b["size"]:
        return False
    if a["hash"] is not None and b["hash"] is not None:
        return a["hash"] == b["hash"]  # partial hash: same size and samples
    if a["size"] == 0:
        return True
    return None


def _key(f: dict[str, Any]) -> tuple[Any, ...] | None:
    if f["digest"]:
        return ("d", f["digest"])
    if f["hash"] is not None:
        return ("h", f["size"], f["hash"])
    return None


def _file_diffs(side: str, fa: dict[str, dict[str, Any]], fb: dict[str, dict[str, Any]],
                classify: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(fa.keys() & fb.keys()):
        a, b = fa[path], fb[path]
        same = _same_content(a, b)
        if same is True:
            continue
        entry = {"side": side, "path": path, "item": classify(path, b["mode"]),
                 "change": "changed" if same is False else "unknown",
                 "a": _brief(a), "b": _brief(b)}
        out.append(entry)
    removed = {p: fa[p] for p in fa.keys() - fb.keys()}
    added = {p: fb[p] for p in fb.keys() - fa.keys()}
    # A file matched across different paths by its content.
    by_content: dict[tuple[Any, ...], str] = {}
    for p in sorted(added):
        k = _key(added[p])
        if k is not None:
            by_content.setdefault(k, p)
    for path in sorted(removed):
        f = removed[path]
        k = _key(f)
        moved = by_content.pop(k, None) if k is not None else None
        if moved is not None:
            out.append({"side": side, "path": path, "item": classify(path, f["mode"]),
                        "change": "moved", "to": moved, "a": _brief(f),
                        "b": _brief(added.pop(moved))})
        else:
            out.append({"side": side, "path": path, "item": classify(path, f["mode"]),
                        "change": "removed", "a": _brief(f), "b": None})
    for path in sorted(added):
        f = added[path]
        out.append({"side": side, "path": path, "item": classify(path, f["mode"]),
                    "change": "added", "a": None, "b": _brief(f)})
    return out


def _brief(f: dict[str, Any]) -> dict[str, Any]:
    return {"size": f["size"], "digest": f["digest"],
            "hash": None if f["hash"] is None else f"{f['hash']:016x}"}


def compare(a: Experiment, b: Experiment, level: int = 1,
            archive: Contents | None = None) -> dict[str, Any]:
    """The report (JSON-ready); ``report["differs"]`` lists the level-1
    items that differ."""
    ca, cb = a.command, b.command
    ma, mb = a.manifest, b.manifest
    both = ma is not None and mb is not None
    not_compared: list[str] = []
    differs: list[str] = []
    report: dict[str, Any] = {"a": ca.id, "b": cb.id, "level": level,
                              "apparatus": {"a": ma is not None, "b": mb is not None}}
    if ca.text != cb.text:
        differs.append("command")
        report["command"] = {"a": ca.text, "b": cb.text,
                             "words": _word_diff(ca.text, cb.text)}
    if ca.working_dir != cb.working_dir:
        differs.append("working_directory")
        report["working_directory"] = {"a": ca.working_dir, "b": cb.working_dir}
    if ca.return_value != cb.return_value:
        differs.append("exit_status")
        report["exit_status"] = {"a": ca.return_value, "b": cb.return_value}
    host_a = {"host": ca.hostname, "user": ca.username}
    host_b = {"host": cb.hostname, "user": cb.username}
    if both:
        for k in ("uid", "gid", "groups", "kernel", "machine", "umask"):
            host_a[k], host_b[k] = ma.get(k), mb.get(k)
    if host_a != host_b:
        differs.append("host_user")
        report["host_user"] = {k: {"a": host_a[k], "b": host_b[k]}
                               for k in host_a if host_a[k] != host_b[k]}
    # `shournal rerun`'s link, shown, not a difference by itself.
    report["derivedFrom"] = {"a": ca.derived_from, "b": cb.derived_from}
    report["duration"] = {"a": (ca.end_time - ca.start_time).total_seconds(),
                          "b": (cb.end_time - cb.start_time).total_seconds()}
    if both:
        ea, eb = _compared_env(ma["env"]), _compared_env(mb["env"])
        env = {"added": {k: eb[k] for k in sorted(eb.keys() - ea.keys())},
               "removed": {k: ea[k] for k in sorted(ea.keys() - eb.keys())},
               "changed": {k: {"a": ea[k], "b": eb[k]}
                           for k in sorted(ea.keys() & eb.keys()) if ea[k] != eb[k]}}
        if any(env.values()):
            differs.append("environment")
            report["environment"] = env
    else:
        not_compared.append("environment (recorded with the apparatus only)")
    if both:
        reads_a, reads_b = a.reads(), b.reads()
    else:
        # The journal's reads only (the config's read rules: by default
        # files the user may write), on both sides alike.
        plain_a = Experiment(ca, None)
        plain_b = Experiment(cb, None)
        reads_a, reads_b = plain_a.reads(), plain_b.reads()
        not_compared.append(
            "programs, libraries and other reads outside the config's read rules "
            "(recorded with the apparatus only)")
        not_compared.append("full-content digests (partial hashes compared instead)")
    writes_a = a.writes() if both else Experiment(ca, None).writes()
    writes_b = b.writes() if both else Experiment(cb, None).writes()
    files = _file_diffs("read", reads_a, reads_b, classify_read)
    files += _file_diffs("write", writes_a, writes_b, lambda p, mode: "outputs")
    for f in files:
        if f["item"] not in differs:
            differs.append(f["item"])
    report["files"] = files
    if ca.dropped_reads or cb.dropped_reads or ca.lost_events or cb.lost_events:
        not_compared.append("files beyond the journal's caps or lost events "
                            f"(a: {ca.dropped_reads + ca.lost_events}, "
                            f"b: {cb.dropped_reads + cb.lost_events})")
    unknown = [f["path"] for f in files if f["change"] == "unknown"]
    if unknown:
        not_compared.append(f"content of {len(unknown)} files (no hash on one side)")
    if level >= 3:
        report["content_diffs"] = _content_diffs(files, archive or a.contents())
    report["differs"] = [i for i in ITEMS if i in differs]
    report["not_compared"] = not_compared
    return report


def own_variable(name: str) -> bool:
    """shournal's own bookkeeping in a shell's environment (the shell's
    ``_``, ``_SHOURNAL_*``, the session id): different for every command
    line or shell, never a difference of the experiment."""
    return name == "_" or name.startswith("_SHOURNAL_") or name == "SHOURNAL_SESSION_ID"


def _compared_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not own_variable(k)}


def _word_diff(a: str, b: str) -> list[str]:
    """Words as ``-old``, ``+new`` or ``=same``."""
    wa, wb = a.split(), b.split()
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=wa, b=wb).get_opcodes():
        if op == "equal":
            out += [f"={w}" for w in wa[i1:i2]]
        else:
            out += [f"-{w}" for w in wa[i1:i2]] + [f"+{w}" for w in wb[j1:j2]]
    return out


def _text(data: bytes) -> list[str] | None:
    if b"\0" in data[:8192] or len(data) > _MAX_DIFF_BYTES:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def _content_diffs(files: list[dict[str, Any]], archive: Contents) -> list[dict[str, Any]]:
    out = []
    for f in files:
        if f["change"] not in ("changed", "moved"):
            continue
        da, db = f["a"]["digest"], f["b"]["digest"]
        entry: dict[str, Any] = {"side": f["side"], "path": f["path"]}
        if not (da and db and archive.has(da) and archive.has(db)):
            entry["note"] = ("content not archived on both sides (outputs: "
                             "shournal run --apparatus --archive-outputs)")
            out.append(entry)
            continue
        try:
            ta, tb = _text(archive.get(da)), _text(archive.get(db))
        except ArchiveError as exc:
            entry["note"] = str(exc)
            out.append(entry)
            continue
        if ta is None or tb is None:
            entry["note"] = "binary or large: sizes and digests only"
        else:
            to = f.get("to", f["path"])
            entry["diff"] = "".join(
                line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                for line in difflib.unified_diff(ta, tb, f"a{printable(f['path'])}",
                                                 f"b{printable(to)}"))
        out.append(entry)
    return out


def render_human(report: dict[str, Any]) -> str:
    """The report for a terminal: every recorded name, value and command
    text made printable (a line each; a content diff keeps its lines)."""
    lines = [f"command {report['a']} vs command {report['b']}: "
             + ("differ in " + ", ".join(report["differs"]) if report["differs"]
                else "no difference")]
    level = report["level"]
    for side in ("a", "b"):
        origin = report.get("derivedFrom", {}).get(side)
        if origin is not None:
            lines.append(f"{side} derived from command {origin} (shournal rerun)")
    if level >= 2:
        if "command" in report:
            lines.append("command: " + " ".join(w for w in report["command"]["words"]
                                                if not w.startswith("=")))
        for item in ("working_directory", "exit_status"):
            if item in report:
                lines.append(f"{item.replace('_', ' ')}: {report[item]['a']} -> "
                             f"{report[item]['b']}")
        for k, v in report.get("host_user", {}).items():
            lines.append(f"{k}: {v['a']} -> {v['b']}")
        env = report.get("environment")
        if env:
            for k, v in env["added"].items():
                lines.append(f"env +{k}={v}")
            for k, v in env["removed"].items():
                lines.append(f"env -{k}={v}")
            for k, v in env["changed"].items():
                lines.append(f"env ~{k}: {v['a']} -> {v['b']}")
        d = report["duration"]
        lines.append(f"duration: {d['a']:.3f}s -> {d['b']:.3f}s (not a difference)")
    for f in report["files"]:
        what = f["item"].replace("_", " ")
        line = f"{f['change']:8} {f['side']:5} {f['path']}"
        if f["change"] == "moved":
            line += f" -> {f['to']}"
        if level >= 2 and f["a"] and f["b"]:
            line += f"  ({what}; size {f['a']['size']} -> {f['b']['size']})"
        elif level >= 2:
            line += f"  ({what})"
        lines.append(line)
    text = "".join(printable(line) + "\n" for line in lines)
    for c in report.get("content_diffs", []):
        if "diff" in c:
            text += printable(c["diff"], newlines=True)
        else:
            text += printable(f"{c['side']} {c['path']}: {c['note']}") + "\n"
    for n in report["not_compared"]:
        text += printable(f"not compared: {n}") + "\n"
    return text
