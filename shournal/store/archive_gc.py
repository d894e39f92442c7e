"""Garbage collection of the apparatus archive: the blobs that deleted
commands' manifests named and no remaining manifest names
(``shournal delete``, :mod:`shournal.store.gc`).

A blob is live while any manifest in the journal names its digest, as a
read or as a written file, whatever the path (content is shared across
paths and commands).  Every manifest is decoded once per deletion: only
commands recorded with their apparatus have one.  A manifest that cannot
be decoded might name anything, so then nothing is collected.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shournal.store.archive import Archive, ArchiveError, check_digest, digests_of

if TYPE_CHECKING:
    from shournal.store.db import Store

@dataclass(slots=True)
class Collection:
    """Blobs (digest -> stored bytes) a deletion leaves unreferenced."""

    blobs: dict[str, int] = field(default_factory=dict)
    # Why nothing was collected (one line), or None.
    kept_because: str | None = None

    @property
    def size(self) -> int:
        return sum(self.blobs.values())


def unreferenced(rows: Iterable[tuple[bytes, bool]], archive: Archive) -> Collection:
    """The blobs in ``archive`` named by the doomed manifests and by no
    other: ``rows`` are (manifest, doomed) for every manifest in the
    journal."""
    doomed: set[str] = set()
    live: set[str] = set()
    for manifest, is_doomed in rows:
        try:
            (doomed if is_doomed else live).update(digests_of(bytes(manifest)))
        except ValueError as exc:
            if not is_doomed:
                return Collection(kept_because=str(exc))
    candidates = set()
    for digest in doomed - live:
        try:
            candidates.add(check_digest(digest))
        except ArchiveError:
            continue  # never a path from a malformed digest
    if not candidates or not archive.blobs.is_dir():
        return Collection()
    return Collection(blobs=archive.blob_sizes(sorted(candidates)))


def _live(store: Store) -> set[str]:
    """Every digest the journal's manifests name now.

    :raises ValueError: a manifest cannot be decoded.
    """
    from shournal.store import archived
    from shournal.store.connection import AlchemyReads

    live: set[str] = set()
    with store.reading() as conn:
        for manifest in archived.apparatus_manifests(AlchemyReads(conn)):
            live |= digests_of(manifest)
    return live


def collect(
    store: Store, found: Collection, archive: Archive, spool_waiting: Callable[[], bool]
) -> Collection:
    """Remove ``found``'s blobs (after the deletion committed); what was
    removed, or why nothing was.  Not while a recorder holds the archive
    (see :mod:`shournal.store.archive`) or commands wait in the spool
    (``spool_waiting()``: their manifests are not in the journal yet); then the manifests are
    read again, for those stored since the deletion.

    :raises ArchiveError: a blob cannot be removed (those before it are).
    """
    if not found.blobs or found.kept_because:
        return found
    fd = archive.try_exclusive()
    if fd is None:
        return Collection(kept_because="a command is being recorded with its apparatus "
                          "and may name them")
    try:
        if spool_waiting():
            return Collection(kept_because="commands waiting in the spool may name them")
        try:
            live = _live(store)
        except ValueError as exc:
            return Collection(kept_because=str(exc))
        removed: dict[str, int] = {}
        for digest, size in found.blobs.items():
            if digest not in live:
                archive.remove(digest)
                removed[digest] = size
        return Collection(blobs=removed)
    finally:
        os.close(fd)
