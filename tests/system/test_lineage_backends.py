"""The lineage's content lookup on SQLite and on PostgreSQL (the rest of
the lineage tests, on SQLite, are in tests/unit/test_lineage.py)."""

from __future__ import annotations

import os

from fixtures_lineage import SECOND, T0, J

from shournal.hashing import partial_xxh64_bytes
from shournal.journal import Journal
from shournal.provenance.readers import JournalReader


def test_writers_of_on_both_backends(store, tmp_path):
    """The content lookup: hash + size, and hashless writes by mtime."""
    jj = J(store, tmp_path)
    data = b"z" * 1000
    c1 = jj.cmd("a", 10, writes=[jj.v("a", data, 10)])
    c2 = jj.cmd("b", 20, writes=[jj.v("b", data, 20)])
    empty = jj.cmd("touch e", 30, writes=[jj.v("e", b"", 30)])
    reader = JournalReader(Journal(store))
    found = reader.writers_of(len(data), T0, [partial_xxh64_bytes(data)])
    assert [w.command_id for w in found] == [c2, c1]
    assert found[0].path == os.fsencode(tmp_path / "b")
    assert [w.command_id for w in reader.writers_of(0, T0 + 30 * SECOND, [])] == [empty]
    assert reader.writers_of(0, T0 + 31 * SECOND, []) == []
