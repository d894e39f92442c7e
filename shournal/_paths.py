"""Where shournal's files live.  Environment overrides exist for
development and tests; the installed defaults are written by `make install`
into _installed.py (absent in a source checkout)."""

from __future__ import annotations

import errno
import os
import stat

# Not at the top: `shournal query`'s fast path needs only the text of two
# of these paths, and pathlib (with urllib.parse, ipaddress, fnmatch, re)
# costs it ~3 ms.  Every function that returns a Path imports it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

try:  # written by the installer
    from shournal import _installed  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - source checkout
    _installed = None

_DEFAULT_PREFIX = "/usr/local"


def _installed_attr(name: str, default: str) -> str:
    return getattr(_installed, name, default) if _installed else default


def suid_helper_text() -> str:
    """:func:`suid_helper` as text (`shournal doctor` starts the helper
    before it imports pathlib)."""
    return (
        os.environ.get("SHOURNAL_SUID_PATH")
        or _installed_attr("SUID_PATH", f"{_DEFAULT_PREFIX}/libexec/shournal/shournal-suid")
    )


def suid_helper() -> Path:
    from pathlib import Path

    return Path(suid_helper_text())


def listener() -> Path:
    from pathlib import Path

    return Path(
        os.environ.get("SHOURNAL_LISTENER")
        or _installed_attr("LISTENER_PATH", f"{_DEFAULT_PREFIX}/libexec/shournal/shournal-listener")
    )


def preload_lib() -> Path:
    from pathlib import Path

    return Path(
        os.environ.get("SHOURNAL_PRELOAD_LIB")
        or _installed_attr("PRELOAD_PATH", f"{_DEFAULT_PREFIX}/lib/shournal/libshournal_preload.so")
    )


def shell_dir() -> Path:
    """The bash and zsh integration scripts."""
    from pathlib import Path

    env = os.environ.get("SHOURNAL_SHELL_DIR")
    if env:
        return Path(env)
    installed = _installed_attr("SHELL_DIR", "")
    if installed:
        return Path(installed)
    return Path(__file__).resolve().parent.parent / "shell"


def clean(text: str) -> str:
    """``str(pathlib.Path(text))`` without importing pathlib: repeated
    slashes and "." parts dropped, a leading "//" kept."""
    root = ""
    if text.startswith("/"):
        root = "//" if text.startswith("//") and not text.startswith("///") else "/"
    return root + "/".join(p for p in text.split("/") if p and p != ".") or "."


def _xdg(var: str, fallback: str) -> str:
    value = os.environ.get(var)
    if value and value.startswith("/"):
        return clean(value)
    home = os.path.expanduser("~")
    if home.startswith("~"):  # as pathlib.Path.home()
        raise RuntimeError("Could not determine home directory.")
    return clean(f"{home}/{fallback}")


def _config_dir_text() -> str:
    return os.path.join(_xdg("XDG_CONFIG_HOME", ".config"), "shournal")


def config_dir() -> Path:
    from pathlib import Path

    return Path(_config_dir_text())


def config_file_text() -> str:
    """The text of :func:`config_file`."""
    return _config_dir_text() + "/config.toml"


def config_file() -> Path:
    from pathlib import Path

    return Path(config_file_text())


def _data_dir_text() -> str:
    return os.path.join(_xdg("XDG_DATA_HOME", ".local/share"), "shournal")


def data_dir() -> Path:
    from pathlib import Path

    return Path(_data_dir_text())


def default_db_file() -> str:
    """The text of :func:`default_db_path`."""
    return _data_dir_text() + "/journal.sqlite"


def default_db_path() -> Path:
    from pathlib import Path

    return Path(default_db_file())


def archive_dir() -> Path:
    """The content archive of commands recorded with their apparatus
    (shournal.store.archive), beside the default journal."""
    return data_dir() / "archive"


# What decides a command line's journal (shournal.journal.resolve_url: the
# URL, the config file, the data directory), in the order of the key.
JOURNAL_KEY_VARIABLES = ("SHOURNAL_DB_URL", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "HOME")
_keys: dict[tuple[str, ...], str] = {}


