"""Parsing query criteria: comparison operators, sizes, times.

One option value carries its operator, so a criterion is always one shell
word (typer options take exactly one value)::

    --wsize '>10KiB'          --wsize 'gt:10KiB'      --wsize '-gt 10KiB'
    --wsize '1M..2G'          --wsize 'between:1M..2G'
    --exit-code '!=0'         --since 3d              --until 2024-05-01
    --command-text 'like:%make%'   --wname 'ne:out.log'

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

Every error is a :class:`CriteriaError` with a one-line message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Generic, Literal, TypeVar

from shournal.query import QueryError

Op = Literal["eq", "ne", "lt", "le", "gt", "ge", "like", "between"]
T = TypeVar("T")

TEXT_OPS: frozenset[str] = frozenset({"eq", "ne", "like"})
ORDER_OPS: frozenset[str] = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "between"})
EQUALITY_OPS: frozenset[str] = frozenset({"eq", "ne"})


class CriteriaError(QueryError):
    """A criterion value that cannot be parsed (a usage error)."""


@dataclass(frozen=True, slots=True)
class Condition(Generic[T]):
    """``column <op> value``; ``high`` is the upper bound of ``between``."""

    op: Op
    value: T
    high: T | None = None


@dataclass(frozen=True, slots=True)
class Period:
    """A time as the half-open interval [start_ns, end_ns) of its precision,
    in ns since the epoch (UTC).  An instant lasts 1 ns."""

    start_ns: int
    end_ns: int


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


def parse_size_value(name: str, text: str) -> int:
    m = _SIZE_RE.fullmatch(text.strip())
    factor = _SIZE_UNITS.get(m.group(2).lower()) if m else None
    if m is None or factor is None:
        raise CriteriaError(f"{name}: invalid size {text!r} (use e.g. 4096, 10KiB, 1.5M, 2G)")
    return int(float(m.group(1)) * factor) if "." in m.group(1) else int(m.group(1)) * factor


def parse_int_value(name: str, text: str) -> int:
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise CriteriaError(f"{name}: invalid number {text!r}") from None


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


def parse_time_value(name: str, text: str, *, now: datetime | None = None) -> Period:
    """One time (see the module docstring) as the period it denotes."""
    t = text.strip()
    now = (now or datetime.now(UTC)).astimezone()
    low = t.lower()
    if low == "now":
        n = _ns(now)
        return Period(n, n + 1)
    if low in ("today", "yesterday"):
        d = now.date() - timedelta(days=1 if low == "yesterday" else 0)
        return _local_day(d)
    m = _AGE_RE.fullmatch(t)
    if m is not None:
        unit = _AGE_UNITS.get(m.group(2).lower())
        if unit is None:
            raise CriteriaError(
                f"{name}: unknown time unit {m.group(2)!r} in {text!r} "
                "(use s, min, h, d, w, m (months), y)"
            )
        count = int(m.group(1))
        try:
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
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", t):
            return _local_day(date.fromisoformat(t))
        moment = datetime.fromisoformat(t.replace("z", "Z"))
    except ValueError:
        raise CriteriaError(
            f"{name}: cannot read the time {text!r} (use e.g. 2024-05-01, "
            "2024-05-01T10:00, 3d, 2h, yesterday)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, like the shell's clock
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


def ns_to_datetime(ns: int) -> datetime:
    seconds, rest = divmod(ns, _NS)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest // 1000)
