"""A file given to ``--wfile``/``--rfile``: checked before the journal is
opened, then probed (size, mtime, partial hash under each of the journal's
hash settings), since the journal finds files by content, not by name.

Standard library and the hash only: `shournal query --wfile F` runs this
on its fast path (:mod:`shournal.cli._fast`).
"""

from __future__ import annotations

import os
import stat

from shournal.data import FileProbe, QueryFileError

# Not typing.TYPE_CHECKING: importing typing costs the fast path ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["check_file", "probe_file"]


def _open_regular(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    name = os.fsdecode(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise QueryFileError(f"cannot open {name}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise QueryFileError(f"cannot examine {name}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise QueryFileError(f"{name} is not a regular file")
    return fd, st


def check_file(path: str | os.PathLike[str]) -> None:
    """Fail early (before the journal is opened) when ``path`` cannot be
    used for --wfile/--rfile."""
    fd, _ = _open_regular(path)
    os.close(fd)


def probe_file(path: str | os.PathLike[str], hash_settings: Iterable[tuple[int, int]]) -> FileProbe:
    """Stat ``path`` and hash it under every (chunk size, max reads) given."""
    from shournal.hashing import partial_xxh64

    fd, st = _open_regular(path)
    hashes: set[int] = set()
    try:
        if st.st_size > 0:
            for chunk, max_reads in set(hash_settings):
                digest = partial_xxh64(fd, st.st_size, chunk, max_reads)
                if digest is not None:
                    hashes.add(digest)
    except OSError as e:
        raise QueryFileError(f"cannot read {os.fsdecode(path)}: {e.strerror}") from None
    finally:
        os.close(fd)
    return FileProbe(size=st.st_size, mtime_ns=st.st_mtime_ns, hashes=frozenset(hashes))
