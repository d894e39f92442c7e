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


@server_app.command(
    "import",
    help="Move a single-user journal (a SQLite file, or a postgresql:// URL) into the journal "
    "you write now (your lab store): every command with its files, session, archived scripts, "
    "note and tags, each once however often it is imported. Run it as the user whose commands "
    "they are: the lab store makes every row its inserter's.",
    short_help="Move your old journal into the lab store.",
)
def import_journal(
    source: Annotated[
        str,
        typer.Argument(metavar="FILE_OR_URL", show_default=False,
                       help="The journal to move in: its SQLite file, or its database URL."),
    ],  # fmt: skip
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Only say how many would be moved; store nothing."),
    ] = False,
    map_file: Annotated[
        str | None,
        typer.Option("--map", metavar="FILE", show_default=False,
                     help="Write each command's old and new id (tab-separated) to FILE."),
    ] = None,  # fmt: skip
) -> None:
    from shournal.config import load_config
    from shournal.importers import redacted
    from shournal.moving import Moved, move_in, opened_source, read_source, write_map
    from shournal.redact import patterns_for
    from shournal.terminal import printable

    with errors_to_status():
        from shournal.journal import Journal

        with opened_source(source, _shown(source)) as old:
            views, records = read_source(old, _shown(source))
        # Secrets are kept no more than in what is recorded.
        records = redacted(records, patterns_for(load_config(create=False).redact.patterns))
        from shournal.errors import StoreMissing
        from shournal.location import resolve_url

        try:
            # (a dry run creates no journal: with none, all would be new)
            with Journal.open(create=not dry_run, read_only=dry_run) as journal:
                if _same_journal(source, journal.location):
                    fail(f"{printable(_shown(source))} is the journal you write: nothing to move",
                         EXIT_USAGE)
                moved = move_in(journal, views, records, dry_run=dry_run)
                into = journal.location
        except StoreMissing:
            if not dry_run:
                raise
            moved = Moved(stored=len(records), mapping=[(v.id, None) for v in views])
            into = _shown(resolve_url() or "the default journal")
        if map_file is not None and not dry_run:
            write_map(map_file, _shown(source), moved.mapping)
    for line in moved.notes:
        print(f"shournal: {line}", file=sys.stderr)
    if map_file is None and not dry_run and any(old != new for old, new in moved.mapping):
        # An id printed before (in a lab notebook) is found through the map;
        # the source is only read, so the map can still be had later.
        print("shournal: the moved commands have new ids: --map FILE writes each one's old and "
              "new id (running the import again for it stores nothing twice)", file=sys.stderr)
    done = "would move" if dry_run else "moved"
    n = moved.stored
    print(f"{done} {n} command{'' if n == 1 else 's'}, skipped {moved.skipped} already stored, "
          f"from {printable(_shown(source))} into {printable(into)}")


def _shown(source: str) -> str:
    from shournal.moving import is_url
    from shournal.store.lab import mask

    return mask(source) if is_url(source) else source


def _same_journal(source: str, target: str) -> bool:
    import os

    from shournal.moving import is_url

    if is_url(source):
        return _shown(source) == target
    return os.path.realpath(source) == os.path.realpath(target)
