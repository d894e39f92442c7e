"""The SQL of archived contents: the script archive (``content`` joined to
read files) and the apparatus manifests.  Callers outside ``store/`` get
plain tuples and bytes, never statements."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlalchemy import Connection, select

from shournal.store import models as m

# (read file id, command id, directory, basename, mode, mtime_ns, content)
ArchivedRow = tuple[int, int, bytes, bytes, int, int, bytes]


def _archived_rows(conn: Connection, where: object) -> Iterator[ArchivedRow]:
    rf, re_ = m.ReadFile, m.ReadEvent
    stmt = (
        select(rf.id, re_.command_id, m.Directory.path, rf.basename, rf.mode, rf.mtime_ns,
               m.Content.data)
        .join(re_, re_.read_file_id == rf.id)
        .join(m.Directory, m.Directory.id == rf.directory_id)
        .join(m.Content, m.Content.id == rf.content_id)
        .where(where)  # type: ignore[arg-type]
        .order_by(re_.command_id, rf.id)
    )
    for r in conn.execute(stmt):
        yield (r[0], r[1], bytes(r[2]), bytes(r[3]), r[4], r[5], bytes(r[6]))


def archived_of_file(conn: Connection, file_id: int) -> Iterator[ArchivedRow]:
    """Read file ``file_id`` with its archived content, once per command
    that read it (none: no such file, or its content was not archived)."""
    return _archived_rows(conn, m.ReadFile.id == file_id)


def archived_of_commands(conn: Connection, command_ids: Iterable[int]) -> Iterator[ArchivedRow]:
    """The archived read files of the given commands, by command and id."""
    return _archived_rows(conn, m.ReadEvent.command_id.in_(list(command_ids)))


# (command id, directory, basename, mode, mtime_ns, size, apparatus manifest)
ApparatusReadRow = tuple[int, bytes, bytes, int, int, int, bytes]


def apparatus_reads_of_file(conn: Connection, file_id: int) -> Iterator[ApparatusReadRow]:
    """Read file ``file_id`` once per command recorded with its apparatus
    that read it, with that command's encoded manifest, oldest first."""
    rf, re_ = m.ReadFile, m.ReadEvent
    stmt = (
        select(re_.command_id, m.Directory.path, rf.basename, rf.mode, rf.mtime_ns, rf.size,
               m.Apparatus.manifest)
        .join(re_, re_.read_file_id == rf.id)
        .join(m.Directory, m.Directory.id == rf.directory_id)
        .join(m.Apparatus, m.Apparatus.command_id == re_.command_id)
        .where(rf.id == file_id)
        .order_by(re_.command_id)
    )
    for r in conn.execute(stmt):
        yield (r[0], bytes(r[1]), bytes(r[2]), r[3], r[4], r[5], bytes(r[6]))


def read_file_exists(conn: Connection, file_id: int) -> bool:
    return conn.execute(select(m.ReadFile.id).where(m.ReadFile.id == file_id)).first() is not None


def content(conn: Connection, content_id: int) -> bytes | None:
    """The script archive's bytes under ``content_id``."""
    row = conn.execute(select(m.Content.data).where(m.Content.id == content_id)).first()
    return None if row is None else bytes(row[0])


def apparatus_manifest(conn: Connection, command_id: int) -> bytes | None:
    """The encoded apparatus manifest of a command (None: recorded without)."""
    row = conn.execute(
        select(m.Apparatus.manifest).where(m.Apparatus.command_id == command_id)
    ).scalar_one_or_none()
    return None if row is None else bytes(row)


def apparatus_manifests(conn: Connection) -> Iterator[bytes]:
    """Every encoded apparatus manifest in the journal."""
    for (manifest,) in conn.execute(select(m.Apparatus.manifest)):
        yield bytes(manifest)
