"""Which file events are recorded (reference §3).

Everything here runs once per fanotify event in the listener, ~100k times
for a large command, so the rules are precomputed into tuples and sets of
``bytes`` at construction and each check is a handful of C-level calls
(``bytes.startswith`` with a tuple, set membership) -- no regex, no
decoding: kernel paths are bytes and need not be valid UTF-8.
"""

from __future__ import annotations

import os

from shournal import limits

# Not typing.TYPE_CHECKING: importing typing alone costs the listener ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Container, Iterable, Sequence

    from shournal.config import (
        IgnoreCommandsConfig,
        ReadEventsConfig,
        ScriptArchiveConfig,
        WriteEventsConfig,
    )

__all__ = [
    "BUILTIN_IGNORED_COMMANDS",
    "IgnoredCommands",
    "PathRule",
    "ScriptArchiveRule",
    "may_read",
    "may_read_ids",
    "may_write",
    "may_write_ids",
]

# Never worth recording, as in the original: mount changes what paths mean,
# and shournal's own invocations would only clutter the journal.  Like every
# rule they drop only a line that is that one command (IgnoredCommands.
# matches_line): `shournal version; python3 analyze.py > out` is recorded.
# Listed in the config file's comments and the README: keep them in step.
BUILTIN_IGNORED_COMMANDS = ("mount*", "shournal*", "shournal-run*")

# Shell syntax that makes a line more than one simple command: separators,
# pipes, redirections, groups, substitutions.
_SHELL_OPERATORS = frozenset("();<>|&")


# The permission tests use literal mode bits (S_IWUSR = 0o200, S_IWGRP =
# 0o020, S_IWOTH = 0o002, and the R bits) rather than stat.S_* globals:
# constants cost nothing per call.  `gids` are the *real* groups: a setgid
# program must not make files of its group count as the user's.


def may_write(st: os.stat_result, uid: int, gids: Container[int]) -> bool:
    """Could the real user write the file, going by its mode bits?"""
    return may_write_ids(st.st_mode, st.st_uid, st.st_gid, uid, gids)


def may_read(st: os.stat_result, uid: int, gids: Container[int]) -> bool:
    """Could the real user read the file, going by its mode bits?"""
    return may_read_ids(st.st_mode, st.st_uid, st.st_gid, uid, gids)


def may_write_ids(mode: int, owner: int, group: int, uid: int, gids: Container[int]) -> bool:
    """may_write() on the fields of a stat (as the holder relays them)."""
    return (
        (mode & 0o200 != 0 and owner == uid)
        or mode & 0o002 != 0
        or (mode & 0o020 != 0 and group in gids)
    )


def may_read_ids(mode: int, owner: int, group: int, uid: int, gids: Container[int]) -> bool:
    """may_read() on the fields of a stat (as the holder relays them)."""
    return (
        (mode & 0o400 != 0 and owner == uid)
        or mode & 0o004 != 0
        or (mode & 0o040 != 0 and group in gids)
    )


def _to_bytes(path: str | bytes) -> bytes:
    raw = os.fsencode(path)
    # Tolerate "/a/b/" from callers that skipped config normalisation.
    return raw.rstrip(b"/") or b"/"


def _prefixes(paths: Iterable[bytes]) -> tuple[bytes, ...]:
    # "/a" covers "/a/x" but not "/ab": match on a component boundary.
    # "/" itself is a prefix of every absolute path.
    return tuple(p if p == b"/" else p + b"/" for p in paths)


class PathRule:
    """Include/exclude directories plus the hidden-file rule, on bytes paths.

    A path matches if it equals or lies below an include path, does not
    equal or lie below an exclude path, and -- with ``exclude_hidden`` -- is
    either not hidden (contains no ``/.``) or equals or lies below an include
    path that is itself hidden: explicitly listing ``~/.config`` exempts it.
    """

    __slots__ = (
        "_exact",
        "_under",
        "_ex_exact",
        "_ex_under",
        "_exclude_hidden",
        "_hid_exact",
        "_hid_under",
    )

    def __init__(
        self,
        include: Iterable[str | bytes],
        exclude: Iterable[str | bytes] = (),
        exclude_hidden: bool = True,
    ) -> None:
        inc = [_to_bytes(p) for p in include]
        exc = [_to_bytes(p) for p in exclude]
        hidden = [p for p in inc if b"/." in p]
        self._exact = frozenset(inc)
        self._under = _prefixes(inc)
        self._ex_exact = frozenset(exc)
        self._ex_under = _prefixes(exc)
        self._exclude_hidden = exclude_hidden
        self._hid_exact = frozenset(hidden)
        self._hid_under = _prefixes(hidden)

    @classmethod
    def from_config(
        cls, section: WriteEventsConfig | ReadEventsConfig | ScriptArchiveConfig
    ) -> PathRule:
        return cls(section.include_paths, section.exclude_paths, section.exclude_hidden)

    def match(self, path: bytes) -> bool:
        if path not in self._exact and not path.startswith(self._under):
            return False
        if path in self._ex_exact or path.startswith(self._ex_under):
            return False
        if self._exclude_hidden and b"/." in path:
            return path in self._hid_exact or path.startswith(self._hid_under)
        return True

    def __repr__(self) -> str:
        return (
            f"PathRule(include={sorted(self._exact)!r}, exclude={sorted(self._ex_exact)!r}, "
            f"exclude_hidden={self._exclude_hidden!r})"
        )


