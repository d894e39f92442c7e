"""A lab store: one PostgreSQL journal for many users, private by the
database's own rules (docs/lab.md).

The tables are the journal's (shournal.store.models), created from the same
metadata, plus what a shared server needs:

- an ``owner`` column on every table of recorded data, filled by the
  database (``DEFAULT current_user``) and checked on every insert and
  update (``WITH CHECK (owner = current_user)``): the client cannot choose
  it;
- uniqueness per owner (every unique constraint gets ``owner`` first), so a
  failed insert never tells a user that a colleague has some content;
- foreign keys per owner (``(owner, x_id)`` references ``(owner, id)``): a
  row can only point at rows of its own owner, so a user can neither hang
  rows on a colleague's nor block a colleague's deletion;
- row-level security enabled and forced on every table: a user reads his
  own rows and those of owners who share with a role he is a member of
  (table ``lab_share``, written by each owner), and changes or deletes only
  his own;
- the tables owned by a NOLOGIN role, used through a NOLOGIN group role;
  no role of shournal's has BYPASSRLS; no view, no SECURITY DEFINER
  function.

The store's writer works unchanged against it: before each write
transaction it sets ``shournal.rows`` to ``own`` (OWN_ROWS_ONLY), which
narrows what it sees to its own rows, so its find-or-insert of directories,
working directories and contents never finds a colleague's shared row.
The setting can only narrow what a user sees, never widen it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    Connection,
    ForeignKeyConstraint,
    UniqueConstraint,
    create_engine,
    event,
    text,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.schema import CreateIndex, CreateTable

from shournal.errors import StoreError, StoreUnavailable
from shournal.store import models as m
from shournal.store.migrations import PG_SCHEMA_LOCK, SCHEMA_VERSION
from shournal.store.migrations import upgrade as upgrade_journal

OWNER_ROLE = "shournal_schema"
USERS_ROLE = "shournal_users"
SHARE_TABLE = "lab_share"
ROWS_SETTING = "shournal.rows"
# Run by the writer at the start of each of its transactions (see above).
OWN_ROWS_ONLY = f"SELECT set_config('{ROWS_SETTING}', 'own', true)"
# The oldest server whose row-level security and DDL this module uses.
MIN_SERVER_VERSION = 130000



@functools.cache
def _dialect() -> Any:
    # Imported when DDL is made, not by the writer that imports this module.
    from sqlalchemy.dialects import postgresql

    return postgresql.dialect()  # type: ignore[no-untyped-call]


# Role names shournal accepts (quoted in every statement anyway): what login
# names and PostgreSQL's own roles look like, not the reserved pg_ prefix.
_ROLE_NAME = re.compile(r"(?!pg_)[A-Za-z_][A-Za-z0-9_.-]{0,62}")

# Who may read a row of recorded data: its owner, and members of a role its
# owner shares with -- unless the session narrowed itself to its own rows.
READ_RULE = (
    "owner = current_user OR ("
    f"coalesce(current_setting('{ROWS_SETTING}', true), '') <> 'own' "
    f"AND owner IN (SELECT s.owner FROM {SHARE_TABLE} s "
    "WHERE pg_has_role(current_user, s.role::oid, 'MEMBER')))"
)
OWN_RULE = "owner = current_user"


class LabError(StoreError):
    """The server or its catalogue refuses what was asked (one line)."""


class BadRoleName(LabError):
    """A role name shournal does not accept (a usage error)."""


def data_tables() -> list[str]:
    """The tables of recorded data (everything but the schema version), in
    the order they are created."""
    return [t.name for t in m.Base.metadata.sorted_tables if t.name != "schema_version"]


def check_role_name(name: str) -> str:
    if not _ROLE_NAME.fullmatch(name):
        raise BadRoleName(
            f"invalid role name {name!r}: letters, digits, '_', '.', '-', at most 63, "
            "not starting with a digit or pg_"
        )
    return name


def quote(name: str) -> str:
    return str(_dialect().identifier_preparer.quote_identifier(name))


def mask(url: str | URL) -> str:
    """A URL as it may be printed: the password masked."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except sa_exc.ArgumentError:
        return "(an invalid database URL)"
    return parsed.render_as_string(hide_password=True)


def _compiled(statement: Any) -> str:
    return str(statement.compile(dialect=_dialect())).strip()


