"""Where shournal's files live.  Environment overrides exist for
development and tests; the installed defaults are written by `make install`
into _installed.py (absent in a source checkout)."""

from __future__ import annotations

import os
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
