"""The `store` fixture: every test using it runs on SQLite and on the
private PostgreSQL server of fixtures_pg."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shournal.store import Store


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    else:
        url = request.getfixturevalue("pg_fresh_url")
    with Store(url) as s:
        yield s