def journal_key(environ: Mapping[str, str] | None = None) -> str:
    """The journal key of ``environ`` (default: ours): which store daemon
    and spool serve a command line -- one daemon per journal.  The FNV-1a
    64 hash of the values of JOURNAL_KEY_VARIABLES, each followed by a NUL
    byte (unset counts as empty), in hex; shournal_journal_key() in
    native/shournal_forward.h computes the same from the shell's."""
    env = os.environ if environ is None else environ
    values = tuple(env.get(name, "") for name in JOURNAL_KEY_VARIABLES)
    key = _keys.get(values)
    if key is None:
        h = 0xCBF29CE484222325
        for value in values:
            for byte in os.fsencode(value) + b"\0":
                h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        key = _keys[values] = f"{h:016x}"
    return key


def runtime_dir_text() -> str:
    """The text of :func:`runtime_dir`."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and xdg.startswith("/"):
        return clean(f"{xdg}/shournal")
    return f"/tmp/shournal-{os.getuid()}"


def runtime_dir() -> Path:
    """Per-user directory for in-flight markers and listener warnings.

    Must match setup_rundir() in native/preload/settings.c.
    """
    from pathlib import Path

    return Path(runtime_dir_text())


class UnsafeDirectory(OSError):
    """A directory that another user made or may write; not used."""


def check_own_directory(path: str | Path, *, follow_links: bool, forbidden_mode: int) -> None:
    """Raise UnsafeDirectory unless ``path`` is a directory owned by this
    user without any of the ``forbidden_mode`` bits; ``follow_links``: of
    the directory a link points to (else a link is refused).

    :raises OSError: it cannot be examined (FileNotFoundError: absent).
    """
    st = os.stat(path) if follow_links else os.lstat(path)
    where = f"{path} -> {os.path.realpath(path)}" if follow_links and os.path.islink(path) else path
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
    """:func:`private_runtime_dir_text` as a Path."""
    from pathlib import Path

    return Path(private_runtime_dir_text(create))


def private_runtime_dir_text(create: bool = True) -> str:
    """runtime_dir(), made (mode 0700) if absent and ``create``, and used
    only by the rules of setup_rundir() in native/preload/settings.c: a
    directory, not a link, of this user, without group or other permissions.
    In /tmp anybody could have made it first and planted links in it.

    :raises UnsafeDirectory: it is not such a directory.
    :raises OSError: it cannot be made, or (``create`` false) is absent.
    """
    path = runtime_dir_text()
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    check_own_directory(path, follow_links=False, forbidden_mode=0o077)
    return path


def make_private_dir(path: str | Path) -> None:
    """``mkdir -p path`` where every folder made is mode 0700 (as the XDG
    base directory spec asks): ``Path.mkdir(mode, parents=True)`` gives
    the mode to the last folder only, the parents get 0777 less the
    umask.  Folders that exist are left as they are (a ``~/.local`` the
    user made 0755 is the user's business).

    :raises OSError: a folder cannot be made, or ``path`` (or a parent)
        is there but is no folder (``NotADirectoryError``).
    """
    missing = []
    here = os.path.abspath(path)
    while not os.path.lexists(here):
        missing.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
    if not os.path.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))


def open_private(path: str | Path, flags: int = os.O_WRONLY | os.O_TRUNC) -> int:
    """``os.open`` of a file of ours, made 0600 if absent, never through
    a link.  :raises OSError: as os.open."""
    return os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


# Mode bits that make a private file or folder of ours readable (or
# usable) by somebody else.
OPEN_TO_OTHERS = 0o077


def open_to_others(paths: list[str]) -> list[tuple[str, int]]:
    """(path, st_mode) of each of ``paths`` that exists, belongs to this
    (effective) user and grants group or others any access.  Links are
    followed (the Docker edition's data folder is one); what belongs to
    somebody else is not ours to judge or change."""
    found = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_uid == os.geteuid() and st.st_mode & OPEN_TO_OTHERS:
            found.append((path, st.st_mode))
    return found


def private_mode(st_mode: int) -> int:
    """The permissions a private folder (0700) or file (0600) has."""
    return 0o700 if stat.S_ISDIR(st_mode) else 0o600


def private_fix(path: str, st_mode: int) -> str:
    """The command that makes ``path`` private again."""
    import shlex

    return f"chmod {private_mode(st_mode):o} {shlex.quote(path)}"
