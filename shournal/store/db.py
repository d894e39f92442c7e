"""The journal as one object: its database (:mod:`shournal.store.engine`),
its schema made current on opening (:mod:`shournal.store.schema`), and
its writer (:mod:`shournal.store.writer`)."""

from __future__ import annotations

from collections.abc import Sequence

from shournal.record import CommandRecord
from shournal.store.engine import Database
from shournal.store.schema import ensure_schema
from shournal.store.writer import Writer


class Store(Database):
    """The journal: the database ``url`` names (the arguments: see
    :class:`Database`), its schema made current on opening (created when
    ``create``), and its writer.

    :raises StoreError: see :mod:`shournal.errors`.
    """

    def __init__(
        self, url: str | None = None, *, create: bool = True, read_only: bool = False
    ) -> None:
        super().__init__(url, create=create, read_only=read_only)
        try:
            ensure_schema(self)
            if self.private:
                self.mark_private()
        except BaseException:
            self.engine.dispose()
            raise
        self.writer = Writer(self)

    def add_command(self, rec: CommandRecord) -> int:
        """Store one finished command line and all its file events in one
        transaction; return the new command id."""
        return self.writer.add_command(rec)

    def add_commands(self, recs: Sequence[CommandRecord], skip_stored: bool = False) -> int:
        """Store several command lines at once (:meth:`Writer.add_commands`);
        the number stored."""
        return self.writer.add_commands(recs, skip_stored)

    @property
    def batch_size(self) -> int | None:
        """How many commands one add_commands transaction takes at most
        (:data:`shournal.store.writer.PG_BATCH` on PostgreSQL); None: as
        many as it is given."""
        return self.writer.batch_size

    def add_imported(
        self, recs: Sequence[CommandRecord], *, dry_run: bool = False
    ) -> tuple[int, int]:
        """Store commands `shournal import` brought in, each once
        (:meth:`Writer.add_imported`); (stored, skipped)."""
        return self.writer.add_imported(recs, dry_run=dry_run)

    def has_command(self, rec: CommandRecord) -> bool:
        """Whether the journal already holds `rec` (:meth:`Writer.has_command`)."""
        return self.writer.has_command(rec)
