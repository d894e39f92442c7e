"""The user's configuration: ``$XDG_CONFIG_HOME/shournal/config.toml``.

The settings are those of the original's ``config.ini`` (reference §7) in
TOML spelling.  The file is created on first use with every key commented
out, so the defaults below apply until the user uncomments something.

The listener loads this once per command line, so only the standard library
is imported, and an untouched file (comments and section headers only) is
recognised without starting the TOML parser.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# Not typing.TYPE_CHECKING: importing typing alone costs the listener ~2 ms.
from shournal import _paths, limits
from shournal._default_config import DEFAULT_CONFIG_TEXT
from shournal.data import _FrozenValue
from shournal.redact import DEFAULT_SECRET_NAMES, PatternError, compile_user

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "DEFAULT_CONFIG_TEXT",
    "ApparatusConfig",
    "Config",
    "ConfigError",
    "HashConfig",
    "IgnoreCommandsConfig",
    "MountsConfig",
    "ReadEventsConfig",
    "RedactConfig",
    "ScriptArchiveConfig",
    "StoreConfig",
    "WriteEventsConfig",
    "load_config",
    "parse_config",
    "parse_size",
]


def _home() -> str:
    home = os.path.expanduser("~")
    return _normalise(home) if home.startswith("/") else "/"


def _home_paths() -> tuple[str, ...]:
    return (_home(),)


# The sections are plain classes with __slots__ (equality, repr and hashing
# as frozen dataclasses have them: shournal.data._FrozenValue), not
# dataclasses: the module dataclasses and the making of ten of them cost
# every command that reads the config (the listener, `shournal doctor`)
# ~10 ms.  Each lists its fields once, in __slots__, and takes them in
# that order (tests/unit/test_config.py checks the default file documents
# each).


class WriteEventsConfig(_FrozenValue):
    """[write_events]: which written files are recorded."""

    __slots__ = ("include_paths", "exclude_paths", "exclude_hidden", "max_event_count")
    include_paths: tuple[str, ...]
    exclude_paths: tuple[str, ...]
    exclude_hidden: bool
    max_event_count: int  # 0 = unlimited

    def __init__(self, include_paths: tuple[str, ...] = ("/",),
                 exclude_paths: tuple[str, ...] = (), exclude_hidden: bool = True,
                 max_event_count: int = 5000) -> None:
        self._init(include_paths=include_paths, exclude_paths=exclude_paths,
                   exclude_hidden=exclude_hidden, max_event_count=max_event_count)


class ReadEventsConfig(_FrozenValue):
    """[read_events]: which read or executed files are recorded."""

    __slots__ = ("enable", "only_writable", "include_paths", "exclude_paths", "exclude_hidden",
                 "max_event_count")
    enable: bool
    only_writable: bool
    include_paths: tuple[str, ...]  # default: the home
    exclude_paths: tuple[str, ...]
    exclude_hidden: bool
    max_event_count: int  # 0 = unlimited

    def __init__(self, enable: bool = True, only_writable: bool = True,
                 include_paths: tuple[str, ...] | None = None,
                 exclude_paths: tuple[str, ...] = (), exclude_hidden: bool = True,
                 max_event_count: int = 5000) -> None:
        self._init(enable=enable, only_writable=only_writable,
                   include_paths=_home_paths() if include_paths is None else include_paths,
                   exclude_paths=exclude_paths, exclude_hidden=exclude_hidden,
                   max_event_count=max_event_count)


class ScriptArchiveConfig(_FrozenValue):
    """[script_archive]: which read files are stored with their content."""

    __slots__ = ("enable", "only_writable", "max_size", "max_count_of_files", "include_paths",
                 "exclude_paths", "exclude_hidden", "include_file_extensions",
                 "include_file_names")
    enable: bool
    only_writable: bool
    max_size: int  # bytes
    max_count_of_files: int
    include_paths: tuple[str, ...]
    exclude_paths: tuple[str, ...]
    exclude_hidden: bool
    # What scientists write: scripts, notebooks, workflow files and small
    # configs.  () = any file (then the names do not matter).
    include_file_extensions: tuple[str, ...]
    # Whole basenames archived too (files without an extension).
    include_file_names: tuple[str, ...]

    def __init__(
        self, enable: bool = True, only_writable: bool = True,
        max_size: int = limits.DEFAULT_ARCHIVE_MAX, max_count_of_files: int = 3,
        include_paths: tuple[str, ...] = ("/",), exclude_paths: tuple[str, ...] = (),
        exclude_hidden: bool = True,
        include_file_extensions: tuple[str, ...] = (
            "sh", "bash", "zsh", "py", "R", "r", "pl", "awk", "sed", "jl", "m", "ipynb",
            "smk", "nf", "yaml", "yml", "toml", "json", "ini", "cfg",
        ),
        include_file_names: tuple[str, ...] = ("Makefile", "Snakefile"),
    ) -> None:  # fmt: skip
        self._init(enable=enable, only_writable=only_writable, max_size=max_size,
                   max_count_of_files=max_count_of_files, include_paths=include_paths,
                   exclude_paths=exclude_paths, exclude_hidden=exclude_hidden,
                   include_file_extensions=include_file_extensions,
                   include_file_names=include_file_names)


class IgnoreCommandsConfig(_FrozenValue):
    """[ignore_commands]: command lines that are not recorded."""

    __slots__ = ("commands",)
    # Whitespace-normalised entries: "cmd", "cmd arg ..." or "cmd*".
    commands: tuple[str, ...]

    def __init__(self, commands: tuple[str, ...] = ()) -> None:
        self._init(commands=commands)


class MountsConfig(_FrozenValue):
    """[mounts]: mount points never observed."""

    __slots__ = ("exclude_paths",)
    exclude_paths: tuple[str, ...]

    def __init__(self, exclude_paths: tuple[str, ...] = ()) -> None:
        self._init(exclude_paths=exclude_paths)


class HashConfig(_FrozenValue):
    """[hash]: the partial XXH64 parameters (see shournal.hashing)."""

    __slots__ = ("enable", "chunk_size", "max_count_of_reads")
    enable: bool
    chunk_size: int
    max_count_of_reads: int

    def __init__(self, enable: bool = True, chunk_size: int = limits.DEFAULT_HASH_CHUNK,
                 max_count_of_reads: int = limits.DEFAULT_HASH_READS) -> None:
        self._init(enable=enable, chunk_size=chunk_size, max_count_of_reads=max_count_of_reads)


class StoreConfig(_FrozenValue):
    """[store]: where commands are stored."""

    __slots__ = ("url", "daemon_idle_seconds", "share_with", "spool_dir")
    url: str  # empty: SQLite in the data directory
    # The store daemon (shournal.capture.daemon) exits after this long without a
    # command line, once its spool is drained; the next one starts it again.
    daemon_idle_seconds: int
    # A lab store (docs/lab.md): the roles whose members may read this
    # user's rows; applied by the writer when it opens the store.
    share_with: tuple[str, ...]
    # A folder on shared storage (docs/lab.md "A shared spool_dir"): each
    # host spools to its own `<spool_dir>/<host>/`, and any host that
    # reaches the server pushes every host's commands.  Empty: the spool
    # stays in the data directory.
    spool_dir: str

    def __init__(self, url: str = "", daemon_idle_seconds: int = 600,
                 share_with: tuple[str, ...] = (), spool_dir: str = "") -> None:
        self._init(url=url, daemon_idle_seconds=daemon_idle_seconds, share_with=share_with,
                   spool_dir=spool_dir)


class ApparatusConfig(_FrozenValue):
    """[apparatus]: what a command recorded with its apparatus
    (`shournal run --apparatus`) keeps (shournal.reproduce)."""

    __slots__ = ("max_file_size", "max_command_size", "archive_outputs", "secret_env_names",
                 "paths")
    # Largest file whose content is archived (the holder sends no fd for
    # larger ones; they are counted as not archived).
    max_file_size: int
    # Most content bytes one command adds to the archive (new blobs only).
    max_command_size: int
    # Archive the content of written files too, not only their digests.
    archive_outputs: bool
    # Environment variables whose values are never stored (fnmatch
    # patterns, matched against the upper-cased name; shournal.redact).
    secret_env_names: tuple[str, ...]
    # Directories (and below) whose shell command lines are recorded with
    # their apparatus (as after `shournal apparatus on`).
    paths: tuple[str, ...]

    def __init__(self, max_file_size: int = 64 * 1024**2, max_command_size: int = 1024**3,
                 archive_outputs: bool = False,
                 secret_env_names: tuple[str, ...] = DEFAULT_SECRET_NAMES,
                 paths: tuple[str, ...] = ()) -> None:
        self._init(max_file_size=max_file_size, max_command_size=max_command_size,
                   archive_outputs=archive_outputs, secret_env_names=secret_env_names,
                   paths=paths)


class RedactConfig(_FrozenValue):
    """[redact]: the user's secret patterns, on top of the built-in ones
    (shournal.redact): (name, regex) pairs, each name the kind in its
    marker, ``[REDACTED:name]``."""

    __slots__ = ("patterns",)
    patterns: tuple[tuple[str, str], ...]

    def __init__(self, patterns: tuple[tuple[str, str], ...] = ()) -> None:
        self._init(patterns=patterns)


class Config(_FrozenValue):
    """The whole configuration; every part defaults to the original's defaults."""

    __slots__ = ("write_events", "read_events", "script_archive", "ignore_commands", "mounts",
                 "hash", "store", "apparatus", "redact", "source")
    write_events: WriteEventsConfig
    read_events: ReadEventsConfig
    script_archive: ScriptArchiveConfig
    ignore_commands: IgnoreCommandsConfig
    mounts: MountsConfig
    hash: HashConfig
    store: StoreConfig
    apparatus: ApparatusConfig
    redact: RedactConfig
    # The file the values came from; None when nothing was read.  Not
    # compared: equal settings from two files are equal.
    source: Path | None

    def __init__(
        self, write_events: WriteEventsConfig | None = None,
        read_events: ReadEventsConfig | None = None,
        script_archive: ScriptArchiveConfig | None = None,
        ignore_commands: IgnoreCommandsConfig | None = None,
        mounts: MountsConfig | None = None, hash: HashConfig | None = None,
        store: StoreConfig | None = None, apparatus: ApparatusConfig | None = None,
        redact: RedactConfig | None = None, source: Path | None = None,
    ) -> None:  # fmt: skip
        self._init(
            write_events=write_events or WriteEventsConfig(),
            read_events=read_events or ReadEventsConfig(),
            script_archive=script_archive or ScriptArchiveConfig(),
            ignore_commands=ignore_commands or IgnoreCommandsConfig(),
            mounts=mounts or MountsConfig(), hash=hash or HashConfig(),
            store=store or StoreConfig(), apparatus=apparatus or ApparatusConfig(),
            redact=redact or RedactConfig(), source=source,
        )  # fmt: skip

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._names() if name != "source")


