"""Parsing query criteria: comparison operators, sizes, times.

One option value carries its operator, so a criterion is always one shell
word (typer options take exactly one value)::

    --wsize '>10KiB'          --wsize 'gt:10KiB'      --wsize '-gt 10KiB'
    --wsize '1M..2G'          --wsize 'between:1M..2G'
    --exit-code '!=0'         --since 3d              --until 2024-05-01
    --command-text make            --wname 'ne:out.log'

Operators: ``> >= < <= = == !=`` or the original's words ``gt ge lt le eq
ne like between`` (case-insensitive) followed by ``:`` or blanks, with an
optional leading dash.  ``A..B`` (or ``between:A..B``, ``between A B``)
means ``>= A and <= B``.

Sizes: an integer with an optional unit ``k kb kib m mb mib g gb gib t tb
tib`` (case-insensitive, all powers of 1024 as in the original); decimals
like ``1.5M`` are allowed.

Times: ISO dates (``2024-05-01``, ``2024-05-01T10:00``, ``2024-05-01
10:00:30``, an explicit offset such as ``+02:00`` or ``Z``; local time
otherwise), ``now``, ``today``, ``yesterday``, or a relative age ``<N><unit>``
meaning N units ago: ``s sec min h d w m mo y`` (``m`` is months, as in the
original; minutes are ``min``).  A time is a period as long as its precision:
``2024-05-01`` is that whole (local) day, so ``--until 2024-05-01`` includes
the day and ``--wmtime 2024-05-01`` finds files modified during it.

Text: ``eq``, ``ne`` and ``like`` (``%`` is the only wildcard, ``_`` is an
ordinary character); a value containing ``%`` is ``like`` by default.  The
command text without an operator and without ``%`` matches as a substring
(``make`` is ``like:%make%``).  The command text's ``like`` and the host name
compare case-insensitively, everything else (``eq:``/``ne:`` command text,
names, paths, working directories, users) case-sensitively.  Directories
(``--cwd``, ``--wpath``, ``--rpath``) are resolved by :func:`resolve_path`:
relative to the current directory, ``~`` expanded, no trailing slash.

:func:`parse_criteria` turns all of them into one
:class:`shournal.data.Criteria`; ``shournal query``, ``shournal stats`` and
``shournal delete`` (and :class:`shournal.Journal`) take nothing else, so the
same words select the same commands everywhere.

Every error is a :class:`CriteriaError` with a one-line message.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import fields, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from shournal.data import (
    INT64_MAX,
    BadSessionId,
    Condition,
    Criteria,
    CriteriaError,
    FileCriteria,
    Op,
    Period,
)

__all__ = [
    "CriteriaError",
    "parse_age",
    "parse_criteria",
    "parse_hash",
    "parse_int",
    "parse_size",
    "parse_text",
    "parse_time",
    "parse_time_value",
    "resolve_path",
    "session_id_bytes",
    "session_id_text",
]

TEXT_OPS: frozenset[str] = frozenset({"eq", "ne", "like"})
ORDER_OPS: frozenset[str] = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "between"})
EQUALITY_OPS: frozenset[str] = frozenset({"eq", "ne"})


_SYMBOLS: dict[str, Op] = {
    ">=": "ge",
    "<=": "le",
    "!=": "ne",
    "==": "eq",
    ">": "gt",
    "<": "lt",
    "=": "eq",
}
_WORD_RE = re.compile(r"(-?)([a-zA-Z]+)(:|\s+)(.*)", re.DOTALL)
_WORDS: frozenset[str] = frozenset({"gt", "ge", "lt", "le", "eq", "ne", "like", "between"})


def _operator_word(text: str) -> tuple[str, str] | None:
    """(word, rest) for ``word:rest`` or ``-word rest``; a bare ``word rest``
    is a value (a command text may well start with ``ne``)."""
    m = _WORD_RE.fullmatch(text)
    if m is None or (not m.group(1) and m.group(3) != ":"):
        return None
    return m.group(2).lower(), m.group(4).strip()


def split_operator(raw: str) -> tuple[Op | None, str]:
    """(operator or None, the rest); None means the whole value is the
    operand."""
    text = raw.strip()
    word = _operator_word(text)
    if word is not None and word[0] in _WORDS:
        return word[0], word[1]  # type: ignore[return-value]
    for symbol, op in _SYMBOLS.items():
        if text.startswith(symbol):
            return op, text[len(symbol) :].strip()
    return None, raw


def _check_unknown_word(name: str, raw: str, allowed: frozenset[str]) -> None:
    """``--wsize 'bigger:10'``: say that the operator is unknown rather than
    that the size is bad."""
    word = _operator_word(raw.strip())
    if word is not None and word[0] not in _WORDS:
        raise CriteriaError(
            f"{name}: unknown operator {word[0]!r} (use {', '.join(sorted(allowed))}, "
            "or > >= < <= = != and A..B)"
        )


def _op_allowed(name: str, op: Op, allowed: frozenset[str]) -> None:
    if op not in allowed:
        raise CriteriaError(
            f"{name}: operator {op!r} not allowed here (use {', '.join(sorted(allowed))})"
        )


def _split_between(name: str, rest: str) -> tuple[str, str]:
    if ".." in rest:
        low, _, high = rest.partition("..")
    else:
        parts = rest.split()
        if len(parts) != 2:
            raise CriteriaError(f"{name}: between needs two values, e.g. 1K..2M")
        low, high = parts
    if not low.strip() or not high.strip():
        raise CriteriaError(f"{name}: between needs two values, e.g. 1K..2M")
    return low.strip(), high.strip()


def parse_text(name: str, raw: str, *, default: Op = "eq") -> Condition[str]:
    """A text criterion: eq, ne or like (``%`` is the only wildcard).  Without
    an operator: ``default``, or like when the value contains ``%``."""
    op, rest = split_operator(raw)
    if op is None:
        op = "like" if "%" in raw else default
        rest = raw
    else:
        _op_allowed(name, op, TEXT_OPS)
    if rest == "":
        raise CriteriaError(f"{name}: empty value")
    return Condition(op, rest)


def parse_command_text(name: str, raw: str) -> Condition[str]:
    """The command text: a substring when the value has neither an operator
    nor ``%`` (what people type first: ``--command-text make``), otherwise as
    :func:`parse_text` with ``like`` by default.  No escaping is needed here:
    the value holds no ``%``, and the engines escape ``_`` in every pattern."""
    cond = parse_text(name, raw, default="like")
    if split_operator(raw)[0] is None and "%" not in raw:
        return Condition("like", f"%{raw}%")
    return cond


def _ordered(
    name: str, raw: str, convert: type | object, allowed: frozenset[str] = ORDER_OPS
) -> Condition:
    op, rest = split_operator(raw)
    if op is None:
        _check_unknown_word(name, raw, allowed)
        if ".." in raw and "between" in allowed:
            op = "between"
        else:
            op = "eq"
    else:
        _op_allowed(name, op, allowed)
    if op == "between":
        low, high = _split_between(name, rest)
        return Condition(op, convert(name, low), convert(name, high))  # type: ignore[operator]
    if rest == "":
        raise CriteriaError(f"{name}: empty value")
    return Condition(op, convert(name, rest))  # type: ignore[operator]


# -- numbers and sizes ---------------------------------------------------------

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    **{s: 1024 for s in ("k", "kb", "kib")},
    **{s: 1024**2 for s in ("m", "mb", "mib")},
    **{s: 1024**3 for s in ("g", "gb", "gib")},
    **{s: 1024**4 for s in ("t", "tb", "tib")},
}
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)")


def bounded(name: str, value: int, low: int = -INT64_MAX - 1, high: int = INT64_MAX) -> int:
    """``value`` if it fits the journal's 64-bit integers (or ``low``..``high``)."""
    if not low <= value <= high:
        raise CriteriaError(f"{name}: {value} is out of range ({low}..{high})")
    return value


