"""The journal database (SQLite or PostgreSQL via SQLAlchemy).

Exports are resolved lazily so that importing the exceptions does not pull
in SQLAlchemy.
"""

from __future__ import annotations

from shournal.errors import (
    SchemaTooNew,
    StoreCorrupt,
    StoreError,
    StoreMissing,
    StoreReadOnly,
    StoreUnavailable,
)

# Not typing.TYPE_CHECKING: `shournal query`'s fast path imports this
# package, and typing costs it ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shournal.store.db import Store

__all__ = [
    "SchemaTooNew",
    "Store",
    "StoreCorrupt",
    "StoreError",
    "StoreMissing",
    "StoreReadOnly",
    "StoreUnavailable",
]


def __getattr__(name: str) -> Any:
    if name == "Store":
        from shournal.store.db import Store

        return Store
    raise AttributeError(name)
