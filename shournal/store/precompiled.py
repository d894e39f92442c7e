"""Statements built from the models by SQLAlchemy, compiled once, and run on
the driver's own cursor.

Why: the store daemon runs a few statements for every command line (find
its host, directory, session and hash setting; insert the command).  A
typed line comes seconds after the last one, with the CPU's caches cold,
and then SQLAlchemy's work around each execution (its statement cache,
execution context and result) costs ~0.2 ms of CPU per statement, several
times the database's own work (bench/store_transaction.py --gap).  The
SQL and the conversion of each parameter still come from SQLAlchemy (the
models' tables and column types, the dialect's bind processors); only
that per-execution work is skipped.  SQLite's qmark paramstyle takes the
parameters in the compiled statement's order, psycopg's pyformat by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement


class Precompiled:
    """One statement compiled for one dialect; `run` executes it on a DBAPI
    cursor with parameters given by name, as SQLAlchemy would bind them."""

    def __init__(
        self, stmt: ClauseElement, dialect: Dialect, column_keys: list[str] | None = None
    ) -> None:
        compiled = stmt.compile(dialect=dialect, column_keys=column_keys)
        order = compiled.positiontup
        # (pyformat: the parameters by their names in the SQL)
        self._named = order is None
        if order is None:
            order = list(compiled.binds)
        escaped = compiled.escaped_bind_names or {}
        self.sql = compiled.string
        if column_keys is not None and not set(order) <= set(column_keys):
            # (a column default SQLAlchemy would fill in: not done here)
            raise ValueError(f"values missing for {sorted(set(order) - set(column_keys))}")
        # dialect_impl: the type as this dialect stores it (SQLite's
        # DATETIME text, a TypeDecorator's process_bind_param before it)
        self._binds: tuple[tuple[str, str, Callable[[Any], Any] | None], ...] = tuple(
            (name, escaped.get(name, name),
             compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect))
            for name in order
        )  # fmt: skip

    def parameters(self, values: Mapping[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
        if self._named:
            return {
                key: values[name] if process is None else process(values[name])
                for name, key, process in self._binds
            }
        return tuple(
            values[name] if process is None else process(values[name])
            for name, _key, process in self._binds
        )

    def run(self, cursor: Any, values: Mapping[str, Any]) -> Any:
        cursor.execute(self.sql, self.parameters(values))
        return cursor
