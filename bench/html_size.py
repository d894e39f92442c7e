"""Size of the self-contained HTML pages: the lineage page (which inlines
the vendored dagre layout library) and the query report, for lineages of
``--steps`` commands written through the real store writer into a
temporary journal.  Prints JSON (``-o`` writes it to a file).

    .venv/bin/python bench/html_size.py -o bench/results/html_size.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path

from shournal.hashing import partial_xxh64_bytes
from shournal.journal import Journal
from shournal.provenance.graph import DiskTarget, build_lineage
from shournal.provenance.readers import JournalReader
from shournal.provenance.render import render_html
from shournal.record import CommandRecord, FileEvent
from shournal.report.html import render_html as render_report

T0 = 1_700_000_000 * 10**9
S = 10**9


def _event(root: Path, name: str, content: bytes, t: int) -> FileEvent:
    return FileEvent(path=os.fsencode(root / name), size=len(content), mtime_ns=T0 + t * S,
                     mode=0o100644, hash=partial_xxh64_bytes(content))  # fmt: skip


def _sizes(steps: int, tmp: Path) -> dict[str, int]:
    """A chain of ``steps`` commands, each reading the previous output and
    a parameter file: the lineage page and the report of its commands."""
    root = tmp / f"w{steps}"
    root.mkdir()
    with Journal.open(f"sqlite:///{tmp / f'j{steps}.sqlite'}", create=True) as j:
        prev: FileEvent | None = None
        for i in range(steps):
            out = f"out{i}".encode() * 10
            reads = [_event(root, f"params{i}.yaml", b"p%d" % i, i)]
            if prev is not None:
                reads.append(prev)
            prev = _event(root, f"out{i}", out, 10 * i + 5)
            j.add(CommandRecord(
                text=f"step{i} > out{i}", return_value=0, start_ns=T0 + 10 * i * S,
                end_ns=T0 + (10 * i + 5) * S, working_dir=str(root), username="u",
                hostname="h", session_uuid=b"\x01" * 16, hash_chunk_size=256,
                hash_max_reads=3, reads=reads, writes=[prev],
            ))  # fmt: skip
        target = root / f"out{steps - 1}"
        target.write_bytes(f"out{steps - 1}".encode() * 10)
        os.utime(target, ns=(T0 + (10 * (steps - 1) + 5) * S,) * 2)
        lin = build_lineage(JournalReader(j), [DiskTarget(str(target))])
        page = render_html(lin)
        report = render_report(j.find())
    return {"steps": steps, "lineage_page_bytes": len(page.encode()),
            "report_bytes": len(report.encode())}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, nargs="*", default=[2, 20, 200])
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()
    assets = resources.files("shournal.provenance") / "html_assets"
    result = {
        "dagre_bytes": len((assets / "dagre.min.js").read_bytes()),
        "lineage_js_bytes": len((assets / "lineage.js").read_bytes()),
        "pages": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for steps in args.steps:
            result["pages"].append(_sizes(steps, Path(tmp)))
    text = json.dumps(result, indent=1) + "\n"
    if args.output is not None:
        args.output.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
