"""``--stat``: is each listed file still as the command left it?

A file is up to date ("U") when its size, mtime and partial hash (recomputed
with the hash settings *that command* was recorded with) all equal the
journal's; modified ("M") when any differs or it is no longer a regular
file; missing ("N") when the path no longer exists; "ERROR" when it cannot
be examined (no permission).  Sizes and mtimes are compared first: a file
whose size or mtime changed is modified without reading it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable

from shournal.data import CommandView, FileEventView

UP_TO_DATE = "U"
MODIFIED = "M"
MISSING = "N"
ERROR = "ERROR"

STATUS_WORDS = {
    UP_TO_DATE: "up to date",
    MODIFIED: "modified",
    MISSING: "missing",
    ERROR: "error",
}


def file_status(ev: FileEventView, chunk_size: int | None, max_reads: int | None) -> str:
    """The status of the file ``ev`` recorded; ``chunk_size``/``max_reads``
    are the recording command's hash settings (None: it did not hash)."""
    from shournal.hashing import partial_xxh64

    try:
        fd = os.open(ev.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return MISSING
        return ERROR
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return MODIFIED
        if st.st_size != ev.size or st.st_mtime_ns != ev.mtime_ns:
            return MODIFIED
        if chunk_size is None or max_reads is None or ev.hash is None or st.st_size == 0:
            return UP_TO_DATE
        digest = partial_xxh64(fd, st.st_size, chunk_size, max_reads)
        return UP_TO_DATE if digest == ev.hash else MODIFIED
    except OSError:
        return ERROR
    finally:
        os.close(fd)


def stat_commands(commands: Iterable[CommandView]) -> None:
    """Set ``status`` on every loaded file event of ``commands``; a path
    listed several times is examined once per hash setting and content."""
    cache: dict[tuple[bytes, int, int, int | None, int | None, int | None], str] = {}
    for cmd in commands:
        for ev in (*cmd.writes, *cmd.reads):
            key = (ev.path, ev.size, ev.mtime_ns, ev.hash, cmd.hash_chunk_size, cmd.hash_max_reads)
            status = cache.get(key)
            if status is None:
                status = file_status(ev, cmd.hash_chunk_size, cmd.hash_max_reads)
                cache[key] = status
            ev.status = status
