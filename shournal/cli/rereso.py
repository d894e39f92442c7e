"""``shournal describe tool|benchmark`` and ``shournal recombine``: ReReSo
bundles from recorded work, and running tools on matching benchmarks.

Exit statuses: 0 done; 1 describe: no journal yet (as every command
reading the journal), recombine: no pair matched or a run failed;
2 bad input (unknown id, a command that read no files, runs of different
programs, content neither archived nor on disk, an invalid or missing
descriptor, an unusable output directory): one line, nothing written;
3 the journal cannot be used.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from shournal.cli import EXIT_USAGE
from shournal.cli._common import errors_to_status, note, open_journal
from shournal.cli._common import fail as _fail

_NO_JOURNAL = "no journal: "

if TYPE_CHECKING:
    from shournal.rereso.describe import Meta


describe_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Write ReReSo tool and benchmark bundles (rereso-tool.yml, rereso-benchmark.yml) "
    "from recorded commands.",
)


def _notes(notes: list[str]) -> None:
    for line in notes:
        note(line)


OutputDir = Annotated[
    Path,
    typer.Option("--output", "-o", metavar="DIR",
                 help="The bundle directory (must not exist, or be empty).", show_default=False),
]
Name = Annotated[str | None, typer.Option("--name", help="metadata.name.", show_default=False)]
Description = Annotated[
    str | None, typer.Option("--description", help="metadata.description.", show_default=False)
]
Refs = Annotated[
    list[str] | None,
    typer.Option("--ref", metavar="URL", help="metadata.references (repeatable).",
                 show_default=False),
]
License = Annotated[
    str | None,
    typer.Option("--license", metavar="SPDX",
                 help="SPDX licence identifier (its syntax is checked, not the SPDX list: "
                 "MIT, CC-BY-4.0, LicenseRef-NAME); without it the licence is 'unspecified'.",
                 show_default=False),
]


def _meta(name: str | None, description: str | None, refs: list[str] | None,
          license_: str | None) -> Meta:
    from shournal.rereso.describe import DescribeError, Meta

    try:
        return Meta(name=name, description=description, references=tuple(refs or ()),
                    license=license_)
    except DescribeError as e:
        _fail(str(e), EXIT_USAGE)


@describe_app.command(
    "tool",
    help="A tool bundle from recorded runs of one tool: rereso-tool.yml (one command per "
    "invocation pattern, file arguments as placeholders, formats from the files' media "
    "types), the wrapper rereso-run, an Apptainer definition and, when the runs were "
    "recorded with --apparatus, the SIF image of what they read.",
)
def describe_tool_cmd(
    command_ids: Annotated[list[int], typer.Argument(metavar="ID...",
                                                     help="Ids of recorded runs of the tool.")],
    output: OutputDir,
    name: Name = None,
    description: Description = None,
    ref: Refs = None,
    license_: License = None,
) -> None:
    from shournal.rereso.describe import DescribeError, describe_tool
    from shournal.rereso.schema import DescriptorInvalid

    meta = _meta(name, description, ref, license_)
    try:
        with errors_to_status(missing=_NO_JOURNAL), open_journal() as journal:
            result = describe_tool(journal, command_ids, output, meta)
    except (DescribeError, DescriptorInvalid) as e:
        _fail(str(e), EXIT_USAGE)
    _notes(result.notes)
    typer.echo(f"Wrote the tool bundle {result.bundles[0]}")


@describe_app.command(
    "benchmark",
    help="A benchmark set: the input files of recorded commands (their recorded versions), "
    "or given files, with rereso-benchmark.yml; one bundle per media type.",
)
def describe_benchmark_cmd(
    output: OutputDir,
    paths: Annotated[list[Path] | None, typer.Argument(metavar="[PATH...]",
                                                       help="Files to include as they are.",
                                                       show_default=False)] = None,
    command_id: Annotated[
        list[int] | None,
        typer.Option("--command-id", metavar="ID",
                     help="Include the input files this command read (repeatable).",
                     show_default=False),
    ] = None,
    rfile: Annotated[
        list[Path] | None,
        typer.Option("--rfile", metavar="F",
                     help="Include F, whose content a recorded command read (repeatable).",
                     show_default=False),
    ] = None,
    name: Name = None,
    description: Description = None,
    ref: Refs = None,
    license_: License = None,
    license_file: Annotated[
        list[str] | None,
        typer.Option("--license-file", metavar="PATH=SPDX",
                     help="A file's own licence, overriding --license (repeatable); PATH is "
                     "the file's name in the set or its path.", show_default=False),
    ] = None,
) -> None:
    from contextlib import nullcontext

    from shournal.rereso.describe import DescribeError, describe_benchmark, parse_file_license
    from shournal.rereso.schema import DescriptorInvalid

    meta = _meta(name, description, ref, license_)
    if not (paths or command_id or rfile):
        _fail("give --command-id ID, --rfile F or PATH...", EXIT_USAGE)
    try:
        file_licenses = dict(parse_file_license(t) for t in license_file or ())
    except DescribeError as e:
        _fail(str(e), EXIT_USAGE)
    try:
        needs_store = bool(command_id or rfile)
        with errors_to_status(missing=_NO_JOURNAL), (
            open_journal() if needs_store else nullcontext()
        ) as journal:
            result = describe_benchmark(
                journal, output, meta,
                command_ids=command_id or (), rfiles=rfile or (), paths=paths or (),
                file_licenses=file_licenses,
            )  # fmt: skip
    except (DescribeError, DescriptorInvalid) as e:
        _fail(str(e), EXIT_USAGE)
    _notes(result.notes)
    for bundle in result.bundles:
        typer.echo(f"Wrote the benchmark bundle {bundle}")


def recombine(
    tool_dir: Annotated[Path, typer.Argument(metavar="TOOL_DIR", help="A tool bundle.")],
    bench_dirs: Annotated[list[Path], typer.Argument(metavar="BENCH_DIR...",
                                                     help="Benchmark bundles.")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="OUT_DIR",
                     help="Results go to OUT_DIR/<benchmark set>/<benchmark>/ (not needed "
                     "with --plan).", show_default=False),
    ] = None,
    plan_only: Annotated[
        bool,
        typer.Option("--plan", help="Only list, for every command and benchmark set, whether "
                     "the set satisfies the command's input constraint and why not."),
    ] = False,
    inputs: Annotated[
        list[str] | None,
        typer.Option("--input", metavar="NAME=PATH",
                     help="The file for a command's other input placeholder [NAME] "
                     "(repeatable).", show_default=False),
    ] = None,
    host: Annotated[
        bool,
        typer.Option("--host", help="Run with the host's programs instead of inside the "
                     "tool's container (Apptainer/Singularity when installed, else "
                     "bubblewrap on its unpacked squashfs partition)."),
    ] = False,
    output_format: Annotated[
        str,
        typer.Option("--output-format", metavar="FORMAT", help="human or json."),
    ] = "human",
) -> None:
    import tempfile

    from shournal.rereso.image import ImageError, extract, mount_points
    from shournal.rereso.recombine import (
        RecombineError,
        container_of,
        container_runtime,
        parse_inputs,
        plan,
        render,
    )

    if output_format not in ("human", "json"):
        _fail(f"unknown output format '{output_format}' (human or json)", EXIT_USAGE)
    if output is None and not plan_only:
        _fail("give --output OUT_DIR (or --plan)", EXIT_USAGE)
    try:
        the_plan = plan(tool_dir, bench_dirs, output, parse_inputs(inputs or []))
    except RecombineError as e:
        _fail(str(e), EXIT_USAGE)
    runnable = any(p.runs for p in the_plan.pairs)
    if plan_only:
        if output_format == "json":
            typer.echo(render(the_plan, [], output_format, planned_only=True), nl=False)
        else:
            for line in the_plan.lines():
                typer.echo(line)
            if runnable and not host:
                try:
                    container_of(the_plan.tool)
                except RecombineError as e:
                    typer.echo(f"note: {e}")
        raise typer.Exit(0)
    if not runnable:
        if output_format == "json":
            typer.echo(render(the_plan, [], output_format), nl=False)
        from shournal.terminal import printable

        note("no benchmark set matches a command of the tool: nothing was run")
        for line in the_plan.lines():
            typer.echo(f"  {printable(line)}", err=True)
        raise typer.Exit(1)
    try:
        sif = None if host else container_of(the_plan.tool)
    except RecombineError as e:
        _fail(str(e), EXIT_USAGE)
    with tempfile.TemporaryDirectory(prefix="shournal-image.") as tmp:
        mode, target = "host", "-"
        runtime = container_runtime() if sif is not None else None
        if sif is not None and runtime is not None:
            mode, target = "apptainer", f"{runtime}|{sif}"
        elif sif is not None:
            rootfs = Path(tmp, "rootfs")
            try:
                extract(sif, rootfs)
                mount_points(rootfs)
            except ImageError as e:
                _fail(f"cannot unpack the container {sif}: {e}", EXIT_USAGE)
            # The image is named too, so the run's record says what it ran in.
            mode, target = "bwrap", f"{rootfs}|{sif}"
        _recombine(the_plan, mode, target, output_format)


def _recombine(the_plan: Any, mode: str, target: str, output_format: str) -> None:
    from shournal.rereso.recombine import RecombineError, render, run_plan
    if output_format == "human":
        for line in the_plan.lines():
            typer.echo(line)
        sys.stdout.flush()
    try:
        runs = run_plan(the_plan, mode, target)
    except RecombineError as e:
        _fail(str(e), EXIT_USAGE)
    typer.echo(render(the_plan, runs, output_format), nl=False)
    ok = bool(runs) and all(r.status == 0 for r in runs)
    raise typer.Exit(0 if ok else 1)
