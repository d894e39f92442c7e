"""Notes and tags on commands (`shournal note`, `shournal tag`): the
writers and the few reads beside the command views (which carry a
command's note and tags themselves, see :mod:`shournal.store.reader`).

Each writer is one transaction that first checks the command exists: an
unknown id changes nothing.  Values are checked by the caller
(:func:`shournal.data.check_note`, :func:`shournal.data.check_tag`) and
again here, so that no caller stores what the outputs would refuse.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy import Connection, delete, select

from shournal.data import LabelError, check_note, check_tag
from shournal.errors import StoreError, StoreReadOnly
from shournal.store import models as m

if TYPE_CHECKING:
    from collections.abc import Iterator

    from shournal.store.db import Store

__all__ = ["add_tags", "remove_tags", "set_note"]


@contextmanager
def _writing(store: Store, command_id: int) -> Iterator[Connection]:
    """A write transaction in which command ``command_id`` exists.

    :raises LabelError: no such command.
    :raises StoreReadOnly: the journal was opened read-only, or its file
        cannot be written."""
    if store._read_only:
        raise StoreReadOnly(f"the journal {store.location} is open read-only: nothing stored")
    try:
        with store.writing() as conn:
            found = conn.execute(
                select(m.Command.id).where(m.Command.id == command_id)
            ).scalar_one_or_none()
            if found is None:
                raise LabelError(f"no command with id {command_id}")
            yield conn
    except StoreError as e:
        if "readonly" in str(e).lower() or "read-only" in str(e).lower():
            raise StoreReadOnly(
                f"the journal {store.location} is read-only here: nothing stored"
            ) from None
        raise


def set_note(store: Store, command_id: int, text: str | None) -> bool:
    """Set (``text``) or remove (None) the note of a command; whether it
    changed anything."""
    text = None if text is None else check_note(text)
    note = m.CommandNote.__table__
    with _writing(store, command_id) as conn:
        old = conn.execute(
            select(note.c.text).where(note.c.command_id == command_id)
        ).scalar_one_or_none()
        if old == text:
            return False
        conn.execute(delete(note).where(note.c.command_id == command_id))
        if text is not None:
            conn.execute(note.insert(), {"command_id": command_id, "text": text})
        return True


def add_tags(store: Store, command_id: int, tags: Iterable[str]) -> list[str]:
    """Give a command these tags; the ones it did not have yet."""
    wanted = sorted({check_tag(t) for t in tags})
    tag, link = m.Tag.__table__, m.CommandTag.__table__
    added: list[str] = []
    with _writing(store, command_id) as conn:
        # (what it has, read first: rowcount of an ignored insert is not
        # the same on both drivers)
        has = set(
            conn.execute(
                select(tag.c.name)
                .join(link, link.c.tag_id == tag.c.id)
                .where(link.c.command_id == command_id)
            ).scalars()
        )
        for name in wanted:
            if name in has:
                continue
            conn.execute(store.writer.insert_ignore(tag), {"name": name})  # type: ignore[arg-type]
            tag_id = conn.execute(select(tag.c.id).where(tag.c.name == name)).scalar_one()
            conn.execute(link.insert(), {"command_id": command_id, "tag_id": tag_id})
            added.append(name)
    return added


def remove_tags(store: Store, command_id: int, tags: Iterable[str]) -> list[str]:
    """Take these tags off a command; the ones it had.  A tag no command
    carries any more is removed too."""
    wanted = sorted({check_tag(t) for t in tags})
    tag, link = m.Tag.__table__, m.CommandTag.__table__
    removed: list[str] = []
    with _writing(store, command_id) as conn:
        for name in wanted:
            tag_id = conn.execute(select(tag.c.id).where(tag.c.name == name)).scalar_one_or_none()
            if tag_id is None:
                continue
            gone = conn.execute(
                delete(link).where(link.c.command_id == command_id, link.c.tag_id == tag_id)
            )
            if gone.rowcount:
                removed.append(name)
            still = select(link.c.tag_id).where(link.c.tag_id == tag_id).limit(1)
            if conn.execute(still).first() is None:
                conn.execute(delete(tag).where(tag.c.id == tag_id))
    return removed
