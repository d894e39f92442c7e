"""The push's causes (shournal.errors.server_condition) and its state file
(shournal.capture.sync_state)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shournal.capture.sync_state import STATE_FILE, SyncState, read_state, when, write_state
from shournal.errors import (
    SERVER_CREDENTIALS,
    SERVER_DOWN,
    SERVER_READ_ONLY,
    SERVER_UNREACHABLE,
    StoreUnavailable,
    journal_condition,
    server_condition,
)


class _PgError(Exception):
    def __init__(self, text: str, sqlstate: str | None = None) -> None:
        super().__init__(text)
        self.sqlstate = sqlstate


class _Wrapped(Exception):
    """As SQLAlchemy wraps the driver's error (in .orig)."""

    def __init__(self, orig: BaseException) -> None:
        super().__init__(f"(psycopg.OperationalError) {orig}")
        self.orig = orig


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (_Wrapped(_PgError("cannot execute INSERT in a read-only transaction", "25006")),
         SERVER_READ_ONLY),
        (_Wrapped(_PgError('FATAL:  password authentication failed for user "alice"', "28P01")),
         SERVER_CREDENTIALS),
        (_Wrapped(_PgError("terminating connection due to administrator command", "57P01")),
         SERVER_DOWN),
        (_Wrapped(_PgError('connection to server at "10.0.0.1", port 5432 failed: '
                           "Connection refused")), SERVER_DOWN),
        (_Wrapped(_PgError('connection to server at "10.0.0.1", port 5432 failed: '
                           "timeout expired")), SERVER_UNREACHABLE),
        (_Wrapped(_PgError("server closed the connection unexpectedly")), SERVER_UNREACHABLE),
    ],
)
def test_server_causes(exc: BaseException, cause: str) -> None:
    assert server_condition(exc) == cause
    assert journal_condition(exc) == cause


def test_a_cause_found_through_the_chain() -> None:
    """The store re-raises the driver's error as its own (from None: the
    context still holds it)."""
    try:
        try:
            raise _Wrapped(_PgError("x", "28P01"))
        except _Wrapped:
            raise StoreUnavailable("cannot use the journal postgresql://a:***@h/db") from None
    except StoreUnavailable as exc:
        assert server_condition(exc) == SERVER_CREDENTIALS


def test_a_file_journal_is_no_server() -> None:
    assert server_condition(Exception("database is locked")) is None
    assert journal_condition(Exception("database is locked")) == (
        "the journal is locked by another process")


def test_state_round_trip(tmp_path: Path) -> None:
    write_state(tmp_path, SyncState(SERVER_DOWN, 1000.0, 7, 900.0))
    state = read_state(tmp_path)
    assert state is not None
    assert (state.cause, state.since, state.backlog, state.last_push) == (
        SERVER_DOWN, 1000.0, 7, 900.0)
    assert when(1000.0) == "1970-01-01 00:16:40 UTC" and when(None) == "never"


@pytest.mark.parametrize("text", ["", "[1]", "{not json", json.dumps({"cause": 5,
                                                                       "backlog": -3})])
def test_a_bad_state_file_reads_as_little(tmp_path: Path, text: str) -> None:
    (tmp_path / STATE_FILE).write_text(text)
    state = read_state(tmp_path)
    assert state is None or (state.cause is None and state.backlog == 0)


def test_a_state_cause_is_printable(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text(json.dumps({"cause": "down\x1b[31m\nnow"}))
    state = read_state(tmp_path)
    assert state is not None and state.cause == "down?[31m?now"
