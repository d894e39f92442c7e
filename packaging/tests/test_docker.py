"""The Docker edition, without a Docker engine: the image is built from
packaging/docker/Dockerfile by podman (chroot isolation, on a base image
imported from the debootstrap root filesystem), its file system is exported,
and the entrypoint runs in it in fresh namespaces with Docker's default
capability set, with and without the documented --cap-add flags, as the
image's user and with the journal directory bind-mounted like a volume.

Not covered here: Docker's seccomp and AppArmor profiles (podman cannot run
containers on this host: its OCI runtimes fail to set rlimits), see README.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from rootfs import ENTER, PACKAGING, required_env

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (podman, namespaces)")

IMAGE = "localhost/shournal-ci/shournal:test"
BASE = "localhost/shournal-ci/bookworm:latest"
# Docker's default capabilities (moby oci/caps/defaults.go).
DOCKER_CAPS = ("chown,dac_override,fsetid,fowner,mknod,net_raw,setgid,setuid,setfcap,"
               "setpcap,net_bind_service,sys_chroot,kill,audit_write")
ENTRYPOINT = "/usr/local/sbin/shournal-docker-entrypoint"
PROMPT = "user@shournal-ci:~$ "


def _podman(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], check=True, **kw)


@pytest.fixture(scope="module")
def image_root() -> Iterator[Path]:
    deb = required_env("SHOURNAL_CI_DEB")
    rootfs = required_env("SHOURNAL_CI_ROOTFS")
    tar = subprocess.Popen(["tar", "-C", rootfs, "--exclude=./.complete", "-c", "."],
                           stdout=subprocess.PIPE)
    _podman("import", "-q", "-", BASE, stdin=tar.stdout, stdout=subprocess.DEVNULL)
    assert tar.wait() == 0
    subprocess.run([str(PACKAGING / "docker" / "build-image.sh"), deb, IMAGE,
                    "--build-arg", f"BASE={BASE}", "--isolation", "chroot", "-q"],
                   check=True, env={**os.environ, "DOCKER": "podman"}, stdout=subprocess.DEVNULL)
    cid = _podman("create", IMAGE, capture_output=True, text=True).stdout.strip()
    root = Path(tempfile.mkdtemp(prefix="shournal-image-", dir="/var/tmp"))
    root.chmod(0o755)  # it becomes "/" for the unprivileged user
    try:
        export = subprocess.Popen(["podman", "export", cid], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-C", str(root), "-x"], stdin=export.stdout, check=True)
        assert export.wait() == 0
        yield root
    finally:
        _podman("rm", "-f", cid, stdout=subprocess.DEVNULL)
        shutil.rmtree(root, ignore_errors=True)


def _container(root: Path, caps: str, *cmd: str, nnp: bool = False,
               env: dict[str, str] | None = None) -> list[str]:
    """argv that runs the image's entrypoint like `docker run` would."""
    bounding = "-all," + ",".join("+" + c for c in caps.split(","))
    argv = [str(ENTER), str(root), "setpriv", f"--bounding-set={bounding}",
            "--inh-caps=-all", "--reuid=1000", "--regid=1000", "--init-groups",
            "--reset-env"]
    if nnp:
        argv.append("--no-new-privs")
    extra = [f"{k}={v}" for k, v in (env or {}).items()]
    return argv + ["env", "TERM=dumb", *extra, "/bin/sh", "-c",
                   f'cd ~ && exec {ENTRYPOINT} "$@"', "sh", *cmd]


def test_journal_directories_are_made_by_root_with_fixed_owners(image_root: Path) -> None:
    """Only root may make directories in /journal: a user who could would
    make /journal/root first and read root's journal through the link."""
    def owner_mode(rel: str) -> tuple[int, int]:
        st = (image_root / rel).lstat()
        assert stat.S_ISDIR(st.st_mode), rel
        return st.st_uid, stat.S_IMODE(st.st_mode)

    assert owner_mode("journal") == (0, 0o755)
    assert owner_mode("journal/root") == (0, 0o700)
    assert owner_mode("journal/user") == (1000, 0o700)
    assert os.readlink(image_root / "root/.local/share/shournal") == "/journal/root"
    assert os.readlink(image_root / "home/user/.local/share/shournal") == "/journal/user"


def test_without_flags_one_line_and_exit_1(image_root: Path) -> None:
    proc = subprocess.run(_container(image_root, DOCKER_CAPS, "bash", "-l"),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("shournal: cannot record in this container:")
    assert "--cap-add SYS_ADMIN --cap-add SYS_PTRACE" in lines[0]


def test_only_sys_admin_is_not_enough(image_root: Path) -> None:
    proc = subprocess.run(_container(image_root, DOCKER_CAPS + ",sys_admin", "true"),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and "CAP_SYS_PTRACE" in proc.stderr, proc.stderr


def test_no_new_privileges_is_explained(image_root: Path) -> None:
    proc = subprocess.run(_container(image_root, DOCKER_CAPS + ",sys_admin,sys_ptrace", "true",
                                     nnp=True),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and "no-new-privileges" in proc.stderr, proc.stderr


def test_opt_out_gives_an_unrecorded_shell(image_root: Path) -> None:
    proc = subprocess.run(
        _container(image_root, DOCKER_CAPS, "bash", "-c", "echo shell-ok",
                   env={"SHOURNAL_DOCKER_UNRECORDED": "1"}),
        capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and proc.stdout == "shell-ok\n"
    assert proc.stderr.startswith("shournal: NOT recording:"), proc.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_every_interactive_shell_recorded_into_the_volume(image_root: Path, shell: str) -> None:
    journal = image_root / "journal" / "user"
    argv = _container(image_root, DOCKER_CAPS + ",sys_admin,sys_ptrace", shell, "-l")
    if shell == "zsh":  # a fresh user's zsh would start its set-up wizard
        rc = image_root / "home/user/.zshrc"
        rc.write_text(f"PS1='{PROMPT}'\nunsetopt PROMPT_SP\n")
        os.chown(rc, 1000, 1000)
    proc = pexpect.spawn(argv[0], argv[1:], encoding="utf-8", timeout=60, echo=False,
                         env={"PATH": os.environ["PATH"]}, dimensions=(50, 250))
    try:
        proc.expect_exact(PROMPT)
        assert "shournal:" not in proc.before, proc.before
        proc.sendline(f"echo in-container-{shell} > a-{shell}.txt")
        proc.expect_exact(PROMPT)
        # An external program: its exec must join the command's namespace,
        # which needs CAP_SYS_PTRACE (without it, cp runs unobserved).
        proc.sendline(f"cp a-{shell}.txt c-{shell}.txt")
        proc.expect_exact(PROMPT)
        proc.sendline(f"for i in $(seq 100); do shournal query --wfile c-{shell}.txt && break;"
                      " sleep 0.1; done")
        proc.expect_exact(PROMPT)
        assert f"cp a-{shell}.txt c-{shell}.txt" in proc.before, proc.before
        proc.sendline("exit")
        proc.expect(pexpect.EOF)
    finally:
        proc.close(force=True)
    assert (journal / "journal.sqlite").is_file()
