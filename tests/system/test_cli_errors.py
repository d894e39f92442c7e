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


# A reader of a WAL journal makes them (and so changes the directory).
SQLITE_SIDE_FILES = {".local/share/shournal/journal.sqlite-shm",
                     ".local/share/shournal/journal.sqlite-wal"}


def tree_state(root: Path) -> dict[str, tuple[int, int, int]]:
    """What a read must not change: every file's size, mtime and mode, and
    which directories there are (a file written beside the target and
    removed again changes its directory's mtime, nothing else)."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        mtime = 0 if path.is_dir() and not path.is_symlink() else st.st_mtime_ns
        out[str(path.relative_to(root))] = (st.st_size, mtime, st.st_mode)
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


# -- exit statuses (item 13; the table in the README) -------------------------------------


def test_exit_statuses(install, recorded_home):
    home = recorded_home
    assert as_user(install, home, "query", "--wfile", "out.txt").returncode == 0
    res = as_user(install, home, "query", "--command-text", "%no such text%")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    one_line(as_user(install, home, "query", "--exit-code", "x"), 2)
    # a pattern SQLite refuses is a bad value, not an unusable journal
    huge = "%" + "a" * 120_000 + "%"
    one_line(as_user(install, home, "query", "--command-text", huge), 2, "pattern too long")
    one_line(as_user(install, home, "stats", "--cwd", huge), 2, "pattern too long")
    # a journal that is no database: 3
    garbage = home / "work" / "garbage.sqlite"
    garbage.write_bytes(b"not a database " * 500)
    os.chown(garbage, install.user.pw_uid, install.user.pw_gid)
    env = {"SHOURNAL_DB_URL": f"sqlite:///{garbage}"}
    for argv in (("query", "--history", "3"), ("stats",), ("lineage", "out.txt")):
        one_line(as_user(install, home, *argv, env=env), 3, "not a usable database")
    # a config file that cannot be used: 4, whichever command reads it
    write_config(home, "[store]\nno_such_key = 1\n", install)
    for argv in READS + [("delete", "--command-text", "%x%", "--yes"),
                         ("export", "make", "out.txt", "-o", str(home / "work" / "wf"))]:
        one_line(as_user(install, home, *argv), 4, "no_such_key")
    assert not (home / "work" / "wf").exists()
    # ... or a config path of the wrong type
    afile = str(home / "work" / "out.txt")
    one_line(as_user(install, home, "stats", env={"XDG_CONFIG_HOME": afile}), 4,
             "Not a directory")
    config = home / ".config" / "shournal" / "config.toml"
    config.unlink()
    config.mkdir()
    one_line(as_user(install, home, "query", "--history", "1"), 4, "Is a directory")


# -- every command with paths it cannot use (item 9) ---------------------------------------


def test_bad_paths_are_one_line_and_change_nothing(install, recorded_home):
    home = recorded_home
    work = home / "work"
    ro = home / "ro"
    ro.mkdir()  # root's: the user cannot write in it
    missing = work / "no" / "such"
    afile = work / "out.txt"
    adir = work / "adir"
    adir.mkdir()
    os.chown(adir, install.user.pw_uid, install.user.pw_gid)
    secret = ro / "secret"  # not readable by the user
    secret.write_text("x")
    secret.chmod(0o600)
    bad_inputs = [str(missing / "x"), str(adir), str(secret)]
    bad_outputs = [str(ro / "x"), str(missing / "x"), str(adir)]
    runs: list[tuple[str, ...]] = []
    for path in bad_inputs:
        runs += [
            ("query", "--wfile", path), ("query", "--rfile", path),
            ("query", "--lineage-of", path), ("stats", "--lineage-of", path),
            ("lineage", path), ("delete", "--lineage-of", path, "--yes"),
            ("diff", "--wfile", path, "out.txt"), ("diff", "--lineage", path, "out.txt"),
            ("export", "make", path, "-o", str(work / "wf")),
            ("describe", "benchmark", "-o", str(work / "bench"), path),
            ("recombine", path, path, "-o", str(work / "rc")),
        ]
    for path in bad_outputs:
        runs += [
            ("query", "--command-text", "%echo%", "-o", path),
            ("query", "--command-text", "%echo%", "--output-format", "html", "-o", path),
            ("query", "--command-text", "%echo%", "--output-format", "shournal-json", "-o", path),
            ("lineage", "out.txt", "--output-format", "html", "-o", path),
            ("lineage", "out.txt", "--output-format", "dot", "-o", path),
        ]
    for path in (str(ro / "x"), str(afile)):
        runs += [
            ("query", "--command-text", "%echo%", "--restore-rfiles", "--restore-dir", path),
            ("export", "snakemake", "out.txt", "-o", path),
            ("describe", "benchmark", "-o", path, "out.txt"),
            ("restore", "--file-id", "1", "-o", path),
        ]
    ro.chmod(0o555)
    before = tree_state(home)
    seen = []
    for argv in runs:
        res = as_user(install, home, *argv)
        assert "Traceback" not in res.stderr, (argv, res.stderr)
        lines = res.stderr.splitlines()
        assert res.returncode in (1, 2), (argv, res.returncode, res.stderr)
        if res.returncode == 2 or lines:  # (1: "nothing found" may say so on stdout)
            assert len(lines) == 1 and lines[0].startswith("shournal: "), (argv, res.stderr)
        seen.append(res.returncode)
        after = tree_state(home)
        changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
        assert changed <= SQLITE_SIDE_FILES, (argv, changed)
    assert 2 in seen
