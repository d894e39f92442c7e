"""The holder relays an event only if the user reaches the file by its path,
and hands on only descriptors it opened itself, as the user.

The kernel opens an event's fd without any permission check, and faccessat2
on that fd sees the inode only.  A 0644 file in a directory only root may
search (0700) is not the user's to read, yet a setuid program, a sudo rule
or root (a backup or scanner opening /proc/<pid>/root/...) may read it in
his namespace.  And the kernel's fd has O_NOATIME, which the kernel grants
a file's owner only: through it the user would read other people's files
without moving their atime.

Every attack runs against the installed helper and, as the positive control,
against a build of the helper before the fix (UNFIXED), under which it
succeeds.  The user's LISTENER is tests/native/relay_loot.c: it logs every
record and descriptor fd 4 hands out."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_suid_security
import xxhash
from fixtures_shell import Install, wait_for
from test_suid_security import NATIVE, PUBLIC, SECRET, Recorders, Tools, user_dir

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: setuid copies and a second user"),
]

# the attack programs and their temporary directories
tools = test_suid_security.tools
scratch = test_suid_security.scratch

TESTS_NATIVE = Path(__file__).resolve().parents[1] / "native"
UNFIXED = "a94fa98"  # its holder checked the event's inode only, and relayed the kernel's fd


def _cc(src: Path, out: Path, include: Path = NATIVE) -> None:
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-I", str(include), "-o", str(out), str(src)],
                   check=True, capture_output=True)
    out.chmod(0o755)


@pytest.fixture(scope="module")
def loot_listener(tools: Tools) -> Path:
    out = tools.root / "relay-loot"
    _cc(TESTS_NATIVE / "relay_loot.c", out)
    return out


@pytest.fixture(scope="module")
def unfixed_install(install: Install) -> Iterator[tuple[Install, Path]]:
    """The helper as of UNFIXED, installed setuid root like the fixture's,
    and the loot listener built for its protocol."""
    repo = NATIVE.parent
    archive = subprocess.run(["git", "-c", f"safe.directory={repo}", "-C", str(repo), "archive",
                              UNFIXED, "native", "shournal/__init__.py"], capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"no git history with {UNFIXED} for the unfixed helper: "
                    f"{archive.stderr.decode(errors='replace').strip()}")
    root = Path(tempfile.mkdtemp(prefix="shournal-unfixed-", dir="/var/tmp"))
    try:
        root.chmod(0o755)
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
        subprocess.run(["make", "-s", "-C", str(root / "native"), f"BUILD={root}"], check=True,
                       capture_output=True)
        helper = root / "shournal-suid"
        os.chown(helper, 0, 0)
        helper.chmod(0o4755)
        loot = root / "relay-loot"
        _cc(TESTS_NATIVE / "relay_loot.c", loot, root / "native")
        yield dataclasses.replace(install, helper=helper), loot
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["fixed", UNFIXED])
def helper(request, install: Install,
           loot_listener: Path) -> Iterator[tuple[bool, Recorders, Path]]:  # fmt: skip
    """(fixed?, recorders of that helper, the loot listener for its protocol)."""
    fixed = request.param == "fixed"
    inst, loot = ((install, loot_listener) if fixed
                  else request.getfixturevalue("unfixed_install"))  # fmt: skip
    recs = Recorders(inst)
    try:
        yield fixed, recs, loot
    finally:
        recs.close()


def _loot(out: Path) -> list[str]:
    (out / "go").touch()
    wait_for((out / "loot").exists, "the listener's loot")
    return (out / "loot").read_text().splitlines()


def _about(loot: list[str], path: Path, content: bytes) -> list[str]:
    return [line for line in loot
            if line.startswith((f"record {path} ", f"fd {path} ")) or content.hex() in line]


@pytest.mark.parametrize("reader", ["setuid program", "root via /proc/PID/root"])
def test_file_behind_a_closed_directory_never_reaches_the_user(reader, helper, install, tools,
                                                               scratch):
    fixed, recs, loot = helper
    closed = scratch / "closed"
    closed.mkdir()
    closed.chmod(0o700)  # root's: the user may not search it
    secret = closed / "secret.sh"
    secret.write_bytes(SECRET)
    secret.chmod(0o644)  # readable by all, as an inode
    opened = scratch / "open"
    opened.mkdir()
    opened.chmod(0o755)
    public = opened / "public.sh"
    public.write_bytes(PUBLIC)
    public.chmod(0o644)
    out = user_dir(scratch, install.user, "out")
    prog = [str(tools.suidread), str(secret), str(public)] if reader == "setuid program" else []
    rec = recs.start(install.user, [str(loot), str(out), *prog])
    wait_for((out / "ready").exists, "the listener's command")
    if not prog:
        # root, in the user's namespace, as a backup or scanner walks it
        for path, content in ((secret, SECRET), (public, PUBLIC)):
            with open(f"/proc/{rec.listener}/root{path}", "rb") as f:
                assert f.read() == content
    loot = _loot(out)
    if prog:
        assert "child 0" in loot, (loot, rec.output())  # the setuid program read both
    leaked = _about(loot, secret, SECRET)
    if fixed:
        assert not leaked, f"the user got {secret} behind a 0700 directory: {leaked}"
        # dropped as any file he may not read: not even counted as lost
        assert {line for line in loot if line.startswith("lost ")} == {"lost 0"}, loot
    else:
        assert leaked, loot  # positive control: without the path check it leaks
    # positive control: the same read of a file the user may reach is relayed
    # with its record (size, hash) and its fd (a script candidate)
    assert f"record {public} {len(PUBLIC)} {xxhash.xxh64_intdigest(PUBLIC)}" in loot, loot
    assert [line for line in loot
            if line.startswith(f"fd {public} ") and line.endswith(PUBLIC.hex())], loot
    recs.wait(rec)


def test_relayed_fd_has_no_noatime(helper, install, tools, scratch):
    """A script candidate of another user, readable by all: the fd the
    listener gets must not have O_NOATIME (the kernel grants it the owner
    only), so reading through it moves the atime as the user's read would."""
    fixed, recs, loot = helper
    if os.statvfs(scratch).f_flag & os.ST_NOATIME:
        pytest.skip(f"{scratch} is on a noatime mount")
    script = user_dir(scratch, install.other, "other") / "x.sh"
    script.write_bytes(PUBLIC)
    os.chown(script, install.other.pw_uid, install.other.pw_gid)
    script.chmod(0o644)
    out = user_dir(scratch, install.user, "out")
    rec = recs.start(install.user, [str(loot), str(out), "/bin/cat", str(script)])
    wait_for((out / "ready").exists, "the listener's command")
    # The command's read moved the atime; put it back before the mtime, so
    # that any read moves it again (relatime) -- the holder's own reads
    # (hash, with the kernel's O_NOATIME fd) never do.
    st = script.stat()
    before = st.st_mtime_ns - 3600 * 10**9
    os.utime(script, ns=(before, st.st_mtime_ns))
    loot = _loot(out)
    assert "child 0" in loot, (loot, rec.output())
    fds = [line.split() for line in loot if line.startswith(f"fd {script} ")]
    assert len(fds) == 1 and fds[0][3] == PUBLIC.hex(), loot  # the listener read it
    noatime = fds[0][2] == "1"
    moved = script.stat().st_atime_ns != before
    if fixed:
        assert not noatime and moved, (loot, script.stat())
    else:
        assert noatime and not moved, (loot, script.stat())  # positive control
    recs.wait(rec)