class ConfigError(Exception):
    """A config problem, rendered as one ``file:line: message`` line."""

    def __init__(
        self,
        message: str,
        *,
        file: str | os.PathLike[str] | None = None,
        line: int | None = None,
        section: str | None = None,
        key: str | None = None,
    ) -> None:
        self.message = message
        self.file = os.fspath(file) if file is not None else None
        self.line = line
        self.section = section
        self.key = key
        where = self.file or "config"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}")


class _Invalid(Exception):
    """A value failed validation; ``value`` helps locating it in the text."""

    def __init__(self, message: str, value: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.value = value


# ---- value converters ------------------------------------------------------


def _describe(value: object) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"float {value}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f"expected true or false, got {_describe(value)}")
    return value


def _int(lo: int, hi: int | None = None) -> Callable[[object], int]:
    def convert(value: object) -> int:
        # bool is an int subclass; `true` is not a count
        if type(value) is not int:
            raise _Invalid(f"expected an integer, got {_describe(value)}")
        if value < lo or (hi is not None and value > hi):
            bound = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
            raise _Invalid(f"must be {bound}, got {value}")
        return value

    return convert


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"expected a string, got {_describe(value)}")
    return value


def _absolute_path(value: object) -> str:
    """A folder named by an absolute path ("~/" for the home), or empty."""
    text = os.path.expanduser(_str(value))
    if text and (not os.path.isabs(text) or "\0" in text):
        raise _Invalid(f"expected an absolute path, got {value!r}")
    return os.path.normpath(text) if text else ""


