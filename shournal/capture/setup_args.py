"""The helper options for a shell's next command line: the preload
library reads them from <rundir>/setup-args (NUL-separated; it cannot read
TOML) and passes them to shournal-suid setup."""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def write_options(cfg, path: Path, apparatus: bool = False) -> None:
    """Write the options ``cfg`` gives the helper (those of a command
    recorded with its apparatus if ``apparatus``) to ``path``."""
    from shournal.config import helper_options

    data = b"".join(os.fsencode(a) + b"\0" for a in helper_options(cfg, apparatus=apparatus))
    write_file(path, data)


def write_file(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, unless it holds it already."""
    try:
        with open(os.open(path, os.O_RDONLY | _NOFOLLOW), "rb") as fh:
            if fh.read() == data:
                return
    except OSError:
        pass
    try:
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    except OSError:
        return
    try:
        with open(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        with suppress(OSError):
            os.unlink(tmp)
