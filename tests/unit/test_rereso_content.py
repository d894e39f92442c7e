"""Media types from content, and the recorded content of a file version
(journal archive first, the disk only while it is still that version)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shournal.hashing import partial_xxh64_bytes
from shournal.rereso import content, mediatype

CSV = b"a,b,c\n1,2,3\n4,5,6\n"


@pytest.mark.parametrize(
    ("name", "data", "expected", "by"),
    [
        ("data.dat", CSV, "text/csv", mediatype.BY_CONTENT),  # libmagic, not the name
        ("r.out", b'{"a": [1, 2]}\n', "application/json", mediatype.BY_CONTENT),
        ("m.bin", b"\x89HDF\r\n\x1a\n" + bytes(200), "application/x-hdf5", mediatype.BY_CONTENT),
        ("short.csv", b"a\n1\n", "text/csv", mediatype.BY_EXTENSION),  # magic: text/plain
        ("model.h5", None, "application/x-hdf5", mediatype.BY_EXTENSION),  # no content
        ("notes", b"some words\n", "text/plain", mediatype.BY_CONTENT),
        ("blob.zzq", b"\x00\x01\x02\xfe\xff", mediatype.UNKNOWN, mediatype.BY_NOTHING),
        ("nothing", None, mediatype.UNKNOWN, mediatype.BY_NOTHING),
    ],
)
def test_detect(name: str, data: bytes | None, expected: str, by: str):
    assert mediatype.detect(name, data) == mediatype.MediaType(expected, by)


def test_unknown_notice_is_one_line():
    line = mediatype.unknown_notice("blob.zzq")
    assert line == "blob.zzq: media type unknown, using application/octet-stream"


def _version(path: Path, data: bytes, **kw: object) -> content.FileVersion:
    values: dict = dict(
        path=os.fsencode(path), size=len(data), mtime_ns=1, hash=partial_xxh64_bytes(data),
        chunk_size=256, max_reads=3,
    )
    values.update(kw)
    return content.FileVersion(**values)


def _nothing(version: content.FileVersion) -> bytes | None:
    return None


def test_disk_is_used_only_while_it_is_the_recorded_version(tmp_path: Path):
    f = tmp_path / "in.csv"
    f.write_bytes(CSV)
    v = _version(f, CSV)
    assert content.recorded_content(v, _nothing) == (CSV, content.FROM_DISK)
    f.write_bytes(CSV.replace(b"4", b"9"))  # same size, other content
    with pytest.raises(content.ContentUnavailable, match="hash differs"):
        content.recorded_content(v, _nothing)
    f.write_bytes(CSV + b"7,8,9\n")
    with pytest.raises(content.ContentUnavailable, match="size differs"):
        content.recorded_content(v, _nothing)
    f.unlink()
    with pytest.raises(content.ContentUnavailable, match=r"in\.csv \(missing\)"):
        content.recorded_content(v, _nothing)


def test_a_source_wins_over_the_disk_and_sources_are_asked_in_order(tmp_path: Path):
    f = tmp_path / "in.csv"
    f.write_bytes(b"today's content\n")

    v = _version(f, CSV)
    both = content.first_of(lambda _v: None, lambda _v: CSV, lambda _v: b"never")
    assert content.recorded_content(v, both) == (CSV, content.FROM_ARCHIVE)
