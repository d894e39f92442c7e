"""The typer application behind `shournal` (see :mod:`shournal.cli`).

Imported only when a command needs the parser: typer and its
dependencies cost more start-up time than most commands themselves.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from shournal.cli.delete import delete
from shournal.cli.history import history
from shournal.cli.importing import import_history
from shournal.cli.labels import note, tag
from shournal.cli.provenance import export, lineage, status
from shournal.cli.query import query
from shournal.cli.redact import redact
from shournal.cli.reproduce import apparatus_switch, diff, replay, rerun
from shournal.cli.rereso import describe_app, recombine
from shournal.cli.restore import restore
from shournal.cli.server import server_app
from shournal.cli.stats import stats
from shournal.cli.sync import sync

app = typer.Typer(
    no_args_is_help=True,
    # plain click help: rich (a typer dependency) costs ~50 ms to import
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    # -h as well: what people type first (every command and sub-command)
    context_settings={"help_option_names": ["-h", "--help"]},
    help="shournal: a journal of every shell command and the files it read and wrote.",
)

def _print_version(value: bool) -> None:
    if value:
        from shournal.cli import print_version

        print_version()
        raise typer.Exit(0)


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", is_eager=True,
                     callback=_print_version),
    ] = False,
) -> None:
    pass


app.command(
    "history",
    help="One line per command: when, how long, exit status, files written, directory, "
    "command line (bare `shournal` on a terminal).",
    short_help="One line per command, newest last (bare `shournal` on a terminal).",
)(history)
app.command("query", help="Find commands by the files they wrote or read, text, directory...")(
    query
)
app.command(
    "note",
    help="Set, show (no TEXT) or remove (--clear) a command's note, e.g. "
    "shournal note 42 'the command behind figure 3'.",
    short_help="Set, show or remove a command's note.",
)(note)
app.command(
    "tag",
    help="Add tags to a command (shournal tag 42 fig3 paper2), --remove them, list a "
    "command's tags (no TAG) or every tag (no ID).",
    short_help="Add, remove or list a command's tags.",
)(tag)
app.command("stats", help="Statistics: busiest commands, sessions and directories, totals.")(
    stats
)
app.command(
    "restore",
    help="Restore one archived read file (by its file id) into this directory.",
    short_help="Restore one archived read file (by file id) into this directory.",
)(restore)
app.command(
    "diff",
    help="Every difference between two recorded commands: ids, or --wfile F1 F2 "
    "(exit 0 same, 1 differ).",
    short_help="Every difference between two recorded commands.",
)(diff)
app.command(
    "replay",
    help="Run a command recorded with --apparatus again in a sandbox (bubblewrap) built "
    "from the archive; writes go to OUTDIR; verdict per output (exit 0 all identical).",
    short_help="Replay a command recorded with its apparatus; verdict per output.",
)(replay)
app.command(
    "rerun",
    help="Run a new experiment derived from a command recorded with --apparatus (changed "
    "command line, inputs, environment, host programs), sandboxed as replay.",
    short_help="Run a changed experiment on a recorded apparatus (sandboxed).",
)(rerun)
app.command(
    "apparatus",
    help="on|off|status: record this shell's next command lines with their apparatus "
    "(the shell function `shournal` passes the shell's pid).",
    short_help="Record this shell's command lines with their apparatus (on|off).",
)(apparatus_switch)
app.command(
    "import",
    help="Import the history you already have: bash, zsh, atuin, the original shournal "
    "(with its files), hishtory; a second import skips what is stored.",
    short_help="Import a bash, zsh, atuin, original shournal or hishtory history.",
)(import_history)
app.command("delete", help="Delete commands and what only they referenced from the journal.")(
    delete
)
app.command(
    "redact",
    help="Apply the current secret patterns (built in and [redact] patterns) to the stored "
    "command lines, archived scripts and recorded environments; --dry-run says what would "
    "change.",
    short_help="Redact secrets in what is stored already (--dry-run).",
)(redact)
app.command(
    "lineage",
    help="From FILE back to every command that made it and the files they read.",
    short_help="From FILE back to every command that made it.",
)(lineage)
app.command(
    "status",
    help="Is each file still what its recorded lineage would make? Exit 0: all up to date.",
    short_help="Is each file still what its recorded lineage would make?",
)(status)
app.command(
    "export",
    help="Write a Snakefile or Makefile that rebuilds TARGETs from their leaf inputs.",
    short_help="Write a Snakefile or Makefile that rebuilds the targets.",
)(export)
app.add_typer(
    describe_app,
    name="describe",
    help="Write ReReSo tool and benchmark bundles from recorded commands.",
)
app.add_typer(
    server_app,
    name="server",
    help="A lab store on PostgreSQL: init (schema, roles, policies), add-user.",
)
app.command(
    "recombine",
    help="Run a tool bundle's commands on every benchmark set whose format they accept, "
    "each run journaled.",
    short_help="Run a tool bundle on every matching benchmark set.",
)(recombine)


@app.command(
    "run",
    # Every option after the command's first word is the command's.
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
    },
    help="Run CMD observed (its whole process tree) and store it; exits with CMD's status.",
    short_help="Run CMD observed (its whole process tree) and store it.",
)
def run(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments.")],
    apparatus: Annotated[
        bool,
        typer.Option(
            "--apparatus",
            help="Also archive every file it read (content), the digests of what it wrote, "
            "its environment: for `shournal replay` and `shournal diff`.",
        ),
    ] = False,
    archive_outputs: Annotated[
        bool,
        typer.Option("--archive-outputs",
                     help="With --apparatus: archive the content of written files too."),
    ] = False,
) -> None:
    from shournal.capture.runner import RunError, run_observed

    if archive_outputs and not apparatus:
        print("shournal: --archive-outputs needs --apparatus", file=sys.stderr)
        raise typer.Exit(2)
    try:
        status = run_observed(command, apparatus=apparatus, archive_outputs=archive_outputs)
    except RunError as exc:
        print(f"shournal: {exc}", file=sys.stderr)
        raise typer.Exit(exc.status) from None
    raise typer.Exit(status)


@app.command("init", help="Print the two lines to add to ~/.bashrc or ~/.zshrc.")
def init(
    shell: Annotated[str, typer.Argument(help="bash or zsh")],
    ctrl_r: Annotated[
        bool,
        typer.Option("--ctrl-r", help="Also bind Ctrl-R to `shournal search` (Enter puts "
                     "the chosen command on the prompt)."),
    ] = False,
) -> None:
    from shournal.cli import print_init

    raise typer.Exit(print_init(shell, ctrl_r=ctrl_r))


@app.command(
    "search",
    help="Search the journal interactively (full screen): command text, and the files "
    "commands wrote (w:NAME) or read (r:NAME); Enter prints the chosen command "
    "(with `shournal init SHELL --ctrl-r`: puts it on the prompt).",
    short_help="Search commands and their files interactively (Ctrl-R).",
)
def search(
    query: Annotated[
        str,
        typer.Option("--query", help="Start with this search text "
                     "(w:NAME: wrote a file NAME, r:NAME: read one)."),
    ] = "",
    mode: Annotated[
        str,
        typer.Option("--mode", help="Text matching: substring, fuzzy or prefix (Ctrl-S cycles)."),
    ] = "substring",
    filter_: Annotated[
        str,
        typer.Option("--filter", help="Start with this filter: all, host, session, directory "
                     "or repository (Ctrl-R cycles)."),
    ] = "all",
) -> None:
    from shournal.cli.search import run_search
    from shournal.search_query import MODES, SCOPES

    for name, value, known in (("--mode", mode, MODES), ("--filter", filter_, SCOPES)):
        if value not in known:
            print(f"shournal: {name}: unknown value {value!r} (one of {', '.join(known)})",
                  file=sys.stderr)
            raise typer.Exit(2)
    raise typer.Exit(run_search(query, mode, filter_))


app.command(
    "sync",
    help="Push the commands waiting in the spool to the journal (a lab server) now; "
    "print the backlog, the last error and the time of the last successful push. "
    "Exit 0: nothing waits; 1: some still wait; 3: the server cannot be used.",
    short_help="Push the spool to the journal now; print the backlog and last error.",
)(sync)


@app.command(
    "doctor",
    help="Check everything recording needs and print the fix for each failure.",
    short_help="Check everything recording needs; print the fix for each failure.",
)
def doctor() -> None:
    from shournal.doctor import print_report, run_checks

    raise typer.Exit(0 if print_report(run_checks()) else 1)


@app.command("version", help="Print the version.")
def version() -> None:
    from shournal.cli import print_version

    print_version()
