"""``shournal server init URL`` and ``shournal server add-user NAME``: an
administrator's set-up of a lab store on PostgreSQL (docs/lab.md).

Both are idempotent and print what they did (nothing when all was in
place); ``--dry-run`` prints the SQL instead and changes nothing.  A URL
is printed with its password masked; a password given with
``--password-stdin`` is never printed.

Exit statuses: 0 done (or nothing to do); 2 usage error (an invalid role
name, an empty password); 3 the server cannot be reached or refuses.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from shournal.cli import EXIT_USAGE
from shournal.cli._common import errors_to_status, fail

server_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

Url = Annotated[
    str,
    typer.Argument(
        help="The database as an administrator (a superuser) reaches it, e.g. "
        "postgresql://postgres@/shournal?host=/run/postgresql",
        show_default=False,
    ),
]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Print the SQL it would run; change nothing.")
]

UsersRole = Annotated[
    str | None,
    typer.Option("--users-role", help="The group role of shournal's users "
                 "[default: shournal_users]."),
]


def _report(lines: list[str], dry_run: bool, url: str, nothing: str) -> None:
    from shournal.store.lab import mask

    if dry_run:
        print(f"-- {mask(url)}")
    for line in lines:
        print(line)
    if not lines:
        print(("-- " if dry_run else "") + nothing)


@server_app.command(
    "init",
    help="Create the lab store's schema (owned by a NOLOGIN role), the users' group role "
    "and the row-level-security policies in an existing PostgreSQL database.",
    short_help="Create a lab store's schema, roles and policies.",
)
def init(
    url: Url,
    dry_run: DryRun = False,
    owner: Annotated[
        str | None,
        typer.Option("--owner-role", help="The role owning the tables [default: shournal_schema]."),
    ] = None,
    users: UsersRole = None,
) -> None:
    from shournal.store import lab

    owner = owner or lab.OWNER_ROLE
    users = users or lab.USERS_ROLE
    _check_names(owner, users)
    with errors_to_status():
        plan = lab.execute(url, lambda conn: lab.plan_init(conn, owner, users), dry_run)
    _report(list(lab.describe(plan, dry_run)), dry_run, url,
            "lab store in place: nothing to do")


@server_app.command(
    "add-user",
    help="Create (or adopt) NAME's login role and make it a member of the users' group role.",
    short_help="Create or adopt a user's login role.",
)
def add_user(
    url: Url,
    name: Annotated[str, typer.Argument(help="The user's role (usually the login name).")],
    dry_run: DryRun = False,
    password_stdin: Annotated[
        bool,
        typer.Option("--password-stdin",
                     help="Set the role's password from the first line of stdin "
                     "(hashed with scram-sha-256 before it is sent)."),
    ] = False,
    users: UsersRole = None,
) -> None:
    from shournal.store import lab

    users = users or lab.USERS_ROLE
    _check_names(name, users)
    password = None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
        if not password:
            fail("--password-stdin: no password on stdin", EXIT_USAGE)
    with errors_to_status():
        plan = lab.execute(
            url, lambda conn: lab.plan_add_user(conn, name, users, password), dry_run
        )
    _report(list(lab.describe(plan, dry_run)), dry_run, url,
            f"{name} is a shournal user already: nothing to do")


def _check_names(*names: str) -> None:
    from shournal.store.lab import BadRoleName, check_role_name

    for name in names:
        try:
            check_role_name(name)
        except BadRoleName as e:
            fail(str(e), EXIT_USAGE)
