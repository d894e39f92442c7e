"""Partial XXH64 file hashes, bit-compatible with shournal 3.3.

A file is sampled at up to ``max_reads`` chunks spread over its size and the
concatenated bytes are hashed with XXH64 (seed 0) in one call.  Databases
written by the original store the same values, so ``--wfile`` lookups work
across both implementations.

This runs once per recorded file in the listener, so the code avoids
per-call global/attribute lookups and extra syscalls; see ``_digest``.
"""

from __future__ import annotations

import os
from functools import partial

import xxhash

from shournal import limits

# Not typing.TYPE_CHECKING: importing typing alone costs the listener ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "CONTENT_DIGEST_ALGORITHM",
    "content_digest",
    "hash_from_bytes",
    "hash_to_bytes",
    "partial_xxh64",
    "partial_xxh64_bytes",
]

# The digest of a whole file's content (archived scripts, the apparatus
# archive): XXH3-128.  Not the partial hash: two versions of a file that
# differ outside the sampled chunks must never merge.  128 bits make an
# accidental collision negligible; it is not collision-resistant against
# someone crafting files on purpose (SHA-256 would be), but it hashes at
# memory speed, and a record with its apparatus hashes every library and
# module the command read, every time.
CONTENT_DIGEST_ALGORITHM = "xxh3_128"
content_digest = xxhash.xxh3_128_digest

_pread = os.pread
_xxh64 = xxhash.xxh64_intdigest
_partial = partial

# Contiguous sampling covers at most chunk * max_reads bytes, which one
# pread returns just as well.  Above this size a single read would allocate
# a needlessly large buffer (pathological configs), so loop instead.
_ONE_READ_LIMIT = 1 << 20


def _digest(
    read_at: Callable[[int, int], bytes],
    chunk: int,
    seekstep: int,
    max_reads: int | None,
) -> int | None:
    """The original's ``digestFile``: ``read_at(length, offset)`` returns up to
    ``length`` bytes (fewer only at EOF).  ``max_reads=None`` means no limit.

    Returns None when nothing was read (empty file), like the original.
    """
    if seekstep <= chunk:
        # Contiguous reads that stop at the first short one yield exactly the
        # file's first chunk * max_reads bytes: fetch them in one call.
        if max_reads is not None:
            length = chunk * max_reads
            if length <= _ONE_READ_LIMIT:
                data = read_at(length, 0)
                return _xxh64(data) if data else None
        step = chunk
    else:
        step = seekstep
    parts: list[bytes] = []
    offset = 0
    reads = 0
    while max_reads is None or reads < max_reads:
        block = read_at(chunk, offset)
        parts.append(block)
        reads += 1
        if len(block) < chunk:
            break
        offset += step
    # One hash call over the joined chunks (same value as streaming them,
    # but without a state object).
    data = b"".join(parts)
    return _xxh64(data) if data else None


def _defaults(chunk_size: int | None, max_reads: int | None) -> tuple[int, int]:
    """The helper's defaults (native/shournal_protocol.h) for what is None."""
    return (
        limits.DEFAULT_HASH_CHUNK if chunk_size is None else chunk_size,
        limits.DEFAULT_HASH_READS if max_reads is None else max_reads,
    )


def partial_xxh64(
    fd: int,
    size: int,
    chunk_size: int | None = None,
    max_reads: int | None = None,
) -> int | None:
    """Partial hash of the open file ``fd`` whose fstat size is ``size``;
    ``chunk_size`` and ``max_reads`` default to the helper's defaults.

    The size only determines the sampling positions; reads go until EOF, so a
    file that changed after fstat is hashed as the original would hash it.
    Uses pread, so the file offset of ``fd`` is untouched.
    """
    if chunk_size is None or max_reads is None:
        chunk_size, max_reads = _defaults(chunk_size, max_reads)
    seekstep = size // max_reads
    if seekstep <= chunk_size:
        # The common small-file case, without building a reader object.
        length = chunk_size * max_reads
        if length <= _ONE_READ_LIMIT:
            data = _pread(fd, length, 0)
            return _xxh64(data) if data else None
    return _digest(_partial(_pread, fd), chunk_size, seekstep, max_reads)


def partial_xxh64_bytes(
    data: bytes,
    chunk_size: int | None = None,
    max_reads: int | None = None,
) -> int | None:
    """What ``partial_xxh64`` returns for a file whose content is ``data``."""
    if chunk_size is None or max_reads is None:
        chunk_size, max_reads = _defaults(chunk_size, max_reads)
    view = memoryview(data)

    def read_at(length: int, offset: int) -> bytes:
        return bytes(view[offset : offset + length])

    return _digest(read_at, chunk_size, len(data) // max_reads, max_reads)


def hash_to_bytes(h: int | None) -> bytes:
    """The original's database encoding: 8 bytes little-endian (native order
    on x86-64 and arm64); no hash is the empty blob, never NULL, so that
    UNIQUE indexes treat unhashed files as equal."""
    return b"" if h is None else h.to_bytes(8, "little")


def hash_from_bytes(b: bytes) -> int | None:
    """Inverse of :func:`hash_to_bytes`."""
    if not b:
        return None
    if len(b) != 8:
        raise ValueError(f"a partial hash is 8 bytes, got {len(b)}")
    return int.from_bytes(b, "little")
