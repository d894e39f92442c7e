"""``shournal diff``, ``replay`` and ``rerun`` (shournal.reproduce).

Exit statuses: diff 0 no difference, 1 they differ; replay 0 every
recorded output identical, 1 otherwise; rerun 0 the new command exited 0,
1 otherwise; all 2 bad input, 3 the journal cannot be used.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from shournal.cli import EXIT_STORE, EXIT_USAGE
from shournal.cli._common import fail as _fail
from shournal.cli._common import write as _write


class ReportFormat(StrEnum):
    human = "human"
    json = "json"


def _command_id(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        _fail(f"not a command id: {value!r}", EXIT_USAGE)
    if n < 1:
        _fail(f"not a command id: {value!r}", EXIT_USAGE)
    return n


def _open_store() -> Any:
    from shournal.journal import resolve_url
    from shournal.store import Store, StoreError, StoreMissing

    try:
        return Store(resolve_url(), create=False)
    except StoreMissing:
        _fail("nothing recorded yet (no journal)", EXIT_USAGE)
    except StoreError as e:
        _fail(str(e), EXIT_STORE)


def diff(
    commands: Annotated[
        list[str] | None, typer.Argument(help="Two command ids.", show_default=False)
    ] = None,
    detail: Annotated[
        int, typer.Option("-d", "--detail", min=1, max=3,
                          help="1: what differs; 2: each difference; 3: content diffs.")
    ] = 1,
    wfile: Annotated[
        tuple[str, str] | None,
        typer.Option("--wfile", help="Compare the commands that wrote these two files.",
                     show_default=False, metavar="F1 F2"),
    ] = None,
    output_format: Annotated[
        ReportFormat, typer.Option("--output-format", help="human or json.")
    ] = ReportFormat.human,
) -> None:
    """Every difference between two recorded commands (Rex's expdiff)."""
    from shournal.reproduce.diff import compare, render_human
    from shournal.reproduce.experiment import ExperimentError, load, load_by_file
    from shournal.store import StoreError

    ids = commands or []
    if (wfile is None) == (len(ids) != 2) or (wfile is not None and ids):
        _fail("give two command ids, or --wfile F1 F2", EXIT_USAGE)
    store = _open_store()
    try:
        if wfile is not None:
            for f in wfile:
                if not Path(f).is_file():
                    _fail(f"{f}: not a regular file", EXIT_USAGE)
            a, b = (load_by_file(store, f) for f in wfile)
        else:
            a, b = (load(store, _command_id(i)) for i in ids)
        report = compare(a, b, detail)
    except ExperimentError as e:
        _fail(str(e), EXIT_USAGE)
    except StoreError as e:
        _fail(str(e), EXIT_STORE)
    finally:
        store.close()
    if output_format is ReportFormat.json:
        _write(json.dumps(report, ensure_ascii=True, indent=1) + "\n")
    else:
        _write(render_human(report))
    raise typer.Exit(1 if report["differs"] else 0)


def replay(
    command_id: Annotated[str, typer.Argument(help="The command's id.", metavar="ID")],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output-dir", help="Where its writes go (new or empty; "
                     "default: a new directory under $TMPDIR).", show_default=False,
                     metavar="OUTDIR"),
    ] = None,
    share_net: Annotated[
        bool, typer.Option("--share-net", help="Let the replay use the network.")
    ] = False,
    output_format: Annotated[
        ReportFormat, typer.Option("--output-format", help="human or json.")
    ] = ReportFormat.human,
) -> None:
    """Run a command recorded with its apparatus again, in a sandbox built
    from the archive, and compare each output with the recorded one."""
    from shournal.reproduce.experiment import ExperimentError, load
    from shournal.reproduce.replay import ReplayError, render_human
    from shournal.reproduce.replay import replay as run_replay
    from shournal.store import StoreError

    cid = _command_id(command_id)
    store = _open_store()
    try:
        exp = load(store, cid)
    except ExperimentError as e:
        _fail(str(e), EXIT_USAGE)
    except StoreError as e:
        _fail(str(e), EXIT_STORE)
    finally:
        store.close()
    try:
        report = run_replay(exp, output, share_net)
    except ReplayError as e:
        _fail(str(e), EXIT_USAGE)
    if output_format is ReportFormat.json:
        _write(json.dumps(report, ensure_ascii=True, indent=1) + "\n")
    else:
        _write(render_human(report))
    raise typer.Exit(0 if report["identical"] else 1)