def schema_ddl() -> list[str]:
    """The statements creating a lab store's tables: the journal's schema
    from the models, then its owner columns, per-owner uniqueness and
    per-owner foreign keys, and the sharing table."""
    out: list[str] = []
    tables = m.Base.metadata.sorted_tables
    for table in tables:
        out.append(_compiled(CreateTable(table, include_foreign_key_constraints=[])))
        out.extend(_compiled(CreateIndex(ix)) for ix in sorted(table.indexes, key=str))
    referenced = sorted(
        {fk.referred_table.name for t in tables for fk in t.foreign_key_constraints}
    )
    for table in tables:
        if table.name == "schema_version":
            continue
        t = quote(table.name)
        out.append(f"ALTER TABLE {t} ADD COLUMN owner name NOT NULL DEFAULT current_user")
        keys = [c.name for c in table.primary_key.columns]
        if keys != ["id"]:
            # a key of references (a command's note, redaction counts, read
            # events) is per owner: a colleague's command id would collide
            # and tell that it has a note, or a secret of some kind.  The
            # owner comes last: the readers look these rows up by command id
            # (a lineage level, a delete's cascade), which an index led by
            # the owner cannot answer without reading all of it.
            name = quote(f"pk_{table.name}")
            out.append(
                f"ALTER TABLE {t} DROP CONSTRAINT {name}, "
                f"ADD CONSTRAINT {name} PRIMARY KEY ({', '.join(quote(k) for k in keys)}, owner)"
            )
        for uc in sorted(
            (c for c in table.constraints if isinstance(c, UniqueConstraint)), key=str
        ):
            name = _dialect().identifier_preparer.format_constraint(uc)
            cols = ", ".join(quote(c.name) for c in uc.columns)
            out.append(
                f"ALTER TABLE {t} DROP CONSTRAINT {name}, "
                f"ADD CONSTRAINT {name} UNIQUE (owner, {cols})"
            )
        for ix in sorted((i for i in table.indexes if i.unique), key=str):
            # a unique index (a partial one, as import_key's) is per owner too
            create = _compiled(CreateIndex(ix))
            head, _, rest = create.partition(" (")
            out.append(f"DROP INDEX {quote(str(ix.name))}")
            out.append(f"{head} (owner, {rest}")
        if table.name in referenced:
            out.append(
                f"ALTER TABLE {t} ADD CONSTRAINT {quote('uq_' + table.name + '_owner_id')} "
                "UNIQUE (owner, id)"
            )
    for table in tables:
        for fk in sorted(table.foreign_key_constraints, key=lambda c: c.column_keys):
            out.append(_foreign_key(table.name, fk))
    out.append(
        f"CREATE TABLE {SHARE_TABLE} (owner name NOT NULL DEFAULT current_user, "
        "role regrole NOT NULL, PRIMARY KEY (owner, role))"
    )
    out.append(
        "INSERT INTO schema_version (id, version) "
        f"VALUES (1, {int(SCHEMA_VERSION)})"
    )
    return out


def _foreign_key(table: str, fk: ForeignKeyConstraint) -> str:
    (col,) = fk.column_keys
    (element,) = fk.elements
    ref = element.column
    name = quote(f"fk_{table}_{col}_{ref.table.name}")
    on_delete = f" ON DELETE {fk.ondelete}" if fk.ondelete else ""
    # MATCH SIMPLE (the default): a NULL reference (no session, no content)
    # is not checked, as in the single-user schema.
    return (
        f"ALTER TABLE {quote(table)} ADD CONSTRAINT {name} FOREIGN KEY (owner, {quote(col)}) "
        f"REFERENCES {quote(ref.table.name)} (owner, {quote(ref.name)}){on_delete}"
    )


