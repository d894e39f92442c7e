"""Archived apparatus content kept in the journal itself: table
``apparatus_blob`` of a PostgreSQL journal (docs/lab.md, "Archived
content on the server").

A PostgreSQL journal is reached from several hosts, and the file archive
(:mod:`shournal.store.archive`) is on one of them, so the writer stores
the content a manifest names in the same transaction as the manifest
(:func:`upload`): from the file archive of the host that stores the
command, where the recorder put it (the archive is the recorder's staging
area and this host's cache).  A blob has the file archive's format
(``archive.pack``) and is unique by digest -- in a lab store per owner, so
storing content a colleague has too is never refused and tells nothing.
Readers take a blob from the table (any row they may read: the content is
checked against its digest), else from this host's file archive
(:class:`JournalContent`).  A SQLite journal keeps the file archive alone,
as before, and leaves the table empty.

A blob the writer found stored is named by a manifest it stores only at
its commit; a deletion must not remove the blob meanwhile.  So the writer
holds a transaction advisory lock of its database user shared, and the
collection (:func:`collect`, inside ``shournal delete``'s transaction)
holds it exclusively: it reads the manifests only once no writer of that
user is between its check and its commit.  The lock is per user, so one
user's deletion never waits on another's writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from shournal.store.archive import (
    Archive,
    ArchiveError,
    NotInArchive,
    check_digest,
    digests_of,
    unpack,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from shournal.store.connection import Reads

# The journals that keep apparatus content in apparatus_blob.
SERVER_DIALECTS = frozenset({"postgresql"})
# pg_advisory_xact_lock(key, hashtext(current_user)): "shBl", an int4.
_LOCK_KEY = 0x7368426C
_IN_BATCH = 200


def keeps_blobs(dialect: str) -> bool:
    """Whether a journal of this dialect keeps apparatus content in its table."""
    return dialect in SERVER_DIALECTS


def _valid(digests: Iterable[str]) -> list[str]:
    out = []
    for digest in digests:
        try:
            out.append(check_digest(digest))
        except ArchiveError:
            continue  # a malformed digest names no content
    return sorted(set(out))


def _batches(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _IN_BATCH):
        yield items[start : start + _IN_BATCH]


def _lock(conn: Connection, *, shared: bool) -> None:
    from sqlalchemy import text

    kind = "_shared" if shared else ""
    conn.execute(text(f"SELECT pg_advisory_xact_lock{kind}(:k, hashtext(current_user))"),
                 {"k": _LOCK_KEY})


def _stored(conn: Connection, digests: Sequence[str]) -> set[str]:
    from sqlalchemy import bindparam, text

    stmt = text("SELECT digest FROM apparatus_blob WHERE digest IN :ds").bindparams(
        bindparam("ds", expanding=True))
    found: set[str] = set()
    for batch in _batches(digests):
        found |= {bytes(r[0]).hex() for r in conn.execute(
            stmt, {"ds": [bytes.fromhex(d) for d in batch]})}
    return found


def upload(conn: Connection, manifest: bytes, archive: Archive) -> list[str]:
    """Store the content ``manifest`` names that the table lacks, from
    ``archive``, in ``conn``'s transaction (a PostgreSQL writer's, which
    in a lab store sees only its own rows); the digests it could not
    store (not in this host's archive, or damaged there): readers say
    their files' content is not readable."""
    from sqlalchemy.dialects.postgresql import insert

    from shournal.store import models as m

    try:
        digests = _valid(digests_of(manifest))
    except ValueError:
        return []  # a manifest that cannot be decoded names nothing to read back
    if not digests:
        return []
    _lock(conn, shared=True)
    stored = _stored(conn, digests)
    table = m.ApparatusBlob.__table__
    missing = []
    for digest in digests:
        if digest in stored:
            continue
        try:
            blob = archive.packed(digest)
        except ArchiveError:
            missing.append(digest)
            continue
        conn.execute(insert(table).on_conflict_do_nothing(),  # type: ignore[arg-type]
                     {"digest": bytes.fromhex(digest), "data": blob})
    return missing


def collect(conn: Connection) -> dict[str, int] | str:
    """Remove the blobs no manifest names any more, in ``conn``'s
    transaction (``shournal delete``'s, which in a lab store sees and
    deletes only its user's rows): digest -> stored bytes of those
    removed, or why none were (one line: a manifest that cannot be decoded
    might name any)."""
    from sqlalchemy import bindparam, text

    _lock(conn, shared=False)
    live: set[str] = set()
    for (manifest,) in conn.execute(text("SELECT manifest FROM apparatus")):
        try:
            live |= digests_of(bytes(manifest))
        except ValueError as exc:
            return str(exc)
    doomed: list[int] = []
    removed: dict[str, int] = {}
    for blob_id, digest, length in conn.execute(
            text("SELECT id, digest, length(data) FROM apparatus_blob")):
        hexed = bytes(digest).hex()
        if hexed not in live:
            doomed.append(blob_id)
            removed[hexed] = int(length)
    stmt = text("DELETE FROM apparatus_blob WHERE id IN :ids").bindparams(
        bindparam("ids", expanding=True))
    for start in range(0, len(doomed), _IN_BATCH):
        conn.execute(stmt, {"ids": doomed[start : start + _IN_BATCH]})
    return removed


def unused(conn: Reads, doomed: Iterable[int]) -> dict[str, int]:
    """The blobs (digest -> stored bytes) :func:`collect` would remove once
    the commands ``doomed`` are deleted (``shournal delete --dry-run``: no
    lock, an estimate); none in a journal that keeps no blobs."""
    if not keeps_blobs(conn.dialect):
        return {}
    gone = set(doomed)
    live: set[str] = set()
    for command_id, manifest in conn.rows("SELECT command_id, manifest FROM apparatus"):
        if command_id in gone:
            continue
        try:
            live |= digests_of(bytes(manifest))
        except ValueError:
            return {}
    found: dict[str, int] = {}
    for digest, length in conn.rows("SELECT digest, length(data) FROM apparatus_blob"):
        hexed = bytes(digest).hex()
        if hexed not in live:
            found[hexed] = int(length)
    return found


# -- reading (through shournal.Journal) ------------------------------------------------


def read(conn: Reads, digests: Iterable[str]) -> dict[str, bytes]:
    """The content of each of ``digests`` the journal's table holds and
    the reader may read, checked against its digest (a damaged row is as
    good as none); nothing from a journal that keeps no blobs."""
    if not keeps_blobs(conn.dialect):
        return {}
    from shournal.store.reader import in_list

    found: dict[str, bytes] = {}
    for batch in _batches(_valid(digests)):
        marks, params = in_list("d", [bytes.fromhex(d) for d in batch])
        for digest, blob in conn.rows(
                f"SELECT digest, data FROM apparatus_blob WHERE digest IN ({marks})", params):
            hexed = bytes(digest).hex()
            if hexed in found:
                continue
            data = unpack(bytes(blob), hexed)
            if data is not None:
                found[hexed] = data
    return found


def present(conn: Reads, digests: Iterable[str]) -> set[str]:
    """Which of ``digests`` the journal's table holds for the reader."""
    if not keeps_blobs(conn.dialect):
        return set()
    from shournal.store.reader import in_list

    found: set[str] = set()
    for batch in _batches(_valid(digests)):
        marks, params = in_list("d", [bytes.fromhex(d) for d in batch])
        found |= {bytes(r[0]).hex() for r in conn.rows(
            f"SELECT digest FROM apparatus_blob WHERE digest IN ({marks})", params)}
    return found


class JournalContent:
    """Archived apparatus content as a journal's readers get it: from the
    journal's table, else from this host's file archive, each blob checked
    against its digest.  ``read``/``present``: :func:`read` and
    :func:`present` over a read transaction of the journal."""

    def __init__(
        self,
        read: Callable[[Sequence[str]], dict[str, bytes]],
        present: Callable[[Sequence[str]], set[str]],
        local: Archive | None = None,
    ) -> None:
        self._read = read
        self._present = present
        self.local = local if local is not None else Archive()

    def get(self, digest: str) -> bytes:
        """The content of ``digest``; ArchiveError if it is neither in the
        journal (for this reader) nor in this host's archive, or damaged."""
        check_digest(digest)
        found = self._read([digest]).get(digest)
        if found is not None:
            return found
        try:
            return self.local.get(digest)
        except NotInArchive:
            raise ArchiveError(f"content {digest} is not readable: neither in the journal "
                               "for you nor in this host's archive") from None

    def has(self, digest: str) -> bool:
        return not self.unreadable([digest])

    def unreadable(self, digests: Iterable[str]) -> list[str]:
        """Those of ``digests`` this reader can read from neither place."""
        given = list(digests)
        wanted = _valid(given)
        on_server = self._present(wanted) if wanted else set()
        return [d for d in self.local.unreadable(given) if d not in on_server]
