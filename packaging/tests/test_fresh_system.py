"""The Debian package on a fresh Debian 12: install it with apt, record an
interactive bash and zsh of an unprivileged user, honour dpkg-statoverride,
and leave nothing behind after remove + purge.

Run by packaging/test-fresh-system.sh (it builds the .deb and the cached
debootstrap root filesystem and sets SHOURNAL_CI_DEB / SHOURNAL_CI_ROOTFS).
The tests share one root filesystem and run in file order.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from rootfs import PROMPT, USER, Root, interact, required_env

from shournal import __version__

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chroot, namespaces)")

HELPER = "/usr/libexec/shournal/shournal-suid"
TRIPLET_LIB = "/usr/lib/x86_64-linux-gnu/shournal/libshournal_preload.so"
# Snapshot of everything a package could leave behind: every path with its
# type, mode and owner, plus the content of /etc.  Left out: the kernel file
# systems, user homes and /tmp (user data), and dpkg's and apt's own records
# and logs of the installation.
SNAPSHOT = r"""
find / -xdev \( -path /proc -o -path /dev -o -path /run -o -path /tmp -o -path /home \
    -o -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/cache/apt \
    -o -path /var/cache/debconf -o -path /var/cache/ldconfig -o -path /var/log \) -prune \
    -o -printf '%p %y %m %u %g\n' | LC_ALL=C sort
