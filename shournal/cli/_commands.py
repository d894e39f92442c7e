"""The one table of `shournal`'s commands: name, where the command is,
its help and its short help (the line of the top-level ``--help``).

A command is added by one entry here.  :mod:`shournal.cli._app` builds
the typer application from this table, with only the command being run:
importing every command module and having typer read every signature
cost each command more start-up time than its own work
(bench/cli_startup.py).  The top-level ``--help`` lists the commands from
this table alone (tests/unit/test_cli_commands.py checks it against the
application with every command).  Plain data: no typer here.
"""

from __future__ import annotations

# name: ("module:attribute", help, short help or None (click makes it
# from the help), context settings or None).  The attribute is a typer
# command function, or a typer.Typer of sub-commands; the order is the
# order of the top-level --help (typer lists sub-command groups last).
COMMANDS: dict[str, tuple[str, str, str | None, dict[str, bool] | None]] = {
    "history": (
        "shournal.cli.history:history",
        "One line per command: when, how long, exit status, files written, directory, "
        "command line (bare `shournal` on a terminal).",
        "One line per command, newest last (bare `shournal` on a terminal).",
        None,
    ),
    "query": (
        "shournal.cli.query:query",
        "Find commands by the files they wrote or read, text, directory...",
        None,
        None,
    ),
    "note": (
        "shournal.cli.labels:note",
        "Set, show (no TEXT) or remove (--clear) a command's note, e.g. "
        "shournal note 42 'the command behind figure 3'.",
        "Set, show or remove a command's note.",
        None,
    ),
    "tag": (
        "shournal.cli.labels:tag",
        "Add tags to a command (shournal tag 42 fig3 paper2), --remove them, list a "
        "command's tags (no TAG) or every tag (no ID).",
        "Add, remove or list a command's tags.",
        None,
    ),
    "stats": (
        "shournal.cli.stats:stats",
        "Statistics: busiest commands, sessions and directories, totals.",
        None,
        None,
    ),
    "restore": (
        "shournal.cli.restore:restore",
        "Restore one archived read file (by its file id) into this directory.",
        "Restore one archived read file (by file id) into this directory.",
        None,
    ),
    "diff": (
        "shournal.cli.reproduce:diff",
        "Every difference between two recorded commands: ids, or --wfile F1 F2 "
        "(exit 0 same, 1 differ).",
        "Every difference between two recorded commands.",
        None,
    ),
    "replay": (
        "shournal.cli.reproduce:replay",
        "Run a command recorded with --apparatus again in a sandbox (bubblewrap) built "
        "from the archive; writes go to OUTDIR; verdict per output (exit 0 all identical).",
        "Replay a command recorded with its apparatus; verdict per output.",
        None,
    ),
    "rerun": (
        "shournal.cli.reproduce:rerun",
        "Run a new experiment derived from a command recorded with --apparatus (changed "
        "command line, inputs, environment, host programs), sandboxed as replay.",
        "Run a changed experiment on a recorded apparatus (sandboxed).",
        None,
    ),
    "apparatus": (
        "shournal.cli.reproduce:apparatus_switch",
        "on|off|status: record this shell's next command lines with their apparatus "
        "(the shell function `shournal` passes the shell's pid).",
        "Record this shell's command lines with their apparatus (on|off).",
        None,
    ),
    "import": (
        "shournal.cli.importing:import_history",
        "Import the history you already have: bash, zsh, atuin, the original shournal "
        "(with its files), hishtory; a second import skips what is stored.",
        "Import a bash, zsh, atuin, original shournal or hishtory history.",
        None,
    ),
    "delete": (
        "shournal.cli.delete:delete",
        "Delete commands and what only they referenced from the journal.",
        None,
        None,
    ),
    "redact": (
        "shournal.cli.redact:redact",
        "Apply the current secret patterns (built in and [redact] patterns) to the stored "
        "command lines, archived scripts and recorded environments; --dry-run says what would "
        "change.",
        "Redact secrets in what is stored already (--dry-run).",
        None,
    ),
    "lineage": (
        "shournal.cli.provenance:lineage",
        "From FILE back to every command that made it and the files they read.",
        "From FILE back to every command that made it.",
        None,
    ),
    "status": (
        "shournal.cli.provenance:status",
        "Is each file still what its recorded lineage would make? Exit 0: all up to date.",
        "Is each file still what its recorded lineage would make?",
        None,
    ),
    "export": (
        "shournal.cli.provenance:export",
        "Write a Snakefile or Makefile that rebuilds TARGETs from their leaf inputs.",
        "Write a Snakefile or Makefile that rebuilds the targets.",
        None,
    ),
    "recombine": (
        "shournal.cli.rereso:recombine",
        "Run a tool bundle's commands on every benchmark set whose format they accept, "
        "each run journaled.",
        "Run a tool bundle on every matching benchmark set.",
        None,
    ),
    "run": (
        "shournal.cli._app:run",
        "Run CMD observed (its whole process tree) and store it; exits with CMD's status.",
        "Run CMD observed (its whole process tree) and store it.",
        # Every option after the command's first word is the command's.
        {
            "allow_extra_args": True,
            "ignore_unknown_options": True,
            "allow_interspersed_args": False,
        },
    ),
    "init": (
        "shournal.cli._app:init",
        "Print the two lines to add to ~/.bashrc or ~/.zshrc.",
        None,
        None,
    ),
    "search": (
        "shournal.cli._app:search",
        "Search the journal interactively (full screen): command text, and the files "
        "commands wrote (w:NAME) or read (r:NAME); Enter prints the chosen command "
        "(with `shournal init SHELL --ctrl-r`: puts it on the prompt).",
        "Search commands and their files interactively (Ctrl-R).",
        None,
    ),
    "sync": (
        "shournal.cli.sync:sync",
        "Push the commands waiting in the spool to the journal (a lab server) now; "
        "print the backlog, the last error and the time of the last successful push. "
        "Exit 0: nothing waits; 1: some still wait; 3: the server cannot be used.",
        "Push the spool to the journal now; print the backlog and last error.",
        None,
    ),
    "doctor": (
        "shournal.cli._app:doctor",
        "Check everything recording needs and print the fix for each failure.",
        "Check everything recording needs; print the fix for each failure.",
        None,
    ),
    "version": ("shournal.cli._app:version", "Print the version.", None, None),
    "describe": (
        "shournal.cli.rereso:describe_app",
        "Write ReReSo tool and benchmark bundles from recorded commands.",
        None,
        None,
    ),
    "server": (
        "shournal.cli.server:server_app",
        "A lab store on PostgreSQL: init (schema, roles, policies; upgrades), add-user, "
        "import (move your journal in).",
        None,
        None,
    ),
}

# The reading commands, run without typer when their arguments are plain
# (shournal.cli._direct; their options: shournal/cli/_spec.py, which
# scripts/cli_spec.py writes from the typer application).
DIRECT = ("query", "lineage", "status", "stats", "history")


def first_word(argv: list[str]) -> str | None:
    """The command word of ``shournal ARGV``: its first argument that is
    not an option (the top level has only flags: --version, -h, --help),
    or None."""
    for i, arg in enumerate(argv):
        if arg == "--":
            # the end of the options: the next argument is the command
            return argv[i + 1] if i + 1 < len(argv) else None
        if arg == "-" or not arg.startswith("-"):
            return arg
    return None