def _str_list(value: object) -> list[str]:
    if not isinstance(value, list):
        raise _Invalid(f"expected an array of strings, got {_describe(value)}")
    for item in value:
        if not isinstance(item, str):
            raise _Invalid(f"expected an array of strings, found {_describe(item)}")
    return value


_SIZE_UNITS = {
    "": 1,
    "b": 1,
    **{s: 1024 for s in ("k", "kb", "kib")},
    **{s: 1024**2 for s in ("m", "mb", "mib")},
    **{s: 1024**3 for s in ("g", "gb", "gib")},
    **{s: 1024**4 for s in ("t", "tb", "tib")},
}
_SIZE_RE = re.compile(r"\s*(\d+)\s*([A-Za-z]*)\s*")


def parse_size(text: str) -> int:
    """``"500KiB"`` -> 512000.  Units are base 1024 and case-insensitive."""
    m = _SIZE_RE.fullmatch(text)
    factor = _SIZE_UNITS.get(m.group(2).lower()) if m else None
    if m is None or factor is None:
        raise ValueError(f'invalid size {text!r} (use e.g. 4096, "500KiB", "2M", "1G")')
    return int(m.group(1)) * factor


def _size(value: object) -> int:
    if type(value) is int:
        if value < 0:
            raise _Invalid(f"must be >= 0, got {value}")
        return value
    if isinstance(value, str):
        try:
            return parse_size(value)
        except ValueError as exc:
            raise _Invalid(str(exc)) from None
    raise _Invalid(f'expected a size such as "500KiB", got {_describe(value)}')


