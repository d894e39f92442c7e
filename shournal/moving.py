"""``shournal server import``: moving a single-user journal (a SQLite file
or a PostgreSQL URL) into the journal the user writes now, usually a lab
store (docs/lab.md, "Moving a journal in").

It is run by each user for their own journal: the lab store gives every
row to the role that inserts it, so an administrator importing for
someone would own their commands.  Every command comes with its file
events, session, hash settings, archived scripts, apparatus manifest,
note, tags and redaction counts, and is stored once however often (or however overlapping a
copy) the journal is imported: each carries an import key made from what
it is (host, user, session, start, text and how many identical ones came
before, :mod:`shournal.importers.identity`), as `shournal import` does for
other histories.  What was printed before stays findable: the returned
mapping (old id -> new id) is what ``--map`` writes.

The source is only read.  A SQLite file is first checked and copied to a
private temporary directory, and the copy opened: an older schema is
upgraded there, never in the source.  A file or URL that is not a journal,
is damaged or of a newer schema raises :class:`ImportFailed` (one line)
before anything is stored; the commands are stored in one transaction.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from shournal.data import CommandView, FileEventView
from shournal.errors import SchemaTooNew, StoreCorrupt, StoreMissing
from shournal.importers import ImportFailed
from shournal.importers.identity import assign
from shournal.journal import Journal
from shournal.record import CommandRecord, FileEvent

# The kind a moved command is marked as imported from (CommandView.imported_from).
KIND = "journal"
WHAT = "a shournal journal"
# Commands read from the source per batch (each with all its files).
_BATCH = 500
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class Moved:
    """What an import did (or would do): ``mapping`` is (old id, new id)
    for every command of the source, new id None in a dry run for a
    command not stored yet; ``notes`` one line each."""

    stored: int = 0
    skipped: int = 0
    mapping: list[tuple[int, int | None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def is_url(source: str) -> bool:
    return "://" in source


@contextmanager
def opened_source(source: str, shown: str) -> Iterator[Journal]:
    """The journal ``source`` names, only read (see the module);
    ``shown``: how errors name it (a URL with its password masked).

    :raises ImportFailed: not a journal, damaged, or of a newer schema.
    """
    if is_url(source):
        with _opened(shown, source, read_only=True) as journal:
            yield journal
        return
    path = Path(source)
    if not path.is_file():
        raise ImportFailed(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    from shournal.importers.sqlite_file import opened

    with tempfile.TemporaryDirectory(prefix="shournal-import-") as tmp:
        copy = Path(tmp) / "journal.sqlite"
        # Checked (header, integrity) before it is copied: a damaged file
        # is one line, not an error halfway through the reading.
        with opened(path, WHAT):
            shutil.copyfile(path, copy)
            wal = Path(f"{path}-wal")
            if wal.is_file():
                shutil.copyfile(wal, f"{copy}-wal")
        with _opened(str(path), f"sqlite:///{copy}", read_only=False) as journal:
            yield journal


@contextmanager
def _opened(shown: str, url: str, *, read_only: bool) -> Iterator[Journal]:
    try:
        journal = Journal.open(url, create=False, read_only=read_only)
    except StoreMissing:
        raise ImportFailed(f"{shown}: not {WHAT}: it holds no journal") from None
    except (StoreCorrupt, SchemaTooNew) as e:
        raise ImportFailed(f"{shown}: {e}") from None
    with journal:
        yield journal


def _ns(moment: datetime) -> int:
    return ((moment - _EPOCH) // timedelta(microseconds=1)) * 1000


def _event(ev: FileEventView, content: bytes | None) -> FileEvent:
    return FileEvent(
        path=ev.path, size=ev.size, mtime_ns=ev.mtime_ns, mode=ev.mode, hash=ev.hash,
        content=content,
    )  # fmt: skip


def read_source(journal: Journal, shown: str) -> tuple[list[CommandView], list[CommandRecord]]:
    """Every command of ``journal`` (oldest first) with its record, the
    record keyed (``import_key``) and marked as moved; ``derived_from``
    still the source's id.  ``shown``: how errors name the source."""
    try:
        ids = [c.id for c in journal.find(max_files=0)]
        views: list[CommandView] = []
        records: list[CommandRecord] = []
        contents: dict[int, bytes | None] = {}
        for start in range(0, len(ids), _BATCH):
            batch = journal.commands(ids[start : start + _BATCH])
            redactions = journal.redactions_of(ids[start : start + _BATCH])
            for cid in ids[start : start + _BATCH]:
                cmd = batch[cid]
                for ev in cmd.reads:
                    if ev.content_id is not None and ev.content_id not in contents:
                        contents[ev.content_id] = journal.content(ev.content_id)
                views.append(cmd)
                records.append(
                    CommandRecord(
                        text=cmd.text,
                        return_value=cmd.return_value,
                        start_ns=_ns(cmd.start_time),
                        end_ns=_ns(cmd.end_time),
                        working_dir=cmd.working_dir,
                        username=cmd.username,
                        hostname=cmd.hostname,
                        session_uuid=cmd.session_uuid,
                        hash_chunk_size=cmd.hash_chunk_size,
                        hash_max_reads=cmd.hash_max_reads,
                        writes=[_event(ev, None) for ev in cmd.writes],
                        reads=[
                            _event(ev, None if ev.content_id is None else contents[ev.content_id])
                            for ev in cmd.reads
                        ],
                        dropped_writes=cmd.dropped_writes,
                        dropped_reads=cmd.dropped_reads,
                        lost_events=cmd.lost_events,
                        lost_reasons=dict(cmd.lost_reasons),
                        incomplete=cmd.incomplete,
                        apparatus=journal.apparatus_manifest(cmd.id),
                        derived_from=cmd.derived_from,
                        redactions=redactions.get(cmd.id, {}),
                    )
                )
    except (StoreCorrupt, SchemaTooNew) as e:
        raise ImportFailed(f"{shown}: {e}") from None
    except (TypeError, ValueError) as e:
        # a value of the wrong type where the schema says otherwise (SQLite
        # keeps what it is given): a damaged journal, not shournal's bug
        raise ImportFailed(f"{shown}: damaged {WHAT}: {e}") from None
    assign(KIND, records, [True] * len(records))
    return views, records


