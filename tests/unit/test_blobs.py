"""The blob format shared by the file archive and a journal's table
(shournal.store.archive.pack/unpack), the journal's content as readers get
it (shournal.store.blobs.JournalContent: the table first, then this host's
archive), and replay's refusal of content it cannot read
(shournal.reproduce.replay.check_readable)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from shournal.hashing import content_digest
from shournal.reproduce.experiment import Experiment
from shournal.reproduce.replay import Changes, ContentNotReadable, check_readable
from shournal.store.archive import Archive, ArchiveError, pack, unpack
from shournal.store.blobs import JournalContent


def test_pack_and_unpack_check_the_digest() -> None:
    for data in (b"text " * 100, os.urandom(300), b""):
        digest = content_digest(data).hex()
        blob = pack(data)
        assert blob[:1] in (b"Z", b"R")
        assert unpack(blob, digest) == data
    text = b"text " * 100
    assert pack(text)[:1] == b"Z" and len(pack(text)) < len(text)
    digest = content_digest(text).hex()
    assert unpack(pack(text)[:-1], digest) is None  # torn
    assert unpack(b"X" + text, digest) is None  # unknown tag
    assert unpack(pack(b"other"), digest) is None  # not that content


def _content(tmp_path: Path, server: dict[str, bytes]) -> tuple[JournalContent, Archive]:
    local = Archive(tmp_path / "archive")

    def read(digests: Sequence[str]) -> dict[str, bytes]:
        return {d: server[d] for d in digests if d in server}

    def present(digests: Sequence[str]) -> set[str]:
        return {d for d in digests if d in server}

    return JournalContent(read, present, local), local


def test_journal_content_takes_the_table_then_the_local_archive(tmp_path: Path) -> None:
    on_server, here = b"on the server", b"in this host's archive"
    ds, dh = content_digest(on_server).hex(), content_digest(here).hex()
    contents, local = _content(tmp_path, {ds: on_server})
    local.put(here)
    nowhere = "ab" * 16
    assert contents.get(ds) == on_server and contents.get(dh) == here
    assert contents.has(ds) and contents.has(dh) and not contents.has(nowhere)
    assert contents.unreadable([ds, dh, nowhere, "not-a-digest"]) == [nowhere, "not-a-digest"]
    with pytest.raises(ArchiveError, match=f"content {nowhere} is not readable"):
        contents.get(nowhere)
    with pytest.raises(ArchiveError, match="not a content digest"):
        contents.get("../../etc/passwd")
    # a damaged local blob says so (not "not readable")
    local.path_of(dh).write_bytes(b"Zbroken")
    with pytest.raises(ArchiveError, match="damaged"):
        contents.get(dh)


def _experiment(reads: list[list[object]]) -> Experiment:
    command = SimpleNamespace(id=7, working_dir="/w", text="true", return_value=0,
                              reads=[], writes=[])
    manifest = {"reads": reads, "writes": [], "env": {}, "argv": ["true"]}
    return Experiment(command, manifest)  # type: ignore[arg-type]


def test_check_readable_names_every_file_whose_content_cannot_be_read(tmp_path: Path) -> None:
    have, lost = b"readable", b"lost"
    dh, dl = content_digest(have).hex(), content_digest(lost).hex()
    contents, _local = _content(tmp_path, {dh: have})
    reg = 0o100644
    exp = _experiment([
        ["/w/b.txt", 4, 0, reg, None, dl, None],
        ["/w/a.txt", 4, 0, reg, None, dl, None],  # the same content, another path
        ["/w/ok.txt", 8, 0, reg, None, dh, None],
        ["/w/big", 9, 0, reg, None, None, "too_large"],  # not archived: from the host
        ["/proc/self/stat", 0, 0, reg, None, dl, None],  # the sandbox's own
        ["/w/fifo", 0, 0, 0o010644, None, dl, None],  # no content
        ["/w/replaced", 4, 0, reg, None, dl, None],  # rerun --input
    ])
    exp.content = contents
    with pytest.raises(ContentNotReadable) as info:
        check_readable(exp, Changes(inputs={"/w/replaced": "/elsewhere"}))
    assert info.value.lines == [
        f"command 7: the archived content of {p} is not readable (not in the journal for "
        "you, nor in this host's archive)" for p in ("/w/a.txt", "/w/b.txt")
    ]
    # positive control: with that content readable, nothing is refused
    contents, local = _content(tmp_path / "2", {dh: have})
    local.put(lost)
    exp.content = contents
    check_readable(exp, Changes(inputs={"/w/replaced": "/elsewhere"}))
