"""The journal as a library: :class:`Journal` is the one front door the CLI,
the listener, ``shournal doctor`` and scripts use.

    >>> import shournal
    >>> with shournal.Journal.open() as journal:        # doctest: +SKIP
    ...     for cmd in journal.find(cwd=".", since="1w"):
    ...         print(cmd.id, cmd.text)

Which journal: :func:`resolve_url` decides it once for everyone, so the
listener that writes and the commands that read always agree.

Importing this module costs only the standard library; SQLAlchemy is
loaded when a journal is opened.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from shournal.data import FileProbe

# Not typing.TYPE_CHECKING: `shournal query`'s fast path imports this
# module (resolve_url), and typing costs it ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Iterator
    from pathlib import Path
    from typing import Any

    from sqlalchemy import Connection

    from shournal.capture.record import CommandRecord
    from shournal.config import Config
    from shournal.data import CommandView, Criteria, JournalStats, WrittenVersion
    from shournal.restore import ArchivedFile, RestoredFile, RestoreResult
    from shournal.store.db import Store
    from shournal.store.gc import DeletePlan, DeleteResult
    from shournal.store.search import Searcher

__all__ = ["Journal", "resolve_url"]

# The variable that overrides the configured journal (scripts, tests, direnv).
URL_VARIABLE = "SHOURNAL_DB_URL"


def resolve_url(url: str | None = None, *, config: Config | None = None) -> str | None:
    """The SQLAlchemy URL of the journal to use: ``url`` if given, else
    ``$SHOURNAL_DB_URL``, else ``[store] url`` of the config file (or of
    ``config``), else None: the SQLite file in the data directory.

    :raises shournal.store.StoreUnavailable: the config file cannot be read,
        so which journal is meant is unknown.
    """
    if url:
        return url
    from_env = os.environ.get(URL_VARIABLE)
    if from_env:
        return from_env
    if config is None:
        if _default_config_in_use():
            return None
        from shournal.config import ConfigError, load_config

        try:
            config = load_config(create=False)
        except ConfigError as exc:
            from shournal.store.errors import ConfigUnusable

            raise ConfigUnusable(f"cannot tell which journal to use: {exc}") from None
    return config.store.url or None


def _default_config_in_use() -> bool:
    """Whether the config file is absent or the commented default text
    shournal writes, so that no ``[store] url`` is set (load_config would
    say the same), told without importing shournal.config: its parser and
    schema cost every `shournal query` ~20 ms."""
    from shournal import _paths
    from shournal._default_config import DEFAULT_CONFIG_TEXT

    try:
        with open(_paths.config_file_text(), "rb") as f:
            raw = f.read(len(DEFAULT_CONFIG_TEXT) + 1)
    except FileNotFoundError:
        return True
    except OSError:  # load_config says what is wrong
        return False
    return raw == DEFAULT_CONFIG_TEXT.encode()


class Journal:
    """A shournal journal: every recorded command line with the files it
    read and wrote.  Open it with :meth:`open`; use it as a context manager
    (or call :meth:`close`).

    Criteria are the CLI's, as keywords (see
    :func:`shournal.query.criteria.parse_criteria`): ``cwd``, ``command_text``,
    ``since``, ``until``, ``older_than``, ``session_id``, ``host``,
    ``user``, ``command_id``, ``exit_code``, ``lineage_of`` (a file: the
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

    def __init__(self, store: Store) -> None:
        """Wrap an open :class:`shournal.store.Store`; use :meth:`open`."""
        self.store = store
        self._settings: list[tuple[int, int]] | None = None
        self._snapshot: Connection | None = None

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
        from shournal.store.db import Store

        return cls(Store(resolve_url(url, config=config), create=create, read_only=read_only))

    @staticmethod
    def searcher(url: str | None = None) -> Searcher:
        """The interactive search's reader of the journal :func:`resolve_url`
        names: pages of matches, newest first, each a bounded amount of
        work (see :mod:`shournal.store.search`).  SQLite journals only;
        SQLAlchemy is not loaded (the search screen's start-up budget).

        :raises shournal.store.StoreError: none yet, or not searchable.
        """
        from shournal.store.search import open_searcher

        return open_searcher(resolve_url(url))

    @property
    def location(self) -> str:
        """Where the journal is: a file path, or the URL without password."""
        return self.store.location

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Journal {self.location}>"

    @contextmanager
    def snapshot(self) -> Iterator[Journal]:
        """Inside, :meth:`commands`, :meth:`written_versions` and
        :meth:`hash_settings` read one consistent state of the journal over
        one connection (a walk over many lookups neither sees a half-stored
        command nor pays a transaction per lookup).  Nested: the outer one
        holds.  Not for sharing between threads."""
        if self._snapshot is not None:
            yield self
            return
        with self.store.reading() as conn:
            self._snapshot = conn
            try:
                yield self
            finally:
                self._snapshot = None

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        if self._snapshot is not None:
            yield self._snapshot
        else:
            with self.store.reading() as conn:
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
        from shournal.query.find import find_commands

        return find_commands(
            self.store, self._criteria(criteria, filters), wfile=wfile, rfile=rfile,
            history=history, limit=limit, reverse=reverse, max_files=max_files,
        )  # fmt: skip

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

    def apparatus_manifest(self, command_id: int) -> bytes | None:
        """The encoded apparatus manifest of a command recorded with
        ``--apparatus`` (None: recorded without it); decoded by
        :func:`shournal.reproduce.archive.decode_manifest`."""
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
        from shournal.query.find import probe_file

        return probe_file(path, self.hash_settings())

    def _by_content(
        self, kind: int, size: int, hash: int | None, mtime_ns: int | None, max_files: int | None
    ) -> list[CommandView]:
        from shournal.query.find import find_commands
        from shournal.store.reader import KIND_WRITE

        probe = FileProbe(size, mtime_ns, frozenset() if hash is None else frozenset({hash}))
        side = "written" if kind == KIND_WRITE else "read"
        return find_commands(self.store, max_files=max_files, **{side: probe})

    def _criteria(self, criteria: Criteria | None, filters: dict[str, Any]) -> Criteria:
        """``criteria`` and the keyword ``filters`` as one :class:`Criteria`,
        with ``lineage_of`` replaced by the ids of the commands in those
        files' lineages (intersected with ``command_ids``): the provenance
        walk answers it, the SQL sees ids.

        :raises shournal.data.QueryFileError: a file cannot be read."""
        from shournal.query.find import merge_criteria

        crit = merge_criteria(criteria, **filters)
        if crit.lineage_of is None:
            return crit
        from shournal.provenance.graph import DiskTarget, build_lineage
        from shournal.provenance.readers import JournalReader

        lin = build_lineage(JournalReader(self), [DiskTarget(p) for p in crit.lineage_of])
        ids = set(lin.commands)
        if crit.command_ids is not None:
            ids &= set(crit.command_ids)
        from dataclasses import replace

        return replace(crit, lineage_of=None, command_ids=tuple(sorted(ids)))

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
        from shournal.store.stats import compute_stats

        return compute_stats(
            self.store,
            command_ids=command_ids,
            criteria=self._criteria(criteria, filters),
            top=DEFAULT_TOP if top is None else top,
        )

    # -- deleting --------------------------------------------------------------------

    def plan_delete(self, criteria: Criteria | None = None, **filters: Any) -> DeletePlan:
        """What :meth:`delete` with the same criteria would remove: the
        commands (oldest first) and their number of file events.  Reads
        only.

        :raises shournal.store.gc.DeleteError: no criteria.
        """
        from shournal.store.gc import plan_delete

        return plan_delete(self.store, self._criteria(criteria, filters))

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

        :raises shournal.store.gc.DeleteError: no criteria.
        """
        from shournal.store.gc import delete_commands

        return delete_commands(self.store, self._criteria(criteria, filters), only_ids=only_ids)

    # -- archived files ------------------------------------------------------------------

    def archived(self, file_id: int) -> ArchivedFile:
        """The archived read file with this id (as printed after a read file).

        :raises shournal.restore.NotArchived: no such id, or not archived.
        """
        from shournal.restore import load_archived

        return load_archived(self.store, file_id)

    def restore(self, file_id: int, target: Path, *, overwrite: bool = False) -> RestoredFile:
        """Write archived read file ``file_id`` to ``target`` with its
        permission bits (never setuid) and mtime.

        :raises shournal.restore.RestoreError: NotArchived, TargetExists
            (without ``overwrite``), or it cannot be written.
        """
        from shournal.restore import restore_file

        return restore_file(self.archived(file_id), target, overwrite=overwrite)

    def restore_read_files(
        self, commands: Iterable[CommandView], dest: Path, *, overwrite: bool = False
    ) -> RestoreResult:
        """Restore every archived read file of ``commands`` into
        ``dest/command-<id>/<original absolute path>``."""
        from shournal.restore import restore_read_files

        return restore_read_files(self.store, commands, dest, overwrite=overwrite)

    # -- writing -----------------------------------------------------------------------

    def add(self, record: CommandRecord) -> int:
        """Store one finished command line with its file events (one
        transaction); return its id."""
        return self.store.add_command(record)
