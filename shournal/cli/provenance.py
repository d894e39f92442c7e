"""``shournal lineage``, ``shournal status`` and ``shournal export``: thin
wrappers of :mod:`shournal.provenance`.

Exit statuses:
  lineage  0 every target was written by a recorded command, 1 some was
           not (its lineage is the file alone), 2 usage, 3 journal unusable
  status   0 everything up to date, 1 anything stale, missing or unknown,
           2 usage, 3 journal unusable
  export   0 written (commands that could not be expressed, and inputs or
           scripts on disk that are not the version that ran, are named on
           stderr and in the file), 1 no recorded command wrote the targets
           or no workflow can rebuild them (no step expressible; a file's
           versions cannot be kept apart), 2 usage (the file exists, bad
           option), 3 journal unusable
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from enum import StrEnum

from shournal.cli import EXIT_FOUND, EXIT_NOT_FOUND, EXIT_USAGE
from shournal.cli._common import HumanOrJson, errors_to_status, note, write_to
from shournal.cli._common import fail as _fail
from shournal.cli._common import write as _write

# Not typing.TYPE_CHECKING: typing and pathlib (with re, urllib and
# ipaddress) cost `lineage` and `status` their start-up; typer reads the
# signatures with the names shournal.cli._app gives it.  Paths come as
# Path from typer, as text from shournal.cli._direct.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Annotated, Any, TypeVar

    import typer

    from shournal.cli._options import HumanOrJsonFormat

    T = TypeVar("T")


class LineageFormat(StrEnum):
    human = "human"
    json = "json"
    dot = "dot"
    html = "html"


class ExportFormat(StrEnum):
    snakemake = "snakemake"
    make = "make"
    rocrate = "rocrate"
    prov = "prov"


# The workflow formats (the others are run records).
_WORKFLOWS = (ExportFormat.snakemake, ExportFormat.make)


@contextmanager
def _reader() -> Iterator[Any]:
    """The journal for reading; None when there is none yet."""
    from shournal.cli._common import open_journal
    from shournal.errors import StoreMissing
    from shournal.provenance.readers import JournalReader
    from shournal.query.pending import wait_for_pending

    # A command that just finished may still be on its way into the journal.
    # (Other errors: shournal.cli.error_status gives their line and status.)
    wait_for_pending()
    try:
        journal = open_journal()
    except StoreMissing:
        yield None
        return
    try:
        yield JournalReader(journal)
    finally:
        journal.close()


def _run(work: Callable[[], T]) -> T:
    """Map the library's errors to one line and the documented status."""
    with errors_to_status():
        return work()
    raise AssertionError("unreachable")  # errors_to_status exits on every error


def _check_files(files: list[Path]) -> None:
    from shournal.data import QueryError
    from shournal.probe import check_file

    try:
        for f in files:
            check_file(f)
    except QueryError as e:
        _fail(str(e), EXIT_USAGE)


def lineage(
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE...", help="The files whose lineage to show.")
    ],
    version_of_command: Annotated[
        int | None,
        typer.Option(
            "--version-of-command", metavar="ID", show_default=False,
            help="The version of FILE that command ID wrote, not the one on disk.",
        ),
    ] = None,  # fmt: skip
    depth: Annotated[
        int | None,
        typer.Option(
            "--depth", min=1, metavar="N", show_default=False,
            help="Follow at most N commands back.",
        ),
    ] = None,
    output_format: Annotated[
        LineageFormat,
        typer.Option(
            "--output-format",
            help="human (a tree), json, dot (Graphviz) or html (one offline page; needs -o).",
        ),
    ] = LineageFormat.human,
    show_scripts: Annotated[
        bool, typer.Option("--show-scripts", help="Print the archived scripts (human).")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file.", show_default=False),
    ] = None,
) -> None:
    """From FILE back to every command that made it and their inputs."""
    from shournal.provenance.graph import CommandTarget, DiskTarget, Target, build_lineage
    from shournal.provenance.render import render_dot, render_html, render_human, render_json

    if output_format is LineageFormat.html and output is None:
        _fail("--output-format html needs -o FILE", EXIT_USAGE)
    if version_of_command is None:
        _check_files(files)
    targets: list[Target] = [
        DiskTarget(str(f))
        if version_of_command is None
        else CommandTarget(str(f), version_of_command)
        for f in files
    ]
    with _reader() as reader:
        if reader is None:
            _fail("no journal yet: nothing has been recorded", EXIT_NOT_FOUND)
        lin = _run(lambda: build_lineage(reader, targets, depth))
    if output_format is LineageFormat.json:
        text = render_json(lin)
    elif output_format is LineageFormat.dot:
        text = render_dot(lin)
    elif output_format is LineageFormat.html:
        text = render_html(lin)
    else:
        text = render_human(lin, scripts=show_scripts)
    write_to(text, output)
    written = all(not lin.files[t].leaf for t in lin.targets)
    raise SystemExit(EXIT_FOUND if written else EXIT_NOT_FOUND)


