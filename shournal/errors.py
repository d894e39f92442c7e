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


def journal_condition(exc: BaseException) -> str:
    """A short name of why the journal cannot take commands now."""
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