def policies() -> list[tuple[str, str, str]]:
    """(table, policy name, CREATE POLICY statement) for every table."""
    out = [
        ("schema_version", "lab_read",
         "CREATE POLICY lab_read ON schema_version FOR SELECT USING (true)"),
    ]
    for name in [*data_tables(), SHARE_TABLE]:
        t = quote(name)
        read = READ_RULE
        insert = OWN_RULE
        if name == SHARE_TABLE:
            # Members of the role see who shares with it (the read rule of
            # every other table needs that); one shares only with a role
            # one is a member of.
            read = f"{OWN_RULE} OR pg_has_role(current_user, role::oid, 'MEMBER')"
            insert = f"{OWN_RULE} AND pg_has_role(current_user, role::oid, 'MEMBER')"
        out += [
            (name, "lab_read", f"CREATE POLICY lab_read ON {t} FOR SELECT USING ({read})"),
            (name, "lab_insert",
             f"CREATE POLICY lab_insert ON {t} FOR INSERT WITH CHECK ({insert})"),
            (name, "lab_update", f"CREATE POLICY lab_update ON {t} FOR UPDATE "
             f"USING ({OWN_RULE}) WITH CHECK ({insert})"),
            (name, "lab_delete", f"CREATE POLICY lab_delete ON {t} FOR DELETE USING ({OWN_RULE})"),
        ]
    return out


def grants(users: str) -> list[tuple[str, str, str]]:
    """(table, privileges, GRANT statement) of the group role."""
    u = quote(users)
    out = [("schema_version", "SELECT", f"GRANT SELECT ON schema_version TO {u}")]
    for name in data_tables():
        privileges = "SELECT, INSERT, UPDATE, DELETE"
        out.append((name, privileges, f"GRANT {privileges} ON {quote(name)} TO {u}"))
    out.append((SHARE_TABLE, "SELECT, INSERT, DELETE",
                f"GRANT SELECT, INSERT, DELETE ON {SHARE_TABLE} TO {u}"))
    return out


@dataclass
class Step:
    """One thing init or add-user does: what it says, and its statements."""

    what: str
    sql: list[str] = field(default_factory=list)
    # statements that carry a secret: run, never printed
    secret: bool = False
    # statements already run while planning (an upgrade's: each migration
    # reads the structure the one before left)
    done: bool = False


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    # the last step's statements are built from the connection (a password
    # hashed by the client library)
    run_late: Callable[[Connection], None] | None = None

    def add(self, what: str, *sql: str, secret: bool = False, done: bool = False) -> None:
        self.steps.append(Step(what, list(sql), secret, done))


def admin_engine(url: str) -> Any:
    """An engine for the administrator's URL (PostgreSQL only; a bare
    postgresql:// URL uses psycopg, shournal's PostgreSQL driver)."""
    try:
        parsed = make_url(url)
    except sa_exc.ArgumentError:
        raise LabError("invalid database URL") from None
    if parsed.get_backend_name() != "postgresql":
        raise LabError(f"{mask(parsed)}: a lab store needs a postgresql:// URL")
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    try:
        return create_engine(parsed)
    except (sa_exc.SQLAlchemyError, ImportError) as e:
        raise LabError(f"cannot use {mask(parsed)}: {_one_line(e)}") from None


def _one_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    return " ".join(str(orig if orig is not None else exc).split()) or type(exc).__name__


def _role(conn: Connection, name: str) -> dict[str, Any] | None:
    row = conn.execute(
        text("SELECT rolcanlogin, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = :n"),
        {"n": name},
    ).one_or_none()
    return None if row is None else dict(row._mapping)


def _tables(conn: Connection) -> set[str]:
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')"
        )
    )
    return {r[0] for r in rows}


def _group_role(conn: Connection, plan: Plan, name: str, what: str) -> None:
    found = _role(conn, name)
    q = quote(name)
    if found is None:
        plan.add(f"created role {name} ({what}; cannot log in)",
                 f"CREATE ROLE {q} NOLOGIN NOBYPASSRLS")
        return
    if found["rolsuper"]:
        raise LabError(f"role {name} is a superuser; shournal needs it to be an ordinary role")
    if found["rolcanlogin"] or found["rolbypassrls"]:
        plan.add(f"role {name}: made NOLOGIN NOBYPASSRLS ({what})",
                 f"ALTER ROLE {q} NOLOGIN NOBYPASSRLS")


