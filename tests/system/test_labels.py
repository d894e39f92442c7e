"""Notes and tags on both engines (the `store` fixture: SQLite and
PostgreSQL): the writers behind `shournal note`/`shournal tag`, the --tag
criterion, the upgrade from schema 7, deletion, and the CLI on a journal it
cannot write (unit side: tests/unit/test_cli_labels.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from synthetic import record
from typer.testing import CliRunner

from shournal.cli import app
from shournal.data import LabelError
from shournal.journal import Journal
from shournal.store import Store
from shournal.store import models as m
from shournal.store.migrations import SCHEMA_VERSION


def _labels(s: Store) -> tuple[list[tuple[int, str]], list[tuple[int, str]], list[str]]:
    with s.reading() as conn:
        notes = conn.execute(select(m.CommandNote.command_id, m.CommandNote.text)).all()
        links = conn.execute(
            select(m.CommandTag.command_id, m.Tag.name).join(m.Tag, m.Tag.id == m.CommandTag.tag_id)
        ).all()
        tags = conn.execute(select(m.Tag.name)).scalars().all()
    return sorted(map(tuple, notes)), sorted(map(tuple, links)), sorted(tags)


def test_notes_and_tags_on_both_engines(store: Store) -> None:
    ids = [store.add_command(record(t)) for t in ("make fig3", "make fig4", "ls")]
    j = Journal(store)
    assert j.set_note(ids[0], "  the command behind figure 3\n")
    assert not j.set_note(ids[0], "the command behind figure 3")  # unchanged
    assert j.note(ids[0]) == "the command behind figure 3"
    assert j.add_tags(ids[0], ["paper2", "fig3", "fig3"]) == ["fig3", "paper2"]
    assert j.add_tags(ids[0], ["fig3"]) == []
    assert j.add_tags(ids[1], ["paper2", "Z", "a"]) == ["Z", "a", "paper2"]
    # code point order on both engines (not the database's collation)
    assert j.commands([ids[1]])[ids[1]].tags == ["Z", "a", "paper2"]
    assert j.tags() == [("Z", 1), ("a", 1), ("fig3", 1), ("paper2", 2)]
    assert [c.id for c in j.find(tag="paper2")] == ids[:2]
    assert [c.id for c in j.find(tag=["paper2", "fig3"])] == ids[:1]
    assert j.find(tag="nosuch") == []
    [found] = j.find(command_id=ids[0])
    assert (found.note, found.tags) == ("the command behind figure 3", ["fig3", "paper2"])
    assert j.stats(tag="paper2").commands == 2
    assert j.remove_tags(ids[1], ["Z", "nosuch"]) == ["Z"]
    assert ("Z", 1) not in j.tags()  # no command carries it: gone
    assert j.set_note(ids[0], None) and j.note(ids[0]) is None


def test_bad_input_changes_nothing(store: Store) -> None:
    cid = store.add_command(record("make"))
    j = Journal(store)
    j.add_tags(cid, ["kept"])
    before = _labels(store)
    for write in (
        lambda: j.set_note(cid + 1, "x"),
        lambda: j.add_tags(cid + 1, ["x"]),
        lambda: j.add_tags(cid, ["good", "bad tag"]),  # all or nothing
        lambda: j.add_tags(cid, [""]),
        lambda: j.set_note(cid, "\x1b[2J"),
        lambda: j.remove_tags(cid + 1, ["kept"]),
    ):
        with pytest.raises(LabelError):
            write()
    assert _labels(store) == before


def test_delete_takes_notes_and_unused_tags_along(store: Store) -> None:
    a, b = (store.add_command(record(t)) for t in ("a", "b"))
    j = Journal(store)
    j.set_note(a, "gone soon")
    j.add_tags(a, ["only-a", "shared"])
    j.add_tags(b, ["shared"])
    result = j.delete(command_id=str(a))
    assert result.commands == 1 and result.collected["tag"] == 1
    assert _labels(store) == ([], [(b, "shared")], ["shared"])


def test_upgrade_from_7_adds_the_tables(store: Store) -> None:
    cid = store.add_command(record("old"))
    with store.writing() as conn:
        for table in reversed(m.LABEL_TABLES):
            conn.execute(text(f"DROP TABLE {table}"))
        conn.execute(m.SchemaVersion.__table__.update().values(version=7))
    url = store.engine.url.render_as_string(hide_password=False)
    store.close()
    with Store(url, create=False) as s:
        with s.reading() as conn:
            assert conn.execute(select(m.SchemaVersion.version)).scalar_one() == SCHEMA_VERSION
            assert conn.execute(select(func.count()).select_from(m.Tag)).scalar_one() == 0
        j = Journal(s)
        assert j.add_tags(cid, ["after-upgrade"]) == ["after-upgrade"]
        assert j.commands([cid])[cid].tags == ["after-upgrade"]


@pytest.fixture
def immutable_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A journal even root cannot write (chattr +i), as a read-only mount
    or another user's file is to its reader."""
    path = tmp_path / "j.sqlite"
    with Store(f"sqlite:///{path}") as s:
        s.add_command(record("make"))
    # no WAL left: a reader of an immutable file cannot make one
    subprocess.run(["sqlite3", str(path), "PRAGMA journal_mode=delete;"], check=False,
                   capture_output=True)  # fmt: skip
    monkeypatch.setenv("SHOURNAL_DB_URL", f"sqlite:///{path}")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.root
def test_cli_on_a_journal_it_cannot_write(immutable_journal: Path) -> None:
    before = immutable_journal.read_bytes()
    for args in (["note", "1", "x"], ["tag", "1", "x"], ["tag", "1", "--remove", "x"],
                 ["note", "1", "--clear"]):  # fmt: skip
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 3, res.stderr
        assert res.stderr.count("\n") == 1 and "read-only" in res.stderr, res.stderr
    # reading still works
    res = CliRunner().invoke(app, ["tag", "1"])
    assert res.exit_code == 1 and res.stderr == ""
    assert immutable_journal.read_bytes() == before
