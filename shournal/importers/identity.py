"""The stable identity of an imported entry (``CommandRecord.import_key``).

A re-import of the same file, or of a newer copy that overlaps it, must find
what is stored already.  The identity is the source kind and what the entry
itself says -- its start time (when the source has one), its text, host,
user and session -- plus how many entries before it in the same file said
exactly the same (two equal entries in one second stay two).  Nothing of
the import's own circumstances (the time of the import, the file's name, the
entry's line number) takes part.  A source with ids of its own (atuin's
history ids) is identified by those instead.

An entry without a time (a bash history without ``HISTTIMEFORMAT``, a zsh
history without ``EXTENDED_HISTORY``) is told from its repetitions only by
their count: a newer copy of such a file whose head was cut (``HISTFILESIZE``)
counts a repeated command from a later start, so its newest repetitions are
taken as stored.  docs/commands.md says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from shournal.record import CommandRecord

KEY_BYTES = 16


def key(kind: str, *parts: str | bytes | int | None) -> bytes:
    """A KEY_BYTES BLAKE2b digest of ``kind`` and ``parts``, each typed and
    length-prefixed (so no two different tuples give the same input)."""
    chunks = []
    for part in (kind, *parts):
        if part is None:
            raw = b"n"
        elif isinstance(part, int):
            raw = b"i%d" % part
        elif isinstance(part, str):
            raw = b"s" + part.encode("utf-8", "surrogatepass")
        else:
            raw = b"b" + part
        chunks.append(b"%d:" % len(raw))
        chunks.append(raw)
    return hashlib.blake2b(b"".join(chunks), digest_size=KEY_BYTES).digest()


def assign(kind: str, records: Sequence[CommandRecord], timed: Sequence[bool]) -> None:
    """Mark ``records`` as imported from ``kind`` and give each its key by
    content; ``timed[i]``: the source gave record i its start time (an
    estimated time takes no part in the identity)."""
    seen: dict[tuple[object, ...], int] = {}
    for rec, has_time in zip(records, timed, strict=True):
        content = (
            rec.hostname,
            rec.username,
            rec.session_uuid,
            rec.start_ns if has_time else None,
            rec.text,
        )
        n = seen.get(content, 0)
        seen[content] = n + 1
        rec.imported_from = kind
        rec.import_key = key(kind, *content, n)