find /etc -xdev -type f -exec md5sum {} + | LC_ALL=C sort
"""


@pytest.fixture(scope="module")
def deb() -> Path:
    path = Path(required_env("SHOURNAL_CI_DEB"))
    assert path.is_file(), path
    return path


@pytest.fixture(scope="module")
def root(deb: Path) -> Iterator[Root]:
    r = Root(Path(required_env("SHOURNAL_CI_ROOTFS")))
    try:
        # The shells under test and an ordinary user; nothing of shournal yet.
        r.run("apt-get update -qq && DEBIAN_FRONTEND=noninteractive "
              "apt-get install -y -qq --no-install-recommends zsh >/dev/null")
        r.run(f"useradd --create-home --shell /bin/bash {USER}")
        (r.path / "tmp" / deb.name).write_bytes(deb.read_bytes())
        r.baseline = r.run(SNAPSHOT)  # type: ignore[attr-defined]
        yield r
    finally:
        r.close()


def apt_install(root: Root, deb: Path, extra: str = "") -> str:
    return root.run(f"DEBIAN_FRONTEND=noninteractive apt install -y -q {extra} ./tmp/{deb.name}"
                    " 2>&1 </dev/null")


def test_apt_install_puts_files_in_debian_places(root: Root, deb: Path) -> None:
    out = apt_install(root, deb)
    assert "Setting up shournal" in out, out
    listing = root.run(
        f"stat -c '%A %U %G %n' {HELPER} {TRIPLET_LIB} /usr/libexec/shournal/shournal-listener"
        " /usr/share/shournal/shournal.bash /usr/share/shournal/shournal.zsh /usr/bin/shournal"
    )
    assert f"-rwsr-xr-x root root {HELPER}" in listing
    assert f"-rw-r--r-- root root {TRIPLET_LIB}" in listing
    assert "-rwxr-xr-x root root /usr/libexec/shournal/shournal-listener" in listing
    assert "-rw-r--r-- root root /usr/share/shournal/shournal.bash" in listing
    # The group exists and nobody is a member (the helper relies on that).
    group = root.run("getent group shournal").strip()
    assert group.startswith("shournal:x:") and group.endswith(":"), group
    # The shell integration points at the installed library, not a template.
    bash_rc = (root.path / "usr/share/shournal/shournal.bash").read_text()
    assert TRIPLET_LIB in bash_rc and "@PRELOAD_LIB@" not in bash_rc
    # Completion where bash-completion and zsh look; a man page per command.
    for path in ("usr/share/bash-completion/completions/shournal",
                 "usr/share/zsh/vendor-completions/_shournal",
                 "usr/share/man/man1/shournal.1.gz", "usr/share/man/man1/shournal-query.1.gz"):
        assert (root.path / path).is_file(), path
    # A private environment with no pip: nothing is fetched at install time.
    assert not list((root.path / "usr/lib/shournal/venv").rglob("pip"))
    assert root.run("shournal version", user=USER).strip().endswith(__version__)
    check = root.run(f"{HELPER} check", user=USER, check=False)
    assert "setuid-root ok" in check and "fanotify ok" in check, check


def _records(root: Root, kind: str) -> None:
    home = root.path / "home" / USER
    if kind == "bash":
        rc = home / ".bashrc"
        rc.write_text(f"PS1='{PROMPT}'\nsource /usr/share/shournal/shournal.bash\n"
                      "SHOURNAL_ENABLE\n")
    else:
        rc = home / ".zshrc"
        rc.write_text(f"PS1='{PROMPT}'\nunsetopt PROMPT_SP\n"
                      "source /usr/share/shournal/shournal.zsh\nSHOURNAL_ENABLE\n")
    uid_gid = (home.stat().st_uid, home.stat().st_gid)
    os.chown(rc, *uid_gid)
    shell = root.spawn([kind, "-i"])
    try:
        shell.expect_exact(PROMPT)
        assert "shournal:" not in shell.before, shell.before
        out = interact(shell, 'echo "$SHOURNAL_SESSION_ID"')
        assert out.strip(), "SHOURNAL_ENABLE did not start a session"
        interact(shell, f"cd ~ && echo written-by-{kind} > out-{kind}.txt")
        # The listener stores in the background; ask until it has.
        out = interact(shell, f"for i in $(seq 100); do shournal query --wfile out-{kind}.txt "
                              "&& break; sleep 0.1; done")
        assert f"echo written-by-{kind} > out-{kind}.txt" in out, out
        shell.sendline("exit 7")
        shell.expect(__import__("pexpect").EOF)
        shell.close()
        assert shell.exitstatus == 7, (shell.exitstatus, shell.signalstatus)
    finally:
        if shell.isalive():
            shell.terminate(force=True)


def test_interactive_bash_is_recorded(root: Root) -> None:
    _records(root, "bash")


def test_interactive_zsh_is_recorded(root: Root) -> None:
    _records(root, "zsh")


def test_statoverride_is_respected(root: Root, deb: Path) -> None:
    root.run(f"dpkg-statoverride --update --add root root 0755 {HELPER}")
    assert root.run(f"stat -c %a {HELPER}").strip() == "755"
    apt_install(root, deb, "--reinstall")
    assert root.run(f"stat -c %a {HELPER}").strip() == "755"
    root.run(f"dpkg-statoverride --remove {HELPER}")
    apt_install(root, deb, "--reinstall")
    assert root.run(f"stat -c %a {HELPER}").strip() == "4755"


def test_remove_and_purge_leave_nothing(root: Root, deb: Path) -> None:
    leftovers = "find / -xdev \\( -path /proc -o -path /dev -o -path /home -o -path /tmp \\) " \
                "-prune -o -name '*shournal*' -print"
    # Root's byte code from the tests above must go too.
    root.run("shournal version >/dev/null")
    root.run("DEBIAN_FRONTEND=noninteractive apt-get purge -y -q shournal")
    assert root.run(leftovers).strip() == ""
    after_first = root.run(SNAPSHOT)
    # Again, through remove first: the group stays until purge (policy).
    apt_install(root, deb)
    root.run("DEBIAN_FRONTEND=noninteractive apt-get remove -y -q shournal")
    assert root.run("getent group shournal").startswith("shournal:")
    assert not (root.path / "usr/lib/shournal").exists()
    root.run("DEBIAN_FRONTEND=noninteractive apt-get purge -y -q shournal")
    assert root.run("getent group shournal", check=False).strip() == ""
    assert root.run(leftovers).strip() == ""
    assert root.run(SNAPSHOT) == after_first
    # Compared with before the first install, only the dependencies apt
    # pulled in remain, and /etc's user and group databases are unchanged.
    before = set(root.baseline.splitlines())  # type: ignore[attr-defined]
    new = [line for line in after_first.splitlines() if line not in before]
    for name in ("passwd", "group", "shadow", "gshadow"):
        path = f"/etc/{name}"
        assert [ln for ln in new if ln.endswith(f"  {path}")] == [], f"{path} changed"
