"""The apparatus archive: file contents, content-addressed, deduplicated,
compressed, under ``_paths.archive_dir()`` (beside the default journal).

A blob is named by the full-content digest of what it holds
(``hashing.content_digest``, XXH3-128; see there why not SHA-256):
``blobs/<first 2 hex digits>/<32 hex digits>``.  Storing content that is
there already costs one ``stat``: recording the same experiment again
adds only what changed.

Writes are atomic: the blob is written to a file of its own in ``tmp/``
(``O_CREAT | O_EXCL``, a name no one else uses), fsynced, and published
with ``link()``, which never replaces a blob another writer published
first; the temporary name is then removed.  A reader therefore sees a
whole blob or none, and ``get`` checks the digest of what it returns
anyway (a disk error, a hand-edited file), so archived content is never
silently wrong.

Garbage collection (``shournal delete``, :mod:`shournal.store.archive_gc`)
removes blobs no manifest in the journal names any more.  A recorder
finds a blob archived already and names it in a manifest it stores only
later, so it holds ``lock`` shared (:meth:`Archive.hold_for_recording`)
until its listener exits; the collector removes blobs only while it holds
it exclusively.

Blob format: one tag byte, ``Z`` (zlib) or ``R`` (raw: content that zlib
does not shrink, e.g. already compressed data), then the data.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from shournal import _paths
from shournal.hashing import content_digest

_ZLIB = b"Z"
_RAW = b"R"
# zlib level 6 (its default) compresses text ~3-4x; higher levels cost
# much more time for little.
_LEVEL = 6
DIGEST_HEX_LEN = 32


class ArchiveError(Exception):
    """The archive cannot be used, or a blob is missing or damaged."""


class NotInArchive(ArchiveError):
    """The archive has no blob of that digest."""


def check_digest(digest: str) -> str:
    """``digest`` if it is a well-formed hex digest, else ArchiveError
    (digests come from the journal; never let one name another path)."""
    if len(digest) != DIGEST_HEX_LEN or any(c not in "0123456789abcdef" for c in digest):
        raise ArchiveError(f"not a content digest: {digest!r}")
    return digest


def pack(data: bytes) -> bytes:
    """``data`` as a blob: tag byte, then zlib or raw data (the module's
    docstring); the same format in the file archive and in a PostgreSQL
    journal's ``apparatus_blob`` table (:mod:`shournal.store.blobs`)."""
    packed = zlib.compress(data, _LEVEL)
    return _ZLIB + packed if len(packed) < len(data) else _RAW + data


def unpack(blob: bytes, digest: str) -> bytes | None:
    """The content a blob holds, if it is whole and its digest is
    ``digest``; None otherwise (damaged, or not that content)."""
    tag, body = blob[:1], blob[1:]
    try:
        data = zlib.decompress(body) if tag == _ZLIB else body if tag == _RAW else None
    except zlib.error:
        data = None
    if data is None or content_digest(data).hex() != digest:
        return None
    return data


class Contents(Protocol):
    """Where archived content is read by digest: the file archive
    (:class:`Archive`) or a journal's (:class:`shournal.store.blobs.JournalContent`)."""

    def get(self, digest: str) -> bytes: ...

    def has(self, digest: str) -> bool: ...

    def unreadable(self, digests: Iterable[str]) -> list[str]: ...


