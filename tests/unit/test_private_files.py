"""shournal's own folders and files are private (issue 26): the helpers of
shournal._paths and the journal's once-then-refuse rule (shournal.store.engine)."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from shournal import _paths
from shournal.store import Store, StoreUnavailable


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_every_folder_made_is_0700_and_existing_ones_are_left(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        (tmp_path / "a").mkdir(mode=0o755)
        _paths.make_private_dir(tmp_path / "a" / "b" / "c" / "d")
        _paths.make_private_dir(tmp_path / "a" / "b" / "c" / "d")  # again: nothing to do
    finally:
        os.umask(old)
    assert mode(tmp_path / "a") == 0o755
    assert [mode(tmp_path / "a" / p) for p in ("b", "b/c", "b/c/d")] == [0o700] * 3


def test_open_private_makes_0600_and_never_follows_a_link(tmp_path: Path) -> None:
    os.close(_paths.open_private(tmp_path / "f"))
    assert mode(tmp_path / "f") == 0o600
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(OSError):
        _paths.open_private(tmp_path / "link")
    assert not (tmp_path / "target").exists()


def test_open_to_others_names_only_what_others_may_use(tmp_path: Path) -> None:
    (tmp_path / "open").mkdir(mode=0o700)
    (tmp_path / "open").chmod(0o711)
    (tmp_path / "closed").mkdir(mode=0o700)
    (tmp_path / "file").touch(mode=0o600)
    (tmp_path / "file").chmod(0o640)
    paths = [str(tmp_path / n) for n in ("open", "closed", "file", "absent")]
    found = _paths.open_to_others(paths)
    assert [(p, m & 0o777) for p, m in found] == [
        (str(tmp_path / "open"), 0o711), (str(tmp_path / "file"), 0o640)]
    assert [_paths.private_fix(p, m) for p, m in found] == [
        f"chmod 700 {tmp_path / 'open'}", f"chmod 600 {tmp_path / 'file'}"]


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    return tmp_path / "share" / "shournal"


def test_a_new_default_journal_is_private(data_home: Path) -> None:
    with Store() as store:
        assert store.notes == []
    assert mode(data_home.parent) == 0o700 and mode(data_home) == 0o700
    assert mode(data_home / "journal.sqlite") == 0o600


def test_an_older_open_journal_is_made_private_once_then_refused(data_home: Path) -> None:
    Store().close()
    journal = data_home / "journal.sqlite"
    with sqlite3.connect(journal) as db:  # as an older shournal left it
        db.execute("PRAGMA user_version=0")
    db.close()
    data_home.chmod(0o755)
    journal.chmod(0o644)
    with Store(create=False) as store:  # a reader changes nothing
        assert store.notes == []
    assert mode(data_home) == 0o755
    with Store() as store:
        (note,) = store.notes
    assert f"{data_home} 0755 -> 0700" in note and f"{journal} 0644 -> 0600" in note
    assert (mode(data_home), mode(journal)) == (0o700, 0o600)
    journal.chmod(0o640)
    with pytest.raises(StoreUnavailable, match=f"fix: chmod 600 {journal}$"):
        Store()
    assert mode(journal) == 0o640
    journal.chmod(0o600)
    with Store() as store:
        assert store.notes == []


def test_a_named_journal_file_is_private_its_folder_is_the_users(tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    with Store(f"sqlite:///{folder}/j.sqlite") as store:
        assert store.notes == []
    assert mode(folder) == 0o755 and mode(folder / "j.sqlite") == 0o600
