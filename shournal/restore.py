"""Restoring archived read files (scripts) from the journal: the library
behind ``shournal restore`` and ``shournal query --restore-rfiles``.

Stored paths are data, possibly from a shared PostgreSQL journal that
others write to, so they are never trusted: every component is created or
opened relative to its parent directory's fd with O_NOFOLLOW, ``.``,
``..`` and empty components are refused, and existing files are replaced
only on request, by renaming a new file over them (which replaces a
symlink, never its target).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shournal.data import CommandView
    from shournal.store.db import Store

# Permission bits only: a restored script must not come back setuid.
_MODE_MASK = 0o777

_IN_BATCH = 200


class RestoreError(Exception):
    """Restoring cannot proceed (one-line message); nothing was written."""


class NotArchived(RestoreError):
    """No archived content for the given file id."""


class TargetExists(RestoreError):
    """The target exists and overwriting was not requested."""

    def __init__(self, target: Path) -> None:
        super().__init__(f"{target} exists (use --force to overwrite)")
        self.target = target


@dataclass(frozen=True, slots=True)
class ArchivedFile:
    """One archived read file of one command."""

    file_id: int  # the read file's id, as printed after "id" by query
    command_id: int
    path: bytes  # original absolute path
    mode: int
    mtime_ns: int
    data: bytes

    @property
    def name(self) -> bytes:
        return self.path.rsplit(b"/", 1)[-1]


@dataclass(frozen=True, slots=True)
class RestoredFile:
    file_id: int
    command_id: int
    source: bytes  # original path
    target: Path


@dataclass(slots=True)
class RestoreResult:
    dest: Path
    restored: list[RestoredFile] = field(default_factory=list)
    # (command id, original path, reason): stored paths that cannot be
    # restored safely.
    skipped: list[tuple[int, bytes, str]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.restored)


# -- reading the archive ------------------------------------------------------------


def _files(rows: Iterable[tuple[int, int, bytes, bytes, int, int, bytes]]
           ) -> Iterator[ArchivedFile]:
    for file_id, command_id, directory, basename, mode, mtime_ns, data in rows:
        yield ArchivedFile(file_id=file_id, command_id=command_id, path=directory + basename,
                           mode=mode, mtime_ns=mtime_ns, data=data)


def load_archived(store: Store, file_id: int) -> ArchivedFile:
    """The archived content of read file ``file_id`` (the id query prints
    for a read event; every command that read that version shows the same
    id).  ``command_id`` is the first command that read it.  A version read
    by several commands is one read file (one id).

    :raises NotArchived: no such file, or its content was not archived.
    :raises shournal.store.StoreError: the journal cannot be read.
    """
    from shournal.store import archived

    if not 0 <= file_id < 2**63:
        raise NotArchived(f"no file with id {file_id}")
    with store.reading() as conn:
        for found in _files(archived.archived_of_file(conn, file_id)):
            return found
        exists = archived.read_file_exists(conn, file_id)
    if not exists:
        raise NotArchived(f"no file with id {file_id} in the journal")
    raise NotArchived(f"file {file_id} was recorded but its content was not archived")


def archived_read_files(store: Store, command_ids: Iterable[int]) -> Iterator[ArchivedFile]:
    """All archived read files of the given commands, by command and id."""
    from shournal.store import archived

    ids = sorted(set(command_ids))
    for start in range(0, len(ids), _IN_BATCH):
        with store.reading() as conn:
            rows = list(archived.archived_of_commands(conn, ids[start : start + _IN_BATCH]))
        yield from _files(rows)


# -- writing files safely -----------------------------------------------------------


def _safe_components(path: bytes) -> list[bytes]:
    """The components of a stored absolute path, refusing anything that
    could leave the restore directory."""
    if not path.startswith(b"/"):
        raise ValueError("not an absolute path")
    parts = [p for p in path.split(b"/") if p]
    if not parts:
        raise ValueError("no file name")
    for part in parts:
        if part in (b".", b".."):
            raise ValueError(f"contains {part.decode()!r}")
        if b"\0" in part:
            raise ValueError("contains a NUL byte")
    return parts


def _open_dir(parent_fd: int, name: bytes, create: bool) -> int:
    """Open (creating if asked) directory ``name`` below ``parent_fd``
    without following a symlink."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=parent_fd)
    try:
        return os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd
        )
    except OSError as e:
        shown = os.fsdecode(name)
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise RestoreError(f"{shown} exists and is not a directory (or is a symlink)") from None
        raise RestoreError(f"cannot open directory {shown}: {e.strerror}") from None


def _open_root(dest: Path) -> int:
    """``dest`` itself is the user's choice: it may be a symlink."""
    try:
        dest.mkdir(parents=True, exist_ok=True)
        return os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise RestoreError(f"cannot use {dest} as restore directory: {e.strerror}") from None


