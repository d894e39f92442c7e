"""The lab store's DDL (shournal.store.lab) derived from the models: every
table of recorded data gets an owner, every uniqueness and every foreign
key is per owner, every table gets its policies.  On a real server:
tests/system/test_lab.py and test_lab_server.py."""

from __future__ import annotations

import re

import pytest

from shournal.store import models as m
from shournal.store.lab import (
    SHARE_TABLE,
    BadRoleName,
    check_role_name,
    data_tables,
    grants,
    mask,
    policies,
    schema_ddl,
)


def test_every_data_table_gets_an_owner_the_database_fills() -> None:
    ddl = schema_ddl()
    owned = {
        t for t in data_tables()
        if f'ALTER TABLE "{t}" ADD COLUMN owner name NOT NULL DEFAULT current_user' in ddl
        or f"ALTER TABLE {t} ADD COLUMN owner name NOT NULL DEFAULT current_user" in ddl
    }  # fmt: skip
    assert owned == set(data_tables()) == set(m.Base.metadata.tables) - {"schema_version"}


def test_every_unique_constraint_and_foreign_key_is_per_owner() -> None:
    ddl = "\n".join(schema_ddl())
    for table in m.Base.metadata.sorted_tables:
        for c in table.constraints:
            cols = [col.name for col in c.columns]
            if type(c).__name__ == "UniqueConstraint":
                listed = ", ".join(f'"{x}"' for x in cols)
                assert f"UNIQUE (owner, {listed})" in ddl, (table.name, cols)
        for fk in table.foreign_key_constraints:
            (col,) = fk.column_keys
            assert re.search(
                rf'ADD CONSTRAINT "fk_{table.name}_{col}_\w+" FOREIGN KEY \(owner, "{col}"\) '
                rf'REFERENCES "{fk.referred_table.name}" \(owner, "id"\)', ddl
            ), (table.name, col)
    # the single-user foreign keys are not created at all
    assert "FOREIGN KEY(" not in ddl.replace("FOREIGN KEY (owner", "")


def test_every_table_gets_its_policies_and_grants() -> None:
    pol = {(t, p) for t, p, _sql in policies()}
    for table in [*data_tables(), SHARE_TABLE]:
        assert {(table, p) for p in ("lab_read", "lab_insert", "lab_update", "lab_delete")} <= pol
    assert {t for t, _p, _sql in grants("g")} == {*data_tables(), SHARE_TABLE, "schema_version"}
    for _t, _p, sql in policies():
        assert "SECURITY DEFINER" not in sql


@pytest.mark.parametrize("name", ["alice", "shournal-test", "a.b_c", "x" * 63])
def test_role_names_accepted(name: str) -> None:
    assert check_role_name(name) == name


@pytest.mark.parametrize("name", ["", "bad name", "pg_monitor", "1abc", "x" * 64, 'a"b', "a;b"])
def test_role_names_refused(name: str) -> None:
    with pytest.raises(BadRoleName):
        check_role_name(name)


def test_mask_hides_the_password() -> None:
    assert mask("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert "secret" not in mask("postgresql+psycopg://u:secret@h/db?sslmode=verify-full")
    assert mask("::not a url::") == "(an invalid database URL)"
