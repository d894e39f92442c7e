"""The `store` and `journal` fixtures: every test using one runs on SQLite and on the
private PostgreSQL server of fixtures_pg."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shournal.journal import Journal
from shournal.store import Store


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    else:
        url = request.getfixturevalue("pg_fresh_url")
    with Store(url) as s:
        yield s


@pytest.fixture(params=["sqlite", "postgresql"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Journal]:
    """A new journal through the front door every reader uses, on SQLite
    and on the private PostgreSQL server."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    else:
        url = request.getfixturevalue("pg_fresh_url")
    with Journal.open(url, create=True) as j:
        yield j
