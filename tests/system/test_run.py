"""`shournal run`: one command and its whole process tree, no shell hooks."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from fixtures_shell import journal_url, wait_for, write_config

from shournal.journal import Journal

pytestmark = [pytest.mark.root]


def cli_as_user(install, home, *argv) -> list[str]:
    """The argv of `shournal ARGV` run as the test user, environment cleared."""
    env = install.env(home)
    return ["runuser", "-u", install.user.pw_name, "--", "env", "-i",
            *[f"{k}={v}" for k, v in env.items()], str(install.cli), *argv]


def run_as_user(install, home, *argv, **kw):
    return subprocess.run(
        cli_as_user(install, home, *argv),
        cwd=home / "work", capture_output=True, text=True, timeout=120, **kw,
    )


def commands(home, **criteria):
    store = Journal.open(journal_url(home), create=True)
    try:
        return store.find(**criteria)
    finally:
        store.close()


def test_run_records_and_waits_for_background_descendants(install, user_home):
    script = "echo parent > p_out; (sleep 1; echo child > c_out) & exit 7"
    start = time.monotonic()
    res = run_as_user(install, user_home, "run", "--", "sh", "-c", script)
    elapsed = time.monotonic() - start
    assert res.returncode == 7, res.stderr
    assert elapsed >= 1.0  # the background child was awaited
    (cmd,) = commands(user_home, wfile=user_home / "work" / "c_out")
    assert cmd.text == f"sh -c '{script}'"
    assert cmd.return_value == 7
    assert sorted(e.path.rsplit(b"/", 1)[1] for e in cmd.writes) == [b"c_out", b"p_out"]
    # its own UUID, as a shell's command line has
    assert cmd.uuid is not None and len(cmd.uuid) == 16


def test_run_an_in_place_edit_records_the_version_it_read(install, user_home):
    """`sed -i` reads f and renames its new version over it: the version
    read is gone (deleted) when the holder looks, and must still be the
    command's read of f, so that f's lineage goes through it."""
    data = user_home / "work" / "data.txt"
    data.write_text("a b a\n")
    os.chown(data, install.user.pw_uid, install.user.pw_gid)
    res = run_as_user(install, user_home, "run", "--", "sed", "-i", "s/a/x/g", "data.txt")
    assert res.returncode == 0, res.stderr
    assert data.read_text() == "x b x\n"
    (cmd,) = commands(user_home, wfile=data)
    path = os.fsencode(data)
    assert [(e.path, e.size) for e in cmd.reads if e.path == path] == [(path, 6)]
    assert [e.path for e in cmd.writes] == [path]


def test_run_exit_status_of_signal_and_missing_command(install, user_home):
    res = run_as_user(install, user_home, "run", "sh", "-c", "kill -TERM $$")
    assert res.returncode == 128 + 15
    res = run_as_user(install, user_home, "run", "no-such-command-xyz")
    assert res.returncode == 127
    assert res.stderr.strip() == "shournal: no-such-command-xyz: command not found"
    assert "Traceback" not in res.stderr


def test_run_options_after_the_command_belong_to_it(install, user_home):
    res = run_as_user(install, user_home, "run", "ls", "-la", "--color=never")
    assert res.returncode == 0, res.stderr
    assert "total" in res.stdout


def test_run_a_burst_larger_than_the_holders_queue_threshold_loses_nothing(install, user_home):
    """Files with ~1 KB paths closed as fast as Python can: 28 MiB of
    records, more than the socket (~200 KB) and the queue threshold
    (QUEUE_PRESSURE, 24 MiB) that wakes the lazily started listener while
    its command still runs.  Every event arrives, none is lost."""
    write_config(user_home, "[write_events]\nmax_event_count = 0\n", install)
    nested = "/".join(c * 240 for c in "abc")
    name = "f" * 240
    path_len = len(f"{user_home}/work/burst/{nested}/{name}000000")
    record = 48 + (path_len + 7) // 8 * 8  # struct shournal_record + padded path
    n = (28 << 20) // record
    assert n * record > 24 << 20
    script = (
        "import os\n"
        f"d = 'burst/{nested}'\n"
        "os.makedirs(d)\n"
        f"for i in range({n}): open(f'{{d}}/{name}{{i:06}}', 'w').close()\n"
    )
    res = run_as_user(install, user_home, "run", "--", "python3", "-c", script)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and res.stderr == "", res.stderr
    (cmd,) = commands(user_home, command_text="python3 -c %")
    assert (cmd.lost_events, cmd.dropped_writes) == (0, 0), cmd.lost_reasons
    assert len(cmd.writes) == n
    assert {e.path.rsplit(b"/", 1)[1] for e in cmd.writes} == {
        b"%s%06d" % (name.encode(), i) for i in range(n)}


def _ignore_marks(user) -> dict[int, int]:
    """inode -> ignored mask of the fanotify inode marks held by the
    user's processes (the holders)."""
    marks: dict[int, int] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid != user.pw_uid:
                continue
            for fd in os.listdir(f"/proc/{pid}/fdinfo"):
                with open(f"/proc/{pid}/fdinfo/{fd}") as fh:
                    for line in fh:
                        if line.startswith("fanotify ino:"):
                            f = dict(kv.split(":", 1) for kv in line.split()[1:] if ":" in kv)
                            marks[int(f["ino"], 16)] = int(f.get("ignored_mask", "0"), 16)
        except OSError:
            continue
    return marks


