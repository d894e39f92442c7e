"""``shournal query``: find commands and the files they read and wrote.

Exit codes: 0 something found, 1 nothing found (or no journal yet), 2
usage error (bad option, missing file, bad session id), 3 the journal
cannot be used.
Registered by the CLI package with ``app.command("query")(query)``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from shournal.cli import EXIT_FOUND, EXIT_NOT_FOUND, EXIT_USAGE
from shournal.cli._common import check_files, errors_to_status, open_journal, write_to
from shournal.cli._common import fail as _fail
from shournal.cli._output import HUMAN_MAX_FILES, STAT_COUNTS, note_pending
from shournal.cli._output import no_results as _no_results
from shournal.cli._output import render as _render
from shournal.cli._output import stat_counts as _stat_counts

if TYPE_CHECKING:
    import typer

    from shournal.cli._options import (
        OPERATORS,
        CommandText,
        Cwd,
        ExitCode,
        Host,
        LineageOf,
        SessionId,
        Since,
        Tag,
        Until,
        User,
        int_option,
        option,
    )


class OutputFormat(StrEnum):
    human = "human"
    json = "json"
    jsonl = "jsonl"
    shournal_json = "shournal-json"
    # Rendered by shournal.report.html.write_html(views, fp, stats=JournalStats).
    html = "html"


# files per command in an HTML report (the rest is counted, "... and N more")
_HTML_MAX_FILES = 500

def query(
    wfile: Annotated[
        Path | None,
        typer.Option(
            "--wfile",
            help="Commands that wrote this file's content (matched by size, hash "
            "and mtime, not by name: renamed files are found).",
            show_default=False,
        ),
    ] = None,
    rfile: Annotated[
        Path | None,
        typer.Option(
            "--rfile",
            help="Commands that read this file's content (matched like --wfile).",
            show_default=False,
        ),
    ] = None,
    lineage_of: LineageOf = None,
    wname: Annotated[
        str | None, option("--wname", "Wrote a file with this name (% wildcard, ne:NAME).", "NAME")
    ] = None,
    rname: Annotated[
        str | None, option("--rname", "Read a file with this name (like --wname).", "NAME")
    ] = None,
    wpath: Annotated[
        str | None,
        option("--wpath", "Wrote a file in this directory ('/dir/%' for the whole tree).", "DIR"),
    ] = None,
    rpath: Annotated[
        str | None, option("--rpath", "Read a file in this directory (like --wpath).", "DIR")
    ] = None,
    wsize: Annotated[
        str | None,
        option(
            "--wsize", f"Wrote a file of this size, e.g. '>10KiB', '1M..2G'. {OPERATORS}", "SIZE"
        ),
    ] = None,
    rsize: Annotated[str | None, option("--rsize", "Read a file of this size.", "SIZE")] = None,
    whash: Annotated[
        str | None, option("--whash", "Wrote a file with this partial hash (decimal).", "HASH")
    ] = None,
    rhash: Annotated[
        str | None, option("--rhash", "Read a file with this partial hash.", "HASH")
    ] = None,
    wmtime: Annotated[
        str | None,
        option("--wmtime", "Wrote a file with this mtime, e.g. '>2024-05-01', '<3d'.", "TIME"),
    ] = None,
    rmtime: Annotated[
        str | None, option("--rmtime", "Read a file with this mtime.", "TIME")
    ] = None,
    history: Annotated[
        int | None,
        int_option(
            "--history",
            help="Only the last N matching commands by start time; alone, the last N commands.",
            show_default=False,
        ),
    ] = None,
    command_text: CommandText = None,
    cwd: Cwd = None,
    session_id: SessionId = None,
    command_id: Annotated[
        str | None, option("--command-id", "The command with this id (or '>100', '5..9').", "ID")
    ] = None,
    exit_code: ExitCode = None,
    tag: Tag = None,
    host: Host = None,
    user: User = None,
    since: Since = None,
    until: Until = None,
    limit: Annotated[
        int | None,
        int_option("--limit", help="At most N commands, in output order.", show_default=False),
    ] = None,
    reverse: Annotated[
        bool, typer.Option("--reverse", help="Newest first (default: oldest first).")
    ] = False,
    stat: Annotated[
        bool,
        typer.Option(
            "--stat",
            help="Show whether each file is still up to date, modified or missing "
            "(rehashed with the command's hash settings).",
        ),
    ] = False,
    max_files: Annotated[
        int, int_option("--max-files", help="Files listed per command and kind (human).")
    ] = HUMAN_MAX_FILES,
    stat_counts: Annotated[
        str,
        typer.Option(
            "--stat-counts",
            help="MIN,MAX: statistics sections need MIN entries and show MAX (human); "
            "0,0 hides them.",
            metavar="MIN,MAX",
        ),
    ] = STAT_COUNTS,
    output_format: Annotated[
        OutputFormat,
        typer.Option(
            "--output-format",
            help="human, json (one array), jsonl (one object per line), shournal-json "
            "(the original's HEADER:/COMMAND:/FOOTER: lines), html (needs -o).",
        ),
    ] = OutputFormat.human,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write to this file instead of stdout.", show_default=False
        ),
    ] = None,
    restore_rfiles: Annotated[
        bool,
        typer.Option(
            "--restore-rfiles",
            help="Restore the archived read files of every found command into "
            "DIR/command-<id>/<original path>, with their mode.",
        ),
    ] = False,
    restore_dir: Annotated[
        Path | None,
        typer.Option(
            "--restore-dir",
            help="Where --restore-rfiles writes (default: $TMPDIR/shournal-restore-$USER).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Find commands by the files they wrote or read, their text, directory,
    session, time, exit status or id.  All criteria must hold."""
    from shournal.criteria import parse_criteria
    from shournal.data import QueryError
    from shournal.errors import StoreMissing
    from shournal.provenance import resolve_lineage
    from shournal.query.pending import wait_for_pending

    # Usage errors first: a failing query must not touch the journal.
    with errors_to_status():
        criteria = parse_criteria(
            command_text=command_text, cwd=cwd, command_id=command_id, exit_code=exit_code,
            host=host, user=user, since=since, until=until, session_id=session_id,
            wname=wname, rname=rname, wpath=wpath, rpath=rpath, wsize=wsize, rsize=rsize,
            whash=whash, rhash=rhash, wmtime=wmtime, rmtime=rmtime, lineage_of=lineage_of,
            tag=tag or None,
        )  # fmt: skip
        if history is None and wfile is None and rfile is None and criteria.is_empty():
            raise QueryError("empty query: give a filter (e.g. --wfile FILE) or --history N")
        check_files(wfile, rfile, lineage_of)
        min_stats, max_stats = _stat_counts(stat_counts)
        if output_format is OutputFormat.html and output is None:
            raise QueryError("--output-format html needs -o FILE")

    # A command that just finished may still be on its way into the journal.
    pending = wait_for_pending()
    human = output_format is OutputFormat.human
    html = output_format is OutputFormat.html
    missing = ""
    stats = None
    firsts: Any = None
    restored: Any = None
    commands: list[Any] = []
    capped: list[int] | None = None
    with errors_to_status():
        try:
            journal = open_journal()
        except StoreMissing as e:
            missing = str(e)
        else:
            with journal:
                commands = journal.find(
                    resolve_lineage(journal, criteria),
                    wfile=wfile,
                    rfile=rfile,
                    history=history,
                    limit=limit,
                    reverse=reverse,
                    max_files=max_files if human else _HTML_MAX_FILES if html else None,
                )
                if not commands and human and wfile is not None:
                    capped = journal.capped_writers(wfile)
                if restore_rfiles and commands:
                    restored = _restore(journal, commands, restore_dir)
                if commands and (html or (human and max_stats > 0)):
                    top = None
                    if html:
                        from shournal.report.html import TOP_N as top
                    stats = journal.stats(command_ids=[c.id for c in commands], top=top)
                if commands and html:
                    firsts = journal.session_firsts(
                        {c.session_uuid for c in commands if c.session_uuid is not None}
                    )

    if stat:
        from shournal.query.filestat import stat_commands

        stat_commands(commands)

    if html:
        _write_html(commands, output, stats, firsts)  # type: ignore[arg-type]
    elif human and not commands:
        write_to(_no_results(missing, pending, wfile, rfile, capped, command_text), None)
    else:
        write_to(
            _render(
                output_format, commands, stats, max_files, min_stats, max_stats, output, restored
            ),
            output,
        )
    note_pending(pending, commands, human)
    if restored is not None:
        from shournal.terminal import printable

        dest = printable(str(restored.dest))
        print(f"shournal: restored {restored.count} file(s) into {dest}", file=sys.stderr)
        for cmd_id, path, why in restored.skipped:
            shown = printable(f"{os.fsdecode(path)} not restored: {why}")
            print(f"shournal: command {cmd_id}: {shown}", file=sys.stderr)
    raise SystemExit(EXIT_FOUND if commands else EXIT_NOT_FOUND)