def _exists(dir_fd: int, name: bytes) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _write_file(dir_fd: int, name: bytes, item: ArchivedFile, overwrite: bool, shown: Path) -> None:
    """Write ``item`` as ``name`` in ``dir_fd`` with its mode and mtime."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    target = name
    if overwrite:
        # A fresh file renamed over the old one: never writes through a
        # symlink or into a file someone else holds open.
        target = b".shournal-restore-%d-%d.tmp" % (os.getpid(), item.file_id)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target, dir_fd=dir_fd)
    try:
        fd = os.open(target, flags, 0o600, dir_fd=dir_fd)
    except FileExistsError:
        raise TargetExists(shown) from None
    except OSError as e:
        raise RestoreError(f"cannot create {shown}: {e.strerror}") from None
    try:
        try:
            view = memoryview(item.data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, item.mode & _MODE_MASK)
            os.utime(fd, ns=(item.mtime_ns, item.mtime_ns))
        finally:
            os.close(fd)
        if overwrite:
            if stat.S_ISDIR(_lstat_mode(dir_fd, name)):
                raise RestoreError(f"{shown} exists and is a directory")
            os.rename(target, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(target, dir_fd=dir_fd)
        if isinstance(e, OSError):
            raise RestoreError(f"cannot write {shown}: {e.strerror}") from None
        raise


def _lstat_mode(dir_fd: int, name: bytes) -> int:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return 0


def restore_file(item: ArchivedFile, target: Path, *, overwrite: bool = False) -> RestoredFile:
    """Write one archived file to ``target`` (a file path whose directory
    exists) with its original permission bits and mtime.

    :raises TargetExists: ``target`` exists and ``overwrite`` is false.
    :raises RestoreError: it cannot be written.
    """
    name = os.fsencode(target.name)
    if name in (b"", b".", b".."):
        raise RestoreError(f"invalid target file name {target}")
    parent = target.parent
    try:
        dir_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise RestoreError(f"cannot use directory {parent}: {e.strerror}") from None
    try:
        _write_file(dir_fd, name, item, overwrite, target)
    finally:
        os.close(dir_fd)
    return RestoredFile(item.file_id, item.command_id, item.path, target)


def restore_read_files(
    store: Store,
    commands: Iterable[CommandView],
    dest: Path,
    *,
    overwrite: bool = False,
) -> RestoreResult:
    """Restore the archived read files of every given command into
    ``dest/command-<id>/<original absolute path>`` with their original
    permission bits and mtime.

    The commands' own read lists are not used (they may be cut short for
    display): every archived read file of each command is restored; when
    a command read two versions of one path, the later one wins.  Paths
    that could leave ``dest`` are skipped and reported.  Unless
    ``overwrite``, an existing target stops the restore before anything is
    written.

    :raises TargetExists: a target exists and ``overwrite`` is false.
    :raises RestoreError: ``dest`` or a directory below it cannot be used.
    :raises shournal.store.StoreError: the journal cannot be read.
    """
    result = RestoreResult(dest=dest)
    # Latest version per (command, path); order of first appearance kept.
    plan: dict[tuple[int, bytes], tuple[ArchivedFile, list[bytes]]] = {}
    for item in archived_read_files(store, (c.id for c in commands)):
        try:
            parts = _safe_components(item.path)
        except ValueError as e:
            result.skipped.append((item.command_id, item.path, str(e)))
            continue
        parts = [b"command-%d" % item.command_id, *parts]
        plan[(item.command_id, b"/".join(parts))] = (item, parts)
    if not plan:
        return result

    root_fd = _open_root(dest)
    try:
        if not overwrite:
            for _item, parts in plan.values():
                if _target_exists(root_fd, parts):
                    raise TargetExists(dest.joinpath(*map(os.fsdecode, parts)))
        for item, parts in plan.values():
            shown = dest.joinpath(*map(os.fsdecode, parts))
            fd = os.dup(root_fd)
            try:
                for part in parts[:-1]:
                    child = _open_dir(fd, part, create=True)
                    os.close(fd)
                    fd = child
                _write_file(fd, parts[-1], item, overwrite, shown)
            finally:
                os.close(fd)
            result.restored.append(RestoredFile(item.file_id, item.command_id, item.path, shown))
    finally:
        os.close(root_fd)
    return result


def _target_exists(root_fd: int, parts: list[bytes]) -> bool:
    """Whether the file at ``parts`` below ``root_fd`` exists (directories
    that do not exist yet mean it does not)."""
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            if not _exists(fd, part):
                return False
            child = _open_dir(fd, part, create=False)
            os.close(fd)
            fd = child
        return _exists(fd, parts[-1])
    finally:
        os.close(fd)


__all__ = [
    "ArchivedFile",
    "NotArchived",
    "RestoreError",
    "RestoreResult",
    "RestoredFile",
    "TargetExists",
    "archived_read_files",
    "load_archived",
    "restore_file",
    "restore_read_files",
]
