"""Every journal access of the provenance package, and nothing else: all
of it through :class:`shournal.Journal` (no SQL here).

The graph walk, the status check and the exporters ask three questions of
the journal:

* :meth:`JournalReader.writers_of`: the commands that wrote a given
  content (size + partial hash, with or without the mtime), with the
  written file version (:meth:`shournal.Journal.written_versions`, one
  index lookup), and :meth:`JournalReader.writers_of_many` for a whole
  level of the lineage in one statement;
* :meth:`JournalReader.commands`: commands with all the files they read
  and wrote (the :class:`~shournal.data.CommandView` that ``query``
  renders), a whole level of the lineage in one batch
  (:meth:`shournal.Journal.commands`);
* :meth:`JournalReader.archived`: the archived content of a read file
  (a script version).
"""

from __future__ import annotations

import os

from shournal.data import CommandView, FileProbe, WrittenVersion

# Not typing.TYPE_CHECKING: typing costs `shournal lineage` its start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from contextlib import AbstractContextManager
    from typing import Any

    from shournal.journal import Journal

__all__ = ["JournalReader", "WrittenVersion"]


class JournalReader:
    """Read access to one journal for the provenance walks; caches the
    commands it loaded (a lineage asks for each command once or twice).

    Every method raises :class:`shournal.store.StoreError` when the journal
    cannot be read."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._commands: dict[int, CommandView | None] = {}

    def snapshot(self) -> AbstractContextManager[Any]:
        """One consistent state of the journal for a whole walk
        (:meth:`shournal.Journal.snapshot`)."""
        return self.journal.snapshot()

    def hash_settings(self) -> list[tuple[int, int]]:
        """Every (chunk size, max reads) the journal has hashed with."""
        return self.journal.hash_settings()

    def probe(self, path: str | bytes) -> FileProbe:
        """A file on disk as the journal identifies content.

        :raises shournal.data.QueryFileError: it cannot be read."""
        return self.journal.probe(os.fsdecode(path))

    def writers_of(self, size: int, mtime_ns: int, hashes: Iterable[int]) -> list[WrittenVersion]:
        """Every write event of this content (see
        :meth:`shournal.Journal.written_versions`); the caller picks among
        them.  Newest end first."""
        return self.journal.written_versions(size, mtime_ns, hashes)

    def writers_of_many(
        self, contents: list[tuple[int, int, Iterable[int]]]
    ) -> list[list[WrittenVersion]]:
        """:meth:`writers_of` of each (size, mtime_ns, hashes), in that
        order; a whole level of the lineage in one statement
        (:meth:`shournal.Journal.written_versions_many`)."""
        return self.journal.written_versions_many(contents)

    def commands(self, command_ids: Iterable[int]) -> dict[int, CommandView]:
        """The commands with their read and written files (missing ids left
        out); the ones not loaded yet in one batch."""
        ids = list(dict.fromkeys(command_ids))
        todo = [i for i in ids if i not in self._commands]
        if todo:
            found = self.journal.commands(todo)
            for i in todo:
                self._commands[i] = found.get(i)
        out: dict[int, CommandView] = {}
        for i in ids:
            cmd = self._commands[i]
            if cmd is not None:
                out[i] = cmd
        return out

    def command(self, command_id: int) -> CommandView | None:
        """The command with all its read and written files (None: no such
        command), as ``query`` loads it."""
        return self.commands([command_id]).get(command_id)

    def environment(self, command_id: int) -> dict[str, str] | None:
        """The environment a command recorded with its apparatus ran with,
        as its manifest stored it (secret-looking values already redacted
        when it was recorded); None: recorded without its apparatus, or a
        manifest that cannot be read."""
        import zlib

        from shournal.store.archive import decode_manifest

        raw = self.journal.apparatus_manifest(command_id)
        if raw is None:
            return None
        try:
            env = decode_manifest(raw).get("env")
        except (ValueError, zlib.error):
            return None
        if not isinstance(env, dict):
            return None
        return {str(k): str(v) for k, v in env.items()}

    def archived(self, file_id: int) -> bytes:
        """The archived content of read file ``file_id``.

        :raises shournal.restore.NotArchived: no content was archived."""
        return self.journal.archived(file_id).data
