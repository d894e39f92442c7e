"""SqliteReads runs statements with many named parameters positionally
(sqlite3 binds names in time quadratic in their number): the same rows
as bound by name, a name used twice bound twice, and small statements
bound by name as before."""

from __future__ import annotations

import sqlite3

from shournal.store import connection
from shournal.store.connection import SqliteReads


def _reads() -> SqliteReads:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, size INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, f"n:{i}", i * 10) for i in range(200)])
    return SqliteReads(conn, "test")


def test_many_named_parameters_give_the_rows_binding_by_name_gives() -> None:
    reads = _reads()
    n = connection._NAMED_MAX + 40
    marks = ", ".join(f":id{i}" for i in range(n))
    params = {f"id{i}": i * 3 for i in range(n)}
    params["floor"] = 30
    sql = (
        f"SELECT id, name FROM t WHERE id IN ({marks}) AND size >= :floor "
        "AND (name <> 'x:y' OR size >= :floor) ORDER BY id"
    )
    by_name = reads._conn.execute(sql, params).fetchall()
    assert [r[0] for r in by_name] == [i * 3 for i in range(1, n) if i * 3 < 200]
    assert reads.rows(sql, params) == by_name
    assert sql in connection._POSITIONAL  # it was run positionally
    text, names = connection._POSITIONAL[sql]
    assert ":" not in text.replace("'x:y'", "")
    assert names.count("floor") == 2


def test_few_named_parameters_are_bound_by_name() -> None:
    reads = _reads()
    sql = "SELECT id FROM t WHERE id = :a OR id = :b ORDER BY id"
    assert reads.rows(sql, {"a": 4, "b": 7}) == [(4,), (7,)]
    assert sql not in connection._POSITIONAL


def test_only_parameters_become_placeholders() -> None:
    sql = "SELECT :a, (:b_1), x:y, '1:2', a::int, :9 FROM t WHERE x = :a"
    assert connection._positional(sql) == (
        "SELECT ?, (?), x:y, '1:2', a::int, :9 FROM t WHERE x = ?",
        ("a", "b_1", "a"),
    )