class ScriptArchiveRule:
    """Which read files are archived with their content.

    ``match`` covers what depends on the file alone: size, extension and
    paths.  The caller applies ``enable``, ``only_writable`` (it already has
    the permission result) and the per-command ``max_count_of_files``.
    """

    __slots__ = (
        "enable",
        "only_writable",
        "max_size",
        "max_count_of_files",
        "_paths",
        "_suffixes",
    )

    def __init__(
        self,
        *,
        enable: bool = True,
        only_writable: bool = True,
        max_size: int = limits.DEFAULT_ARCHIVE_MAX,
        max_count_of_files: int = 3,
        include: Iterable[str | bytes] = ("/",),
        exclude: Iterable[str | bytes] = (),
        exclude_hidden: bool = True,
        extensions: Iterable[str | bytes] = ("sh",),
        names: Iterable[str | bytes] = (),
    ) -> None:
        self.enable = enable
        self.only_writable = only_writable
        self.max_size = max_size
        self.max_count_of_files = max_count_of_files
        self._paths = PathRule(include, exclude, exclude_hidden)
        suffixes = []
        for ext in extensions:
            raw = os.fsencode(ext)
            if not raw or b"/" in raw or b"." in raw:
                raise ValueError(f"invalid file extension {ext!r}")
            suffixes.append(b"." + raw)
        # The extension is the text after the basename's last '.'.  For an
        # extension without '.' or '/' that is exactly "path ends with
        # '.ext'", one C call.  None: no extensions listed, any file matches.
        self._suffixes: tuple[bytes, ...] | None = tuple(suffixes) or None
        # Whole basenames (Makefile): "path ends with '/name'"; only with
        # extensions (none listed: any file matches anyway).
        for name in names:
            raw = os.fsencode(name)
            if not raw or b"/" in raw or b"." in raw:
                raise ValueError(f"invalid file name {name!r}")
            if self._suffixes is not None:
                self._suffixes += (b"/" + raw,)

    @classmethod
    def from_config(cls, section: ScriptArchiveConfig) -> ScriptArchiveRule:
        return cls(
            enable=section.enable,
            only_writable=section.only_writable,
            max_size=section.max_size,
            max_count_of_files=section.max_count_of_files,
            include=section.include_paths,
            exclude=section.exclude_paths,
            exclude_hidden=section.exclude_hidden,
            extensions=section.include_file_extensions,
            names=section.include_file_names,
        )

    def match(self, path: bytes, size: int) -> bool:
        if size > self.max_size:
            return False
        suffixes = self._suffixes
        if suffixes is not None and not path.endswith(suffixes):
            return False
        return self._paths.match(path)

    def __repr__(self) -> str:
        return (
            f"ScriptArchiveRule(enable={self.enable!r}, only_writable={self.only_writable!r}, "
            f"max_size={self.max_size!r}, max_count_of_files={self.max_count_of_files!r}, "
            f"paths={self._paths!r}, suffixes={self._suffixes!r})"
        )


def _basename(command: str) -> str:
    return command.rpartition("/")[2]


class IgnoredCommands:
    """Command lines that are not recorded.

    Entries as in the original: ``"cmd*"`` ignores ``cmd`` with any
    arguments, ``"cmd a b"`` only exactly ``cmd a b`` (``"cmd"`` alone: only
    without arguments).  Commands are compared by basename, so ``/bin/ls``
    and ``ls`` are the same command.
    """

    __slots__ = ("_any_args", "_exact")

    def __init__(self, entries: Iterable[str], *, builtins: bool = True) -> None:
        any_args: set[str] = set()
        exact: dict[str, set[tuple[str, ...]]] = {}
        all_entries = [*BUILTIN_IGNORED_COMMANDS, *entries] if builtins else list(entries)
        for entry in all_entries:
            words = entry.split()
            wildcard = bool(words) and words[-1].endswith("*")
            if wildcard and len(words) > 1:
                raise ValueError(f"invalid ignored command {entry!r}: cmd* takes no arguments")
            name = _basename(words[0].removesuffix("*") if wildcard else words[0]) if words else ""
            if not name:
                raise ValueError(f"invalid ignored command {entry!r}: names no command")
            if wildcard:
                any_args.add(name)
            else:
                exact.setdefault(name, set()).add(tuple(words[1:]))
        self._any_args = frozenset(any_args)
        self._exact = {name: frozenset(args) for name, args in exact.items()}

    @classmethod
    def from_config(
        cls, section: IgnoreCommandsConfig, *, builtins: bool = True
    ) -> IgnoredCommands:
        return cls(section.commands, builtins=builtins)

    def matches_line(self, text: str) -> bool:
        """Is the command line `text` one simple command a rule names?  A
        line that also runs or redirects anything else (``;``, ``&&``,
        ``|``, ``>``, ``$(...)``, a second line...) is never ignored:
        nothing the user ran is dropped with the ignored command."""
        words = text.split()
        if not words:
            return False
        first = _basename(words[0])
        if first not in self._any_args and first not in self._exact:
            return False  # the usual case: no tokenizing
        if "`" in text or "\n" in text.strip():
            return False
        import shlex

        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # unbalanced quotes: not a simple command we know
            return False
        if any(t and set(t) <= _SHELL_OPERATORS for t in tokens):
            return False
        return self.matches(tokens)

    def matches(self, argv0_and_args: Sequence[str]) -> bool:
        if not argv0_and_args:
            return False
        name = _basename(argv0_and_args[0])
        if name in self._any_args:
            return True
        args = self._exact.get(name)
        return args is not None and tuple(argv0_and_args[1:]) in args

    def __repr__(self) -> str:
        return f"IgnoredCommands(any_args={sorted(self._any_args)!r}, exact={self._exact!r})"