def plan_init(conn: Connection, owner: str = OWNER_ROLE, users: str = USERS_ROLE) -> Plan:
    """What `shournal server init` does on the server behind `conn` (read
    from its catalogue only); an empty plan when everything is in place."""
    check_role_name(owner)
    check_role_name(users)
    if owner == users:
        raise LabError("the schema's owner and the users' group role must differ")
    version = conn.execute(text("SHOW server_version_num")).scalar_one()
    if int(version) < MIN_SERVER_VERSION:
        raise LabError(f"PostgreSQL {version} is too old for a lab store (13 or newer)")
    plan = Plan()
    _group_role(conn, plan, owner, "owns the schema")
    _group_role(conn, plan, users, "shournal's users")
    tables = _tables(conn)
    ours = set(m.Base.metadata.tables)
    if "schema_version" not in tables:
        if tables & ours:
            raise LabError(
                f"tables named like shournal's ({', '.join(sorted(tables & ours))}) but no "
                "schema version: not a shournal journal"
            )
        everything = [*ours, SHARE_TABLE]
        plan.add(
            f"created the journal's tables (schema version {SCHEMA_VERSION}) with owner "
            "columns, per-owner uniqueness and foreign keys, and the sharing table "
            f"{SHARE_TABLE}",
            *schema_ddl(),
            *(f"ALTER TABLE {quote(t)} OWNER TO {quote(owner)}" for t in sorted(everything)),
        )
        present: set[str] = set()
    else:
        if SHARE_TABLE not in tables:
            raise LabError(
                "this database holds a single-user journal (no owner columns); "
                "a lab store needs an empty database"
            )
        stored = conn.execute(text("SELECT version FROM schema_version WHERE id = 1")).scalar()
        if stored is None or stored > SCHEMA_VERSION:
            raise LabError(
                f"the lab store has schema version {stored}, newer than this shournal's "
                f"({SCHEMA_VERSION}); upgrade shournal"
            )
        if stored < SCHEMA_VERSION:
            sql = upgrade(conn, int(stored))
            plan.add(
                f"upgraded the lab store from schema version {stored} to {SCHEMA_VERSION} "
                "(owner columns, per-owner uniqueness and foreign keys on what was added)",
                *sql, done=True,
            )
            tables = _tables(conn)
        rules = lab_rules(conn)
        if rules:
            plan.add("made keys, uniqueness and foreign keys per owner where they were not",
                     *rules)
        present = tables
    names = ["schema_version", *data_tables(), SHARE_TABLE]
    flags = dict.fromkeys(names, (False, False))
    owners: dict[str, str] = {}
    for name, rls, force, table_owner in conn.execute(
        text(
            "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
            "pg_get_userbyid(c.relowner) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        )
    ):
        flags[name] = (rls, force)
        owners[name] = table_owner
    wrong_owner = sorted(t for t in names if t in present and owners.get(t) != owner)
    if wrong_owner:
        plan.add(
            f"tables given to {owner}: {', '.join(wrong_owner)}",
            *(f"ALTER TABLE {quote(t)} OWNER TO {quote(owner)}" for t in wrong_owner),
        )
    rls_sql = []
    for name in names:
        rls, force = flags[name]
        if not rls:
            rls_sql.append(f"ALTER TABLE {quote(name)} ENABLE ROW LEVEL SECURITY")
        if not force:
            rls_sql.append(f"ALTER TABLE {quote(name)} FORCE ROW LEVEL SECURITY")
    if rls_sql:
        plan.add("row-level security enabled and forced on every table", *rls_sql)
    have = {
        (r[0], r[1])
        for r in conn.execute(
            text(
                "SELECT tablename, policyname FROM pg_policies "
                "WHERE schemaname = current_schema()"
            )
        )
    }
    missing = [(t, p, sql) for t, p, sql in policies() if (t, p) not in have]
    if missing:
        plan.add(
            f"created {len(missing)} policies (read: own and shared rows; insert, update, "
            "delete: own rows only)",
            *(sql for _t, _p, sql in missing),
        )
    grant_sql = []
    for table, privileges, sql in grants(users):
        if table not in present or not _has_privileges(conn, users, table, privileges):
            grant_sql.append(sql)
    if not present or not _sequences_granted(conn, users):
        grant_sql.append(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {quote(users)}")
    if grant_sql:
        plan.add(f"granted {users} the use of the tables", *grant_sql)
    return plan


def _has_privileges(conn: Connection, role: str, table: str, privileges: str) -> bool:
    if _role(conn, role) is None:
        return False
    return bool(
        conn.execute(
            text("SELECT has_table_privilege(:r, :t, :p)"),
            {"r": role, "t": quote(table), "p": privileges.replace(" ", "")},
        ).scalar_one()
    )


def _sequences_granted(conn: Connection, role: str) -> bool:
    if _role(conn, role) is None:
        return False
    return bool(
        conn.execute(
            text(
                "SELECT coalesce(bool_and(has_sequence_privilege(:r, c.oid, 'USAGE')), true) "
                "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'S'"
            ),
            {"r": role},
        ).scalar_one()
    )


def plan_add_user(
    conn: Connection, name: str, users: str = USERS_ROLE, password: str | None = None
) -> Plan:
    """What `shournal server add-user` does: create (or adopt) login role
    `name`, make it a member of the group role, set its password (hashed
    by the client library, so that it never reaches the server's logs)."""
    check_role_name(name)
    check_role_name(users)
    if _role(conn, users) is None:
        raise LabError(f"no role {users}: run `shournal server init` first")
    if name in (users, OWNER_ROLE):
        raise LabError(f"{name} is one of shournal's group roles, not a user")
    plan = Plan()
    found = _role(conn, name)
    q = quote(name)
    if found is None:
        plan.add(f"created login role {name}", f"CREATE ROLE {q} LOGIN NOBYPASSRLS")
    else:
        if found["rolsuper"]:
            raise LabError(
                f"role {name} is a superuser: it reads and changes every row; "
                "give the user an ordinary role"
            )
        if found["rolbypassrls"]:
            raise LabError(
                f"role {name} bypasses row-level security (BYPASSRLS): it would read every "
                f"row; ALTER ROLE {name} NOBYPASSRLS first"
            )
        if not found["rolcanlogin"]:
            plan.add(f"role {name} may log in now", f"ALTER ROLE {q} LOGIN")
    member = found is not None and conn.execute(
        text("SELECT pg_has_role(:n, :g, 'USAGE')"), {"n": name, "g": users}
    ).scalar_one()
    if not member:
        plan.add(f"{name} is a member of {users}", f"GRANT {quote(users)} TO {q}")
    if password is not None:
        plan.add(f"password of {name} set (scram-sha-256)",
                 f"ALTER ROLE {q} PASSWORD '********'", secret=True)

        def set_password(c: Connection) -> None:
            raw = c.connection.driver_connection
            hashed = raw.pgconn.encrypt_password(  # type: ignore[union-attr]
                password.encode(), name.encode(), b"scram-sha-256"
            ).decode()
            c.exec_driver_sql(f"ALTER ROLE {q} PASSWORD '{hashed}'")

        plan.run_late = set_password
    return plan


def run_plan(conn: Connection, plan: Plan) -> None:
    """Carry out what of `plan` was not done while planning, in the
    transaction of `conn`."""
    for step in plan.steps:
        if step.secret or step.done:
            continue
        for sql in step.sql:
            conn.exec_driver_sql(sql)
    if plan.run_late is not None:
        plan.run_late(conn)


def execute(url: str, make: Callable[[Connection], Plan], dry_run: bool) -> Plan:
    """Connect to `url`, plan with `make` and carry the plan out in one
    transaction, or roll it all back for `dry_run`; StoreUnavailable or
    LabError with one line on failure."""
    engine = admin_engine(url)
    try:
        with engine.connect() as conn, conn.begin() as transaction:
            plan = make(conn)
            if dry_run or not plan.steps:
                transaction.rollback()
            else:
                run_plan(conn, plan)
            return plan
    except sa_exc.OperationalError as e:
        raise StoreUnavailable(f"cannot reach {mask(url)}: {_one_line(e)}") from None
    except sa_exc.DBAPIError as e:
        raise LabError(f"{mask(url)}: {_one_line(e)}") from None
    finally:
        engine.dispose()


def describe(plan: Plan, dry_run: bool) -> Sequence[str]:
    """The lines printed for `plan`: what was done, or the SQL."""
    if dry_run:
        return [f"{sql};" for step in plan.steps for sql in step.sql]
    return [step.what for step in plan.steps]


# -- upgrading a lab store ---------------------------------------------------------------

# Statements of an upgrade that only read (the migrations look at the
# catalogue); they are run but not printed.  setval changes a sequence.
_READ_ONLY = re.compile(r"\s*(SELECT|SHOW|WITH)\b(?![^;]*\bsetval\()", re.IGNORECASE)


def upgrade(conn: Connection, version: int) -> list[str]:
    """Lift the lab store in `conn`'s transaction from schema `version` to
    :data:`SCHEMA_VERSION`: the journal's own migrations (as a user's
    journal is upgraded), then the lab's rules on whatever they added
    (:func:`lab_rules`).  Runs as the administrator, who owns what the
    migrations create until init gives it to the owner role.  Returns the
    statements run (what `--dry-run` prints)."""
    ran: list[str] = []

    def capture(_c: Any, _cursor: Any, statement: str, parameters: Any, *_a: Any) -> None:
        if not _READ_ONLY.match(statement):
            statement = " ".join(statement.split())
            ran.append(statement + ("  -- with parameters" if parameters else ""))

    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_SCHEMA_LOCK})
    event.listen(conn, "before_cursor_execute", capture)
    try:
        upgrade_journal(conn, version, "the lab store")
        for sql in lab_rules(conn):
            conn.exec_driver_sql(sql)
    finally:
        event.remove(conn, "before_cursor_execute", capture)
    return ran


