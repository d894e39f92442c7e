"""The SQL of archived contents: the script archive (``content`` joined to
read files) and the apparatus manifests.  Callers outside ``store/`` get
plain tuples and bytes, never statements.  Text SQL over
:class:`shournal.store.connection.Reads`, as :mod:`shournal.store.reader`'s."""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Iterator

from shournal.data import ArchivedFile, NotArchived
from shournal.store.reader import in_list, mode_of

# Not typing.TYPE_CHECKING: the journal's readers import this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from shournal.store.connection import Reads

_IN_BATCH = 200

# (read file id, command id, directory, basename, mode, mtime_ns, content)
ArchivedRow = tuple[int, int, bytes, bytes, int, int, bytes]


def _archived_rows(conn: Reads, where: str, params: dict[str, object]) -> Iterator[ArchivedRow]:
    for r in conn.rows(
        "SELECT read_file.id, read_event.command_id, directory.path, read_file.basename, "
        "read_file.mode, read_file.mtime_ns, content.data FROM read_file "
        "JOIN read_event ON read_event.read_file_id = read_file.id "
        "JOIN directory ON directory.id = read_file.directory_id "
        f"JOIN content ON content.id = read_file.content_id WHERE {where} "
        "ORDER BY read_event.command_id, read_file.id",
        params,
    ):
        yield (r[0], r[1], bytes(r[2]), bytes(r[3]), mode_of(r[4]), r[5], bytes(r[6]))


def archived_of_file(conn: Reads, file_id: int) -> Iterator[ArchivedRow]:
    """Read file ``file_id`` with its archived content, once per command
    that read it (none: no such file, or its content was not archived)."""
    return _archived_rows(conn, "read_file.id = :id", {"id": file_id})


def archived_of_commands(conn: Reads, command_ids: Iterable[int]) -> Iterator[ArchivedRow]:
    """The archived read files of the given commands, by command and id."""
    ids = list(command_ids)
    if not ids:
        return iter(())
    marks, params = in_list("id", ids)
    return _archived_rows(conn, f"read_event.command_id IN ({marks})", params)


# (command id, directory, basename, mode, mtime_ns, size, apparatus manifest)
ApparatusReadRow = tuple[int, bytes, bytes, int, int, int, bytes]


def apparatus_reads_of_file(conn: Reads, file_id: int) -> Iterator[ApparatusReadRow]:
    """Read file ``file_id`` once per command recorded with its apparatus
    that read it, with that command's encoded manifest, oldest first."""
    for r in conn.rows(
        "SELECT read_event.command_id, directory.path, read_file.basename, read_file.mode, "
        "read_file.mtime_ns, read_file.size, apparatus.manifest FROM read_file "
        "JOIN read_event ON read_event.read_file_id = read_file.id "
        "JOIN directory ON directory.id = read_file.directory_id "
        "JOIN apparatus ON apparatus.command_id = read_event.command_id "
        "WHERE read_file.id = :id ORDER BY read_event.command_id",
        {"id": file_id},
    ):
        yield (r[0], bytes(r[1]), bytes(r[2]), mode_of(r[3]), r[4], r[5], bytes(r[6]))


def read_file_exists(conn: Reads, file_id: int) -> bool:
    return conn.first("SELECT id FROM read_file WHERE id = :id", {"id": file_id}) is not None


def content(conn: Reads, content_id: int) -> bytes | None:
    """The script archive's bytes under ``content_id``."""
    row = conn.first("SELECT data FROM content WHERE id = :id", {"id": content_id})
    return None if row is None else bytes(row[0])


def apparatus_manifest(conn: Reads, command_id: int) -> bytes | None:
    """The encoded apparatus manifest of a command (None: recorded without)."""
    row = conn.first("SELECT manifest FROM apparatus WHERE command_id = :id", {"id": command_id})
    return None if row is None else bytes(row[0])


def apparatus_manifests(conn: Reads) -> Iterator[bytes]:
    """Every encoded apparatus manifest in the journal."""
    for (manifest,) in conn.rows("SELECT manifest FROM apparatus"):
        yield bytes(manifest)


def _files(rows: Iterable[tuple[int, int, bytes, bytes, int, int, bytes]]
           ) -> Iterator[ArchivedFile]:
    for file_id, command_id, directory, basename, mode, mtime_ns, data in rows:
        yield ArchivedFile(file_id=file_id, command_id=command_id, path=directory + basename,
                           mode=mode, mtime_ns=mtime_ns, data=data)


def load_archived(conn: Reads, file_id: int) -> ArchivedFile:
    """The archived content of read file ``file_id`` (the id query prints
    for a read event; every command that read that version shows the same
    id): from the script archive, else from the apparatus archive when a
    command recorded with its apparatus read that version.  ``command_id``
    is the first command that read it.  A version read by several commands
    is one read file (one id).

    :raises NotArchived: no such file, or its content was not archived.
    """
    if not 0 <= file_id < 2**63:
        raise NotArchived(f"no file with id {file_id}")
    for found in _files(archived_of_file(conn, file_id)):
        return found
    exists = read_file_exists(conn, file_id)
    apparatus = list(apparatus_reads_of_file(conn, file_id)) if exists else []
    if not exists:
        raise NotArchived(f"no file with id {file_id} in the journal")
    found = _from_apparatus(conn, file_id, apparatus)
    if isinstance(found, ArchivedFile):
        return found
    if found:
        raise NotArchived(f"file {file_id}: its archived content is not readable (not in the "
                          "journal for you, nor in this host's archive)")
    raise NotArchived(f"file {file_id} was recorded but its content was not archived")


def _from_apparatus(conn: Reads, file_id: int,
                    rows: list[ApparatusReadRow]) -> ArchivedFile | bool:
    """The version read file ``file_id`` names, from the apparatus archive:
    a command recorded with its apparatus that read it lists it in its
    manifest (same path, size and mtime) with the digest of its content,
    read from the journal (:mod:`shournal.store.blobs`), else from this
    host's file archive.  Not found: whether a manifest named content
    that could not be read."""
    from shournal.store.archive import Archive, ArchiveError, decode_manifest
    from shournal.store.blobs import read

    archive = Archive()
    named = False
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
            named = True
            data = read(conn, [digest]).get(digest)
            if data is None:
                try:
                    data = archive.get(digest)
                except ArchiveError:
                    continue
            return ArchivedFile(file_id=file_id, command_id=command_id, path=path, mode=mode,
                                mtime_ns=mtime_ns, data=data)
    return named


def archived_read_files(conn: Reads, command_ids: Iterable[int]) -> list[ArchivedFile]:
    """All archived read files of the given commands, by command and id."""
    ids = sorted(set(command_ids))
    found: list[ArchivedFile] = []
    for start in range(0, len(ids), _IN_BATCH):
        found += _files(archived_of_commands(conn, ids[start : start + _IN_BATCH]))
    return found