class Archive:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else _paths.archive_dir()
        self.blobs = self.root / "blobs"
        self.tmp = self.root / "tmp"

    def path_of(self, digest: str) -> Path:
        check_digest(digest)
        return self.blobs / digest[:2] / digest[2:]

    def hold_for_recording(self) -> int | None:
        """Hold the archive shared while a command is recorded with its
        apparatus (released when the fd is closed, at the latest when the
        listener exits, after its record was stored or spooled): the
        open fd, or None when the lock cannot be had (recording goes on;
        a collection then waits for the next deletion)."""
        try:
            _paths.make_private_dir(self.root)
            fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:
            os.close(fd)
            return None
        return fd

    def try_exclusive(self) -> int | None:
        """The archive held exclusively (no recording under way): the open
        fd to close when done, or None when a recorder holds it."""
        try:
            fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ArchiveError(f"cannot lock the archive {self.root}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return fd

    def blob_sizes(self, digests: Iterable[str]) -> dict[str, int]:
        """The stored size of each of ``digests`` that is in the archive."""
        sizes = {}
        for digest in digests:
            try:
                sizes[digest] = self.path_of(digest).stat().st_size
            except (FileNotFoundError, ArchiveError):
                continue
            except OSError as exc:
                raise ArchiveError(f"cannot stat {self.path_of(digest)}: "
                                   f"{exc.strerror}") from None
        return sizes

    def remove(self, digest: str) -> None:
        """Remove the blob of ``digest`` (gone already: nothing to do)."""
        try:
            self.path_of(digest).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ArchiveError(f"cannot remove {self.path_of(digest)}: {exc.strerror}") from None

    def has(self, digest: str) -> bool:
        return self.path_of(digest).exists()

    def unreadable(self, digests: Iterable[str]) -> list[str]:
        """Those of ``digests`` not in the archive (a malformed one neither)."""
        out = []
        for digest in digests:
            try:
                if self.has(digest):
                    continue
            except ArchiveError:
                pass
            out.append(digest)
        return out

    def put(self, data: bytes, digest: str | None = None) -> tuple[str, int]:
        """Store ``data``; return (hex digest, bytes added to the archive:
        0 if it was there already).  ``digest`` may be given when the
        caller computed it already."""
        if digest is None:
            digest = content_digest(data).hex()
        final = self.path_of(digest)
        if final.exists():
            return digest, 0
        blob = pack(data)
        try:
            self._publish(final, blob)
        except OSError as exc:
            raise ArchiveError(f"cannot archive into {self.root}: {exc.strerror}") from None
        return digest, len(blob)

    def _publish(self, final: Path, blob: bytes) -> None:
        if not final.parent.is_dir() or not self.tmp.is_dir():
            for d in (self.root, self.blobs, self.tmp, final.parent):
                _paths.make_private_dir(d)
        tmp = self.tmp / f"{os.getpid()}.{os.urandom(8).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            try:
                view = memoryview(blob)
                while view:
                    view = view[os.write(fd, view):]
                # Only new blobs pay this (an unchanged rerun writes none):
                # a crash must not leave a published blob without its data.
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, final)
            except FileExistsError:
                pass  # another writer published the same content first
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP):
                    raise
                os.rename(tmp, final)  # file systems without hard links
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass

    def get(self, digest: str) -> bytes:
        """The content of ``digest``, checked; ArchiveError if it is not
        there or damaged."""
        return self._checked(digest)[0]

    def packed(self, digest: str) -> bytes:
        """The blob of ``digest`` as stored (its content checked first);
        ArchiveError if it is not there or damaged."""
        return self._checked(digest)[1]

    def _checked(self, digest: str) -> tuple[bytes, bytes]:
        path = self.path_of(digest)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            raise NotInArchive(f"content {digest} is not in the archive {self.root}") from None
        except OSError as exc:
            raise ArchiveError(f"cannot read {path}: {exc.strerror}") from None
        data = unpack(blob, digest)
        if data is None:
            raise ArchiveError(f"archived content {digest} is damaged ({path})")
        return data, blob

    def stored_bytes(self) -> int:
        """Bytes the blobs take (their sizes, not disk blocks)."""
        total = 0
        if not self.blobs.is_dir():
            return 0
        for sub in self.blobs.iterdir():
            for blob in sub.iterdir():
                total += blob.stat().st_size
        return total


# A command's apparatus manifest, as the journal keeps it (command.apparatus):
# zlib-compressed JSON; "format" in it is MANIFEST_FORMAT.
MANIFEST_FORMAT = 1


def encode_manifest(manifest: dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps(manifest, separators=(",", ":")).encode("ascii"))


def decode_manifest(data: bytes) -> dict[str, Any]:
    return json.loads(zlib.decompress(data))


def redact_argv(argv: Any, patterns: Any) -> tuple[Any, dict[str, int]]:
    """A manifest's argv with the secrets in each argument replaced
    (shournal.redact; not a list: as it is)."""
    from shournal import redact

    if not isinstance(argv, list):
        return argv, {}
    counts: dict[str, int] = {}
    out = []
    for arg in argv:
        if isinstance(arg, str):
            arg, found = redact.redact_text(arg, patterns)
            redact.add_counts(counts, found)
        out.append(arg)
    return out, counts


def redact_manifest(
    data: bytes, names: Iterable[str], patterns: Iterable[Any]
) -> tuple[bytes, dict[str, int]]:
    """An encoded manifest with today's rules applied to its environment
    (secret ``names``, ``patterns``) and argv, and what they replaced by
    kind (added to its own ``redacted`` too); unchanged when nothing was
    found (`shournal redact`)."""
    from shournal import redact

    patterns = tuple(patterns)
    man = decode_manifest(data)
    counts: dict[str, int] = {}
    env = man.get("env")
    if isinstance(env, dict):
        new_env, counts = redact.redact_env(env, names, patterns)
    man["argv"], found = redact_argv(man.get("argv"), patterns)
    redact.add_counts(counts, found)
    if not counts:
        return data, {}
    if isinstance(env, dict):
        man["env"] = new_env
    old = man.get("redacted")
    man["redacted"] = redact.add_counts(dict(old) if isinstance(old, dict) else {}, counts)
    return encode_manifest(man), counts


# Index of the digest in a manifest's read/write entry
# ([path, size, mtime_ns, mode, partial hash, digest, reason]).
_DIGEST = 5


def digests_of(manifest: bytes) -> set[str]:
    """Every content digest an encoded manifest names.

    :raises ValueError: it cannot be decoded.
    """
    try:
        data = decode_manifest(manifest)
        entries = [*data.get("reads", []), *data.get("writes", [])]
        return {e[_DIGEST] for e in entries if isinstance(e[_DIGEST], str)}
    except (ValueError, TypeError, IndexError, AttributeError, zlib.error) as exc:
        raise ValueError(f"an apparatus manifest cannot be decoded ({exc})") from None
