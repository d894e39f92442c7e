"""Where shournal's files live.  Environment overrides exist for
development and tests; the installed defaults are written by `make install`
into _installed.py (absent in a source checkout)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

try:  # written by the installer
    from shournal import _installed  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - source checkout
    _installed = None

_DEFAULT_PREFIX = "/usr/local"


def _installed_attr(name: str, default: str) -> str:
    return getattr(_installed, name, default) if _installed else default


def suid_helper() -> Path:
    return Path(
        os.environ.get("SHOURNAL_SUID_PATH")
        or _installed_attr("SUID_PATH", f"{_DEFAULT_PREFIX}/libexec/shournal/shournal-suid")
    )


def listener() -> Path:
    return Path(
        os.environ.get("SHOURNAL_LISTENER")
        or _installed_attr("LISTENER_PATH", f"{_DEFAULT_PREFIX}/libexec/shournal/shournal-listener")
    )


def preload_lib() -> Path:
    return Path(
        os.environ.get("SHOURNAL_PRELOAD_LIB")
        or _installed_attr("PRELOAD_PATH", f"{_DEFAULT_PREFIX}/lib/shournal/libshournal_preload.so")
    )


def shell_dir() -> Path:
    """The bash and zsh integration scripts."""
    env = os.environ.get("SHOURNAL_SHELL_DIR")
    if env:
        return Path(env)
    installed = _installed_attr("SHELL_DIR", "")
    if installed:
        return Path(installed)
    return Path(__file__).resolve().parent.parent / "shell"


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    if value and value.startswith("/"):
        return Path(value)
    return Path.home() / fallback


def config_dir() -> Path:
    return _xdg("XDG_CONFIG_HOME", ".config") / "shournal"


def config_file() -> Path:
    return config_dir() / "config.toml"


def data_dir() -> Path:
    return _xdg("XDG_DATA_HOME", ".local/share") / "shournal"


def default_db_path() -> Path:
    return data_dir() / "journal.sqlite"


def archive_dir() -> Path:
    """The content archive of commands recorded with their apparatus
    (shournal.reproduce.archive), beside the default journal."""
    return data_dir() / "archive"


def runtime_dir() -> Path:
    """Per-user directory for in-flight markers and listener warnings.

    Must match setup_rundir() in native/libshournal_preload.c.
    """
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and xdg.startswith("/"):
        return Path(xdg) / "shournal"
    return Path(f"/tmp/shournal-{os.getuid()}")


class UnsafeDirectory(OSError):
    """A directory that another user made or may write; not used."""


def check_own_directory(path: Path, *, follow_links: bool, forbidden_mode: int) -> None:
    """Raise UnsafeDirectory unless ``path`` is a directory owned by this
    user without any of the ``forbidden_mode`` bits; ``follow_links``: of
    the directory a link points to (else a link is refused).

    :raises OSError: it cannot be examined (FileNotFoundError: absent).
    """
    st = os.stat(path) if follow_links else os.lstat(path)
    where = f"{path} -> {os.path.realpath(path)}" if follow_links and path.is_symlink() else path
    if stat.S_ISLNK(st.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "is not a directory"
    elif st.st_uid != os.getuid():
        problem = f"belongs to uid {st.st_uid}, not to you (uid {os.getuid()})"
    elif st.st_mode & forbidden_mode:
        mode = stat.S_IMODE(st.st_mode)
        verb = "open to" if forbidden_mode & 0o044 else "writable by"
        problem = f"is {verb} group or others (mode {mode:04o})"
    else:
        return
    raise UnsafeDirectory(f"{where} {problem}; not used")


def private_runtime_dir(create: bool = True) -> Path:
    """runtime_dir(), made (mode 0700) if absent and ``create``, and used
    only by the rules of setup_rundir() in native/libshournal_preload.c: a
    directory, not a link, of this user, without group or other permissions.
    In /tmp anybody could have made it first and planted links in it.

    :raises UnsafeDirectory: it is not such a directory.
    :raises OSError: it cannot be made, or (``create`` false) is absent.
    """
    path = runtime_dir()
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    check_own_directory(path, follow_links=False, forbidden_mode=0o077)
    return path
