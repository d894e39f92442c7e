"""The journal as a library: :class:`Journal` is the one front door the CLI,
the listener, ``shournal doctor`` and scripts use.

    >>> import shournal
    >>> with shournal.Journal.open() as journal:        # doctest: +SKIP
    ...     for cmd in journal.find(cwd=".", since="1w"):
    ...         print(cmd.id, cmd.text)

Which journal: :func:`resolve_url` decides it once for everyone, so the
listener that writes and the commands that read always agree.

Importing this module costs only the standard library.  A SQLite journal
is read through sqlite3 alone (:mod:`shournal.store.connection`);
SQLAlchemy is loaded when the journal is a server's, must be created or
upgraded, or is written (the store, opened on the first write).
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from shournal.data import FileProbe, QueryError
from shournal.location import resolve_url

# Not typing.TYPE_CHECKING: `shournal query`'s fast path imports this
# module (resolve_url), and typing costs it ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Iterator, Sequence
    from typing import Any

    from shournal.config import Config
    from shournal.data import (
        ArchivedFile,
        CommandView,
        Criteria,
        JournalStats,
        RedactResult,
        UsageStats,
        WrittenVersion,
    )
    from shournal.deletion import DeletePlan, DeleteResult
    from shournal.record import CommandRecord
    from shournal.store.blobs import JournalContent
    from shournal.store.connection import Reads, _Source
    from shournal.store.db import Store
    from shournal.store.search import Searcher

__all__ = ["Journal", "resolve_url"]
# (Searcher: the type Journal.searcher returns, for annotations above the door)

# A lineage is walked above the journal (shournal.provenance), then handed
# down as command ids.
LINEAGE_UNRESOLVED = ("lineage_of is a provenance walk: resolve it with "
                      "shournal.provenance.resolve_lineage(journal, criteria) first")

class Journal:
    """A shournal journal: every recorded command line with the files it
    read and wrote.  Open it with :meth:`open`; use it as a context manager
    (or call :meth:`close`).

    Criteria are the CLI's, as keywords (see
    :func:`shournal.criteria.parse_criteria`): ``cwd``, ``command_text``,
    ``since``, ``until``, ``older_than``, ``session_id``, ``host``,
    ``user``, ``command_id``, ``exit_code``, ``tag`` (a tag or a list: commands
    carrying all of them), ``lineage_of`` (a file: the
    commands in its lineage, as ``shournal lineage`` walks it), and per written (``w``) or
    read (``r``) file ``wname``, ``wpath``, ``wsize``, ``whash``,
    ``wmtime``.  Values may carry an operator: ``wsize=">10M"``,
    ``exit_code="!=0"``, ``cwd="/data/%"``.  Or pass a parsed
    :class:`shournal.data.Criteria`.  Query, statistics and deletion read
    criteria the same way, so they always select the same commands.

    Errors: :class:`shournal.data.QueryError` for criteria that cannot be
    used (a usage error), :class:`shournal.store.StoreError` for a journal
    that cannot be read or written.
    """

    def __init__(
        self,
        store: Store | None = None,
        *,
        source: _Source | None = None,
        url: str | None = None,
        read_only: bool = False,
    ) -> None:
        """Wrap an open store (reads and writes), or a ``source`` of reads
        with the store for writing (None: opened from ``url`` when first
        needed); use :meth:`open`."""
        from shournal.store.connection import StoreSource

        if source is None:
            assert store is not None
            source = StoreSource(store)
        self._source = source
        self._store_ = store
        self._url = url
        self._read_only = read_only
        self._settings: list[tuple[int, int]] | None = None
        self._snapshot: Reads | None = None

    # -- opening ------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        create: bool = False,
        config: Config | None = None,
        read_only: bool = False,
    ) -> Journal:
        """Open the journal :func:`resolve_url` names (``url`` wins).

        ``create``: create the journal (and its schema) when there is none
        yet; readers leave it False and get
        :class:`shournal.store.StoreMissing` instead, so that reading
        changes nothing on disk.  ``read_only``: only read it (a SQLite
        journal is opened ``mode=ro``: a read-only file, directory or mount
        is browsable).

        :raises shournal.store.StoreError: it cannot be opened (StoreMissing:
            none exists yet; SchemaTooNew, StoreCorrupt, StoreUnavailable).
        """
        from shournal.store.connection import SqliteSource, sqlite_file

        url = resolve_url(url, config=config)
        store = None
        if create:
            from shournal.store.db import Store

            store = Store(url, create=True, read_only=read_only)
        # A SQLite journal of the current schema is read through sqlite3,
        # whoever opened it; anything else through the store.
        path = sqlite_file(url)
        try:
            source = None if path is None else SqliteSource.open(path)
        except BaseException:
            if store is not None:
                store.close()
            raise
        if source is not None:
            return cls(store, source=source, url=url, read_only=read_only)
        if store is None:
            from shournal.store.db import Store

            store = Store(url, create=False, read_only=read_only)
        return cls(store)

    @staticmethod
    def open_to_others(url: str | None = None) -> list[tuple[str, int]]:
        """(path, st_mode) of the journal's files and folder that group or
        others may read (a SQLite journal :func:`resolve_url` names, ``url``
        wins; a server's journal has none), without opening it."""
        from shournal import _paths
        from shournal.store.connection import journal_paths, sqlite_file

        url = resolve_url(url)
        if url is None:
            database = _paths.default_db_file()
            return _paths.open_to_others(journal_paths(database, os.path.dirname(database)))
        path = sqlite_file(url)
        if path is not None:
            return _paths.open_to_others(journal_paths(path, None))
        from shournal.store.engine import journal_open_to_others

        return journal_open_to_others(url)

    @staticmethod
    def searcher(url: str | None = None) -> Searcher:
        """The interactive search's reader of the journal :func:`resolve_url`
        names: pages of matches, newest first, each a bounded amount of
        work (see :mod:`shournal.store.search`).  A SQLite journal is read
        without loading SQLAlchemy (the search screen's start-up budget), a
        PostgreSQL one through the store.

        :raises shournal.store.StoreError: none yet, or not searchable.
        """
        from shournal.store.search import open_searcher

        return open_searcher(resolve_url(url))

    @property
    def location(self) -> str:
        """Where the journal is: a file path, or the URL without password."""
        return self._source.location

    @property
    def _store(self) -> Store:
        """The store, for writing: opened now if the journal was opened
        for reading through sqlite3 alone."""
        if self._store_ is None:
            from shournal.store.db import Store

            self._store_ = Store(self._url, create=False, read_only=self._read_only)
        return self._store_

    def close(self) -> None:
        self._source.close()
        if self._store_ is not None:
            self._store_.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Journal {self.location}>"

    @contextmanager
    def snapshot(self) -> Iterator[Journal]:
        """Inside, :meth:`commands`, :meth:`written_versions` (and
        :meth:`written_versions_many`) and
        :meth:`hash_settings` read one consistent state of the journal over
        one connection (a walk over many lookups neither sees a half-stored
        command nor pays a transaction per lookup).  Nested: the outer one
        holds.  Not for sharing between threads."""
        if self._snapshot is not None:
            yield self
            return
        with self._source.reading() as conn:
            self._snapshot = conn
            try:
                yield self
            finally:
                self._snapshot = None

    @contextmanager
    def _reading(self) -> Iterator[Reads]:
        if self._snapshot is not None:
            yield self._snapshot
        else:
            with self._source.reading() as conn:
                yield conn

    # -- finding commands --------------------------------------------------------------

    def find(
        self,
        criteria: Criteria | None = None,
        *,
        wfile: str | os.PathLike[str] | None = None,
        rfile: str | os.PathLike[str] | None = None,
        history: int | None = None,
        limit: int | None = None,
        reverse: bool = False,
        max_files: int | None = None,
        **filters: Any,
    ) -> list[CommandView]:
        """The commands matching all criteria, oldest first (``reverse``:
        newest first), each with its written and read files.

        ``wfile``/``rfile``: commands that wrote/read this file's content
        (size, partial hash and mtime; renamed or moved files are found).
        ``history``: only the last N matching commands.  ``limit``: at most
        N.  ``max_files``: load at most N written and N read files per
        command (``write_count``/``read_count`` keep the totals).
        ``filters``: criteria as keywords (see the class docstring).

        :raises shournal.data.QueryError: a criterion cannot be used (the
            file cannot be read, a value cannot be parsed).
        """
        from shournal.store.find import find_commands

        crit = None
        if criteria is not None or any(v is not None for v in filters.values()):
            crit = self._criteria(criteria, filters)
        with self._reading() as conn:
            return find_commands(
                conn, crit, wfile=wfile, rfile=rfile,
                history=history, limit=limit, reverse=reverse, max_files=max_files,
            )  # fmt: skip

    def capped_writers(self, wfile: str | os.PathLike[str]) -> list[int]:
        """Ids of the commands that hit the per-command cap of write events
        while ``wfile`` (its mtime on disk) was written: why ``find(wfile=)``
        may find nothing."""
        from shournal.store import reader

        mtime_ns = os.stat(wfile).st_mtime_ns
        with self._reading() as conn:
            return reader.capped_writers(conn, mtime_ns)

    def writers_of(
        self,
        size: int,
        hash: int | None,
        mtime_ns: int | None = None,
        *,
        max_files: int | None = None,
    ) -> list[CommandView]:
        """The commands that wrote this content, oldest first: a file
        version given by its ``size``, partial ``hash`` (as printed; None
        for an empty file or one stored with hashing off) and, unless None,
        its ``mtime_ns``.  For a file on disk use ``find(wfile=...)``."""
        from shournal.store.reader import KIND_WRITE

        return self._by_content(KIND_WRITE, size, hash, mtime_ns, max_files)

    def readers_of(
        self,
        size: int,
        hash: int | None,
        mtime_ns: int | None = None,
        *,
        max_files: int | None = None,
    ) -> list[CommandView]:
        """The commands that read this content, oldest first (arguments as
        :meth:`writers_of`)."""
        from shournal.store.reader import KIND_READ

        return self._by_content(KIND_READ, size, hash, mtime_ns, max_files)

    def commands(
        self, ids: Iterable[int], *, max_files: int | None = None
    ) -> dict[int, CommandView]:
        """The commands with these ids, with their files, by id (ids
        without a command are left out); loaded in batches, not one by
        one."""
        from shournal.store.reader import commands_by_id

        with self._reading() as conn:
            return {c.id: c for c in commands_by_id(conn, ids, max_files)}

    def session_firsts(self, uuids: Iterable[bytes]) -> dict[bytes, CommandView]:
        """The first recorded command of each shell session (by its 16-byte
        uuid), without files: where and when that terminal started."""
        from shournal.store.reader import commands_by_id, session_first_ids

        with self._reading() as conn:
            ids = session_first_ids(conn, uuids)
            found = {c.id: c for c in commands_by_id(conn, ids.values(), 0)}
        return {uuid: found[cid] for uuid, cid in ids.items() if cid in found}

    def apparatus_manifest(self, command_id: int) -> bytes | None:
        """The encoded apparatus manifest of a command recorded with
        ``--apparatus`` (None: recorded without it); decoded by
        :func:`shournal.store.archive.decode_manifest`."""
        from shournal.store.archived import apparatus_manifest

        with self._reading() as conn:
            return apparatus_manifest(conn, command_id)

    def written_versions(
        self, size: int, mtime_ns: int, hashes: Iterable[int]
    ) -> list[WrittenVersion]:
        """Every write of this content, newest end first, as file versions
        with the writing command's times and hash settings: ``size`` and
        one of ``hashes`` (any mtime; the caller prefers the ``mtime_ns``
        match, as ``--wfile`` does), or a write stored without a hash
        (empty file, hashing off) of this size and ``mtime_ns``.  One index
        lookup; what a lineage walk asks once per file version."""
        from shournal.store.reader import written_versions

        with self._reading() as conn:
            return written_versions(conn, size, mtime_ns, hashes)

    def written_versions_many(
        self, contents: Sequence[tuple[int, int, Iterable[int]]]
    ) -> list[list[WrittenVersion]]:
        """:meth:`written_versions` of each (size, mtime_ns, hashes), in
        that order: one statement for up to 64 contents (a lineage level in
        one round trip), each content still one index lookup."""
        from shournal.store.reader import written_versions_many

        if not contents:
            return []
        with self._reading() as conn:
            return written_versions_many(conn, contents)

    def hash_settings(self) -> list[tuple[int, int]]:
        """Every (chunk size, max reads) the journal has hashed with (read
        once per Journal)."""
        from shournal.store.reader import hash_settings

        if self._settings is None:
            with self._reading() as conn:
                self._settings = hash_settings(conn)
        return self._settings

    def probe(self, path: str | os.PathLike[str]) -> FileProbe:
        """A file on disk as the journal identifies content: its size,
        mtime and partial hash under every hash setting of the journal.

        :raises shournal.data.QueryFileError: it cannot be read."""
        from shournal.probe import probe_file

        return probe_file(path, self.hash_settings())

    def _by_content(
        self, kind: int, size: int, hash: int | None, mtime_ns: int | None, max_files: int | None
    ) -> list[CommandView]:
        from shournal.store.find import find_commands
        from shournal.store.reader import KIND_WRITE

        probe = FileProbe(size, mtime_ns, frozenset() if hash is None else frozenset({hash}))
        side = "written" if kind == KIND_WRITE else "read"
        with self._reading() as conn:
            return find_commands(conn, max_files=max_files, **{side: probe})

    def _criteria(self, criteria: Criteria | None, filters: dict[str, Any]) -> Criteria:
        """``criteria`` and the keyword ``filters`` as one :class:`Criteria`.
        A ``lineage_of`` criterion is a provenance walk, resolved above the
        journal (:func:`shournal.provenance.resolve_lineage`) into command ids.

        :raises shournal.data.QueryError: it cannot be used as given."""
        from shournal.criteria import merge_criteria

        crit = merge_criteria(criteria, **filters)
        if crit.lineage_of is not None:
            raise QueryError(LINEAGE_UNRESOLVED)
        return crit

    # -- statistics --------------------------------------------------------------------

    def stats(
        self,
        criteria: Criteria | None = None,
        *,
        command_ids: Iterable[int] | None = None,
        top: int | None = None,
        **filters: Any,
    ) -> JournalStats:
        """Totals and the top-``top`` lists (commands with most file
        modifications, sessions with most commands, busiest working
        directories and directories) over the whole journal, the commands
        matching the criteria, and/or only ``command_ids``."""
        from shournal.data import DEFAULT_TOP
        from shournal.store.stats import compute_stats_conn

        crit = None
        if criteria is not None or any(v is not None for v in filters.values()):
            crit = self._criteria(criteria, filters)
        with self._reading() as conn:
            return compute_stats_conn(
                conn,
                command_ids=command_ids,
                criteria=crit,
                top=DEFAULT_TOP if top is None else top,
            )

    def usage(
        self,
        criteria: Criteria | None = None,
        *,
        top: int | None = None,
        bucket: str = "day",
        **filters: Any,
    ) -> UsageStats:
        """What the matching commands (all, without criteria) produced and
        consumed: files written and read per ``bucket`` ("hour", "day",
        "month", local time), the biggest writers by files and bytes, the
        inputs most commands read, the most used programs."""
        from shournal.data import DEFAULT_TOP
        from shournal.store.stats import compute_usage

        crit = self._criteria(criteria, filters)
        with self._reading() as conn:
            return compute_usage(
                conn, criteria=crit, top=DEFAULT_TOP if top is None else top, bucket=bucket
            )

    # -- deleting --------------------------------------------------------------------

    def plan_delete(self, criteria: Criteria | None = None, **filters: Any) -> DeletePlan:
        """What :meth:`delete` with the same criteria would remove: the
        commands (oldest first) and their number of file events.  Reads
        only.

        :raises shournal.deletion.DeleteError: no criteria.
        """
        from shournal.store.gc import plan_delete_conn

        crit = self._criteria(criteria, filters)
        # (its own transaction: a lab store's narrowing to the user's own
        # rows lasts until its end)
        with self._source.reading() as conn:
            conn.only_own_rows()
            return plan_delete_conn(conn, crit)

    def delete(
        self,
        criteria: Criteria | None = None,
        *,
        only_ids: Collection[int] | None = None,
        **filters: Any,
    ) -> DeleteResult:
        """Delete the matching commands (with ``only_ids``: only those of
        them) and their file events, and collect what nothing references
        any more (directories, archived files, sessions...).  One
        transaction: on any error nothing changes.

        :raises shournal.deletion.DeleteError: no criteria.
        """
        from shournal.store.gc import delete_commands

        return delete_commands(self._store, self._criteria(criteria, filters), only_ids=only_ids,
                               spool_waiting=_spool_waiting)

    # -- archived files ------------------------------------------------------------------

    def archived(self, file_id: int) -> ArchivedFile:
        """The archived read file with this id (as printed after a read
        file); written to disk by :mod:`shournal.restore`.

        :raises shournal.data.NotArchived: no such id, or not archived.
        """
        from shournal.store.archived import load_archived

        with self._reading() as conn:
            return load_archived(conn, file_id)

    def apparatus_content(self) -> JournalContent:
        """The archived apparatus content this journal's manifests name, by
        digest (``get``, ``has``, ``unreadable``): a PostgreSQL journal's
        from its table (every row the reader may read), then from this
        host's file archive; a SQLite journal's from the file archive."""
        from shournal.store.blobs import JournalContent, keeps_blobs, present, read

        with self._reading() as conn:
            in_journal = keeps_blobs(conn.dialect)

        def blobs(digests: Sequence[str]) -> dict[str, bytes]:
            if not in_journal:
                return {}
            with self._reading() as conn:
                return read(conn, digests)

        def stored(digests: Sequence[str]) -> set[str]:
            if not in_journal:
                return set()
            with self._reading() as conn:
                return present(conn, digests)

        return JournalContent(blobs, stored)

    def content(self, content_id: int) -> bytes | None:
        """The script archive's bytes under ``content_id`` (a read file
        version's ``content_id``); None: no such content."""
        from shournal.store.archived import content

        with self._reading() as conn:
            return content(conn, content_id)

    def archived_read_files(self, command_ids: Iterable[int]) -> list[ArchivedFile]:
        """Every archived read file of these commands, by command and id."""
        from shournal.store.archived import archived_read_files

        with self._reading() as conn:
            return archived_read_files(conn, command_ids)

    # -- notes and tags ------------------------------------------------------------------

    def note(self, command_id: int) -> str | None:
        """The note of a command (None: it has none).

        :raises shournal.data.LabelError: no command with this id."""
        return self._labelled(command_id).note

    def tags(self, command_id: int | None = None) -> list[tuple[str, int]]:
        """The tags of a command as (tag, 1), or with ``command_id`` None
        every tag of the journal with its number of commands; by name.

        :raises shournal.data.LabelError: no command with this id."""
        if command_id is not None:
            return [(t, 1) for t in self._labelled(command_id).tags]
        from shournal.store.reader import tag_counts

        with self._reading() as conn:
            return tag_counts(conn)

    def _labelled(self, command_id: int) -> CommandView:
        from shournal.data import LabelError

        found = self.commands([command_id], max_files=0).get(command_id)
        if found is None:
            raise LabelError(f"no command with id {command_id}")
        return found

    def set_note(self, command_id: int, text: str | None) -> bool:
        """Set the note of a command (``text`` None: remove it); whether
        anything changed.  The note is the command's description in every
        output and in the RO-Crate and PROV exports.

        :raises shournal.data.LabelError: no such command, or not a note
            (:func:`shournal.data.check_note`); nothing changed.
        :raises shournal.store.StoreError: the journal cannot be written
            (StoreReadOnly: it is read-only here)."""
        from shournal.store.labels import set_note

        return set_note(self._store, command_id, text)

    def add_tags(self, command_id: int, tags: Iterable[str]) -> list[str]:
        """Tag a command; the tags it did not have yet.  All or nothing.

        :raises shournal.data.LabelError: no such command, or a value is no
            tag (:func:`shournal.data.check_tag`); nothing changed.
        :raises shournal.store.StoreError: as :meth:`set_note`."""
        from shournal.store.labels import add_tags

        return add_tags(self._store, command_id, tags)

    def remove_tags(self, command_id: int, tags: Iterable[str]) -> list[str]:
        """Take tags off a command; the ones it had.  Errors as :meth:`add_tags`."""
        from shournal.store.labels import remove_tags

        return remove_tags(self._store, command_id, tags)

    # -- redaction ---------------------------------------------------------------------

    def redactions(self) -> tuple[int, dict[str, int]]:
        """The secrets replaced by their markers in the whole journal
        (shournal.redact): how many commands have one, and the counts by
        kind."""
        from shournal.store.stats import commands_redacted, redaction_counts

        with self._reading() as conn:
            return commands_redacted(conn), redaction_counts(conn)

    def redactions_of(self, command_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        """The secrets replaced by their markers in these commands: counts
        by kind, by command (those without one left out)."""
        from shournal.store.stats import redactions_of

        with self._reading() as conn:
            return redactions_of(conn, command_ids)

    def redact(
        self,
        patterns: Iterable[Any],
        *,
        secret_env_names: Iterable[str] | None = None,
        dry_run: bool = False,
    ) -> RedactResult:
        """Apply ``patterns`` (shournal.redact.Pattern, e.g.
        ``patterns_for(config.redact.patterns)``) to every stored command
        line and archived script, and to the apparatus manifests' argv and
        environment (variables named like ``secret_env_names`` too, default
        :data:`shournal.redact.DEFAULT_SECRET_NAMES`); count what is
        replaced with each command.  ``dry_run``: only say what would
        change.  One transaction; running it again changes nothing.

        :raises shournal.store.StoreError: the journal cannot be written.
        """
        from shournal import redact
        from shournal.store.archive import redact_manifest
        from shournal.store.redaction import redact_stored

        patterns = tuple(patterns)
        names = tuple(redact.DEFAULT_SECRET_NAMES if secret_env_names is None
                      else secret_env_names)  # fmt: skip
        return redact_stored(
            self._store,
            lambda text: redact.redact_text(text, patterns),
            lambda data: redact.redact_bytes(data, patterns),
            lambda data: redact_manifest(data, names, patterns),
            dry_run=dry_run,
        )

    # -- writing -----------------------------------------------------------------------

    def add(self, record: CommandRecord) -> int:
        """Store one finished command line with its file events (one
        transaction); return its id."""
        return self._store.add_command(record)

    def add_many(self, records: Sequence[CommandRecord], *, skip_stored: bool = False) -> int:
        """Store several command lines in one transaction (``skip_stored``:
        leave out those stored already, by start, session and text); the
        number stored."""
        return self._store.add_commands(records, skip_stored=skip_stored)

    def add_imported(
        self, records: Sequence[CommandRecord], *, dry_run: bool = False
    ) -> tuple[int, int]:
        """Store commands brought in by `shournal import`
        (:mod:`shournal.importers`: each with ``imported_from`` and
        ``import_key``) through the recorder's writer, leaving out those
        whose ``import_key`` is stored already; one transaction, all or
        nothing.  (stored, skipped); ``dry_run``: (would store, would
        skip), nothing stored."""
        return self._store.add_imported(records, dry_run=dry_run)

    def imported_ids(self, keys: Sequence[bytes]) -> dict[bytes, int]:
        """The ids of the user's own commands imported with these
        ``import_key``\\ s, by key (keys not stored are left out)."""
        return self._store.imported_ids(keys)


def _spool_waiting() -> bool:
    """Whether command lines wait in the recorder's spool, not stored yet
    (their archived contents must not be collected meanwhile)."""
    from shournal.capture import spool

    return spool.backlog_of()[0] > 0 or spool.inbox_count() > 0
