"""The holder's partial hash (native/shournal_hash.h) against the Python
implementation and the original's vectors: a journal must not depend on
which side hashed a file."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest
import xxhash
from test_hashing import FILE_VECTORS

from shournal.hashing import partial_xxh64

NATIVE = Path(__file__).resolve().parents[2] / "native"

DRIVER = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "shournal_hash.h"
/* argv: CHUNK READS FILE... ; prints the hash or "none" per file */
int main(int argc, char **argv) {
    unsigned chunk = (unsigned)strtoul(argv[1], NULL, 10);
    unsigned reads = (unsigned)strtoul(argv[2], NULL, 10);
    uint8_t *buf = malloc(chunk);
    for (int i = 3; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY);
        struct stat st;
        uint64_t h = 0;
        if (fd < 0 || fstat(fd, &st) != 0 || buf == NULL) return 2;
        int rc = shournal_partial_hash(fd, (uint64_t)st.st_size, chunk, reads, buf, &h);
        if (rc < 0) return 3;
        if (rc == 0) printf("none\n"); else printf("%llu\n", (unsigned long long)h);
        close(fd);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def native_hash(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("native-hash")
    (d / "h.c").write_text(DRIVER)
    exe = d / "h"
    subprocess.run(
        ["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(NATIVE), "-o", str(exe),
         str(d / "h.c")],
        check=True,
    )
    return exe


def native(exe: Path, chunk: int, reads: int, files: list[Path]) -> list[int | None]:
    out = subprocess.run(
        [str(exe), str(chunk), str(reads), *map(str, files)], capture_output=True, text=True,
        check=True,
    ).stdout.split()
    return [None if v == "none" else int(v) for v in out]


def python(chunk: int, reads: int, path: Path) -> int | None:
    fd = os.open(path, os.O_RDONLY)
    try:
        return partial_xxh64(fd, os.fstat(fd).st_size, chunk, reads)
    finally:
        os.close(fd)


def test_original_vectors(native_hash, tmp_path):
    for i, (chunk, reads, content, hashed, want) in enumerate(FILE_VECTORS):
        f = tmp_path / f"v{i}"
        f.write_bytes(content)
        assert xxhash.xxh64_intdigest(hashed) == want
        assert native(native_hash, chunk, reads, [f]) == [want], (chunk, reads, content)


# The recording tests' sizes, XXH64's block and tail boundaries, and files
# larger than every sampling window.
SIZES = [0, 1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 65, 255, 256, 510, 767, 768, 769, 4096, 21567,
         101978, 1 << 20]
SETTINGS = [(256, 3), (8, 1), (8, 7), (1000, 2), (4096, 1), (40 * 1024, 4), (13, 1000)]


@pytest.mark.parametrize("chunk,reads", SETTINGS)
def test_same_as_python(native_hash, tmp_path, chunk, reads):
    rng = random.Random(chunk * 1000 + reads)
    files = []
    for size in SIZES:
        f = tmp_path / f"s{size}"
        f.write_bytes(rng.randbytes(size))
        files.append(f)
    assert native(native_hash, chunk, reads, files) == [python(chunk, reads, f) for f in files]


def test_whole_small_file_is_plain_xxh64(native_hash, tmp_path):
    data = b"shournal" * 50  # 400 bytes < 3 * 256: hashed whole
    f = tmp_path / "small"
    f.write_bytes(data)
    assert native(native_hash, 256, 3, [f]) == [xxhash.xxh64_intdigest(data)]
