"""shournal.data's plain value classes behave as the dataclasses they
replace (fields in order, equality, repr, frozen and hashable where they
were), and each takes exactly the fields it lists in ``__slots__``."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime

import pytest

from shournal import data

T = datetime(2024, 5, 1, tzinfo=UTC)
VALUES = [
    data.FileEventView(1, b"/a", 3, 4, None, 0o100644),
    data.CommandView(1, "true", 0, T, T, "/", "u", "h", None, 256, 3),
    data.FileProbe(1, None, frozenset({2})),
    data.CommandModifications(1, "make", 3),
    data.SessionCommands(b"\0" * 16, 2, T, T),
    data.WorkingDirCommands("/w", 2),
    data.DirectoryActivity(b"/w/", 2, 1),
    data.JournalStats(),
]
FROZEN = (
    data.FileProbe, data.CommandModifications, data.SessionCommands,
    data.WorkingDirCommands, data.DirectoryActivity,
)  # fmt: skip


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_init_takes_the_fields_in_order(value: object) -> None:
    cls = type(value)
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    assert params == list(cls.__slots__)
    assert not hasattr(value, "__dict__")


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_equality_repr_and_hashing(value: object) -> None:
    cls = type(value)
    fields = {name: getattr(value, name) for name in cls.__slots__}
    twin = cls(**fields)
    assert twin == value and not (twin != value)
    first = cls.__slots__[0]
    if cls is data.JournalStats:
        changed = cls(**{**fields, first: 7})
    else:
        changed = cls(**{**fields, first: fields[first] + fields[first]})
    assert changed != value
    assert value != tuple(fields.values())
    assert repr(value) == f"{cls.__name__}(" + ", ".join(
        f"{k}={v!r}" for k, v in fields.items()
    ) + ")"
    if cls in FROZEN:
        assert hash(twin) == hash(value)
        with pytest.raises(AttributeError):
            setattr(value, first, fields[first])
    else:
        with pytest.raises(TypeError):
            hash(value)


def test_mutable_defaults_are_not_shared() -> None:
    a = data.CommandView(1, "a", 0, T, T, "/", "u", "h", None, None, None)
    b = data.CommandView(2, "b", 0, T, T, "/", "u", "h", None, None, None)
    a.writes.append(data.FileEventView(1, b"/x", 0, 0, None, 0))
    a.lost_reasons["path"] = 1
    assert b.writes == [] and b.lost_reasons == {}
    s, t = data.JournalStats(), data.JournalStats()
    s.most_modifications.append(data.CommandModifications(1, "x", 1))
    assert t.most_modifications == []


def test_the_criteria_types_load_on_first_use() -> None:
    import dataclasses

    assert dataclasses.is_dataclass(data.Criteria)
    assert data.Criteria().is_empty()
    assert data.Condition("eq", 1) == data.Condition("eq", 1)
    with pytest.raises(AttributeError):
        data.NoSuchType  # noqa: B018
