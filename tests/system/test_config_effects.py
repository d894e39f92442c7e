"""Config settings that reach the setuid helper (through <rundir>/setup-args,
written by the listener, read by the preload library): excluded mounts are
never marked, and without any read recording no read marks are set."""

from __future__ import annotations

import grp
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures_shell import Shell, recorded, wait_for, wait_stored, write_config

pytestmark = [pytest.mark.shell, pytest.mark.root]


def _commands(home: Path) -> dict[str, object]:
    return {c.text: c for c in recorded(home)}


@pytest.fixture
def shm(install) -> Iterator[Path]:
    """A directory of the test user's on /dev/shm (another mount)."""
    d = Path("/dev/shm") / f"shournal-test-{os.getpid()}-{time.monotonic_ns()}"
    d.mkdir()
    os.chown(d, install.user.pw_uid, install.user.pw_gid)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_excluded_mount_is_not_observed(install, user_home, shm):
    write_config(user_home, '[mounts]\nexclude_paths = ["/dev/shm"]\n', install)
    sh = Shell("bash", install, user_home)
    sh.run("true")  # the first listener writes the options
    wait_stored(user_home)
    args = (user_home / "run" / "shournal" / "setup-args").read_bytes()
    assert args.startswith(b"--writable-reads\0--exclude-mount\0/dev/shm\0"), args
    sh.run(f"echo x > {shm}/excluded")
    sh.run("echo y > here")
    wait_stored(user_home)
    sh.exit()
    cmds = _commands(user_home)
    assert cmds[f"echo x > {shm}/excluded"].writes == []
    assert [e.path for e in cmds["echo y > here"].writes] == [
        os.fsencode(user_home / "work" / "here")
    ]


def test_config_changed_by_a_command_line_applies_to_the_next(install, user_home, shm):
    """The listener starts after its command line has ended and only then
    reads the config: a command line that edits it is followed by command
    lines with the new options (with the listener started at the command
    line's start, the change waited one command line more)."""
    write_config(user_home, "", install)
    cfg = user_home / ".config" / "shournal" / "config.toml"
    sh = Shell("bash", install, user_home)
    sh.run(f"echo a > {shm}/before")
    sh.run(f"sleep 0.5; printf '[mounts]\\nexclude_paths = [\"/dev/shm\"]\\n' > {cfg}")
    wait_stored(user_home)
    sh.run(f"echo b > {shm}/after")
    wait_stored(user_home)
    sh.exit()
    assert "exclude_paths" in cfg.read_text()
    cmds = _commands(user_home)
    assert [e.path for e in cmds[f"echo a > {shm}/before"].writes] == [
        os.fsencode(shm / "before")]
    assert cmds[f"echo b > {shm}/after"].writes == []


def _is_holder(pid: int) -> bool:
    """A helper's child of group shournal: its holder (a spare helper it
    forked runs with the user's group)."""
    status = Path(f"/proc/{pid}/status").read_text()
    gid = int(next(x for x in status.splitlines() if x.startswith("Gid:")).split()[1])
    return gid == grp.getgrnam("shournal").gr_gid


def _mark_masks(pid: int) -> set[int]:
    """The fanotify mount marks' masks of process `pid`'s groups."""
    masks: set[int] = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        with open(f"/proc/{pid}/fdinfo/{fd}") as fh:
            for line in fh:
                if line.startswith("fanotify mnt_id:"):
                    masks.add(int(line.split(" mask:")[1].split()[0], 16))
    return masks


@pytest.mark.parametrize("reads", [True, False], ids=["reads", "no-reads"])
def test_read_marks_follow_the_config(reads, install, user_home):
    if not reads:
        write_config(user_home, "[read_events]\nenable = false\n\n"
                     "[script_archive]\nenable = false\n", install)
    sh = Shell("bash", install, user_home)
    rundir = user_home / "run" / "shournal"
    try:
        sh.run("true")
        wait_stored(user_home)
        # the line runs until the test makes "go" (`[ -e go ]` opens
        # nothing); its holder: the child of the helper its marker names
        # (not a holder of an earlier line, a prepared one or another test's)
        sh.proc.sendline("while [ ! -e go ]; do sleep 0.05; done")
        try:
            wait_for(lambda: any(rundir.glob("*.run")), "the line's marker")
            helper = int(next(rundir.glob("*.run")).stem)
            children = Path(f"/proc/{helper}/task/{helper}/children").read_text().split()
            (holder,) = [int(c) for c in children if _is_holder(int(c))]
            masks = _mark_masks(holder)
        finally:
            (user_home / "work" / "go").touch()
        sh.proc.expect("__SHOURNAL_PROMPT__", timeout=30)
        sh.exit()
    except BaseException:
        sh.proc.terminate(force=True)
        raise
    close_write, close_nowrite = 0x8, 0x10
    assert masks == ({close_write | close_nowrite} if reads else {close_write}), masks
