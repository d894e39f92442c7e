"""The SQL of redaction (shournal.redact): the counts stored per command
(table ``redaction``), and ``shournal redact`` -- today's patterns applied
to the stored command lines, archived scripts and apparatus manifests.

The rules themselves come from above as functions (text -> text, counts);
this module only reads rows in batches, and writes the changed ones in one
transaction (:func:`redact_stored`: on any error nothing changes).

Archived scripts are content-addressed (``content``: unique by digest,
referenced by ``read_file.content_id``).  A redacted script is new
content: its row is rewritten in place with the new bytes and their
digest, so every reference stays valid; when content with that digest is
archived already (the same script archived redacted later), the
references move to it and the old row goes.  ``read_file``'s size and
partial hash keep describing the file as it was on disk (what ``--rfile``
and lineage match); the archived copy differs from it by its markers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from sqlalchemy import Connection, func, select, update

from shournal.data import RedactResult
from shournal.hashing import content_digest
from shournal.store import models as m

_BATCH = 1000
# Contents are up to the archive's size cap each: fewer per batch.
_CONTENT_BATCH = 50

TextRule = Callable[[str], tuple[str, Mapping[str, int]]]
BytesRule = Callable[[bytes], tuple[bytes, Mapping[str, int]]]


def _batches(conn: Connection, stmt_of: Callable[[int], Any]) -> Iterator[Any]:
    """The rows of ``stmt_of(last id)`` batch by batch (by id: a driver
    that fetches whole results never holds the journal at once)."""
    last = -(2**63)
    while True:
        rows = conn.execute(stmt_of(last)).all()
        if not rows:
            return
        yield from rows
        last = rows[-1][0]


def _add_counts(conn: Connection, command_id: int, counts: Mapping[str, int]) -> None:
    r = m.Redaction
    for kind, n in sorted(counts.items()):
        if not n:
            continue
        done = conn.execute(
            update(r).where(r.command_id == command_id, r.kind == kind)
            .values(count=r.count + n)
        ).rowcount
        if not done:
            conn.execute(m.Redaction.__table__.insert(),
                         {"command_id": command_id, "kind": kind, "count": n})


def redact_stored(
    store: Any,
    text_rule: TextRule,
    bytes_rule: BytesRule,
    manifest_rule: BytesRule | None,
    *,
    dry_run: bool,
) -> RedactResult:
    """Apply the rules to every stored command line, archived script
    (``content``) and, with ``manifest_rule``, apparatus manifest; count
    what they replace into ``redaction`` (a script's under the first
    command that read it).  ``dry_run``: read only.  Otherwise one write
    transaction: all or nothing.  Idempotent when the rules are (what
    they replaced is not found again).

    :raises shournal.store.StoreError: the journal cannot be read or written.
    """
    out = RedactResult(dry_run=dry_run)
    with (store.reading() if dry_run else store.writing()) as conn:
        c = m.Command
        texts: list[tuple[int, str, Mapping[str, int]]] = []
        for id_, text in _batches(
            conn, lambda last: select(c.id, c.text).where(c.id > last).order_by(c.id).limit(_BATCH)
        ):
            new, counts = text_rule(text)
            if counts:
                out.commands.add(counts)
                texts.append((id_, new, counts))

        ct = m.Content
        contents: list[tuple[int, bytes, Mapping[str, int]]] = []
        for id_, data in _batches(
            conn,
            lambda last: select(ct.id, ct.data).where(ct.id > last).order_by(ct.id)
            .limit(_CONTENT_BATCH),
        ):
            new_data, counts = bytes_rule(bytes(data))
            if counts:
                out.scripts.add(counts)
                contents.append((id_, new_data, counts))

        manifests: list[tuple[int, bytes, Mapping[str, int]]] = []
        if manifest_rule is not None:
            a = m.Apparatus
            for cid, manifest in _batches(
                conn,
                lambda last: select(a.command_id, a.manifest).where(a.command_id > last)
                .order_by(a.command_id).limit(_BATCH),
            ):
                new_manifest, counts = manifest_rule(bytes(manifest))
                if counts:
                    out.environments.add(counts)
                    manifests.append((cid, new_manifest, counts))

        if dry_run:
            return out
        for id_, new, counts in texts:
            conn.execute(update(c).where(c.id == id_).values(text=new))
            _add_counts(conn, id_, counts)
        for id_, new_data, counts in contents:
            _replace_content(conn, id_, new_data, counts)
        for cid, new_manifest, counts in manifests:
            conn.execute(update(m.Apparatus).where(m.Apparatus.command_id == cid)
                         .values(manifest=new_manifest))
            _add_counts(conn, cid, counts)
    return out


def _replace_content(conn: Connection, id_: int, data: bytes, counts: Mapping[str, int]) -> None:
    """Content ``id_`` becomes ``data`` (see the module's docstring)."""
    ct, rf, re_ = m.Content, m.ReadFile, m.ReadEvent
    first = conn.execute(
        select(func.min(re_.command_id)).join(rf, rf.id == re_.read_file_id)
        .where(rf.content_id == id_)
    ).scalar_one()
    digest = content_digest(data)
    same = conn.execute(
        select(ct.id).where(ct.digest == digest, ct.algorithm == m.CONTENT_DIGEST_ALGORITHM,
                            ct.id != id_)
    ).scalar_one_or_none()
    if same is None:
        conn.execute(update(ct).where(ct.id == id_).values(
            data=data, digest=digest, algorithm=m.CONTENT_DIGEST_ALGORITHM))
    else:
        conn.execute(update(rf).where(rf.content_id == id_).values(content_id=same))
        conn.execute(ct.__table__.delete().where(ct.id == id_))
    if first is not None:
        _add_counts(conn, int(first), counts)