def status(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(metavar="[PATH]...", show_default=False,
                       help="Files, or directories (every recorded output under them); "
                       "default: the current directory."),
    ] = None,  # fmt: skip
    output_format: HumanOrJsonFormat = HumanOrJson.human,
) -> None:
    """Is each file still what its recorded lineage would make?"""
    from shournal.provenance.status import (
        TargetStatus,
        check_status,
        status_line,
        status_object,
    )

    names = [str(p) for p in paths] if paths else ["."]
    with _reader() as reader:
        if reader is None:
            result = [
                TargetStatus(n, "unknown") for n in names if not os.path.isdir(n)
            ]
        else:
            result = _run(lambda: check_status(reader, names))
    if not result:
        note(f"no recorded command wrote a file under {', '.join(names)}")
    if output_format is HumanOrJson.json:
        import json

        _write(json.dumps([status_object(s) for s in result], ensure_ascii=True, indent=1) + "\n")
    else:
        _write("".join(status_line(s) + "\n" for s in result))
    ok = all(s.state == "up to date" for s in result)
    raise SystemExit(EXIT_FOUND if ok else EXIT_NOT_FOUND)


def export(
    fmt: Annotated[
        ExportFormat,
        typer.Argument(metavar="FORMAT",
                       help="snakemake or make (a workflow), rocrate (a Process Run Crate) "
                       "or prov (W3C PROV-JSON)."),
    ],  # fmt: skip
    targets: Annotated[
        list[Path], typer.Argument(metavar="TARGET...", help="The files the workflow rebuilds.")
    ],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="The directory to write into.", show_default=False),
    ],
    root: Annotated[
        Path | None,
        typer.Option("--root", show_default=False,
                     help="Paths are relative to this directory (default: the deepest "
                     "directory holding the targets and all their files)."),
    ] = None,  # fmt: skip
    current_scripts: Annotated[
        bool,
        typer.Option("--current-scripts",
                     help="Run the scripts on disk, not the archived versions that ran."),
    ] = False,  # fmt: skip
    license: Annotated[
        str | None,
        typer.Option("--license", metavar="URL|TEXT", show_default=False,
                     help="rocrate: the crate's licence (default: a note that none was given)."),
    ] = None,  # fmt: skip
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
) -> None:
    """Write DIR/Snakefile or DIR/Makefile that rebuilds TARGETs from their
    leaf inputs, or the record of what made them: DIR/ro-crate-metadata.json
    (+ DIR/scripts/) or DIR/prov.json."""
    from shournal.provenance.export import (
        changed_message,
        export_workflow,
        skipped_message,
        unnamed_message,
    )

    if fmt not in _WORKFLOWS and (root is not None or current_scripts):
        _fail(f"--root and --current-scripts apply to snakemake and make, not {fmt.value}",
              EXIT_USAGE)  # fmt: skip
    if fmt is not ExportFormat.rocrate and license is not None:
        _fail(f"--license applies to rocrate, not {fmt.value}", EXIT_USAGE)
    _check_files(targets)
    if fmt not in _WORKFLOWS:
        _export_record(targets, fmt.value, output, license, force)
    fmt_name: Any = fmt.value
    result = _export_lineage(targets, lambda lin, reader: export_workflow(
        lin, reader, fmt_name, str(output), root=None if root is None else str(root),
        current_scripts=current_scripts, force=force,
    ))  # fmt: skip
    messages = [skipped_message(result, fmt_name), unnamed_message(result)]
    for message in [*messages, *changed_message(result)]:
        if message:
            note(message)
    import typer  # export runs through typer only: click's echo

    typer.echo(
        f"shournal: wrote {result.path}: {len(result.rules)} rule(s), "
        f"{len(result.leaf_inputs)} leaf input(s), {len(result.scripts)} script(s), "
        f"root {result.root}",
        err=True,
    )
    raise SystemExit(EXIT_FOUND)


def _export_lineage(targets: list[Path], make: Callable[[Any, Any], T]) -> T:
    """``make(lineage, reader)`` on the lineage of ``targets``; one line and
    status 1 when there is no journal or no recorded command wrote them."""
    from shournal.provenance.export import Unexportable
    from shournal.provenance.graph import DiskTarget, build_lineage

    with _reader() as reader:
        if reader is None:
            _fail("no journal yet: nothing has been recorded", EXIT_NOT_FOUND)

        def work() -> T | None:
            lin = build_lineage(reader, [DiskTarget(str(t)) for t in targets])
            if all(lin.files[t].leaf for t in lin.targets):
                return None
            try:
                return make(lin, reader)
            except Unexportable as e:
                _fail(str(e), EXIT_NOT_FOUND)
            raise AssertionError("unreachable")

        result = _run(work)
    if result is None:
        _fail("no recorded command wrote the targets: nothing to export", EXIT_NOT_FOUND)
    return result


def _export_record(
    targets: list[Path], fmt: Any, output: Path, license: str | None, force: bool
) -> None:
    from shournal.config import ConfigError, load_config
    from shournal.provenance.records import export_record

    try:
        # Recorded environments are redacted again with today's patterns.
        secrets: tuple[str, ...] | None = load_config(create=False).apparatus.secret_env_names
    except ConfigError:
        secrets = None  # the defaults; values were redacted when recorded
    result = _export_lineage(targets, lambda lin, reader: export_record(
        lin, reader, fmt, str(output), force=force, license=license,
        secret_env_names=secrets))  # fmt: skip
    import typer  # export runs through typer only: click's echo

    typer.echo(
        f"shournal: wrote {result.path}: {result.commands} command(s), {result.files} file "
        f"version(s), {len(result.scripts)} script(s)",
        err=True,
    )
    raise SystemExit(EXIT_FOUND)