def lab_rules(conn: Connection) -> list[str]:
    """The statements that give the tables of `conn`'s schema what
    :func:`schema_ddl` gives a new lab store, read from the catalogue: an
    owner column (rows already there, which a migration moved, take the
    owner of the row they refer to), every unique constraint and unique
    index per owner, ``UNIQUE (owner, id)`` on referenced tables, and
    every foreign key per owner.  Empty when all is in place."""
    out: list[str] = []
    tables = sorted(_tables(conn) - {"schema_version", SHARE_TABLE})
    order = {name: i for i, name in enumerate(["schema_version", *data_tables()])}
    tables.sort(key=lambda t: (order.get(t, len(order)), t))
    fks = conn.execute(
        text(
            "SELECT c.conname, t.relname, r.relname, "
            "array(SELECT a.attname FROM unnest(c.conkey) k "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k), "
            "array(SELECT a.attname FROM unnest(c.confkey) k "
            "JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k), "
            "c.confdeltype "
            "FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid "
            "JOIN pg_class r ON r.oid = c.confrelid "
            "WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace "
            "ORDER BY 1"
        )
    ).all()
    with_owner = {t for t in tables if _has_column(conn, t, "owner")}
    for table in tables:
        if table in with_owner:
            continue
        t = quote(table)
        out.append(f"ALTER TABLE {t} ADD COLUMN owner name")
        parent = next(
            ((cols[0], ref, refcols[0]) for _n, tab, ref, cols, refcols, _d in fks
             if tab == table and len(cols) == 1 and ref in with_owner),
            None,
        )  # fmt: skip
        if parent is not None:
            col, ref, refcol = parent
            out.append(
                f"UPDATE {t} SET owner = p.owner FROM {quote(ref)} p "
                f"WHERE p.{quote(refcol)} = {t}.{quote(col)}"
            )
        # NOT NULL fails on a row that no owner could be found for: the
        # upgrade is refused rather than a row given to the administrator.
        out.append(
            f"ALTER TABLE {t} ALTER COLUMN owner SET DEFAULT current_user, "
            "ALTER COLUMN owner SET NOT NULL"
        )
        with_owner.add(table)
    for table in tables:
        t = quote(table)
        for name, kind, columns in conn.execute(
            text(
                "SELECT c.conname, c.contype, array(SELECT a.attname FROM unnest(c.conkey) k "
                "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k) "
                "FROM pg_constraint c WHERE c.contype IN ('u', 'p') "
                "AND c.conrelid = CAST(:t AS regclass) ORDER BY 1"
            ),
            {"t": t},
        ):
            if "owner" not in columns and list(columns) != ["id"]:
                # (a primary key of ids from a shared sequence stays as it is)
                q = quote(name)
                cols = ", ".join(quote(c) for c in columns)
                what = "UNIQUE" if kind == "u" else "PRIMARY KEY"
                keyed = f"({cols}, owner)" if kind == "p" else f"(owner, {cols})"
                out.append(
                    f"ALTER TABLE {t} DROP CONSTRAINT {q}, ADD CONSTRAINT {q} {what} {keyed}"
                )
            elif kind == "p" and len(columns) > 1 and columns[0] == "owner":
                # a primary key led by the owner (as stores made before it
                # came last): the owner last, as schema_ddl makes it
                q = quote(name)
                cols = ", ".join(quote(c) for c in columns[1:])
                out.append(
                    f"ALTER TABLE {t} DROP CONSTRAINT {q}, "
                    f"ADD CONSTRAINT {q} PRIMARY KEY ({cols}, owner)"
                )
        for name, definition, columns in conn.execute(
            text(
                "SELECT ci.relname, pg_get_indexdef(i.indexrelid), "
                "array(SELECT a.attname FROM unnest(i.indkey) k "
                "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k) "
                "FROM pg_index i JOIN pg_class ci ON ci.oid = i.indexrelid "
                "WHERE i.indrelid = CAST(:t AS regclass) AND i.indisunique AND NOT i.indisprimary "
                "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) "
                "ORDER BY 1"
            ),
            {"t": t},
        ):
            if "owner" not in columns:
                head, sep, rest = definition.partition(" USING btree (")
                if not sep:
                    raise LabError(f"unique index {name} on {table}: not a B-tree index")
                out.append(f"DROP INDEX {quote(name)}")
                out.append(f"{head}{sep}owner, {rest}")
    referenced = {ref for _n, _t, ref, _c, _r, _d in fks}
    for table in tables:
        if table in referenced:
            uq = f"uq_{table}_owner_id"
            exists = conn.execute(
                text("SELECT 1 FROM pg_constraint WHERE conname = :n "
                     "AND conrelid = CAST(:t AS regclass)"),
                {"n": uq, "t": quote(table)},
            ).first()  # fmt: skip
            if exists is None:
                out.append(
                    f"ALTER TABLE {quote(table)} ADD CONSTRAINT {quote(uq)} UNIQUE (owner, id)"
                )
    on_delete = {"c": " ON DELETE CASCADE", "n": " ON DELETE SET NULL",
                 "d": " ON DELETE SET DEFAULT", "r": " ON DELETE RESTRICT", "a": ""}  # fmt: skip
    for name, table, ref, cols, refcols, deltype in fks:
        if "owner" in cols:
            continue
        q = quote(name)
        mine = ", ".join(quote(c) for c in cols)
        theirs = ", ".join(quote(c) for c in refcols)
        out.append(
            f"ALTER TABLE {quote(table)} DROP CONSTRAINT {q}, ADD CONSTRAINT {q} "
            f"FOREIGN KEY (owner, {mine}) REFERENCES {quote(ref)} (owner, {theirs})"
            f"{on_delete[deltype]}"
        )
    return out


