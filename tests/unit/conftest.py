"""Keeps tests/unit what pyproject.toml says it is: no root, no pty, no
setuid helper, no PostgreSQL.  A unit test that asks for a fixture or mark
of tests/system, or opens a pty, fails with the reason; move it to
tests/system."""

from __future__ import annotations

import os
import pty
from collections.abc import Iterator

import pytest

# The fixtures of tests/fixtures_*.py that need root (users, setuid copies,
# sysctls), the installed helper or the PostgreSQL server (`store` runs on
# it too).
SYSTEM_FIXTURES = frozenset({
    "install",
    "user_home",
    "pg_url",
    "pg_fresh_url",
    "store",
    "suid_dumpable",
    "userns_allowed",
    "links_unprotected",
    "fanotify_mark_limit",
})  # fmt: skip
SYSTEM_MARKS = frozenset({"shell", "root", "pg"})


def _refuse(what: str) -> None:
    pytest.fail(f"a unit test may not use {what}: move it to tests/system", pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    fixtures = SYSTEM_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    marks = SYSTEM_MARKS.intersection(m.name for m in item.iter_markers())
    if fixtures:
        _refuse("the fixture(s) " + ", ".join(sorted(fixtures)))
    if marks:
        _refuse("the mark(s) " + ", ".join(sorted(marks)))


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> None:
    # also those asked for by request.getfixturevalue while the test runs
    if fixturedef.argname in SYSTEM_FIXTURES:
        _refuse(f"the fixture {fixturedef.argname}")


@pytest.fixture(autouse=True)
def _no_pty(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refused(*_args: object, **_kw: object) -> None:
        _refuse("a pty")

    # pexpect opens its pty through one of these
    monkeypatch.setattr(os, "openpty", refused)
    monkeypatch.setattr(os, "forkpty", refused)
    monkeypatch.setattr(pty, "fork", refused)
    monkeypatch.setattr(pty, "openpty", refused)
    yield
