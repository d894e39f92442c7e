"""Restoring archived read files (scripts) from the journal: the library
behind ``shournal restore`` and ``shournal query --restore-rfiles``.

Stored paths are data, possibly from a shared PostgreSQL journal that
others write to, so they are never trusted (:mod:`shournal.confined`):
a path that is not absolute and normalised is skipped, every component is
created or opened relative to its parent directory's fd with O_NOFOLLOW,
and existing files are replaced only on request, by renaming a new file
over them (which replaces a symlink, never its target).
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from shournal.confined import Confined, ConfinedError, Exists, UnsafePath, mirror

if TYPE_CHECKING:
    from shournal.data import CommandView
    from shournal.store import archived
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
    id): from the script archive, else from the apparatus archive when a
    command recorded with its apparatus read that version.  ``command_id``
    is the first command that read it.  A version read by several commands
    is one read file (one id).

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
        apparatus = list(archived.apparatus_reads_of_file(conn, file_id)) if exists else []
    if not exists:
        raise NotArchived(f"no file with id {file_id} in the journal")
    found = _from_apparatus(file_id, apparatus)
    if found is not None:
        return found
    raise NotArchived(f"file {file_id} was recorded but its content was not archived")


def _from_apparatus(file_id: int, rows: list[archived.ApparatusReadRow]) -> ArchivedFile | None:
    """The version read file ``file_id`` names, from the apparatus archive:
    a command recorded with its apparatus that read it lists it in its
    manifest (same path, size and mtime) with the digest of its content."""
    from shournal.reproduce.archive import Archive, ArchiveError, decode_manifest

    archive = Archive()
    for command_id, directory, basename, mode, mtime_ns, size, raw in rows:
        path = directory + basename
        try:
            manifest = decode_manifest(raw)
            entries = manifest["reads"]
        except (ValueError, KeyError, TypeError, zlib.error):
            continue  # a damaged or foreign manifest names nothing
        for entry in entries:
            if not (isinstance(entry, list) and len(entry) == 7):
                continue
            epath, esize, emtime, _emode, _hash, digest, _why = entry
            if (not isinstance(epath, str) or os.fsencode(epath) != path or esize != size
                    or emtime != mtime_ns or not isinstance(digest, str)):
                continue
            try:
                data = archive.get(digest)
            except ArchiveError:
                continue
            return ArchivedFile(file_id=file_id, command_id=command_id, path=path, mode=mode,
                                mtime_ns=mtime_ns, data=data)
    return None


def archived_read_files(store: Store, command_ids: Iterable[int]) -> Iterator[ArchivedFile]:
    """All archived read files of the given commands, by command and id."""
    from shournal.store import archived

    ids = sorted(set(command_ids))
    for start in range(0, len(ids), _IN_BATCH):
        with store.reading() as conn:
            rows = list(archived.archived_of_commands(conn, ids[start : start + _IN_BATCH]))
        yield from _files(rows)


# -- writing files safely (shournal.confined) ------------------------------------


def _write(conf: Confined, rel: str, item: ArchivedFile, overwrite: bool) -> Path:
    """Write ``item`` as ``rel`` below ``conf`` with its mode and mtime."""
    try:
        conf.write(rel, item.data, item.mode & _MODE_MASK, replace=overwrite,
                   mtime_ns=item.mtime_ns)
    except Exists as e:
        raise TargetExists(e.shown) from None
    except (ConfinedError, UnsafePath) as e:
        raise RestoreError(str(e)) from None
    return conf.shown(rel)


def restore_file(item: ArchivedFile, target: Path, *, overwrite: bool = False) -> RestoredFile:
    """Write one archived file to ``target`` (a file path whose directory
    exists) with its original permission bits and mtime.

    :raises TargetExists: ``target`` exists and ``overwrite`` is false.
    :raises RestoreError: it cannot be written.
    """
    name = os.fsencode(target.name)
    if name in (b"", b".", b".."):
        raise RestoreError(f"invalid target file name {target}")
    try:
        conf = Confined(target.parent)
    except ConfinedError as e:
        raise RestoreError(str(e)) from None
    with conf:
        _write(conf, target.name, item, overwrite)
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
    plan: dict[str, ArchivedFile] = {}
    for item in archived_read_files(store, (c.id for c in commands)):
        try:
            rel = f"command-{item.command_id}/{mirror(os.fsdecode(item.path))}"
        except UnsafePath as e:
            result.skipped.append((item.command_id, item.path, str(e)))
            continue
        if rel.endswith("/"):
            result.skipped.append((item.command_id, item.path, "no file name"))
            continue
        plan[rel] = item
    if not plan:
        return result

    try:
        conf = Confined(dest, create=True)
    except ConfinedError as e:
        raise RestoreError(str(e)) from None
    with conf:
        if not overwrite:
            for rel in plan:
                if _target_exists(conf, rel):
                    raise TargetExists(conf.shown(rel))
        for rel, item in plan.items():
            shown = _write(conf, rel, item, overwrite)
            result.restored.append(RestoredFile(item.file_id, item.command_id, item.path, shown))
    return result


def _target_exists(conf: Confined, rel: str) -> bool:
    """Whether the file ``rel`` below ``conf`` exists (directories that do
    not exist yet mean it does not).

    :raises RestoreError: a directory on the way is a symlink or a file.
    """
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        st = conf.lstat("/".join(parts[:i]))
        if st is None:
            return False
        if i < len(parts) and not stat.S_ISDIR(st.st_mode):
            raise RestoreError(f"{conf.shown('/'.join(parts[:i]))} exists and is not a "
                               "directory (or is a symlink)")
    return True


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
