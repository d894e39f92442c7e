"""The apparatus archive (shournal.store.archive): deduplication,
atomic publication, damaged blobs detected."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from shournal import _paths
from shournal.hashing import content_digest
from shournal.store import archive as archive_mod
from shournal.store.archive import Archive, ArchiveError


def _blobs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "blobs").rglob("*") if p.is_file())


def test_ten_stores_of_the_same_content_make_one_blob(tmp_path: Path) -> None:
    arc = Archive(tmp_path)
    data = b"x,y\n1,2\n" * 1000
    digest, added = arc.put(data)
    assert added > 0
    for _ in range(9):
        assert arc.put(data) == (digest, 0)
    assert len(_blobs(tmp_path)) == 1
    assert arc.stored_bytes() == added < len(data)  # compressed
    assert arc.get(digest) == data
    assert digest == content_digest(data).hex()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_incompressible_content_is_stored_raw(tmp_path: Path) -> None:
    arc = Archive(tmp_path)
    data = os.urandom(4096)
    digest, added = arc.put(data)
    assert added == len(data) + 1
    assert arc.get(digest) == data


def test_default_root_is_beside_the_journal(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert Archive().root == tmp_path / "shournal" / "archive" == _paths.archive_dir()
    assert _paths.default_db_path().parent == Archive().root.parent


@pytest.mark.parametrize("fail_at", ["write", "fsync", "link"])
def test_a_write_torn_at_any_step_is_never_visible(tmp_path, monkeypatch, fail_at) -> None:
    """A writer that dies part-way (here: an error after half the bytes,
    at fsync, at publication) leaves no blob and no temporary file; the
    next writer of the same content publishes it whole."""
    arc = Archive(tmp_path)
    data = b"analysis config\n" * 500
    digest = content_digest(data).hex()
    real_write, real_fsync, real_link = os.write, os.fsync, os.link

    def torn_write(fd, buf):
        if fail_at == "write":
            real_write(fd, bytes(buf[: len(buf) // 2]))
            raise OSError(28, "No space left on device")
        return real_write(fd, buf)

    def bad_fsync(fd):
        if fail_at == "fsync":
            raise OSError(5, "Input/output error")
        return real_fsync(fd)

    def bad_link(src, dst):
        if fail_at == "link":
            raise OSError(28, "No space left on device")
        return real_link(src, dst)

    monkeypatch.setattr(archive_mod.os, "write", torn_write)
    monkeypatch.setattr(archive_mod.os, "fsync", bad_fsync)
    monkeypatch.setattr(archive_mod.os, "link", bad_link)
    with pytest.raises(ArchiveError):
        arc.put(data)
    assert not arc.has(digest)
    assert _blobs(tmp_path) == []
    assert list((tmp_path / "tmp").iterdir()) == []
    with pytest.raises(ArchiveError, match="not in the archive"):
        arc.get(digest)
    monkeypatch.undo()
    assert arc.put(data)[0] == digest
    assert arc.get(digest) == data


def test_a_damaged_blob_is_reported_not_returned(tmp_path: Path) -> None:
    arc = Archive(tmp_path)
    data = b"print('hello')\n" * 100
    digest, _ = arc.put(data)
    path = arc.path_of(digest)
    blob = path.read_bytes()
    path.write_bytes(blob[: len(blob) // 2])  # truncated
    with pytest.raises(ArchiveError, match="damaged"):
        arc.get(digest)
    path.write_bytes(b"Z" + zlib.compress(b"other content"))  # wrong content
    with pytest.raises(ArchiveError, match="damaged"):
        arc.get(digest)


def test_concurrent_writers_of_one_content_publish_one_whole_blob(tmp_path: Path) -> None:
    arc = Archive(tmp_path)
    data = b"shared library bytes " * 50_000
    pids = []
    for _ in range(6):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                for _ in range(5):
                    Archive(tmp_path).put(data)
                os._exit(0)
            except BaseException:
                os._exit(1)
        pids.append(pid)
    assert all(os.waitpid(p, 0)[1] == 0 for p in pids)
    (blob,) = _blobs(tmp_path)
    assert arc.get(content_digest(data).hex()) == data
    assert list((tmp_path / "tmp").iterdir()) == []
    assert blob.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("bad", ["../../etc/passwd", "ab", "A" * 32, "g" * 32])
def test_a_digest_never_names_another_path(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ArchiveError, match="not a content digest"):
        Archive(tmp_path).path_of(bad)
