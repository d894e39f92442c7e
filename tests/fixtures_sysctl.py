"""Run an attack with a sysctl at its unfavourable value, where a defence
must not depend on it (docs/security.md, "Sysctls").

Sysctls are global: the value is set for as short as the test lasts, under
an exclusive lock (so two test processes never interleave their changes),
and the old value is always written back.  A test using one of these
fixtures is marked `serial`: `make test` runs it after the parallel pass,
when no other test of the run is changed by the value."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

PROC_SYS = Path("/proc/sys")
LOCK = Path("/var/tmp/shournal-tests-sysctl.lock")


# (the fixtures below)
MACHINE_WIDE = frozenset({
    "suid_dumpable", "userns_allowed", "links_unprotected", "fanotify_mark_limit",
})  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before -m selects by the mark
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if MACHINE_WIDE.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.serial)


def sysctl_path(name: str) -> Path:
    return PROC_SYS / name.replace(".", "/")


@contextmanager
def sysctls(settings: dict[str, str]) -> Iterator[dict[str, str]]:
    """Set each sysctl (dotted name: value); yields the old values.  Skips
    the test if the kernel lacks one or it cannot be written here."""
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old: dict[str, str] = {}
        try:
            for name, value in settings.items():
                path = sysctl_path(name)
                if not path.exists():
                    pytest.skip(f"this kernel has no {name}")
                old[name] = path.read_text().strip()
                try:
                    path.write_text(value)
                except OSError as exc:
                    pytest.skip(f"cannot set {name} here: {exc}")
            yield old
        finally:
            for name, value in reversed(old.items()):
                sysctl_path(name).write_text(value)


@pytest.fixture
def suid_dumpable(request: pytest.FixtureRequest) -> Iterator[str]:
    """fs.suid_dumpable (parametrize indirectly with "0", "1" or "2"): 1
    makes a process that changed its credentials dumpable as itself, 2 as
    root (core_pattern permitting)."""
    with sysctls({"fs.suid_dumpable": request.param}):
        yield request.param


@pytest.fixture
def userns_allowed() -> Iterator[None]:
    """Unprivileged users may create user namespaces (Debian's default;
    off on hardened systems): the user can be "root" in a namespace of his
    own, with mounts of his own, and try to pass it off as shournal's."""
    settings = {}
    if sysctl_path("kernel.unprivileged_userns_clone").exists():  # Debian's patch
        settings["kernel.unprivileged_userns_clone"] = "1"
    if sysctl_path("kernel.apparmor_restrict_unprivileged_userns").exists():  # Ubuntu's
        settings["kernel.apparmor_restrict_unprivileged_userns"] = "0"
    if int(sysctl_path("user.max_user_namespaces").read_text()) == 0:
        settings["user.max_user_namespaces"] = "1024"
    with sysctls(settings):
        yield


@pytest.fixture
def links_unprotected() -> Iterator[None]:
    """fs.protected_symlinks=0 and fs.protected_regular=0 (the kernel's
    defaults without systemd's sysctl.d): in a sticky world-writable
    directory (/tmp), a link planted by another user is followed and an
    existing file of another user is opened by O_CREAT."""
    with sysctls({"fs.protected_symlinks": "0", "fs.protected_regular": "0"}):
        yield


@pytest.fixture
def fanotify_mark_limit() -> Iterator[int]:
    """fs.fanotify.max_user_marks at 8,192 (a 1 GB machine's): each user's
    fanotify marks, of all his recorders together, are limited to it."""
    with sysctls({"fs.fanotify.max_user_marks": "8192"}):
        yield 8192
