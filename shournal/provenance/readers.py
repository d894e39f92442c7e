"""Every journal access of the provenance package, and nothing else.

The graph walk, the status check and the exporters ask three questions of
the journal, all answered here:

* :meth:`JournalReader.writers_of`: the commands that wrote a given
  content (size + partial hash, with or without the mtime), with the
  written file version;
* :meth:`JournalReader.command`: a command with all the files it read and
  wrote (the :class:`~shournal.query.CommandView` that ``query`` renders);
* :meth:`JournalReader.archived`: the archived content of a read file
  (a script version).

Each is one index lookup per question: writers by the write events'
``(hash, size)`` index (empty files by the partial index of hashless
writes on ``mtime_ns``), then the command, its directory and its hash
setting by primary key; a command's reads by the ``read_event`` key
``(command_id, read_file_id)`` and its writes by ``write_event
(command_id)``.  Swapping the store for another reader of file versions
by content means replacing this module only.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shournal.query import CommandView, FileProbe, probe_file

if TYPE_CHECKING:
    from shournal.store.db import Store


@dataclass(frozen=True, slots=True)
class WrittenVersion:
    """One write event that produced a looked-up content."""

    write_id: int
    command_id: int
    start_time: datetime  # aware, UTC: of the writing command
    end_time: datetime
    path: bytes  # where the command wrote it
    size: int
    mtime_ns: int
    hash: int | None
    hash_chunk_size: int | None  # the writing command's hash settings
    hash_max_reads: int | None


@functools.cache
def _writers_stmt(empty: bool) -> Any:
    """The content lookup of :meth:`JournalReader.writers_of`, built once
    (a lineage runs it once per file version)."""
    from sqlalchemy import and_, bindparam, func, literal_column, or_, select

    from shournal.store import models as m

    w, c = m.WriteEvent, m.Command
    if empty:
        # Empty files have no hash: the partial index of hashless writes
        # (its condition spelled literally so that both backends use it).
        match = and_(
            func.length(w.hash) == literal_column("0"),
            w.size == 0,
            w.mtime_ns == bindparam("mtime"),
        )
    else:
        # Any of the hashes (b"" among them: stored with hashing off, then
        # only with the same mtime); the (hash, size) index.
        match = and_(
            w.hash.in_(bindparam("hashes", expanding=True)),
            w.size == bindparam("size"),
            or_(func.length(w.hash) > 0, w.mtime_ns == bindparam("mtime")),
        )
    return (
        select(
            w.id, w.command_id, c.start_time, c.end_time, m.Directory.path, w.basename,
            w.size, w.mtime_ns, w.hash, m.HashSetting.chunk_size, m.HashSetting.max_reads,
        )  # fmt: skip
        .join(c, c.id == w.command_id)
        .join(m.Directory, m.Directory.id == w.directory_id)
        .outerjoin(m.HashSetting, m.HashSetting.id == c.hash_setting_id)
        .where(match)
        .order_by(c.end_time.desc(), c.id.desc(), w.id.desc())
    )


class JournalReader:
    """Read access to one journal for the provenance walks; caches the
    commands it loaded (a lineage asks for each command once or twice).

    Every method raises :class:`shournal.store.StoreError` when the journal
    cannot be read."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._commands: dict[int, CommandView | None] = {}
        self._settings: list[tuple[int, int]] | None = None

    def hash_settings(self) -> list[tuple[int, int]]:
        """Every (chunk size, max reads) the journal has hashed with."""
        from shournal.store import reader

        if self._settings is None:
            with self._store.reading() as conn:
                self._settings = reader.hash_settings(conn)
        return self._settings

    def probe(self, path: str | bytes) -> FileProbe:
        """A file on disk as the journal identifies content: its size, mtime
        and its partial hash under every hash setting in the journal.

        :raises shournal.query.QueryFileError: it cannot be read."""
        import os

        return probe_file(os.fsdecode(path), self.hash_settings())

    def writers_of(self, size: int, mtime_ns: int, hashes: Iterable[int]) -> list[WrittenVersion]:
        """Every write event of this content: ``size`` and one of ``hashes``
        (any mtime), or a write stored without a hash (hashing off, empty
        file) of this size and ``mtime_ns``.  The caller picks among them
        (preferring the mtime match, as ``--wfile`` does); newest end first.
        """
        from shournal.store import models as m

        if size == 0:
            params: dict[str, object] = {"mtime": mtime_ns}
        else:
            wanted = [m.hash_to_bytes(h) for h in sorted(set(hashes))]
            params = {"hashes": [*wanted, b""], "size": size, "mtime": mtime_ns}
        stmt = _writers_stmt(size == 0)
        with self._store.reading() as conn:
            rows = conn.execute(stmt, params).all()
        return [
            WrittenVersion(
                write_id=r[0],
                command_id=r[1],
                start_time=r[2],
                end_time=r[3],
                path=bytes(r[4]) + bytes(r[5]),
                size=r[6],
                mtime_ns=r[7],
                hash=m.hash_from_bytes(bytes(r[8])),
                hash_chunk_size=r[9],
                hash_max_reads=r[10],
            )
            for r in rows
        ]

    def command(self, command_id: int) -> CommandView | None:
        """The command with all its read and written files (None: no such
        command), as ``query`` loads it."""
        if command_id not in self._commands:
            from shournal.criteria import Condition
            from shournal.query import Criteria
            from shournal.store import reader

            with self._store.reading() as conn:
                found = reader.select_commands(
                    conn,
                    probes=(),
                    criteria=Criteria(command_id=Condition("eq", command_id)),
                    history=None,
                    limit=None,
                    max_files=None,
                )
            self._commands[command_id] = found[0] if found else None
        return self._commands[command_id]

    def archived(self, file_id: int) -> bytes:
        """The archived content of read file ``file_id``.

        :raises shournal.restore.NotArchived: no content was archived."""
        from shournal.restore import load_archived

        return load_archived(self._store, file_id).data