def move_in(
    target: Journal, views: Sequence[CommandView], records: Sequence[CommandRecord],
    *, dry_run: bool = False,
) -> Moved:  # fmt: skip
    """Store ``records`` (read by :func:`read_source` as ``views``) into
    ``target``, each once, with their notes and tags; a command derived
    from another (`shournal rerun`) points at the moved origin."""
    out = Moved()
    keys = [bytes(r.import_key or b"") for r in records]
    key_of = {v.id: k for v, k in zip(views, keys, strict=True)}
    new_ids = target.imported_ids(keys)
    before = set(new_ids)
    if dry_run:
        stored, skipped = target.add_imported(list(records), dry_run=True)
        out.stored, out.skipped = stored, skipped
        out.mapping = [(v.id, new_ids.get(k)) for v, k in zip(views, keys, strict=True)]
        return out
    pending = list(range(len(records)))
    unlinked = 0
    # An origin must be stored before what derives from it knows its id:
    # a round per generation of derivation (usually one).
    while pending:
        ready, waiting = [], []
        for i in pending:
            origin = records[i].derived_from
            origin_key = None if origin is None else key_of.get(origin)
            if origin_key is None or origin_key in new_ids:
                ready.append(i)
            else:
                waiting.append(i)
        if not ready:  # a cycle cannot be: an origin is older; store the rest unlinked
            ready, waiting = waiting, []
        batch = []
        for i in ready:
            origin = records[i].derived_from
            origin_key = None if origin is None else key_of.get(origin)
            linked = None if origin_key is None else new_ids.get(origin_key)
            if origin is not None and linked is None and keys[i] not in new_ids:
                unlinked += 1
            batch.append(replace(records[i], derived_from=linked))
        stored, skipped = target.add_imported(batch)
        out.stored += stored
        out.skipped += skipped
        new_ids = target.imported_ids(keys)
        pending = waiting
    if unlinked:
        out.notes.append(
            f"{unlinked} derived command(s) moved without the link to their origin "
            "(the origin is not in the journal)"
        )
    for view, k in zip(views, keys, strict=True):
        new = new_ids[k]
        out.mapping.append((view.id, new))
        if view.note is not None and target.note(new) is None:
            target.set_note(new, view.note)
        if view.tags:
            target.add_tags(new, view.tags)
    apparatus = sum(1 for r, k in zip(records, keys, strict=True)
                    if r.apparatus is not None and k not in before)  # fmt: skip
    if apparatus:
        out.notes.append(
            f"{apparatus} apparatus manifest(s) moved; the contents they name stay in the "
            "archive beside the source journal"
        )
    return out


def write_map(path: str, shown: str, mapping: Sequence[tuple[int, int | None]]) -> None:
    """The mapping as text: a comment naming the source (``shown``: a URL
    with its password masked), then ``OLD NEW`` (tab-separated) per
    command."""
    lines = [f"# shournal server import of {shown}: old id, new id\n"]
    lines += [f"{old}\t{'-' if new is None else new}\n" for old, new in mapping]
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(lines)
    os.replace(tmp, path)
