"""Partial XXH64 against the vectors of the original (reference §4)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from shournal.hashing import (
    _digest,
    hash_from_bytes,
    hash_to_bytes,
    partial_xxh64,
    partial_xxh64_bytes,
)


@contextmanager
def opened(tmp_path: Path, content: bytes, name: str = "f") -> Iterator[tuple[int, int]]:
    path = tmp_path / name
    path.write_bytes(content)
    fd = os.open(path, os.O_RDONLY)
    try:
        yield fd, os.fstat(fd).st_size
    finally:
        os.close(fd)


def reader(data: bytes, log: list[tuple[int, int]] | None = None) -> Callable[[int, int], bytes]:
    def read_at(length: int, offset: int) -> bytes:
        if log is not None:
            log.append((length, offset))
        return data[offset : offset + length]

    return read_at


# (chunk, max_reads, content, the bytes hashed, XXH64 of them)
FILE_VECTORS = [
    (2, 2, b"g", b"g", 284872488598251182),
    (2, 2, b"gh", b"gh", 15572786966169167896),
    (2, 2, b"abc", b"abc", 4952883123889572249),
    (2, 2, b"abcd", b"abcd", 15997673941747208908),
    (2, 2, b"ab___cd___", b"abcd", 15997673941747208908),
    (3, 2, b"abc__def___", b"abcdef", 18053520794346263629),
    (1, 2, b"a____d_____", b"ad", 14991177507756144222),
    (1, 3, b"a__b__c___", b"abc", 4952883123889572249),
]

# digestFile(chunk, seekstep[, max_reads]): (chunk, step, max_reads, content, hashed, XXH64)
DIGEST_VECTORS = [
    (2, 4, None, b"aa__bb__cc__dd", b"aabbccdd", 7093497783361443727),
    (2, 4, 2, b"aa__bb__cc__dd", b"aabb", 16599422985207987241),
    (2, 2, None, b"aa__bb__cc__dd", b"aa__bb__cc__dd", 7609958702727792612),
    (2, 3, None, b"aa__bb__cc__dd", b"aa_b__c_dd", 5095728170605338186),
    (2, 4, None, b"aa__bb__cc__d", b"aabbccd", 10891612896444439932),
]

README_VECTORS = [
    (b"hi\n", 15349503233279147316),
    (b"foo\n", 8087352826690557229),
    (b"#!/usr/bin/env bash\necho hi | tee out.log\n", 13559791986335963073),
    (b"#!/usr/bin/env bash\necho version1\n", 16696055267278105544),
    (b"#!/usr/bin/env bash\necho version2\n", 17683376525180966954),
]


@pytest.mark.parametrize(("chunk", "max_reads", "content", "hashed", "expected"), FILE_VECTORS)
def test_file_vectors(
    tmp_path: Path, chunk: int, max_reads: int, content: bytes, hashed: bytes, expected: int
) -> None:
    assert xxhash.xxh64_intdigest(hashed) == expected
    with opened(tmp_path, content) as (fd, size):
        assert partial_xxh64(fd, size, chunk, max_reads) == expected
    assert partial_xxh64_bytes(content, chunk, max_reads) == expected


@pytest.mark.parametrize(
    ("chunk", "step", "max_reads", "content", "hashed", "expected"), DIGEST_VECTORS
)
def test_digest_vectors(
    chunk: int, step: int, max_reads: int | None, content: bytes, hashed: bytes, expected: int
) -> None:
    assert xxhash.xxh64_intdigest(hashed) == expected
    assert _digest(reader(content), chunk, step, max_reads) == expected


def test_digest_vectors_through_a_real_fd(tmp_path: Path) -> None:
    from functools import partial

    for i, (chunk, step, max_reads, content, _, expected) in enumerate(DIGEST_VECTORS):
        with opened(tmp_path, content, f"f{i}") as (fd, _size):
            assert _digest(partial(os.pread, fd), chunk, step, max_reads) == expected


def test_sampled_reads_start_at_multiples_of_the_step() -> None:
    log: list[tuple[int, int]] = []
    _digest(reader(b"aa__bb__cc__dd", log), 2, 3, None)
    # the last read hits EOF and ends the loop
    assert log == [(2, 0), (2, 3), (2, 6), (2, 9), (2, 12), (2, 15)]


@pytest.mark.parametrize(("content", "expected"), README_VECTORS)
def test_readme_whole_file_values(tmp_path: Path, content: bytes, expected: int) -> None:
    # with the defaults, files up to 768 bytes are hashed whole
    assert len(content) <= 768
    with opened(tmp_path, content) as (fd, size):
        assert partial_xxh64(fd, size) == expected
    assert partial_xxh64_bytes(content) == expected
    # digestWholeFile: seekstep 0, no read limit
    assert _digest(reader(content), 256, 0, None) == expected
    assert _digest(reader(content), 1, 0, None) == expected


def test_empty_file_has_no_hash(tmp_path: Path) -> None:
    with opened(tmp_path, b"") as (fd, size):
        assert partial_xxh64(fd, size) is None
        assert partial_xxh64(fd, size, 8, 1) is None
    assert partial_xxh64_bytes(b"") is None
    assert _digest(reader(b""), 2, 0, None) is None
    assert _digest(reader(b""), 2, 5, 3) is None


def test_file_grown_after_fstat_is_read_to_eof(tmp_path: Path) -> None:
    # the size only sets the sampling positions; the reads decide the bytes
    with opened(tmp_path, b"abcdef") as (fd, _):
        assert partial_xxh64(fd, 0, 2, 2) == xxhash.xxh64_intdigest(b"abcd")


def test_large_file_defaults(tmp_path: Path) -> None:
    content = bytes(range(256)) * 40 + b"tail"
    size = len(content)
    s = size // 3
    expected = xxhash.xxh64_intdigest(
        content[0:256] + content[s : s + 256] + content[2 * s : 2 * s + 256]
    )
    with opened(tmp_path, content) as (fd, size):
        assert partial_xxh64(fd, size) == expected
    assert partial_xxh64_bytes(content) == expected


def test_fd_offset_is_untouched(tmp_path: Path) -> None:
    with opened(tmp_path, b"x" * 5000) as (fd, size):
        os.lseek(fd, 17, os.SEEK_SET)
        partial_xxh64(fd, size)
        partial_xxh64(fd, 10)
        assert os.lseek(fd, 0, os.SEEK_CUR) == 17


def test_unlimited_config_falls_back_to_chunked_reads() -> None:
    # chunk * max_reads beyond the one-read limit must still give the same value
    content = os.urandom(3000)
    assert partial_xxh64_bytes(content, 40960, 100) == xxhash.xxh64_intdigest(content)


@pytest.mark.parametrize("write_size", [1, 2, 7, 64, 255, 256, 257, 4096, 10**6])
def test_independent_of_how_the_file_was_written(tmp_path: Path, write_size: int) -> None:
    content = bytes((i * 31 + 7) % 251 for i in range(20000))
    expected = partial_xxh64_bytes(content)
    path = tmp_path / f"w{write_size}"
    with open(path, "wb", buffering=0) as fh:
        for i in range(0, len(content), write_size):
            fh.write(content[i : i + write_size])
    fd = os.open(path, os.O_RDONLY)
    try:
        assert partial_xxh64(fd, os.fstat(fd).st_size) == expected
    finally:
        os.close(fd)


def test_independent_of_short_reads() -> None:
    # A reader returning less than asked only at EOF: any chunking of the same
    # bytes hashes equally (the original checks buffer sizes 1..127).
    content = b"#!/usr/bin/env bash\necho hi | tee out.log\n"
    for chunk in range(1, 128):
        assert _digest(reader(content), chunk, 0, None) == 13559791986335963073


def test_hash_encoding_roundtrip() -> None:
    h = 15997673941747208908
    assert hash_to_bytes(h) == h.to_bytes(8, "little")
    assert hash_from_bytes(hash_to_bytes(h)) == h
    assert hash_to_bytes(None) == b""
    assert hash_from_bytes(b"") is None
    assert hash_to_bytes(2**64 - 1) == b"\xff" * 8
    with pytest.raises(ValueError):
        hash_from_bytes(b"\x00" * 7)


chunks = st.integers(min_value=1, max_value=64)
reads = st.integers(min_value=1, max_value=8)
blobs = st.binary(max_size=2000)


@settings(max_examples=200, deadline=None)
@given(data=blobs, chunk=chunks, max_reads=reads)
def test_same_bytes_same_hash(data: bytes, chunk: int, max_reads: int) -> None:
    first = partial_xxh64_bytes(data, chunk, max_reads)
    assert partial_xxh64_bytes(bytes(bytearray(data)), chunk, max_reads) == first
    assert (first is None) == (not data)


@settings(max_examples=200, deadline=None)
@given(data=blobs, chunk=chunks, max_reads=reads, step=st.integers(min_value=0, max_value=64))
def test_step_not_above_chunk_reads_contiguously(
    data: bytes, chunk: int, max_reads: int, step: int
) -> None:
    step = min(step, chunk)
    prefix = data[: chunk * max_reads]
    expected = xxhash.xxh64_intdigest(prefix) if prefix else None
    assert _digest(reader(data), chunk, step, max_reads) == expected


@settings(max_examples=200, deadline=None)
@given(data=blobs, chunk=chunks, max_reads=reads)
def test_matches_a_plain_model(data: bytes, chunk: int, max_reads: int) -> None:
    # straightforward transcription of the §4 rules, read by read
    step = len(data) // max_reads
    parts, offset = [], 0
    for _ in range(max_reads):
        block = data[offset : offset + chunk]
        parts.append(block)
        if len(block) < chunk:
            break
        offset += step if step > chunk else chunk
    joined = b"".join(parts)
    expected = xxhash.xxh64_intdigest(joined) if joined else None
    assert partial_xxh64_bytes(data, chunk, max_reads) == expected


@settings(max_examples=50, deadline=None)
@given(data=st.binary(min_size=0, max_size=3000), chunk=chunks, max_reads=reads)
def test_fd_and_bytes_agree(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, chunk: int, max_reads: int
) -> None:
    path = tmp_path_factory.mktemp("h") / "f"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert partial_xxh64(fd, len(data), chunk, max_reads) == partial_xxh64_bytes(
            data, chunk, max_reads
        )
    finally:
        os.close(fd)