def _normalise(path: str) -> str:
    path = os.path.normpath(path)
    # POSIX lets normpath keep exactly two leading slashes; the kernel's
    # paths never have them, so they would never match.
    return "/" + path.lstrip("/") if path.startswith("//") else path


def _expand(raw: str) -> str:
    path = raw.strip()
    for var in ("$HOME", "${HOME}", "~"):
        if path == var or path.startswith(var + "/"):
            path = _home() + path[len(var) :]
            break
    if not path.startswith("/"):
        hint = " (only $HOME and ~ are expanded)" if path[:1] in ("$", "~") else ""
        raise _Invalid(f"path must be absolute, got {raw!r}{hint}", raw)
    return _normalise(path)


def _is_under(path: str, parent: str) -> bool:
    return parent == "/" or path == parent or path.startswith(parent + "/")


def _is_hidden(path: str) -> bool:
    return "/." in path


def _path_list(keep_hidden_children: bool) -> Callable[[object], tuple[str, ...]]:
    """Expanded, normalised, de-duplicated paths without redundant children.

    For include lists a hidden path below a non-hidden one is kept: listing it
    is what exempts it from ``exclude_hidden``.
    """

    def convert(value: object) -> tuple[str, ...]:
        paths: list[str] = []
        for raw in _str_list(value):
            path = _expand(raw)
            if path not in paths:
                paths.append(path)

        def redundant(path: str) -> bool:
            for other in paths:
                if other != path and _is_under(path, other):
                    if not keep_hidden_children or _is_hidden(other) or not _is_hidden(path):
                        return True
            return False

        return tuple(p for p in paths if not redundant(p))

    return convert


def _extensions(value: object) -> tuple[str, ...]:
    result: list[str] = []
    for raw in _str_list(value):
        # "sh" and ".sh" both mean the same to a user
        ext = raw[1:] if raw.startswith(".") else raw
        if not ext or "/" in ext or "." in ext:
            raise _Invalid(f'invalid file extension {raw!r} (use e.g. "sh")', raw)
        if ext not in result:
            result.append(ext)
    return tuple(result)


