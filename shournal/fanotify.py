"""The fanotify interface: constants and event layout from the real headers
(via the cffi extension), and the event parser.

errno from a failed libc call becomes an OSError here and nowhere else.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from shournal._fanotify_cffi import ffi, lib

FAN_CLOSE_WRITE: int = lib.FAN_CLOSE_WRITE
FAN_CLOSE_NOWRITE: int = lib.FAN_CLOSE_NOWRITE
FAN_Q_OVERFLOW: int = lib.FAN_Q_OVERFLOW
FAN_NOFD: int = lib.FAN_NOFD
METADATA_VERSION: int = lib.FANOTIFY_METADATA_VERSION

# struct fanotify_event_metadata: event_len u32, vers u8, reserved u8,
# metadata_len u16, mask u64 (aligned), fd s32, pid s32.
_META = struct.Struct("=IBBHQii")
META_SIZE: int = _META.size
if ffi.sizeof("struct fanotify_event_metadata") != META_SIZE:  # pragma: no cover
    raise ImportError("struct fanotify_event_metadata has an unexpected layout")


class MetadataVersionError(RuntimeError):
    """The kernel speaks a fanotify event format we do not know."""


def iter_events(buf: bytes) -> Iterator[tuple[int, int, int]]:
    """Yield (mask, fd, pid) for every complete event in `buf`.

    A truncated tail or an impossible event_len ends the iteration (the
    kernel never returns partial events; this guards against garbage).
    """
    off, end = 0, len(buf)
    unpack = _META.unpack_from
    while end - off >= META_SIZE:
        ev_len, vers, _res, _mlen, mask, fd, pid = unpack(buf, off)
        if ev_len < META_SIZE or ev_len > end - off:
            return
        if vers != METADATA_VERSION:
            raise MetadataVersionError(f"fanotify metadata version {vers} != {METADATA_VERSION}")
        yield mask, fd, pid
        off += ev_len


def _check(rc: int, syscall: str, path: str | None = None) -> int:
    if rc < 0:
        err = ffi.errno
        raise OSError(err, f"{syscall}: {os.strerror(err)}", path)
    return rc


def fanotify_init(flags: int, event_f_flags: int) -> int:
    return _check(lib.fanotify_init(flags, event_f_flags), "fanotify_init")


def fanotify_mark(fd: int, flags: int, mask: int, path: str) -> int:
    return _check(
        lib.fanotify_mark(fd, flags, mask, -100, path.encode()), "fanotify_mark", path
    )  # -100: AT_FDCWD


def kernel_supports_fanotify() -> bool:
    """Unprivileged fanotify (Linux >= 5.13) tells whether the kernel has it."""
    try:
        fd = fanotify_init(lib.FAN_CLASS_NOTIF | lib.FAN_CLOEXEC, os.O_RDONLY)
    except PermissionError:
        return True  # compiled in, but this kernel wants privilege for any group
    except OSError:
        return False
    os.close(fd)
    return True