def parse_size_value(name: str, text: str) -> int:
    m = _SIZE_RE.fullmatch(text.strip())
    factor = _SIZE_UNITS.get(m.group(2).lower()) if m else None
    if m is None or factor is None:
        raise CriteriaError(f"{name}: invalid size {text!r} (use e.g. 4096, 10KiB, 1.5M, 2G)")
    digits = m.group(1)
    if len(digits) > 40:  # float() of a longer one would be inf
        raise CriteriaError(f"{name}: size {text!r} is out of range")
    size = int(float(digits) * factor) if "." in digits else int(digits) * factor
    if size > INT64_MAX:
        raise CriteriaError(f"{name}: size {text!r} is out of range (at most {INT64_MAX})")
    return size


def parse_int_value(name: str, text: str) -> int:
    try:
        value = int(text.strip(), 10)
    except ValueError:
        raise CriteriaError(f"{name}: invalid number {text!r}") from None
    return bounded(name, value)


def parse_size(name: str, raw: str) -> Condition[int]:
    """``'>10KiB'``, ``'1M..2G'``, ``'4096'``..."""
    return _ordered(name, raw, parse_size_value)


def parse_int(name: str, raw: str) -> Condition[int]:
    """An integer with any ordering operator (exit codes, command ids)."""
    return _ordered(name, raw, parse_int_value)


