"""What a user types into `shournal search` (the query syntax: words for
the command text, ``w:NAME``/``r:NAME`` for the files it wrote/read, the
text modes and the filters) and what the search answers with; the SQL is
:mod:`shournal.store.search`'s.

Query syntax (:func:`parse_query`): words are matched against the command
text; ``w:NAME`` keeps commands that wrote a file whose name contains NAME,
``r:NAME`` those that read one (with a ``/`` in NAME: its whole path).
Text modes: ``substring`` (the text as typed, anywhere), ``prefix`` (the
command starts with it), ``fuzzy`` (each word's letters in order, with
anything between them).  Matching is case-insensitive for ASCII letters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shournal.data import CommandView

# The text modes, in the order a key cycles them; the first is the default.
MODES = ("substring", "fuzzy", "prefix")
# The filter modes, in the order a key cycles them.
SCOPES = ("all", "host", "session", "directory", "repository")

ESCAPE = "\\"



def like_literal(text: str) -> str:
    """``text`` as a LIKE pattern that matches only itself."""
    return (
        text.replace(ESCAPE, ESCAPE * 2).replace("%", ESCAPE + "%").replace("_", ESCAPE + "_")
    )


@dataclass(frozen=True)
class SearchQuery:
    """A parsed search: LIKE patterns for the command text (all must
    match), and substrings of written and read files' names or paths."""

    text: tuple[str, ...] = ()
    written: tuple[str, ...] = ()
    read: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.text or self.written or self.read)


def parse_query(typed: str, mode: str = "substring") -> SearchQuery:
    """What the user typed -> a :class:`SearchQuery` (see the module's
    docstring).  ``w:``/``r:`` words are taken out wherever they stand; a
    bare ``w:`` is text.  The remaining text keeps its inner spacing.

    :raises ValueError: an unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"unknown search mode {mode!r} (one of {', '.join(MODES)})")
    written: list[str] = []
    read: list[str] = []
    kept: list[str] = []
    # split on single spaces so that the text between file words keeps
    # its own spacing when joined again
    for word in typed.split(" "):
        if len(word) > 2 and word[:2] in ("w:", "r:"):
            (written if word[0] == "w" else read).append(word[2:])
        else:
            kept.append(word)
    rest = " ".join(kept).strip()
    text: list[str] = []
    if rest:
        if mode == "substring":
            text.append(f"%{like_literal(rest)}%")
        elif mode == "prefix":
            text.append(f"{like_literal(rest)}%")
        else:
            for word in rest.split():
                text.append("%" + "%".join(like_literal(ch) for ch in word) + "%")
    return SearchQuery(tuple(text), tuple(written), tuple(read))


@dataclass(frozen=True)
class Scope:
    """Which commands a search looks at: all, or those of this host,
    shell session, working directory, or below this git repository."""

    kind: str = "all"
    value: str | bytes | None = None


@dataclass
class Hit:
    """One matching command, as the list shows it."""

    id: int
    text: str
    return_value: int
    start_time: str
    end_time: str
    cwd: str
    hostname: str


@dataclass
class Details:
    """The selected command: its view (files loaded) and its neighbours in
    its session (oldest first)."""

    command: CommandView
    before: list[tuple[int, str]] = field(default_factory=list)
    after: list[tuple[int, str]] = field(default_factory=list)
