"""Lineage output: ``human`` (an indented tree), ``json`` and ``dot``.

JSON: ``{"target", "targets", "commands", "files", "edges"}``.  Commands
are the objects of ``query --output-format json`` in start-time order;
files are versions (``id`` "f1"..., path, size, mtime, hash, ``leaf``:
no recorded command wrote it, ``truncated``: not followed because of
``--depth``, ``archivedId``: the read file id of an archived script
version, for ``shournal restore --file-id``); edges are ``{"type":
"read", "file", "command"}`` and ``{"type": "wrote", "command", "file",
"otherCandidates", "writtenPath"}`` (``writtenPath``: where the command
wrote that content when it was read elsewhere, e.g. after ``mv``).
``target`` is the first target's file id, ``targets`` all of them.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from shournal.data import CommandView
from shournal.provenance.graph import FileNode, Lineage
from shournal.report.human import format_size
from shournal.terminal import printable

# Not typing.TYPE_CHECKING; json and the JSON report are loaded by the
# renderers that need them: the human tree's start-up (bench/cli_startup.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _iso_ns(ns: int) -> str:
    seconds, rest = divmod(ns, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest // 1000)
    return moment.isoformat(timespec="microseconds")


def _file_object(node: FileNode) -> dict[str, Any]:
    return {
        "id": node.id,
        "path": os.fsdecode(node.path),
        "size": node.size,
        "mtime": _iso_ns(node.mtime_ns),
        "mtimeNs": node.mtime_ns,
        "hash": None if node.hash is None else str(node.hash),
        "leaf": node.leaf,
        "otherWriters": node.content_writers,
        "truncated": node.truncated,
        "target": node.target,
        "archivedId": node.archived_id,
    }


def lineage_object(lin: Lineage) -> dict[str, Any]:
    from shournal.report.json import command_object

    edges: list[dict[str, Any]] = []
    for e in lin.edges:
        if e.kind == "read":
            edges.append({"type": "read", "file": e.file, "command": e.command_id})
        else:
            edges.append(
                {
                    "type": "wrote",
                    "command": e.command_id,
                    "file": e.file,
                    "otherCandidates": e.other_candidates,
                    "writtenPath": None if e.written_path is None else os.fsdecode(e.written_path),
                }
            )
    return {
        "target": lin.targets[0] if lin.targets else None,
        "targets": list(lin.targets),
        "commands": [command_object(c) for c in lin.commands_by_start()],
        "files": [_file_object(f) for f in lin.files.values()],
        "edges": edges,
    }


def render_json(lin: Lineage) -> str:
    import json

    return json.dumps(lineage_object(lin), ensure_ascii=True, indent=1) + "\n"


# -- human ----------------------------------------------------------------------


def _local(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _path(path: bytes) -> str:
    return printable(os.fsdecode(path))


def _file_text(node: FileNode) -> str:
    mtime = _local(datetime.fromtimestamp(node.mtime_ns / 1e9, UTC))
    digest = "-" if node.hash is None else str(node.hash)
    return f"{_path(node.path)} ({format_size(node.size)}, mtime {mtime}, hash {digest})"


def _command_head(cmd: CommandView) -> str:
    status = cmd.return_value if cmd.return_value_known else "unknown"
    return (
        f"command {cmd.id}  {_local(cmd.start_time)} - {_local(cmd.end_time)}  "
        f"exit {status}  cwd {printable(cmd.working_dir)}  {printable(cmd.username)}@"
        f"{printable(cmd.hostname)}"
        + ("" if cmd.derived_from is None else f"  derived from command {cmd.derived_from}")
    )


def render_human(lin: Lineage, *, scripts: bool = False) -> str:
    """An indented tree per target, newest first; a command reached again
    is not repeated.  ``scripts``: print the archived script versions
    (their first bytes, as ``query`` does)."""
    out: list[str] = []
    shown: set[int] = set()

    def file_line(node: FileNode, prefix: str, label: str) -> None:
        marks = []
        if node.leaf and node.content_writers:
            marks.append(
                f"[leaf: written outside the journal; {node.content_writers} recorded "
                "command(s) wrote this content at other times]"
            )
        elif node.leaf:
            marks.append("[leaf: no recorded command wrote it]")
        if node.truncated:
            marks.append("[not followed: --depth]")
        if node.archived_id is not None:
            marks.append(f"[script, archived: shournal restore --file-id {node.archived_id}]")
        out.append(f"{prefix}{label}{_file_text(node)}" + (" " + " ".join(marks) if marks else ""))

    def command(cid: int, prefix: str, wrote: Any) -> None:
        cmd = lin.commands.get(cid)
        if cmd is None:
            return
        extra = []
        if wrote.written_path is not None:
            extra.append(f"written as {_path(wrote.written_path)}")
        if wrote.other_candidates:
            extra.append(f"{wrote.other_candidates} other command(s) wrote the same content")
        note = f"  ({'; '.join(extra)})" if extra else ""
        if cid in shown:
            out.append(f"{prefix}<- command {cid} (shown above){note}")
            return
        shown.add(cid)
        out.append(f"{prefix}<- {_command_head(cmd)}{note}")
        inner = prefix + "   "
        for line in cmd.text.splitlines() or [""]:
            out.append(f"{inner}$ {printable(line)}")
        reads = lin.reads(cid)

        def newest(node: FileNode) -> tuple[int, float]:
            edge = lin.writer(node.id)
            if edge is None:
                return (0, 0.0)
            writer = lin.commands[edge.command_id]
            return (1, writer.end_time.timestamp())

        for node in sorted(reads, key=newest, reverse=True):
            file_line(node, inner, "read ")
            if scripts and node.event is not None and node.event.content_preview is not None:
                text = node.event.content_preview.decode("utf-8", "backslashreplace")
                for line in text.splitlines():
                    out.append(f"{inner}   | {printable(line)}")
                rest = (node.event.content_size or 0) - len(node.event.content_preview)
                if rest > 0:
                    out.append(f"{inner}   | ... ({rest} more bytes)")
            edge = lin.writer(node.id)
            if edge is not None:
                command(edge.command_id, inner + "   ", edge)

    for tid in lin.targets:
        node = lin.files[tid]
        file_line(node, "", "")
        edge = lin.writer(tid)
        if edge is not None:
            command(edge.command_id, "", edge)
        out.append("")
    return "\n".join(out)


# -- dot -------------------------------------------------------------------------


def _dot_str(text: str) -> str:
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\n", "\\n") + '"'


def render_dot(lin: Lineage) -> str:
    """Graphviz: commands as boxes, file versions as ellipses (leaves
    grey, targets bold), edges file -> command (read) and command ->
    file (wrote)."""
    lines = [
        "digraph lineage {",
        "  rankdir=LR;",
        '  node [fontname="monospace", fontsize=10];',
    ]
    for cmd in lin.commands_by_start():
        text = cmd.text if len(cmd.text) <= 60 else cmd.text[:57] + "..."
        label = f"{cmd.id}: {text}\n{_local(cmd.start_time)}"
        lines.append(f"  c{cmd.id} [shape=box, label={_dot_str(label)}];")
    for node in lin.files.values():
        attrs = [f"label={_dot_str(os.fsdecode(node.path))}"]
        if node.leaf:
            attrs.append('style=filled, fillcolor="lightgrey"')
        if node.target:
            attrs.append("penwidth=2")
        if node.archived_id is not None:
            attrs.append("shape=note")
        lines.append(f"  {node.id} [{', '.join(attrs)}];")
    for e in lin.edges:
        if e.kind == "read":
            lines.append(f'  {e.file} -> c{e.command_id} [label="read"];')
        else:
            lines.append(f'  c{e.command_id} -> {e.file} [label="wrote"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- html --------------------------------------------------------------------------

_COL = 250  # px between layers
_ROW = 46
_BOX_W, _BOX_H = 220, 30


def _layers(lin: Lineage) -> dict[str, int]:
    """Each node's layer, counted from the targets (0) back along the
    longest path, so that every edge points from a left layer to a right
    one.  Keys: file ids and "c<command id>"."""
    rank: dict[str, int] = {}
    writer_of = {e.file: f"c{e.command_id}" for e in lin.edges if e.kind == "wrote"}
    readers: dict[str, list[str]] = {}
    writes: dict[str, list[str]] = {}
    for e in lin.edges:
        if e.kind == "read":
            readers.setdefault(e.file, []).append(f"c{e.command_id}")
        else:
            writes.setdefault(f"c{e.command_id}", []).append(e.file)
    order: list[str] = []
    # Breadth-first from the targets, relaxing to the longest path: a DAG, so
    # this ends (each relaxation follows time backwards).
    queue = list(lin.targets)
    for t in queue:
        rank[t] = 0
    while queue:
        node = queue.pop(0)
        order.append(node)
        if node.startswith("c"):
            nxt = [f.id for f in lin.reads(int(node[1:]))]
        else:
            nxt = [writer_of[node]] if node in writer_of else []
        for n in nxt:
            if rank.get(n, -1) < rank[node] + 1:
                rank[n] = rank[node] + 1
                queue.append(n)
    for node in list(lin.files) + [f"c{c}" for c in lin.commands]:
        rank.setdefault(node, 0)
    return rank


def _key(node: str) -> str:
    """A node's key in the page (lineage.js): ``c:ID`` for a command
    ("cID" here), ``f:ID`` for a file version."""
    return f"c:{node[1:]}" if node.startswith("c") else f"f:{node}"


def _svg_text(text: str, limit: int = 30) -> str:
    from shournal.report.html import _html

    short = text if len(text) <= limit else text[: limit - 1] + "\u2026"
    return _html(short)


def render_html(lin: Lineage, *, title: str = "shournal lineage") -> str:
    """One self-contained page: the lineage as an SVG graph (sources left,
    targets right); a click on a command or a file version shows its
    details.  Same rules as the HTML report: no external resource, the
    script and stylesheet admitted by hash only, journal data as JSON
    inserted as text."""
    from importlib import resources

    from shournal.report.html import _csp_hash, _html, json_for_script

    def asset(name: str) -> str:
        text = (resources.files("shournal.provenance") / "html_assets" / name).read_text("utf-8")
        if "</" in text.lower() or not text.isascii():
            raise RuntimeError(f"asset {name} cannot be inlined")
        return text

    # dagre (vendored, MIT: html_assets/README.md) lays the graph out in
    # the browser with crossing reduction; the layering below is what a
    # page without scripts shows.
    css, js = asset("lineage.css"), asset("dagre.min.js") + "\n" + asset("lineage.js")
    rank = _layers(lin)
    top = max(rank.values(), default=0)
    rows: dict[int, int] = {}
    pos: dict[str, tuple[int, int]] = {}
    nodes = [f"c{c.id}" for c in reversed(lin.commands_by_start())] + list(lin.files)
    for node in sorted(nodes, key=lambda n: rank[n]):
        layer = rank[node]
        index = rows.get(layer, 0)
        rows[layer] = index + 1
        pos[node] = (20 + (top - layer) * _COL, 20 + index * _ROW)
    width = 40 + top * _COL + _BOX_W
    height = 40 + max(rows.values(), default=1) * _ROW
    parts = [
        f'<svg id="graph" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img" aria-label="lineage graph">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#8a9099"/>'
        "</marker></defs>"
    ]
    for e in lin.edges:
        a, b = (e.file, f"c{e.command_id}") if e.kind == "read" else (f"c{e.command_id}", e.file)
        (x1, y1), (x2, y2) = pos[a], pos[b]
        parts.append(
            f'<line class="edge" data-from="{_html(_key(a))}" data-to="{_html(_key(b))}" '
            f'x1="{x1 + _BOX_W}" y1="{y1 + _BOX_H // 2}" '
            f'x2="{x2}" y2="{y2 + _BOX_H // 2}" marker-end="url(#arrow)"/>'
        )
    for node in nodes:
        x, y = pos[node]
        if node.startswith("c"):
            cmd = lin.commands[int(node[1:])]
            cls, ident, label = "node cmd", str(cmd.id), f"{cmd.id}: {cmd.text}"
        else:
            f = lin.files[node]
            cls = "node file" + (" leaf" if f.leaf else "") + (" target" if f.target else "")
            ident, label = f.id, os.path.basename(os.fsdecode(f.path))
        parts.append(
            f'<g class="{cls}" data-id="{_html(ident)}" transform="translate({x},{y})">'
            f'<rect width="{_BOX_W}" height="{_BOX_H}" rx="3"/>'
            f'<text x="8" y="19">{_svg_text(label)}</text></g>'
        )
    parts.append("</svg>")
    csp = (
        f"default-src 'none'; script-src {_csp_hash(js)}; style-src {_csp_hash(css)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    targets = ", ".join(os.fsdecode(lin.files[t].path) for t in lin.targets)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="generator" content="shournal">\n<link rel="icon" href="data:,">\n'
        f"<title>{_html(title)}</title>\n<style>{css}</style>\n</head>\n<body>\n"
        f"<h1>{_html(title)}</h1>\n"
        f'<p class="meta">{_html(targets)}: {len(lin.commands)} command(s), '
        f"{len(lin.files)} file version(s); leaves dashed; click a node for details</p>\n"
        f'<div id="graph-wrap">{"".join(parts)}</div>\n'
        '<section id="details" aria-live="polite"><p class="empty">'
        "Click a command or a file version.</p></section>\n"
        '<script type="application/json" id="shournal-data">'
        f"{json_for_script(lineage_object(lin))}</script>\n<script>{js}</script>\n"
        "</body></html>\n"
    )