def parse_hash(name: str, raw: str) -> Condition[int]:
    """A partial hash as printed (unsigned decimal) or as 0x hex; eq or ne."""

    def convert(_name: str, text: str) -> int:
        t = text.strip()
        try:
            value = int(t, 16) if t.lower().startswith("0x") else int(t, 10)
        except ValueError:
            raise CriteriaError(f"{name}: invalid hash {text!r} (unsigned decimal)") from None
        if not 0 <= value < 2**64:
            raise CriteriaError(f"{name}: hash {text!r} is not an unsigned 64-bit value")
        return value

    return _ordered(name, raw, convert, EQUALITY_OPS)


# -- times ---------------------------------------------------------------------

_AGE_RE = re.compile(r"(\d+)\s*([a-zA-Z]+)")
_AGE_UNITS: dict[str, str] = {
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d",
    "w": "w", "week": "w", "weeks": "w",
    "m": "mo", "mo": "mo", "month": "mo", "months": "mo",
    "y": "y", "year": "y", "years": "y",
}  # fmt: skip
_SECONDS = {"s": 1, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_NS = 1_000_000_000


def _ns(moment: datetime) -> int:
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * _NS + delta.microseconds * 1000


def _months_ago(now: datetime, months: int) -> datetime:
    total = now.year * 12 + now.month - 1 - months
    year, month = divmod(total, 12)
    month += 1
    day = now.day
    while True:
        try:
            return now.replace(year=year, month=month, day=day)
        except ValueError:  # 31 March minus one month: the last day of February
            day -= 1


def _local_day(d: date) -> Period:
    start = datetime(d.year, d.month, d.day).astimezone()
    end = datetime.combine(d + timedelta(days=1), datetime.min.time()).astimezone()
    return Period(_ns(start), _ns(end))


def _age(name: str, text: str, m: re.Match[str], now: datetime) -> Period:
    unit = _AGE_UNITS.get(m.group(2).lower())
    if unit is None:
        raise CriteriaError(
            f"{name}: unknown time unit {m.group(2)!r} in {text!r} "
            "(use s, min, h, d, w, m (months), y)"
        )
    try:
        count = int(m.group(1))
        if unit == "mo":
            moment = _months_ago(now, count)
        elif unit == "y":
            moment = _months_ago(now, 12 * count)
        else:
            moment = now - timedelta(seconds=count * _SECONDS[unit])
    except (OverflowError, ValueError):
        raise CriteriaError(f"{name}: {text!r} is too far back") from None
    n = _ns(moment)
    return Period(n, n + 1)


def _now(now: datetime | None) -> datetime:
    return (now or datetime.now(UTC)).astimezone()


def parse_age(name: str, text: str, *, now: datetime | None = None) -> Period:
    """Only an age ``<N><unit>`` (``3d``, ``1y``, ``30min``): the instant
    that long before ``now``."""
    m = _AGE_RE.fullmatch(text.strip())
    if m is None:
        raise CriteriaError(
            f"{name}: invalid age {text!r} (a number and a unit: y, m (months), w, d, h, min, "
            "s; e.g. 3d)"
        )
    return _age(name, text, m, _now(now))


# `stats --period`: the named periods (calendar ones, local time) and how
# finely each is broken down.
PERIODS = ("today", "week", "month", "year")


def parse_period(text: str, *, now: datetime | None = None) -> tuple[Period, str]:
    """`stats --period`: ``today``, ``week`` (since this Monday), ``month``,
    ``year`` (since its first day), or a date (``2026-05-01``: that day)
    as the period, and its buckets: ``hour``, ``day`` or ``month``."""
    low = text.strip().lower()
    now = _now(now)
    today = now.astimezone().date()
    end = _local_day(today).end_ns
    if low == "today":
        return _local_day(today), "hour"
    if low == "week":
        return Period(_local_day(today - timedelta(days=today.weekday())).start_ns, end), "day"
    if low == "month":
        return Period(_local_day(today.replace(day=1)).start_ns, end), "day"
    if low == "year":
        return Period(_local_day(today.replace(month=1, day=1)).start_ns, end), "month"
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", low):
        return parse_time_value("--period", low, now=now), "hour"
    raise CriteriaError(
        f"--period: {text!r} is no period (use {', '.join(PERIODS)} or a date such as 2026-05-01)"
    )


def parse_time_value(name: str, text: str, *, now: datetime | None = None) -> Period:
    """One time (see the module docstring) as the period it denotes."""
    t = text.strip()
    now = _now(now)
    low = t.lower()
    if low == "now":
        n = _ns(now)
        return Period(n, n + 1)
    if low in ("today", "yesterday"):
        d = now.date() - timedelta(days=1 if low == "yesterday" else 0)
        return _local_day(d)
    m = _AGE_RE.fullmatch(t)
    if m is not None:
        return _age(name, text, m, now)
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", t):
            return _local_day(date.fromisoformat(t))
        moment = datetime.fromisoformat(t.replace("z", "Z"))
        if moment.tzinfo is None:
            moment = moment.astimezone()  # local time, like the shell's clock
    except ValueError:
        raise CriteriaError(
            f"{name}: cannot read the time {text!r} (use e.g. 2024-05-01, "
            "2024-05-01T10:00, 3d, 2h, yesterday)"
        ) from None
    except (OverflowError, OSError):
        raise CriteriaError(f"{name}: the time {text!r} is out of range") from None
    # The precision given decides how long the period is.
    clock = t.replace("T", " ").split(" ", 1)[1] if ("T" in t or " " in t) else ""
    clock = re.split(r"[+\-Zz]", clock, maxsplit=1)[0]
    if clock.count(":") == 0:
        length = 3600 * _NS
    elif clock.count(":") == 1:
        length = 60 * _NS
    elif "." in clock:
        length = 1
    else:
        length = _NS
    start = _ns(moment)
    return Period(start, start + length)


def parse_time(name: str, raw: str, *, now: datetime | None = None) -> Condition[Period]:
    """A time criterion with any ordering operator (file mtimes)."""
    return _ordered(name, raw, lambda n, v: parse_time_value(n, v, now=now))


# -- paths ---------------------------------------------------------------------


def resolve_path(text: str) -> str:
    """A directory or file path as the journal stores it (absolute,
    normalised, no trailing slash): ``~`` and ``~user`` are expanded, a
    relative path is taken from the current directory, ``.``/``..`` and
    doubled or trailing slashes are resolved.  Symbolic links are left
    alone (the journal may come from another machine).  A ``%`` wildcard
    stays where it is (``./%`` is every directory below this one); a value
    starting with ``%`` is a pattern on the whole path and kept as it is."""
    if text.startswith("%"):
        return text
    path = os.path.expanduser(text)
    if not path.startswith("/"):
        path = os.path.join(os.getcwd(), path)
    wildcard = path.endswith("/%")
    path = os.path.normpath(path.removesuffix("/%") if wildcard else path)
    if path.startswith("//"):  # POSIX lets normpath keep two leading slashes
        path = "/" + path.lstrip("/")
    if wildcard:
        path = path.rstrip("/") + "/%"
    return path


def parse_path(name: str, raw: str) -> Condition[str]:
    """A directory criterion (``--cwd``, ``--wpath``): a text criterion
    whose operand is resolved by :func:`resolve_path`."""
    cond = parse_text(name, raw)
    return Condition(cond.op, resolve_path(cond.value))


# -- session ids -----------------------------------------------------------------


def session_id_bytes(value: str | bytes) -> bytes:
    """The 16 raw bytes of a session id given as printed (base64) or as a
    UUID string."""
    if isinstance(value, bytes):
        if len(value) != 16:
            raise BadSessionId("a raw session id must have 16 bytes")
        return value
    import uuid  # here: ~10 ms of every `shournal query` start-up (shournal.cli._fast)

    text = value.strip()
    with suppress(ValueError):
        return uuid.UUID(text).bytes
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise BadSessionId(f"invalid session id {value!r} (expected base64 as printed, or a UUID)")
    return raw


def session_id_text(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


# -- all criteria together ----------------------------------------------------------


def parse_criteria(
    *,
    command_text: str | None = None,
    cwd: str | None = None,
    command_id: str | int | Iterable[int] | None = None,
    exit_code: str | int | None = None,
    host: str | None = None,
    user: str | None = None,
    since: str | None = None,
    until: str | None = None,
    older_than: str | None = None,
    session_id: str | bytes | None = None,
    wname: str | None = None,
    rname: str | None = None,
    wpath: str | None = None,
    rpath: str | None = None,
    wsize: str | int | None = None,
    rsize: str | int | None = None,
    whash: str | int | None = None,
    rhash: str | int | None = None,
    wmtime: str | None = None,
    rmtime: str | None = None,
    lineage_of: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
    tag: str | Iterable[str] | None = None,
    now: datetime | None = None,
) -> Criteria:
    """Criteria given as the CLI takes them, for query, stats and delete
    alike (see the module docstring for the operator syntax).

    ``command_text``: a case-insensitive substring; with ``%`` (or
    ``like:``) SQL LIKE, ``%`` the only wildcard; ``eq:``/``ne:`` compare
    exactly.  ``cwd``, ``host``, ``user``, names
    and paths: equal (case-sensitive; ``host`` not) unless the value
    contains ``%``.  ``cwd``/``wpath``/``rpath`` are resolved with
    :func:`resolve_path`.  ``command_id``: a criterion such as ``'>100'``,
    or a list of ids (any of them).  ``until`` a date: through the end of
    that day.  ``older_than`` an age: started before that instant (with
    ``until``, the earlier bound holds).  ``lineage_of``: a file (or
    several): the commands in the lineage of its version on disk (see
    ``shournal lineage``).  ``tag``: a tag, or several (commands carrying
    all of them).

    :raises CriteriaError: a value cannot be parsed (BadSessionId for a
        malformed session id).
    """

    def opt(parse: Callable[..., Any], name: str, value: Any, **kw: Any) -> Any:
        return None if value is None else parse(name, str(value), **kw)

    ids: tuple[int, ...] | None = None
    if command_id is not None and not isinstance(command_id, str | int):
        ids = tuple(sorted({bounded("--command-id", int(i), 0) for i in command_id}))
        command_id = None
    ends = [
        p
        for p in (
            opt(parse_time_value, "--until", until, now=now),
            opt(parse_age, "--older-than", older_than, now=now),
        )
        if p is not None
    ]
    c = Criteria(
        command_text=opt(parse_command_text, "--command-text", command_text),
        cwd=opt(parse_path, "--cwd", cwd),
        command_id=opt(parse_int, "--command-id", command_id),
        command_ids=ids,
        exit_code=opt(parse_int, "--exit-code", exit_code),
        host=opt(parse_text, "--host", host),
        user=opt(parse_text, "--user", user),
        since=opt(parse_time_value, "--since", since, now=now),
        until=min(ends, key=lambda p: p.end_ns) if ends else None,
        session_uuid=None if session_id is None else session_id_bytes(session_id),
        lineage_of=None if lineage_of is None else _lineage_paths(lineage_of),
        tags=None if tag is None else _tags(tag),
    )
    for files, prefix, name, path, size, hash_, mtime in (
        (c.written, "--w", wname, wpath, wsize, whash, wmtime),
        (c.read, "--r", rname, rpath, rsize, rhash, rmtime),
    ):
        files.name = opt(parse_text, f"{prefix}name", name)
        files.path = opt(parse_path, f"{prefix}path", path)
        files.size = opt(parse_size, f"{prefix}size", size)
        files.hash = opt(parse_hash, f"{prefix}hash", hash_)
        files.mtime = opt(parse_time, f"{prefix}mtime", mtime, now=now)
    if c.since is not None and c.until is not None and c.until.end_ns <= c.since.start_ns:
        raise CriteriaError("--until lies before --since: nothing can match")
    return c


def merge_criteria(criteria: Criteria | None, **filters: Any) -> Criteria:
    """``criteria`` with the criteria ``filters`` (parse_criteria's
    keywords) added; a filter replaces the criterion of the same name."""
    crit = criteria if criteria is not None else Criteria()
    given = {k: v for k, v in filters.items() if v is not None}
    if not given:
        return crit
    extra = parse_criteria(**given)
    changes: dict[str, Any] = {
        f.name: getattr(extra, f.name)
        for f in fields(Criteria)
        if f.name not in ("written", "read") and getattr(extra, f.name) is not None
    }
    for side in ("written", "read"):
        mine, theirs = getattr(crit, side), getattr(extra, side)
        changes[side] = replace(
            mine,
            **{f.name: getattr(theirs, f.name) for f in fields(FileCriteria)
               if getattr(theirs, f.name) is not None},
        )  # fmt: skip
    return replace(crit, **changes)
def _tags(value: str | Iterable[str]) -> tuple[str, ...] | None:
    """--tag's values as tags (each checked as `shournal tag` stores them)."""
    from shournal.data import check_tag

    items = [value] if isinstance(value, str) else list(value)
    if not items:
        return None
    return tuple(sorted({check_tag(t) for t in items}))


def _lineage_paths(
    value: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> tuple[str, ...]:
    items = [value] if isinstance(value, str | os.PathLike) else list(value)
    # A file, not a pattern: % is a character here.
    paths = tuple(os.path.abspath(os.path.expanduser(os.fspath(p))) for p in items)
    if not paths:
        raise CriteriaError("--lineage-of needs a file")
    return paths


# FileCriteria is filled in place above; re-exported for callers building
# criteria by hand.
__all__ += ["Condition", "Criteria", "FileCriteria", "Period", "merge_criteria"]
