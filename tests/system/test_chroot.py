"""shournal inside a chroot, as schroot, jailkit, arch-chroot or a package
build root set one up: the chroot's root is a mount point ("mountpoint") or
just a directory of the host's root file system ("plain").

A mount namespace joined with setns() starts at the namespace's root: a
naive join from inside a chroot leaves it.  The trampoline must keep the
caller's root, and recording must work in both kinds of chroot.

The jail shows the host's /usr and /etc read-only, its own /proc, the
host's /dev, and the test's install, tools, home and checkout at their
paths; a file JAIL exists only in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import test_suid_security
from fixtures_shell import REPO, Install, Shell, warnings_in
from test_recording import only_command
from test_suid_security import Recorders, Tools, helper_exec, run, start_reporting, user_dir

# the attack tests' fixtures, shared
tools = test_suid_security.tools
scratch = test_suid_security.scratch
recorders = test_suid_security.recorders

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: chroot, mounts, setuid copies"),
]

JAIL_KINDS = ["mountpoint", "plain"]
HOST_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc")


def file_id(path: Path | str) -> str:
    """dev:ino, as `stat -c %d:%i` prints it."""
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}"


@dataclass
class Jail:
    root: Path
    kind: str


def _mounts_under(root: Path) -> list[str]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(root) or point.startswith(f"{root}/"):
            found.append(point)
    return found


@pytest.fixture(params=JAIL_KINDS)
def jail(request, install: Install, tools: Tools, user_home: Path) -> Iterator[Jail]:
    root = Path(tempfile.mkdtemp(prefix="shournal-jail-", dir="/var/tmp"))
    root.chmod(0o755)
    mounted: list[Path] = []

    def mount(*args: str, target: Path) -> None:
        subprocess.run(["mount", *args, str(target)], check=True, capture_output=True)
        mounted.append(target)
        # never let an umount below propagate to the host's mounts
        subprocess.run(["mount", "--make-private", str(target)], check=True,
                       capture_output=True)

    try:
        if request.param == "mountpoint":
            mount("--bind", str(root), target=root)
        for name in HOST_DIRS:
            host = Path("/") / name
            if host.is_symlink():
                (root / name).symlink_to(os.readlink(host))
            elif host.is_dir():
                (root / name).mkdir()
                mount("--bind", "-o", "ro", str(host), target=root / name)
        (root / "proc").mkdir()
        mount("-t", "proc", "proc", target=root / "proc")
        (root / "dev").mkdir()
        mount("--bind", "/dev", target=root / "dev")
        (root / "tmp").mkdir()
        (root / "tmp").chmod(0o1777)
        for shared, ro in ((REPO, True), (install.root, True), (tools.root, False),
                           (user_home, False)):
            inside = root / str(shared).lstrip("/")
            inside.mkdir(parents=True, exist_ok=True)
            mount("--bind", *(["-o", "ro"] if ro else []), str(shared), target=inside)
        (root / "JAIL").write_text("only in the jail\n")
        yield Jail(root, request.param)
    finally:
        for target in reversed(mounted):
            # lazily: a process of a failed test may still use the jail
            subprocess.run(["umount", "--lazy", str(target)], capture_output=True)
        left = _mounts_under(root)
        # never delete through a mount that is still there (the home, the tools)
        assert not left, f"still mounted, {root} left in place: {left}"
        shutil.rmtree(root)


def naive_join_root(jail: Jail, pid: int) -> str:
    """What a plain setns() into `pid`'s mount namespace, from inside the
    jail, sees as "/": the positive control of the escape."""
    r = run(["/usr/sbin/chroot", str(jail.root), "/usr/bin/nsenter",
             f"--mount=/proc/{pid}/ns/mnt", "/usr/bin/stat", "-c", "%d:%i", "/"])
    assert r.rc == 0, r
    return r.out.strip()


def test_exec_keeps_the_jail(jail, install, tools, scratch, recorders: Recorders):
    out = user_dir(scratch, install.user, "out")
    rec = start_reporting(recorders, tools, install.user, out, chroot=jail.root)
    r = helper_exec(install, rec.holder, "/bin/sh", ["PATH=/usr/bin:/bin"], "sh", "-c",
                    "stat -c %d:%i /; readlink /proc/self/ns/mnt; cat /JAIL", chroot=jail.root)
    assert r.rc == 0 and r.err == "", r
    seen_root, seen_ns, marker = r.out.splitlines()
    assert seen_ns == (out / "ns").read_text().strip()  # joined the holder's namespace
    assert seen_root == file_id(jail.root) and marker == "only in the jail"
    assert naive_join_root(jail, rec.holder) == file_id("/")


def test_exec_refuses_a_namespace_made_outside_the_jail(jail, install, tools, scratch,
                                                         recorders: Recorders):
    out = user_dir(scratch, install.user, "out")
    rec = start_reporting(recorders, tools, install.user, out)  # on the host
    r = helper_exec(install, rec.holder, "/usr/bin/touch", [], "touch", str(out / "ran"),
                    chroot=jail.root)
    assert r.rc == 1 and r.out == "", r
    assert len(r.err.splitlines()) == 1 and r.err.startswith("shournal-suid: refusing"), r
    assert not (out / "ran").exists()
    assert naive_join_root(jail, rec.holder) == file_id("/")


def test_recording_works_in_the_jail(jail, install, user_home):
    work = user_home / "work"
    sh = Shell("bash", install, user_home, chroot=jail.root)
    printed = sh.run("cat /JAIL; echo hi > out1")
    printed += sh.run("cp out1 out2")
    sh.exit()
    assert "only in the jail" in printed
    assert warnings_in(printed) == [] and "Success" not in printed, printed
    assert only_command(user_home, wfile=work / "out1").text == "cat /JAIL; echo hi > out1"
    assert only_command(user_home, wfile=work / "out2").text == "cp out1 out2"


def test_shell_redirections_keep_the_jail(jail, install, user_home):
    """The shell opens its redirections through the namespace's copy of its
    root: ".." there must not climb out of the jail."""
    outside = Path(tempfile.mkdtemp(prefix="shournal-outside-", dir="/var/tmp"))
    try:
        os.chown(outside, install.user.pw_uid, install.user.pw_gid)
        (outside / "secret").write_text("host only\n")
        (outside / "secret").chmod(0o644)
        up = "/.." * len(jail.root.parts)
        sh = Shell("bash", install, user_home, chroot=jail.root)
        printed = sh.run(f"cat < {up}{outside}/secret; echo x > {up}{outside}/escaped")
        printed += sh.run("echo hi > inside")
        # a magic link (/dev/fd/63) cannot resolve in the namespace's root:
        # the shell's own open
        printed += sh.run("cat < <(echo via-magic-link)")
        sh.exit()
        assert "via-magic-link\r\n" in printed.replace("echo via-magic-link", "")
        assert "host only" not in printed
        assert not (outside / "escaped").exists()
        assert "No such file or directory" in printed
        # recorded all along: the redirections did go through the namespace
        assert only_command(user_home, wfile=user_home / "work" / "inside").text == \
            "echo hi > inside"
    finally:
        shutil.rmtree(outside)