def _restore(journal: Any, commands: list[Any], restore_dir: Path | None) -> Any:
    from shournal import _paths
    from shournal.restore import RestoreError, restore_read_files

    default = restore_dir is None
    if restore_dir is None:
        import getpass
        import tempfile

        restore_dir = Path(tempfile.gettempdir()) / f"shournal-restore-{getpass.getuser()}"
    restore_dir = Path(restore_dir)  # text when shournal.cli._direct parsed it
    try:
        _paths.make_private_dir(restore_dir)
        if default:
            # a fixed name in a shared directory: anybody may have made it first
            _paths.check_own_directory(restore_dir, follow_links=False, forbidden_mode=0o077)
        return restore_read_files(journal, commands, restore_dir)
    except RestoreError as e:
        _fail(str(e), EXIT_USAGE)
    except _paths.UnsafeDirectory as e:
        _fail(f"restore directory {e} (--restore-dir DIR chooses another)", EXIT_USAGE)
    except OSError as e:
        _fail(f"cannot restore into {restore_dir}: {e.strerror}", EXIT_USAGE)


def _write_html(commands: list[Any], output: Path, stats: Any, firsts: Any) -> None:
    import tempfile

    from shournal.report.html import write_html

    output = Path(output)  # text when shournal.cli._direct parsed it

    # Written beside the target and renamed: a failure leaves nothing
    # behind.  mkstemp creates a new name (O_EXCL): in a directory others
    # may write, a name they planted (a link to a file of ours) is never
    # opened.  The report gets the mode any new file would (umask).
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
        with open(fd, "w", encoding="ascii") as fp:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fp.fileno(), 0o666 & ~umask)
            write_html(commands, fp, stats=stats, session_firsts=firsts)
        os.replace(tmp, output)
    except OSError as e:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _fail(f"cannot write {output}: {e.strerror}", EXIT_USAGE)
