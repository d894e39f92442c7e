"""The CLI on bad ground, run as the unprivileged test user (root would
bypass the permissions): a journal it may only read, paths it cannot
write, config files it cannot use.  Every failure is one `shournal:` line
and its documented status, never a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures_shell import recorded, write_config

pytestmark = [pytest.mark.root]


def as_user(install, home: Path, *argv: str, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = install.env(home)
    full.update(env or {})
    return subprocess.run(
        ["runuser", "-u", install.user.pw_name, "--", "env", "-i",
         *[f"{k}={v}" for k, v in full.items()], str(install.cli), *argv],
        cwd=cwd or home / "work", capture_output=True, text=True, timeout=180,
        stdin=subprocess.DEVNULL,
    )


def one_line(res: subprocess.CompletedProcess[str], status: int, *words: str) -> str:
    """The run failed with `status` and one `shournal:` line naming `words`."""
    assert res.returncode == status, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("shournal"), res.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def tree_state(root: Path) -> dict[str, tuple[int, int, int]]:
    """What a read must not change: every file's size, mtime and mode."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


@pytest.fixture
def recorded_home(install, user_home: Path) -> Path:
    """A home whose journal holds one command (`shournal run`) that wrote out.txt."""
    res = as_user(install, user_home, "run", "--", "sh", "-c", "echo data > out.txt")
    assert res.returncode == 0, res.stderr
    return user_home


# -- a journal the user may only read (issue 27 item 12) ---------------------------------

READS = [
    ("query", "--history", "5"),  # the fast path
    ("query", "--wfile", "out.txt"),
    ("query", "--command-text", "%echo%"),  # the full path
    ("query", "--wfile", "out.txt", "--output-format", "json", "--history", "3",
     "--cwd", "%"),
    ("stats",),
    ("lineage", "out.txt"),
    ("status", "out.txt"),
]


def _check_browsable(install, home: Path, root: Path, env: dict[str, str] | None = None):
    before = tree_state(root)
    for argv in READS:
        res = as_user(install, home, *argv, env=env)
        assert res.returncode == 0, (argv, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr and "readonly" not in res.stderr, (argv, res.stderr)
        assert "echo data" in res.stdout or argv[0] in ("stats", "status", "lineage"), argv
    assert tree_state(root) == before


def test_a_journal_in_a_read_only_directory_is_browsable(install, recorded_home):
    data = recorded_home / ".local" / "share" / "shournal"
    journal = data / "journal.sqlite"
    for extra in data.glob("journal.sqlite-*"):  # as an archive has it: the file alone
        extra.unlink()
    journal.chmod(0o444)
    data.chmod(0o555)
    try:
        _check_browsable(install, recorded_home, data)
    finally:
        data.chmod(0o700)


def test_an_archived_read_only_journal_is_browsable(install, recorded_home, tmp_path):
    archive = recorded_home / "archive"
    archive.mkdir()
    shutil.copy2(recorded_home / ".local" / "share" / "shournal" / "journal.sqlite",
                 archive / "journal.sqlite")
    os.chown(archive / "journal.sqlite", install.user.pw_uid, install.user.pw_gid)
    (archive / "journal.sqlite").chmod(0o444)
    archive.chmod(0o555)
    # the live journal must not be what answers
    shutil.rmtree(recorded_home / ".local" / "share" / "shournal")
    _check_browsable(install, recorded_home, archive,
                     env={"SHOURNAL_DB_URL": f"sqlite:///{archive}/journal.sqlite"})


def test_a_read_only_journal_file_in_a_writable_directory(install, recorded_home):
    journal = recorded_home / ".local" / "share" / "shournal" / "journal.sqlite"
    journal.chmod(0o444)
    for argv in READS:
        res = as_user(install, recorded_home, *argv)
        assert res.returncode == 0, (argv, res.stdout, res.stderr)
    # a writer says so in one line: the journal is unusable (3)
    res = as_user(install, recorded_home, "delete", "--command-text", "%echo%", "--yes")
    one_line(res, 3, "journal")


# -- `shournal run` and a config it cannot use (item 11) -----------------------------------


def test_run_says_itself_that_its_config_is_invalid(install, user_home):
    write_config(user_home, "[write_events]\nno_such_key = 1\n", install)
    res = as_user(install, user_home, "run", "--", "sh", "-c", "echo data > out.txt")
    assert res.returncode == 0, res.stderr
    line = one_line(res, 0, "config", "no_such_key")
    assert line.startswith("shournal: ") and "defaults" in line
    # recorded with the defaults, and no shell is left the warning to show
    found = recorded(user_home, wfile=user_home / "work" / "out.txt")
    assert [c.text for c in found] == ["sh -c 'echo data > out.txt'"]
    rundir = user_home / "run" / "shournal"
    left = "".join(p.read_text() for p in rundir.glob("warnings*"))
    assert "config" not in left, left