def test_path_that_no_longer_leads_to_the_file_counts_as_lost(helper, install, tools, scratch):
    """Between the read and the holder's look at it, one file is renamed
    (its path follows it: still relayed) and another replaced while a hard
    link keeps it (its path now names another file): that one cannot be
    checked by its path and is counted as lost, never relayed."""
    fixed, recs, loot = helper
    d = scratch / "files"
    d.mkdir()
    d.chmod(0o755)
    moved, replaced = d / "moved.sh", d / "replaced.sh"
    for f in (moved, replaced):
        f.write_bytes(PUBLIC)
        f.chmod(0o644)
    os.link(replaced, d / "keep.sh")
    (d / "new.sh").write_bytes(SECRET)
    out = user_dir(scratch, install.user, "out")
    rec = recs.start(install.user, [str(loot), str(out)])
    wait_for((out / "ready").exists, "the listener")
    os.kill(rec.holder, signal.SIGSTOP)  # the events wait in the kernel's queue
    try:
        for f in (moved, replaced):
            with open(f"/proc/{rec.listener}/root{f}", "rb") as fh:
                assert fh.read() == PUBLIC
        # on the host: no events, the namespace's mounts are copies
        os.rename(moved, d / "moved-to.sh")
        os.rename(d / "new.sh", replaced)
    finally:
        os.kill(rec.holder, signal.SIGCONT)
    loot = _loot(out)
    lost = sum(int(line.split()[1]) for line in loot if line.startswith("lost "))
    assert f"record {d / 'moved-to.sh'} {len(PUBLIC)} {xxhash.xxh64_intdigest(PUBLIC)}" in loot
    stale = [line for line in loot if line.startswith(("record ", "fd ")) and "replaced" in line]
    if fixed:
        assert not stale and lost == 1, loot
    else:
        assert stale and lost == 0, loot  # positive control: the stale path was relayed
    recs.wait(rec)


@pytest.mark.parametrize("directory", ["open", "closed"])
def test_read_of_a_file_deleted_since_is_relayed_only_if_its_directory_was_reachable(
        directory, install, tools, scratch, loot_listener):  # fmt: skip
    """`sed -i f` reads f, then replaces it: by the time the holder looks,
    the version read has no name left (the kernel calls it "f (deleted)").
    It is the input of f's lineage, so it is relayed under its path --
    but only if the user could have reached it there: a file of a 0700
    root directory, read and deleted by root in his namespace, stays
    unseen (the 0755 directory is the positive control)."""
    recs = Recorders(install)
    try:
        d = scratch / f"dir-{directory}"
        d.mkdir()
        d.chmod(0o755 if directory == "open" else 0o700)
        f = d / "data.txt"
        f.write_bytes(PUBLIC)
        f.chmod(0o644)
        out = user_dir(scratch, install.user, "out")
        rec = recs.start(install.user, [str(loot_listener), str(out)])
        wait_for((out / "ready").exists, "the listener")
        os.kill(rec.holder, signal.SIGSTOP)  # the events wait in the kernel's queue
        try:
            with open(f"/proc/{rec.listener}/root{f}", "rb") as fh:
                assert fh.read() == PUBLIC
            f.unlink()
        finally:
            os.kill(rec.holder, signal.SIGCONT)
        loot = _loot(out)
        lost = sum(int(line.split()[1]) for line in loot if line.startswith("lost "))
        mine = _about(loot, f, PUBLIC)
        if directory == "open":
            assert mine == [f"record {f} {len(PUBLIC)} {xxhash.xxh64_intdigest(PUBLIC)}"], loot
        else:
            assert mine == [] and not any("deleted" in line for line in loot), loot
        assert lost == 0, loot
        recs.wait(rec)
    finally:
        recs.close()