def _file_names(value: object) -> tuple[str, ...]:
    result: list[str] = []
    for raw in _str_list(value):
        # the helper's pre-filter takes a basename as it takes an extension
        if not raw or "/" in raw or "." in raw:
            raise _Invalid(f'invalid file name {raw!r} (a basename without ".", e.g. "Makefile")',
                           raw)  # fmt: skip
        if raw not in result:
            result.append(raw)
    return tuple(result)


def _commands(value: object) -> tuple[str, ...]:
    result: list[str] = []
    for raw in _str_list(value):
        words = raw.split()
        entry = " ".join(words)
        # the same rules as shournal.capture.filters.IgnoredCommands, which must
        # never reject what passed here
        if not words or not words[0].removesuffix("*").rpartition("/")[2]:
            raise _Invalid(f"invalid command {raw!r}: names no command", raw)
        if entry.endswith("*") and len(words) > 1:
            raise _Invalid(f'invalid command {raw!r}: "cmd*" takes no arguments', raw)
        if "*" in entry[:-1]:
            raise _Invalid(f"invalid command {raw!r}: '*' is allowed only as \"cmd*\"", raw)
        if entry not in result:
            result.append(entry)
    return tuple(result)


def _redact_patterns(value: object) -> tuple[tuple[str, str], ...]:
    """[{name = "...", regex = "..."}, ...], each checked by
    shournal.redact (a regex that does not compile is an error here, never
    on a command line)."""
    if not isinstance(value, list):
        raise _Invalid(
            f'expected an array of {{name = "...", regex = "..."}}, got {_describe(value)}'
        )
    result: list[tuple[str, str]] = []
    for item in value:
        if not isinstance(item, dict) or set(item) != {"name", "regex"}:
            raise _Invalid(f'expected {{name = "...", regex = "..."}}, got {_describe(item)}'
                           + (f" with keys {sorted(item)}" if isinstance(item, dict) else ""))
        name, regex = item["name"], item["regex"]
        if not isinstance(name, str) or not isinstance(regex, str):
            raise _Invalid("name and regex must be strings")
        try:
            compile_user(name, regex)
        except PatternError as exc:
            raise _Invalid(str(exc), name) from None
        if any(n == name for n, _ in result):
            raise _Invalid(f"pattern name {name!r} given twice", name)
        result.append((name, regex))
    return tuple(result)


_include = _path_list(keep_hidden_children=True)
_exclude = _path_list(keep_hidden_children=False)

_SCHEMA: dict[str, tuple[type, dict[str, Callable[[Any], Any]]]] = {
    "write_events": (
        WriteEventsConfig,
        {
            "include_paths": _include,
            "exclude_paths": _exclude,
            "exclude_hidden": _bool,
            "max_event_count": _int(0),
        },
    ),
    "read_events": (
        ReadEventsConfig,
        {
            "enable": _bool,
            "only_writable": _bool,
            "include_paths": _include,
            "exclude_paths": _exclude,
            "exclude_hidden": _bool,
            "max_event_count": _int(0),
        },
    ),
    "script_archive": (
        ScriptArchiveConfig,
        {
            "enable": _bool,
            "only_writable": _bool,
            "max_size": _size,
            "max_count_of_files": _int(0),
            "include_paths": _include,
            "exclude_paths": _exclude,
            "exclude_hidden": _bool,
            "include_file_extensions": _extensions,
            "include_file_names": _file_names,
        },
    ),
    "ignore_commands": (IgnoreCommandsConfig, {"commands": _commands}),
    "mounts": (MountsConfig, {"exclude_paths": _exclude}),
    "hash": (
        HashConfig,
        {
            "enable": _bool,
            "chunk_size": _int(limits.HASH_CHUNK_MIN, limits.HASH_CHUNK_MAX),
            "max_count_of_reads": _int(limits.HASH_READS_MIN),
        },
    ),
    "store": (
        StoreConfig,
        {"url": _str, "daemon_idle_seconds": _int(1),
         "share_with": lambda v: tuple(_str_list(v)), "spool_dir": _absolute_path},
    ),
    "apparatus": (
        ApparatusConfig,
        {
            "max_file_size": _size,
            "max_command_size": _size,
            "archive_outputs": _bool,
            "secret_env_names": lambda v: tuple(_str_list(v)),
            "paths": _exclude,
        },
    ),
    "redact": (RedactConfig, {"patterns": _redact_patterns}),
}
_HEADERS = frozenset(f"[{name}]" for name in _SCHEMA)


