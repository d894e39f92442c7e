"""A lab store (docs/lab.md): two users on two hosts record into one
PostgreSQL over TCP; row-level security attacked with raw psql as each."""

from __future__ import annotations

import pytest
from fixtures_lab import Lab

pytestmark = [pytest.mark.root]


def test_smoke(lab_clean: Lab) -> None:
    a, b = lab_clean.hosts
    for h in (a, b):
        res = h.psql("SELECT current_user")
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == h.name
    res = a.shournal("run", "--", "sh", "-c", "echo hi > out_a")
    assert res.returncode == 0, res.stderr
    res = a.shournal("query", "--history", "5")
    print(res.stdout, res.stderr)
    assert "echo hi" in res.stdout
