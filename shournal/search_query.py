"""What a user types into `shournal search` (the query syntax: words for
the command text, ``w:NAME``/``r:NAME`` for the files it wrote/read, the
text modes and the filters) and what the search answers with; the SQL is
:mod:`shournal.store.search`'s.

Query syntax (:func:`parse_query`): words are matched against the command
text; ``w:NAME`` keeps commands that wrote a file whose name contains NAME,
``r:NAME`` those that read one (with a ``/`` in NAME: its whole path).
Text modes: ``substring`` (the text as typed, anywhere), ``prefix`` (the
command starts with it), ``fuzzy`` (each word's letters in order, with
anything between them; the matches ranked by :func:`rank`).  Matching is
case-insensitive for ASCII letters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

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
    match), substrings of written and read files' names or paths, and in
    fuzzy mode the words (lower case) whose letters the text has in order,
    for :func:`rank`."""

    text: tuple[str, ...] = ()
    written: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    fuzzy: tuple[str, ...] = ()

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
    fuzzy: tuple[str, ...] = ()
    if rest:
        if mode == "substring":
            text.append(f"%{like_literal(rest)}%")
        elif mode == "prefix":
            text.append(f"{like_literal(rest)}%")
        else:
            fuzzy = tuple(_ascii_lower(word) for word in rest.split())
            for word in rest.split():
                text.append("%" + "%".join(like_literal(ch) for ch in word) + "%")
    return SearchQuery(tuple(text), tuple(written), tuple(read), fuzzy)


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
    start_time: datetime
    end_time: datetime
    cwd: str
    hostname: str
    # how well it matches a fuzzy search (:func:`match_score`; 0 otherwise)
    score: float = 0.0


@dataclass
class Details:
    """The selected command: its view (files loaded) and its neighbours in
    its session (oldest first)."""

    command: CommandView
    before: list[tuple[int, str]] = field(default_factory=list)
    after: list[tuple[int, str]] = field(default_factory=list)


# -- ranking fuzzy matches ---------------------------------------------------------------

_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

# What a matched letter earns (as fzf weighs them, contiguity first): right
# after the previous one ("make" in "make -j4" before "m4 --arch kde"), at
# the start of a word (after a space, "/", "-", ...: "gcm" in "git commit
# -m"), at the very start.  A gap between two matched letters costs
# GAP_START and GAP_EXTENSION for each further letter skipped (compact
# matches first).  Equal scores: the newer command first.
CONTIGUOUS, WORD_START, LINE_START = 8.0, 6.0, 2.0
GAP_START, GAP_EXTENSION = -3.0, -1.0
# A word the text does not have (only PostgreSQL's ILIKE folds letters
# beyond ASCII): after every match that has it.
NO_MATCH = -1e6
# Only so much of a long command line is looked at (a keystroke ranks a page).
RANKED_CHARS = 1000
# How many places of a word's first letter are tried.
FIRST_PLACES = 8


def _ascii_lower(text: str) -> str:
    """ASCII letters in lower case (as the search's matching folds them)."""
    return text.translate(_LOWER)


def _word_start(text: str, i: int) -> bool:
    return i == 0 or not text[i - 1].isalnum()


def _gap(skipped: int) -> float:
    return 0.0 if skipped <= 0 else GAP_START + GAP_EXTENSION * (skipped - 1)


def _word_score(text: str, word: str) -> float | None:
    """How well ``word``'s letters (in order) match ``text`` (both lower
    case), or None when they do not.  Each letter takes, among the
    positions that leave room for the rest, the one right after the
    previous letter, else the better of the first one and the first at a
    word start; the first letter tries :data:`FIRST_PLACES` of its places
    (the best counts)."""
    n = len(word)
    if n == 0:
        return 0.0
    # latest[k]: the last position letter k may take with the rest still
    # matching after it
    latest = [0] * n
    end = len(text)
    for k in range(n - 1, -1, -1):
        end = text.rfind(word[k], 0, end)
        if end < 0:
            return None
        latest[k] = end
    best: float | None = None
    first = text.find(word[0], 0, latest[0] + 1)
    tried = 0
    while first >= 0 and tried < FIRST_PLACES:
        tried += 1
        score = (WORD_START if _word_start(text, first) else 0.0) + (
            LINE_START if first == 0 else 0.0
        )
        prev = first
        for k in range(1, n):
            # latest[k] > prev: there is room for this letter and the rest
            ch, last = word[k], latest[k]
            if text[prev + 1] == ch:
                prev += 1
                score += CONTIGUOUS
                continue
            pos = text.find(ch, prev + 1, last + 1)
            here = _gap(pos - prev - 1) + (WORD_START if _word_start(text, pos) else 0.0)
            at = pos
            while at >= 0 and not _word_start(text, at):
                at = text.find(ch, at + 1, last + 1)
            if at > pos and WORD_START + _gap(at - prev - 1) > here:
                pos, here = at, WORD_START + _gap(at - prev - 1)
            score += here
            prev = pos
        if best is None or score > best:
            best = score
        first = text.find(word[0], first + 1, latest[0] + 1)
    return best


def match_score(text: str, words: tuple[str, ...]) -> float:
    """How well the command line ``text`` matches the fuzzy ``words``
    (lower case; see :func:`_word_score`): higher is better, 0 for no
    words, :data:`NO_MATCH` for each word it does not have."""
    line = _ascii_lower(text[:RANKED_CHARS])
    total = 0.0
    for w in words:
        score = _word_score(line, w)
        total += NO_MATCH if score is None else score
    return total


def rank(hits: list[Hit], query: SearchQuery) -> list[Hit]:
    """Fuzzy matches ordered by how well they match (contiguous letters,
    word starts), then newest first; any other search as it is."""
    if not query.fuzzy:
        return hits
    for hit in hits:
        hit.score = match_score(hit.text, query.fuzzy)
    return sorted(hits, key=lambda h: (-h.score, -h.id))