def _pairs(values: list[str], what: str) -> list[tuple[str, str]]:
    out = []
    for v in values:
        left, sep, right = v.partition("=")
        if not sep or not left or (what == "--input" and not right):
            _fail(f"{what} {v!r}: expected {'OLD=NEW' if what == '--input' else 'NAME=VALUE'}",
                  EXIT_USAGE)
        out.append((left, right))
    return out


def rerun(
    command_id: Annotated[str, typer.Argument(help="The command's id.", metavar="ID")],
    command: Annotated[
        str | None, typer.Option("--command", help="Run this command line instead (sh -c).",
                                 show_default=False, metavar="TEXT")
    ] = None,
    inputs: Annotated[
        list[str] | None,
        typer.Option("--input", help="The read file at OLD shows NEW's content (repeatable).",
                     show_default=False, metavar="OLD=NEW"),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", help="Set an environment variable (repeatable).",
                     show_default=False, metavar="NAME=VALUE"),
    ] = None,
    local_all: Annotated[
        bool, typer.Option("--local-all", help="Programs and libraries from the host, "
                           "not from the archive.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output-dir", help="Where its writes go (new or empty).",
                     show_default=False, metavar="OUTDIR"),
    ] = None,
    share_net: Annotated[
        bool, typer.Option("--share-net", help="Let the run use the network.")
    ] = False,
    output_format: Annotated[
        ReportFormat, typer.Option("--output-format", help="human or json.")
    ] = ReportFormat.human,
) -> None:
    """Run a new experiment derived from a command recorded with its
    apparatus (Rex's runnew), sandboxed as replay; its outputs are compared
    with the original's.  Exit 0 when the new command exits 0."""
    import os
    import sys

    from shournal.reproduce.experiment import ExperimentError, load
    from shournal.reproduce.replay import Changes, ReplayError, render_human
    from shournal.reproduce.replay import replay as run_replay
    from shournal.store import StoreError

    cid = _command_id(command_id)
    store = _open_store()
    try:
        exp = load(store, cid)
    except ExperimentError as e:
        _fail(str(e), EXIT_USAGE)
    except StoreError as e:
        _fail(str(e), EXIT_STORE)
    finally:
        store.close()
    changes = Changes(command=command, env=dict(_pairs(env or [], "--env")),
                      local_all=local_all)
    reads = exp.reads()
    for old, new in _pairs(inputs or [], "--input"):
        old_abs = os.path.normpath(os.path.join(exp.command.working_dir, old))
        if old_abs not in reads:
            _fail(f"--input {old}: command {cid} did not read {old_abs}", EXIT_USAGE)
        if not os.path.isfile(new):
            _fail(f"--input {old}={new}: {new} is not a regular file", EXIT_USAGE)
        changes.inputs[old_abs] = os.path.abspath(new)

    def show_plan(notes: dict[str, Any]) -> None:
        lines = [f"rerun derived from command {cid}: {exp.command.text}",
                 f"  command line: {command if command is not None else exp.command.text}"]
        lines += [f"  input {o} shows {n}" for o, n in changes.inputs.items()]
        lines += [f"  env {k}={v}" for k, v in changes.env.items()]
        lines.append(f"  programs and libraries: {len(notes['archived_programs'])} from the "
                     f"archive, {len(notes['local'])} from the host")
        print("\n".join("shournal: " + line for line in lines), file=sys.stderr)

    try:
        report = run_replay(exp, output, share_net, changes, show_plan)
    except ReplayError as e:
        _fail(str(e), EXIT_USAGE)
    report["derivedFrom"] = cid
    if output_format is ReportFormat.json:
        _write(json.dumps(report, ensure_ascii=True, indent=1) + "\n")
    else:
        _write(render_human(report))
    raise typer.Exit(0 if report["exit_status"]["replayed"] == 0 else 1)