# ---- locating a key in the text (tomllib reports no positions) -------------

_HEADER_RE = re.compile(r"\s*\[\[?\s*([^\[\]#]+?)\s*\]")


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'":
        return name[1:-1]
    return name


def _header_name(line: str) -> str | None:
    m = _HEADER_RE.match(line)
    if m is None:
        return None
    return _unquote(m.group(1).split(".")[0])


def _key_re(key: str, dotted: str | None = None) -> re.Pattern[str]:
    name = "|".join(re.escape(k) for k in (key, f'"{key}"', f"'{key}'"))
    prefix = ""
    if dotted is not None:
        quoted = "|".join(re.escape(k) for k in (dotted, f'"{dotted}"', f"'{dotted}'"))
        prefix = rf"(?:{quoted})\s*\.\s*"
    return re.compile(rf"\s*{prefix}(?:{name})\s*[=.]")


def _find_line(
    text: str, section: str, key: str | None = None, value: str | None = None
) -> int | None:
    """Best-effort 1-based line of ``[section] key`` (or of the section)."""
    lines = text.splitlines()
    section_re = _key_re(section)
    key_re = _key_re(key) if key is not None else None
    dotted_re = _key_re(key, section) if key is not None else None
    current = ""
    section_line: int | None = None
    key_line: int | None = None
    for number, line in enumerate(lines, 1):
        name = _header_name(line)
        if name is not None:
            current = name
            if name == section and section_line is None:
                section_line = number
            continue
        if current == "":
            if dotted_re is not None and dotted_re.match(line):
                key_line = number
                break
            if section_line is None and section_re.match(line):
                section_line = number
        elif current == section and key_re is not None and key_re.match(line):
            key_line = number
            break
    if key_line is None:
        return section_line
    if value is not None:
        # point at the offending element of a multi-line array
        for number in range(key_line, len(lines) + 1):
            line = lines[number - 1]
            if number > key_line and _header_name(line) is not None:
                break
            if f'"{value}"' in line or f"'{value}'" in line:
                return number
    return key_line


# ---- loading ---------------------------------------------------------------


def _is_untouched(text: str) -> bool:
    """True if the text sets nothing: only comments and known headers."""
    seen: set[str] = set()
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped not in _HEADERS or stripped in seen:
            return False
        seen.add(stripped)
    return True


def _syntax_error(exc: Exception, text: str, file: str) -> ConfigError:
    message = str(exc)
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
    if m is not None:
        line = int(m.group(1))
        message = f"{message[: m.start()]} (column {m.group(2)})"
    else:
        line = max(1, len(text.splitlines()))
        message = re.sub(r"\s*\(at end of document\)$", " at end of file", message)
    return ConfigError(f"invalid TOML: {message}", file=file, line=line)


def _suggest(name: str, choices: Any) -> str:
    import difflib  # only on this error path

    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def parse_config(text: str, file: str | os.PathLike[str] = "config.toml") -> Config:
    """Validate TOML ``text``; ``file`` is used in error messages and as source."""
    source = Path(file)
    if _is_untouched(text):
        return Config(source=source)
    import tomllib

    file = os.fspath(file)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _syntax_error(exc, text, file) from None

    sections: dict[str, Any] = {}
    for name, table in data.items():
        if name not in _SCHEMA and not isinstance(table, dict):
            raise ConfigError(
                f"unknown top-level key '{name}' (settings belong in a [section])",
                file=file,
                line=_find_line(text, name),
                key=name,
            )
        if name not in _SCHEMA:
            raise ConfigError(
                f"unknown section [{name}]{_suggest(name, _SCHEMA)}",
                file=file,
                line=_find_line(text, name),
                section=name,
            )
        if not isinstance(table, dict):
            raise ConfigError(
                f"[{name}] must be a table, got {_describe(table)}",
                file=file,
                line=_find_line(text, name),
                section=name,
            )
        cls, converters = _SCHEMA[name]
        values: dict[str, Any] = {}
        for key, value in table.items():
            convert = converters.get(key)
            if convert is None:
                raise ConfigError(
                    f"unknown key '{key}' in [{name}]{_suggest(key, converters)}",
                    file=file,
                    line=_find_line(text, name, key),
                    section=name,
                    key=key,
                )
            try:
                values[key] = convert(value)
            except _Invalid as exc:
                raise ConfigError(
                    f"[{name}] {key}: {exc.message}",
                    file=file,
                    line=_find_line(text, name, key, exc.value),
                    section=name,
                    key=key,
                ) from None
        sections[name] = cls(**values)
    return Config(**sections, source=source)