def _has_column(conn: Connection, table: str, column: str) -> bool:
    return bool(
        conn.execute(
            text("SELECT 1 FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) "
                 "AND attname = :c AND NOT attisdropped"),
            {"t": quote(table), "c": column},
        ).first()
    )  # fmt: skip


def apply_sharing(store: Any, roles: Sequence[str]) -> list[str]:
    """Make the roles the user of `store` shares his rows with those of
    ``[store] share_with`` (``roles``), in a lab store; nothing elsewhere.
    Returns a note (one line) for each role that cannot be shared with
    (no such role, or the user is not a member); the others are applied.

    :raises shournal.store.StoreError: the store cannot be written.
    """
    if store.dialect_name != "postgresql":
        return []
    notes: list[str] = []
    with store.writing() as conn:
        if conn.execute(text(f"SELECT to_regclass('{SHARE_TABLE}')")).scalar() is None:
            return []  # not a lab store
        wanted: list[int] = []
        for role in dict.fromkeys(roles):
            member = conn.execute(
                text("SELECT oid, pg_has_role(current_user, oid, 'MEMBER') FROM pg_roles "
                     "WHERE rolname = :r"),
                {"r": role},
            ).one_or_none()  # fmt: skip
            if member is None:
                notes.append(f"[store] share_with: no role {role!r} on the server; not shared")
            elif not member[1]:
                notes.append(f"[store] share_with: you are not a member of {role!r}; not shared")
            else:
                wanted.append(int(member[0]))
        conn.execute(
            text(f"DELETE FROM {SHARE_TABLE} WHERE owner = current_user "
                 "AND NOT (role::oid = ANY(:w))"),
            {"w": wanted},
        )  # fmt: skip
        for oid in wanted:
            conn.execute(
                text(f"INSERT INTO {SHARE_TABLE} (role) VALUES (CAST(:o AS oid)::regrole) "
                     "ON CONFLICT DO NOTHING"),
                {"o": oid},
            )  # fmt: skip
    return notes