def _start_run(install, home, *argv) -> subprocess.Popen:
    """`shournal run -- ARGV` as the user, in the background."""
    return subprocess.Popen(
        cli_as_user(install, home, "run", "--", *argv),
        cwd=home / "work", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_run_reads_the_user_may_not_write_are_ignored_by_the_kernel(install, user_home):
    """Default config: reads are recorded only of files the user may write.
    The first read of any other file makes the holder put an ignore mark
    for FAN_CLOSE_NOWRITE on its inode, so further reads (a build reads
    each system header hundreds of times) make no event at all.  A write
    clears the mark: the file's next read is observed again."""
    write_config(user_home, "", install)
    ro = user_home / "work" / "ro.txt"
    ro.write_text("x")
    os.chown(ro, install.user.pw_uid, install.user.pw_gid)
    ro.chmod(0o444)
    # (the command waits for "go", which the test makes once it has seen
    # the marks: `[ -e go ]` opens nothing)
    script = ("cat ro.txt ro.txt /etc/hostname > /dev/null; "
              "while [ ! -e go ]; do sleep 0.05; done; "
              "chmod u+w ro.txt; echo y >> ro.txt; cat ro.txt > /dev/null")
    proc = _start_run(install, user_home, "sh", "-c", script)
    try:
        want = {ro.stat().st_ino, os.stat("/etc/hostname").st_ino}
        marks: dict[int, int] = {}

        def marked() -> bool:
            marks.clear()
            marks.update(_ignore_marks(install.user))
            return want <= marks.keys()

        wait_for(marked, "the ignore marks")
        close_nowrite = 0x10
        assert {marks.get(ino) for ino in want} == {close_nowrite}, marks
        (user_home / "work" / "go").touch()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    (cmd,) = commands(user_home, command_text="sh -c %")
    path = os.fsencode(ro)
    assert [e.path for e in cmd.writes] == [path]
    # the read after the write (3 bytes) is there; the two before it
    # (a file the user could not write) are not
    assert [(e.path, e.size) for e in cmd.reads] == [(path, 3)]


def test_run_ignore_marks_take_at_most_a_32nd_of_the_users_mark_limit(
        install, user_home, fanotify_mark_limit):
    """Every ignore mark counts against the user's max_user_marks, which
    his other command lines need for their mount marks.  With the limit of
    a 1 GB machine (8,192) a command line reading 1,000 files the user may
    not write takes 256 ignore marks, not 1,000, and a second command line
    started meanwhile is still recorded."""
    write_config(user_home, "", install)
    ro = user_home / "work" / "ro"
    ro.mkdir()
    for i in range(1000):
        (ro / f"{i:04}").write_text("x")  # root's, mode 644: readable, not writable
    script = "cat ro/* > /dev/null; touch read; while [ ! -e go ]; do sleep 0.05; done"
    proc = _start_run(install, user_home, "sh", "-c", script)
    try:
        wait_for((user_home / "work" / "read").exists, "the reads")
        cap = fanotify_mark_limit // 32
        counted: list[int] = []

        def capped() -> bool:  # cat, libc, ... and ro/: the holder adds them as it reads events
            counted.append(len(_ignore_marks(install.user)))
            return counted[-1] >= cap

        # the holder lags behind the reads on a busy machine: wait for the
        # cap itself, then check that it holds
        wait_for(capped, f"{cap} ignore marks", 60)
        for _ in range(5):
            capped()
        assert set(counted[-6:]) == {cap}, counted
        other = run_as_user(install, user_home, "run", "--", "sh", "-c", "echo x > other")
        assert other.returncode == 0 and other.stderr == "", other.stderr
        assert commands(user_home, wfile=user_home / "work" / "other")
        (user_home / "work" / "go").touch()
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err


@pytest.mark.parametrize("damage", ["garbage", "newer schema"])
def test_run_with_an_unusable_journal_says_so_and_keeps_the_command(install, user_home, damage):
    """A corrupt journal, or one of a newer shournal: one line on stderr,
    the command's own exit status, and the command waits (durably) until
    the journal is usable again; then it is stored once."""
    res = run_as_user(install, user_home, "run", "true")
    assert res.returncode == 0, res.stderr
    journal = Path(journal_url(user_home).removeprefix("sqlite:///"))

    def bump_version(by: int) -> None:
        with sqlite3.connect(journal) as db:
            db.execute("UPDATE schema_version SET version = version + ?", (by,))
        db.close()

    good = journal.read_bytes()
    if damage == "garbage":
        journal.write_bytes(b"\x8f not a database \x00" * 4096)
        want = "not usable"
    else:
        bump_version(1)
        want = "newer"
    res = run_as_user(install, user_home, "run", "sh", "-c", "echo kept > kept_out; exit 3")
    assert res.returncode == 3
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("shournal: "), res.stderr
    assert want in lines[0] and "kept" in lines[0], lines
    assert "Traceback" not in res.stderr
    doctor = run_as_user(install, user_home, "doctor")
    assert "1 command(s) in the spool's inbox" in doctor.stdout + doctor.stderr, doctor
    if damage == "garbage":
        journal.write_bytes(good)  # restored from a backup
    else:
        bump_version(-1)  # the newer shournal's journal is back with its owner
    res = run_as_user(install, user_home, "run", "sh", "-c", "echo next > next_out")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    (kept,) = commands(user_home, command_text="sh -c 'echo kept%")
    assert kept.return_value == 3
    assert [e.path.rsplit(b"/", 1)[1] for e in kept.writes] == [b"kept_out"]
    assert len(commands(user_home, command_text="sh -c 'echo next%")) == 1
    # and only once, whoever stores the next command
    run_as_user(install, user_home, "run", "true")
    assert len(commands(user_home, command_text="sh -c 'echo kept%")) == 1
