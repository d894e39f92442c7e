"""The journal's errors, raised by the store and translated in one place
(:func:`shournal.cli.error_status`).  Every message is a single line, ready
to be printed after "shournal: "."""

from __future__ import annotations


class StoreError(Exception):
    """Base class: the journal could not be read or written."""


class StoreUnavailable(StoreError):
    """The database cannot be reached or opened (connection refused, no
    permission, locked for too long, unsupported URL)."""


class StoreCorrupt(StoreError):
    """The file or database is not a usable shournal journal (not a
    database, damaged, or foreign tables with our names)."""


class SchemaTooNew(StoreError):
    """The journal was written by a newer shournal; refusing to touch it."""


class ConfigUnusable(StoreUnavailable):
    """Which journal is meant is unknown: the config file that names it
    cannot be used (its status is the config's, not the journal's)."""


class StoreReadOnly(StoreUnavailable):
    """The journal cannot be written here (opened read-only, or a read-only
    file, directory or mount): a note or tag was not stored."""


class StoreMissing(StoreUnavailable):
    """No journal exists yet (and the caller asked not to create one)."""


# Why a database server cannot take commands now, by SQLSTATE (what the
# server said) and, for failures before any server answered, by the
# client library's words.  The causes are few and fixed: the store daemon
# warns once per shell and per cause, so a cause must not vary with the
# details of each failed attempt, and a cause never quotes the URL (its
# password) or the server's text.
SERVER_READ_ONLY = "the server is read-only (SQLSTATE 25006)"
SERVER_CREDENTIALS = "the server refused the credentials"
SERVER_DOWN = "the server is down"
SERVER_UNREACHABLE = "the server is unreachable"
_CAUSE_BY_SQLSTATE = {
    "25006": SERVER_READ_ONLY,
    "28P01": SERVER_CREDENTIALS,  # invalid_password
    "28000": SERVER_CREDENTIALS,  # invalid_authorization_specification
    "57P01": SERVER_DOWN,  # admin_shutdown
    "57P02": SERVER_DOWN,  # crash_shutdown
    "57P03": SERVER_DOWN,  # cannot_connect_now (starting or stopping)
}
_CAUSE_BY_WORDS = (
    ("read-only transaction", SERVER_READ_ONLY),
    ("password authentication failed", SERVER_CREDENTIALS),
    ("no password supplied", SERVER_CREDENTIALS),
    ("authentication failed", SERVER_CREDENTIALS),
    ("connection refused", SERVER_DOWN),
    ("the database system is", SERVER_DOWN),  # ... starting up / shutting down
    ("terminating connection due to administrator", SERVER_DOWN),
    ("timeout expired", SERVER_UNREACHABLE),
    ("timed out", SERVER_UNREACHABLE),
    ("no route to host", SERVER_UNREACHABLE),
    ("network is unreachable", SERVER_UNREACHABLE),
    ("could not translate host name", SERVER_UNREACHABLE),
    ("server closed the connection unexpectedly", SERVER_UNREACHABLE),
    ("connection is lost", SERVER_UNREACHABLE),
    ("consuming input failed", SERVER_UNREACHABLE),
    ("connection timed out", SERVER_UNREACHABLE),
)


def server_condition(exc: BaseException) -> str | None:
    """Why a database server cannot take commands now (one of the
    SERVER_* causes), or None when `exc` is no such failure."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or any(e is s for s in seen) or len(seen) > 8:
            continue
        seen.append(e)
        todo += [getattr(e, "orig", None), e.__cause__, e.__context__]
    for e in seen:
        cause = _CAUSE_BY_SQLSTATE.get(str(getattr(e, "sqlstate", None) or ""))
        if cause is not None:
            return cause
    for e in seen:
        low = str(e).lower()
        for words, cause in _CAUSE_BY_WORDS:
            if words in low:
                return cause
    return None


def journal_condition(exc: BaseException) -> str:
    """A short name of why the journal cannot take commands now."""
    server = server_condition(exc)
    if server is not None:
        return server
    msg = str(exc)
    low = msg.lower()
    if "database or disk is full" in low or "no space left" in low:
        return "the journal's disk is full (no space left)"
    if "locked" in low or "busy" in low:
        return "the journal is locked by another process"
    if isinstance(exc, SchemaTooNew):
        return f"the journal is of a newer shournal: {msg}"
    if isinstance(exc, StoreCorrupt):
        return f"the journal is not usable: {msg}"
    return f"the journal is not usable: {msg}"