def _write_default(path: Path) -> None:
    """Create ``path`` with the commented defaults, atomically and without
    ever replacing a file someone else created meanwhile."""
    directory = path.parent
    _paths.make_private_dir(directory)
    tmp = directory / f".{path.name}.{os.getpid()}.tmp"
    # 0600: the store URL may carry a password
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, DEFAULT_CONFIG_TEXT.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # file systems without hard links
            os.rename(tmp, path)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def load_config(
    path: Path | None = None, *, create: bool = True, defaults_only: bool = False
) -> Config:
    """Load the config file (default: ``_paths.config_file()``).

    A missing file yields the defaults and, with ``create``, is written with
    the commented defaults (failure to write it is not an error: the
    defaults still apply).  ``defaults_only`` skips the file altogether, as a
    fallback after a ConfigError.

    Raises ConfigError for an unreadable or invalid file.
    """
    if defaults_only:
        return Config()
    if path is None:
        path = _paths.config_file()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if create:
            try:
                _write_default(path)
            except OSError:
                pass
        return Config()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError("invalid TOML: not UTF-8", file=path, line=line) from None
    return parse_config(text, path)


def helper_options(cfg: Config, *, apparatus: bool = False) -> list[str]:
    """The setup options of the setuid helper that follow from the config:
    no read marks when nothing read is wanted, read events only of writable
    files, excluded mounts (never marked, so they cost nothing).

    ``apparatus``: the command is recorded with its apparatus, which needs
    every read, each with its fd (any extension, up to the apparatus's
    size limit), whatever the config says of read events."""
    opts: list[str] = []
    reads, archive = cfg.read_events, cfg.script_archive
    if apparatus:
        pass  # every read: no --no-read, no --writable-reads
    elif not reads.enable and not archive.enable:
        opts.append("--no-read")
    elif (not reads.enable or reads.only_writable) and (
        not archive.enable or archive.only_writable
    ):
        # read events only of files the user may write: the helper drops
        # the others before they cost the listener anything
        opts.append("--writable-reads")
    for path in cfg.mounts.exclude_paths[: limits.MAX_EXCLUDES]:
        opts += ["--exclude-mount", path]
    # The holder hashes each file when it reads the event.
    if cfg.hash.enable:
        reads = min(cfg.hash.max_count_of_reads, limits.HASH_READS_MAX)
        opts += ["--hash", f"{cfg.hash.chunk_size}:{reads}"]
    else:
        opts.append("--no-hash")
    # Reads of possible scripts come with their fd, so the listener can
    # archive exactly what was read.  The helper pre-filters by size and
    # extension only; beyond its limits it sends every small file's fd.
    if apparatus:
        opts += ["--archive-max-size", str(cfg.apparatus.max_file_size)]
    elif archive.enable:
        opts += ["--archive-max-size", str(archive.max_size)]
        exts = archive.include_file_extensions
        names = archive.include_file_names if exts else ()
        raw = [os.fsencode(e) for e in (*exts, *names)]
        if len(raw) <= limits.MAX_ARCHIVE_EXT and all(
            0 < len(e) <= limits.MAX_EXT_LEN and not any(c in e for c in b"/.\0") for e in raw
        ):
            for ext in exts:
                opts += ["--archive-ext", ext]
            for name in names:
                opts += ["--archive-name", name]
    else:
        opts.append("--no-archive")
    return opts
