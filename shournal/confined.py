"""Recorded paths are data, and what shournal writes for them stays below
one directory.

A journal is input from outside (a shared PostgreSQL journal, a
colleague's copy sent for review), so a path it names is checked by
:func:`recorded_path` before it names anything on disk: absolute and
normalised, or refused.  Replay, rerun, restore, ``describe`` and
``recombine`` then create, write and read everything under their output
directory through :class:`Confined`: a directory fd walked one component at
a time with ``O_NOFOLLOW``, so neither a ``..`` nor a symlink planted
inside the directory (before or while it is written) leads out of it.
Standard library only: this module sits below the reproduce, restore and
rereso layers that use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(ValueError):
    """A recorded path that is not absolute and normalised (the reason)."""


def _reason(path: str) -> str | None:
    if "\0" in path:
        return "contains a NUL byte"
    if not path.startswith("/"):
        return "is not absolute"
    if path == "/":
        return None
    for part in path[1:].split("/"):
        if part in ("", ".", ".."):
            shown = "an empty component" if part == "" else f"'{part}'"
            return f"contains {shown}"
    return None


def recorded_path(path: str | bytes) -> str:
    """``path`` (as text) when it is absolute and normalised: no ``.``,
    ``..`` or empty component, no NUL.

    :raises UnsafePath: it is not (the reason, one line).
    """
    text = os.fsdecode(path)
    why = _reason(text)
    if why is not None:
        raise UnsafePath(why)
    return text


def refusal(what: str, path: str | bytes, why: UnsafePath) -> str:
    """The one line that refuses a recorded path: ``what`` names where it
    was recorded (``command 12``)."""
    return f"{what} names the path {os.fsdecode(path)!r}, which {why}: nothing was written"


def mirror(path: str) -> str:
    """The relative path below an output directory that stands for the
    recorded absolute ``path`` (``/a/b`` -> ``a/b``; ``/`` -> ``""``, the
    directory itself).  :raises UnsafePath: ``path`` is not normalised."""
    return recorded_path(path)[1:]


def _parts(rel: str | bytes) -> list[str]:
    text = os.fsdecode(rel)
    if text in ("", "."):
        return []
    if text.startswith("/") or _reason("/" + text) is not None:
        raise UnsafePath(f"{text!r} is not a normalised relative path")
    return text.split("/")


class ConfinedError(Exception):
    """Writing below the directory failed (one line naming the path)."""


class Exists(ConfinedError):
    """The file exists and replacing it was not asked for."""

    def __init__(self, shown: Path) -> None:
        super().__init__(f"{shown} exists")
        self.shown = shown


def _why(e: OSError) -> str:
    return e.strerror or str(e)


class Confined:
    """A directory that writes below it cannot leave.

    ``root`` itself is the user's choice (it may be a symlink); below it,
    every component is opened relative to its parent's fd without following
    a symlink, and ``.``/``..`` are refused.  Paths given to the methods are
    relative to ``root`` (see :func:`mirror` for a recorded absolute path).
    """

    def __init__(self, root: Path | str, *, create: bool = False) -> None:
        self.root = Path(root)
        try:
            if create:
                self.root.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise ConfinedError(f"cannot use directory {self.root}: {_why(e)}") from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Confined:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def shown(self, rel: str | bytes) -> Path:
        """The path a message names."""
        return self.root.joinpath(*_parts(rel))

    def _dir(self, parts: list[str], create: bool, mode: int = 0o777) -> int:
        """An fd of the directory ``parts`` (created if asked)."""
        fd = os.dup(self.fd)
        try:
            for i, part in enumerate(parts):
                if create:
                    try:
                        os.mkdir(part, mode, dir_fd=fd)
                    except FileExistsError:
                        pass
                    except OSError as e:
                        shown = self.root.joinpath(*parts[: i + 1])
                        raise ConfinedError(f"cannot create {shown}: {_why(e)}") from None
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    shown = self.root.joinpath(*parts[: i + 1])
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise ConfinedError(
                            f"{shown} exists and is not a directory (or is a symlink)") from None
                    raise ConfinedError(f"cannot open directory {shown}: {_why(e)}") from None
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def directory(self, rel: str | bytes, *, create: bool = False) -> Iterator[int]:
        """The fd of directory ``rel`` below the root, closed after."""
        fd = self._dir(_parts(rel), create)
        try:
            yield fd
        finally:
            os.close(fd)

    def mkdirs(self, rel: str | bytes, mode: int = 0o777) -> None:
        """Create directory ``rel`` and its missing parents (``mode`` as
        ``mkdir``'s, under the umask)."""
        os.close(self._dir(_parts(rel), True, mode))

    def _split(self, rel: str | bytes) -> tuple[list[str], str]:
        parts = _parts(rel)
        if not parts:
            raise UnsafePath("no file name")
        return parts[:-1], parts[-1]

    def open(self, rel: str | bytes, flags: int, mode: int = 0o600, *,
             parents: bool = True) -> int:
        """``os.open`` of ``rel`` (its last component not followed if a
        symlink; missing directories created when ``parents``)."""
        dirs, name = self._split(rel)
        with self.directory("/".join(dirs), create=parents) as dfd:
            try:
                return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
            except FileExistsError:
                raise Exists(self.shown(rel)) from None
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise ConfinedError(f"{self.shown(rel)} is a symlink") from None
                raise ConfinedError(f"cannot open {self.shown(rel)}: {_why(e)}") from None

    def write(self, rel: str | bytes, data: bytes, mode: int = 0o644, *,
              replace: bool = False, mtime_ns: int | None = None) -> None:
        """Create file ``rel`` holding ``data`` with permission bits ``mode``
        (never setuid) and, if given, mtime ``mtime_ns``.  An existing file
        is :class:`Exists`, unless ``replace``: then a new file is renamed
        over it (which replaces a symlink, never its target)."""
        dirs, name = self._split(rel)
        shown = self.shown(rel)
        with self.directory("/".join(dirs), create=True) as dfd:
            target = name
            if replace:
                target = f".shournal-{os.getpid()}-{os.urandom(6).hex()}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(target, flags, 0o600, dir_fd=dfd)
            except FileExistsError:
                raise Exists(shown) from None
            except OSError as e:
                raise ConfinedError(f"cannot create {shown}: {_why(e)}") from None
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fchmod(fd, mode & 0o777)
                    if mtime_ns is not None:
                        os.utime(fd, ns=(mtime_ns, mtime_ns))
                finally:
                    os.close(fd)
                if replace:
                    if stat.S_ISDIR(self._lmode(dfd, name)):
                        raise ConfinedError(f"{shown} exists and is a directory")
                    os.rename(target, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException as e:
                with contextlib.suppress(OSError):
                    os.unlink(target, dir_fd=dfd)
                if isinstance(e, OSError):
                    raise ConfinedError(f"cannot write {shown}: {_why(e)}") from None
                raise

    @staticmethod
    def _lmode(dfd: int, name: str) -> int:
        try:
            return os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return 0

    def lstat(self, rel: str | bytes) -> os.stat_result | None:
        """``rel``'s own status (a symlink's, not its target's); None when
        it or a directory on the way is missing, or the way is not a plain
        directory."""
        dirs, name = self._split(rel)
        try:
            with self.directory("/".join(dirs)) as dfd:
                return os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except ConfinedError:
            return None
        except FileNotFoundError:
            return None

    def read(self, rel: str | bytes) -> bytes | None:
        """The content of the regular file ``rel``, or None when it is
        missing or anything else (a symlink, a FIFO, a directory)."""
        dirs, name = self._split(rel)
        try:
            with self.directory("/".join(dirs)) as dfd:
                return read_regular_at(dfd, name)
        except ConfinedError:
            return None

    def unlink(self, rel: str | bytes) -> None:
        dirs, name = self._split(rel)
        with self.directory("/".join(dirs)) as dfd:
            os.unlink(name, dir_fd=dfd)

    def symlink(self, target: str, rel: str | bytes) -> None:
        """Create the symlink ``rel`` -> ``target`` (its text is not
        followed here; nothing is written through it)."""
        dirs, name = self._split(rel)
        with self.directory("/".join(dirs), create=True) as dfd:
            try:
                os.symlink(target, name, dir_fd=dfd)
            except OSError as e:
                raise ConfinedError(f"cannot create {self.shown(rel)}: {_why(e)}") from None

    def files(self, rel: str | bytes = "") -> Iterator[tuple[str, os.stat_result, int, str]]:
        """Every regular file below directory ``rel`` (symlinks, FIFOs and
        the like skipped, symlinked directories not entered), in sorted
        order: (path relative to the root, its status, the fd of its
        directory, its name there).  Nothing when ``rel`` is missing."""
        base = _parts(rel)
        try:
            top = self._dir(base, False)
        except ConfinedError:
            return
        try:
            for dirpath, dirnames, filenames, dfd in os.fwalk(".", dir_fd=top,
                                                              follow_symlinks=False):
                dirnames.sort()
                for name in sorted(filenames):
                    try:
                        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    except OSError:
                        continue
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    sub = [p for p in dirpath.split("/") if p not in ("", ".")]
                    yield "/".join([*base, *sub, name]), st, dfd, name
        finally:
            os.close(top)


def read_regular_at(dfd: int, name: str) -> bytes | None:
    """The content of regular file ``name`` in directory ``dfd``, never
    through a symlink and never blocking on a FIFO; None otherwise."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dfd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def remove_tree_at(dfd: int, name: str) -> None:
    """Remove ``name`` in directory ``dfd`` and everything below it,
    never through a symlink; directories a run left without write
    permission are made writable first.  Gone already: nothing to do."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dfd)
        return
    fd = os.open(name, _DIR_FLAGS, dir_fd=dfd)
    try:
        os.fchmod(fd, 0o700)
        for entry in os.scandir(fd):
            remove_tree_at(fd, entry.name)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dfd)


def remove_tree(path: Path) -> bool:
    """Remove the directory ``path`` and everything below it (see
    :func:`remove_tree_at`); False when some of it could not be removed."""
    parent, name = os.path.split(os.path.abspath(path))
    try:
        dfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        remove_tree_at(dfd, name)
    except (OSError, RecursionError):
        return False
    finally:
        os.close(dfd)
    return True
