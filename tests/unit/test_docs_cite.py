"""The docs cite benchmark results by file: each cited file is in the tree
(bench/results keeps only what the docs cite, so a pruning must not drop
one they still name)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "bench" / "README.md", *(REPO / "docs").glob("*.md")]


def test_every_cited_result_file_exists() -> None:
    cited = {
        m.group(1)
        for doc in DOCS
        for m in re.finditer(r"(?:bench/)?(results/[\w.-]+\.json)", doc.read_text())
    }
    assert cited, "the docs cite results"
    assert sorted(c for c in cited if not (REPO / "bench" / c).is_file()) == []


def test_every_result_file_is_cited() -> None:
    """And the other way round: a result no document names is not kept
    (they are named by file, often beside a sibling's `results/` path)."""
    text = "".join(doc.read_text() for doc in DOCS)
    kept = sorted(p.name for p in (REPO / "bench" / "results").glob("*.json"))
    assert [name for name in kept if name not in text] == []
