"""Run things inside a scratch copy of a fresh Debian 12 root filesystem
(see packaging/ci/).  Shared by the package and container tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pexpect

PACKAGING = Path(__file__).resolve().parent.parent
ENTER = PACKAGING / "ci" / "enter-root.sh"
PROMPT = "__SHOURNAL_PKG_PROMPT__ "
USER = "alice"


def required_env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise RuntimeError(f"{name} is not set: run packaging/test-fresh-system.sh")
    return value


class Root:
    """A private copy of the cached root filesystem, removed by close()."""

    def __init__(self, cached: Path) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="shournal-root-", dir="/var/tmp"))
        self.path.rmdir()
        subprocess.run(["cp", "-a", str(cached), str(self.path)], check=True)
        shutil.copy("/etc/resolv.conf", self.path / "etc" / "resolv.conf")

    def run(self, script: str, check: bool = True, user: str | None = None) -> str:
        """Run a sh script inside (as root, or as `user`); return its output."""
        argv = [str(ENTER), str(self.path)]
        if user:
            argv += ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups",
                     "--reset-env"]
        argv += ["/bin/sh", "-ec", script]
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check and proc.returncode != 0:
            raise AssertionError(f"in root: {script!r} exited {proc.returncode}:\n{proc.stdout}")
        return proc.stdout

    def spawn(self, argv: list[str], user: str | None = USER) -> pexpect.spawn:
        prefix = [str(ENTER), str(self.path)]
        if user:
            prefix += ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups",
                       "--reset-env"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "dumb",
               "LANG": "C.UTF-8"}
        return pexpect.spawn(prefix[0], prefix[1:] + argv, env=env, encoding="utf-8",
                             timeout=60, echo=False, dimensions=(50, 250))

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def interact(shell: pexpect.spawn, command: str) -> str:
    """Send one command line to an interactive shell; return its output."""
    shell.sendline(command)
    shell.expect_exact(PROMPT)
    return shell.before
