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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from shournal.confined import Confined, ConfinedError, Exists, UnsafePath, mirror
from shournal.data import ArchivedFile, NotArchived, RestoreError, TargetExists

if TYPE_CHECKING:
    from shournal.data import CommandView
    from shournal.journal import Journal

# Permission bits only: a restored script must not come back setuid.
_MODE_MASK = 0o777


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
    journal: Journal,
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
    for item in journal.archived_read_files(c.id for c in commands):
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
    "restore_file",
    "restore_read_files",
]
