"""The journal and the archive beside it hold what the user's commands read
(with the apparatus: the content of private scripts): nobody else may read
them.  As the unprivileged test user, through the setuid helper; the other
test user attacks, and a positive control shows the same read succeeds
once the modes let it."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest
from fixtures_shell import Install, Shell, journal_url, wait_for, wait_stored

from shournal.journal import Journal

pytestmark = [pytest.mark.root]

SECRET = "secret-script-26\n"


def as_user(install: Install, user, home: Path, *argv: str) -> list[str]:
    env = {**install.env(home), "USER": user.pw_name, "LOGNAME": user.pw_name}
    return ["runuser", "-u", user.pw_name, "--", "env", "-i",
            *[f"{k}={v}" for k, v in env.items()], *argv]  # fmt: skip


def run_as_user(install: Install, home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(as_user(install, install.user, home, str(install.cli), *argv),
                          cwd=home / "work", capture_output=True, text=True, timeout=120)


def other_reads(install: Install, path: Path) -> bool:
    """Whether the other test user can read ``path`` (a file's content or
    a folder's listing)."""
    argv = ["ls", "--", str(path)] if path.is_dir() else ["cat", "--", str(path)]
    res = subprocess.run(["runuser", "-u", install.other.pw_name, "--", *argv],
                         capture_output=True, timeout=60)
    return res.returncode == 0


def private_script(install: Install, home: Path) -> Path:
    """A 0600 script in a 0700 folder of the victim."""
    folder = home / "work" / "private"
    folder.mkdir(mode=0o700)
    script = folder / "secret.sh"
    script.write_text(f"#!/bin/sh\necho '{SECRET.strip()}' > /dev/null\n")
    script.chmod(0o600)
    for p in (folder, script):
        os.chown(p, install.user.pw_uid, install.user.pw_gid)
    return script


def modes_below(top: Path) -> dict[Path, int]:
    out = {top: stat.S_IMODE(top.lstat().st_mode)}
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            p = Path(root) / name
            out[p] = stat.S_IMODE(p.lstat().st_mode)
    return out


def assert_private(home: Path) -> Path:
    """Every folder shournal made below the home 0700, every file 0600;
    returns the journal."""
    local = home / ".local"
    data = local / "share" / "shournal"
    journal = data / "journal.sqlite"
    assert journal.is_file()
    for path, mode in modes_below(local).items():
        kind = path.lstat().st_mode
        if stat.S_ISDIR(kind):
            assert mode == 0o700, (path, oct(mode))
        elif stat.S_ISREG(kind):
            assert mode & 0o077 == 0, (path, oct(mode))
    return journal


def open_up(home: Path, path: Path) -> None:
    """The modes an older shournal left: folders 0755, files 0644."""
    here = path
    while here != home:
        here.chmod(0o755 if here.is_dir() else 0o644)
        here = here.parent


@pytest.mark.parametrize("apparatus", [False, True], ids=["plain", "apparatus"])
def test_first_use_by_shournal_run_is_private(install, user_home, apparatus):
    """`shournal run` as the first use: ~/.local, ~/.local/share, the data
    folder, the spool and the archive are 0700, the journal and the blobs
    0600; the other user reads neither the journal nor the archived
    script.  Positive control: with the modes an older shournal left he
    reads both."""
    script = private_script(install, user_home)
    extra = ["--apparatus"] if apparatus else []
    res = run_as_user(install, user_home, "run", *extra, "--", "sh", str(script))
    assert res.returncode == 0, res.stderr
    wait_stored(user_home)
    journal = assert_private(user_home)
    targets = [journal]
    if apparatus:
        blobs = [p for p in (journal.parent / "archive").rglob("*")
                 if p.is_file() and p.parent.parent.name == "blobs"]
        assert blobs
        targets += blobs
    for target in targets:
        assert not other_reads(install, target), target
    # the control: the same files with an older shournal's modes
    for target in targets:
        open_up(user_home, target)
    for target in targets:
        assert other_reads(install, target), target
    with Journal.open(journal_url(user_home), create=True) as store:
        found = store.find(command_text="sh %secret.sh")
    assert len(found) == 1


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_first_use_by_a_shell_is_private(install, user_home, kind):
    """The same when the first recorded line is typed in a shell."""
    sh = Shell(kind, install, user_home)
    sh.run("echo one > one.txt")
    sh.exit()
    wait_for(lambda: (user_home / ".local/share/shournal/journal.sqlite").exists(), "the journal")
    with Journal.open(journal_url(user_home), create=True) as store:
        wait_for(lambda: store.find(command_text="echo one > one.txt"), "the line")
    journal = assert_private(user_home)
    assert not other_reads(install, journal)
    open_up(user_home, journal)
    assert other_reads(install, journal)


def _old_journal(install: Install, home: Path) -> Path:
    """A journal as an older shournal left it: folders 0755, file 0644,
    never marked private."""
    res = run_as_user(install, home, "run", "true")
    assert res.returncode == 0, res.stderr
    journal = home / ".local/share/shournal/journal.sqlite"
    with sqlite3.connect(journal) as db:
        db.execute("PRAGMA user_version=0")
    db.close()
    open_up(home, journal)
    return journal


def warnings(home: Path) -> str:
    path = home / "run" / "shournal" / "warnings"
    return path.read_text() if path.exists() else ""


def test_an_older_open_journal_is_made_private_once_then_refused(install, user_home):
    """The next start makes an older shournal's journal private, with a
    note; opened to others again afterwards, it is refused with the fix,
    the command kept in the spool and stored once the fix is made; doctor
    names it."""
    journal = _old_journal(install, user_home)
    data = journal.parent
    res = run_as_user(install, user_home, "run", "sh", "-c", "echo a > a.txt")
    assert res.returncode == 0, res.stderr
    wait_stored(user_home)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    note = warnings(user_home)
    assert "made the journal private" in note and str(data) in note, note
    assert not other_reads(install, journal)

    data.chmod(0o755)  # the owner opens it again
    res = run_as_user(install, user_home, "run", "sh", "-c", "echo b > b.txt")
    assert res.returncode == 0
    (line,) = res.stderr.splitlines()
    assert line.startswith("shournal: ") and f"chmod 700 {data}" in line, line
    assert "kept in the spool" in line, line
    assert stat.S_IMODE(data.stat().st_mode) == 0o755  # not changed behind its back
    doctor = run_as_user(install, user_home, "doctor")
    assert f"FAIL journal private: open to group or others: {data}" in doctor.stdout, doctor.stdout
    assert f"fix: chmod 700 {data}" in doctor.stdout

    data.chmod(0o700)  # the fix
    res = run_as_user(install, user_home, "run", "true")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    wait_stored(user_home)
    with Journal.open(journal_url(user_home), create=True) as store:
        assert len(store.find(command_text="sh -c 'echo b > b.txt'")) == 1
    doctor = run_as_user(install, user_home, "doctor")
    assert "ok   journal private" in doctor.stdout, doctor.stdout


def test_the_store_daemon_makes_an_older_journal_private_with_a_note(install, user_home):
    """The real install's path: the shell's lines go through the forwarder
    to the store daemon, which makes the journal private when it opens it
    and says so at a prompt."""
    from test_daemon import daemon_env, kill_daemon, wait_drained

    journal = _old_journal(install, user_home)
    try:
        sh = Shell("bash", install, user_home, extra_env=daemon_env(install))
        outs = [sh.run("echo d > d.txt")]
        wait_drained(user_home)
        wait_for(lambda: stat.S_IMODE(journal.stat().st_mode) == 0o600, "the journal private")
        outs.append(sh.run("true"))
        sh.exit()
    finally:
        kill_daemon(user_home)
    notes = [line for line in "".join(outs).splitlines() if "made the journal private" in line]
    assert len(notes) == 1 and str(journal.parent) in notes[0], outs
    assert stat.S_IMODE(journal.parent.stat().st_mode) == 0o700
    assert not other_reads(install, journal)
    with Journal.open(journal_url(user_home), create=True) as store:
        assert len(store.find(command_text="echo d > d.txt")) == 1
