"""Unit tests of the ReReSo image's parts that need no recording: which
manifest paths may enter the image, ELF interpreters, the links leading
to a file, sourceless bytecode."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from shournal.rereso import image
from shournal.store.archive import Archive


def test_only_canonical_absolute_regular_files_enter_the_image():
    reg, fifo = 0o100644, 0o010644
    assert image.want("/usr/lib/x.so", reg)
    for bad in ("/a/../etc/shadow", "rel/x", "/a//b", "/a/./b", "/proc/self/maps", "/dev/null"):
        assert not image.want(bad, reg), bad
    assert not image.want("/tmp/fifo", fifo)


def test_elf_interpreter_is_the_one_readelf_names():
    sh = os.path.realpath("/bin/sh")
    data = Path(sh).read_bytes()
    out = subprocess.run(["readelf", "-l", sh], capture_output=True, text=True, check=True).stdout
    want = out.split("[Requesting program interpreter: ", 1)[1].split("]", 1)[0]
    assert image.elf_interpreter(data) == want
    assert image.elf_interpreter(b"#!/bin/sh\n") is None
    assert image.elf_interpreter(b"\x7fELF" + b"\x02\x01" + b"\xff" * 60) is None  # garbage


def test_links_to_a_file_of_the_image_are_added(tmp_path: Path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "lib.so.1.2").write_bytes(b"x")
    (tmp_path / "real" / "lib.so.1").symlink_to("lib.so.1.2")
    (tmp_path / "dir").symlink_to("real")
    root = image.Rootfs(files={str(tmp_path / "real" / "lib.so.1.2"): ("0" * 32, 0o100644)})
    assert image._add_chain(root, str(tmp_path / "dir" / "lib.so.1")) == str(
        tmp_path / "real" / "lib.so.1.2")
    assert root.links == {str(tmp_path / "dir"): "real", str(tmp_path / "real" / "lib.so.1"):
                          "lib.so.1.2"}
    other = image.Rootfs()
    image._add_chain(other, str(tmp_path / "dir" / "lib.so.1"))  # leads to no image file
    assert other.links == {}


def test_bytecode_read_without_its_source_is_also_sourceless(tmp_path: Path):
    archive = Archive(tmp_path / "archive")
    digest, _ = archive.put(b"bytecode")
    root = image.Rootfs(files={
        "/usr/lib/python3.11/encodings/__pycache__/utf_8.cpython-311.pyc": (digest, 0o100644),
        "/w/__pycache__/helper.cpython-311.pyc": (digest, 0o100644),
        "/w/helper.py": (digest, 0o100644),
    })
    image.complete(root, archive, [])
    assert root.files["/usr/lib/python3.11/encodings/utf_8.pyc"] == (digest, 0o100644)
    assert "/w/helper.pyc" not in root.files  # its source is there
