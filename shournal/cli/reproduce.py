"""``shournal diff``, ``replay`` and ``rerun`` (shournal.reproduce).

Exit statuses: diff 0 no difference, 1 they differ; replay 0 every
recorded output identical, 1 otherwise; rerun 0 the new command exited 0,
1 otherwise; all 2 bad input (replay and rerun: also a recorded path that
is not absolute and normalised, an OUTDIR that cannot be made or written
or is not an empty directory, archived content the command read that
this user cannot read: one line per file, nothing written), 3 the
journal cannot be used.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from shournal.cli import EXIT_USAGE
from shournal.cli._common import HumanOrJson, note
from shournal.cli._common import fail as _fail
from shournal.cli._common import write as _write
from shournal.cli._options import (
    Archived,
    HumanOrJsonFormat,
    Local,
    LocalAll,
    SandboxOutputDir,
    ShareNet,
)


def _command_id(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        _fail(f"not a command id: {value!r}", EXIT_USAGE)
    if n < 1:
        _fail(f"not a command id: {value!r}", EXIT_USAGE)
    return n


def _open_journal() -> Any:
    from shournal.errors import StoreMissing
    from shournal.journal import Journal

    try:
        return Journal.open(create=False, read_only=True)  # (it only loads)
    except StoreMissing:
        _fail("nothing recorded yet (no journal)", EXIT_USAGE)
    # (other errors: shournal.cli.error_status gives their line and status)


@contextmanager
def _experiments() -> Iterator[Any]:
    """The journal for loading experiments, closed after; the loaders'
    errors as one line and the documented status."""
    from shournal.reproduce.experiment import ExperimentError

    journal = _open_journal()
    try:
        yield journal
    except ExperimentError as e:
        _fail(str(e), EXIT_USAGE)
    finally:
        journal.close()


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
    lineage: Annotated[
        tuple[str, str] | None,
        typer.Option("--lineage", help="Why do these two files differ: the first steps "
                     "where their lineages diverge.", show_default=False, metavar="F1 F2"),
    ] = None,
    output_format: HumanOrJsonFormat = HumanOrJson.human,
) -> None:
    """Every difference between two recorded commands (Rex's expdiff)."""
    from shournal.reproduce.diff import compare, render_human
    from shournal.reproduce.experiment import load, load_by_file

    ids = commands or []
    if lineage is not None:
        if ids or wfile is not None:
            _fail("--lineage F1 F2 takes no command ids and no --wfile", EXIT_USAGE)
        _diff_lineage(lineage, output_format)
    if (wfile is None) == (len(ids) != 2) or (wfile is not None and ids):
        _fail("give two command ids, or --wfile F1 F2", EXIT_USAGE)
    with _experiments() as journal:
        if wfile is not None:
            for f in wfile:
                if not Path(f).is_file():
                    _fail(f"{f}: not a regular file", EXIT_USAGE)
            a, b = (load_by_file(journal, f) for f in wfile)
        else:
            a, b = (load(journal, _command_id(i)) for i in ids)
        report = compare(a, b, detail)
    if output_format is HumanOrJson.json:
        _write(json.dumps(report, ensure_ascii=True, indent=1) + "\n")
    else:
        _write(render_human(report))
    raise typer.Exit(1 if report["differs"] else 0)


def _diff_lineage(files: tuple[str, str], output_format: HumanOrJson) -> None:
    """`diff --lineage F1 F2` (shournal.reproduce.lineage_diff); exits."""
    from shournal.cli.provenance import _check_files, _reader, _run
    from shournal.provenance.graph import DiskTarget, build_lineage
    from shournal.reproduce.lineage_diff import align, render_human

    _check_files([Path(f) for f in files])
    with _reader() as reader:
        if reader is None:
            _fail("nothing recorded yet (no journal)", EXIT_USAGE)
        lins = [_run(lambda f=f: build_lineage(reader, [DiskTarget(f)])) for f in files]
    for f, lin in zip(files, lins, strict=True):
        if lin.writer(lin.targets[0]) is None:
            _fail(f"{f}: no recorded command made this version of it", EXIT_USAGE)
    report = align(*lins)
    report["files"] = list(files)
    if output_format is HumanOrJson.json:
        _write(json.dumps(report, ensure_ascii=True, indent=1) + "\n")
    else:
        _write(render_human(report, *files))
    raise typer.Exit(1 if report["differs"] else 0)


def _replay_failed(e: Exception) -> NoReturn:
    """A replay that cannot be set up: one line, or one per file whose
    archived content is not readable; status 2."""
    from shournal.reproduce.replay import ContentNotReadable

    for line in e.lines[:-1] if isinstance(e, ContentNotReadable) else []:
        note(line)
    _fail(e.lines[-1] if isinstance(e, ContentNotReadable) else str(e), EXIT_USAGE)


def replay(
    command_id: Annotated[str, typer.Argument(help="The command's id.", metavar="ID")],
    output: SandboxOutputDir = None,
    share_net: ShareNet = False,
    local_all: LocalAll = False,
    local: Local = None,
    archived: Archived = None,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the new directory under $TMPDIR the "
                           "command wrote in (without -o; it is removed after).")
    ] = False,
    output_format: HumanOrJsonFormat = HumanOrJson.human,
) -> None:
    """Run a command recorded with its apparatus again, in a sandbox built
    from the archive, and compare each output with the recorded one
    (--local-all, --local: with the host's programs and libraries)."""
    from shournal.reproduce.experiment import load
    from shournal.reproduce.replay import Changes, ReplayError, render_human
    from shournal.reproduce.replay import replay as run_replay

    cid = _command_id(command_id)
    # open while the replay reads the archived content through it
    with _experiments() as journal:
        exp = load(journal, cid)
        changes = Changes(local_all=local_all, local=_programs(exp, local or [], "--local"),
                          archived=_programs(exp, archived or [], "--archived"))
        try:
            report = run_replay(exp, output, share_net, changes, keep=keep)
        except ReplayError as e:
            _replay_failed(e)
    if output_format is HumanOrJson.json:
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


def _edit(text: str) -> str:
    """The command line after the user edited it in $EDITOR (--edit)."""
    import os
    import shlex
    import subprocess
    import tempfile

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        _fail("--edit: set EDITOR (or VISUAL)", EXIT_USAGE)
    fd, name = tempfile.mkstemp(prefix="shournal-rerun-", suffix=".sh")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
        try:
            status = subprocess.call([*shlex.split(editor), name])
        except OSError as e:
            _fail(f"--edit: cannot run {editor}: {e.strerror}", EXIT_USAGE)
        if status != 0:
            _fail(f"--edit: {editor} exited with {status}; nothing run", EXIT_USAGE)
        with open(name, encoding="utf-8", errors="replace") as fh:
            edited = fh.read().strip()
    finally:
        os.unlink(name)
    if not edited:
        _fail("--edit: the command line is empty; nothing run", EXIT_USAGE)
    return edited


def _programs(exp: Any, names: list[str], what: str) -> set[str]:
    """The recorded program/library paths ``names`` (a path, or a file
    name) stand for."""
    import os

    from shournal.reproduce.diff import classify_read

    programs = [p for p, f in exp.reads().items()
                if classify_read(p, f["mode"]) == "programs_libraries"]
    out: set[str] = set()
    for name in names:
        hits = [p for p in programs
                if p == os.path.abspath(name) or ("/" not in name and os.path.basename(p) == name)]
        if not hits:
            _fail(f"{what} {name}: command {exp.command.id} ran no such program or library",
                  EXIT_USAGE)
        out.update(hits)
    return out


def rerun(
    command_id: Annotated[str, typer.Argument(help="The command's id.", metavar="ID")],
    command: Annotated[
        str | None, typer.Option("--command", help="Run this command line instead (sh -c).",
                                 show_default=False, metavar="TEXT")
    ] = None,
    edit: Annotated[
        bool, typer.Option("--edit", help="Edit the command line in $EDITOR first.")
    ] = False,
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
    local_all: LocalAll = False,
    local: Local = None,
    archived: Archived = None,
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Run in the real tree, not sandboxed, recorded "
                           "with its apparatus as any command.")
    ] = False,
    output: SandboxOutputDir = None,
    share_net: ShareNet = False,
    output_format: HumanOrJsonFormat = HumanOrJson.human,
) -> None:
    """Run a new experiment derived from a command recorded with its
    apparatus (Rex's runnew), sandboxed as replay (its outputs compared with
    the original's) or --in-place; either way recorded and linked to its
    origin (derivedFrom).  Exit 0 when the new command exits 0."""
    import os
    import sys

    from shournal.reproduce.experiment import load
    from shournal.reproduce.replay import Changes, ReplayError, render_human
    from shournal.reproduce.replay import replay as run_replay

    cid = _command_id(command_id)
    if command is not None and edit:
        _fail("give --command or --edit, not both", EXIT_USAGE)
    if in_place:
        clash = [name for name, given in (("--input", inputs), ("--local", local),
                                          ("--archived", archived), ("--local-all", local_all),
                                          ("-o", output), ("--share-net", share_net)) if given]
        if clash:
            _fail(f"--in-place runs on the host's files: {', '.join(clash)} needs the sandbox",
                  EXIT_USAGE)
    # open while the run reads the archived content through it
    with _experiments() as journal:
        exp = load(journal, cid)
        if exp.manifest is None:
            _fail(f"command {cid} was recorded without its apparatus (shournal run --apparatus)",
                  EXIT_USAGE)
        if edit:
            command = _edit(exp.command.text)
        changes = Changes(command=command, env=dict(_pairs(env or [], "--env")),
                          local_all=local_all, local=_programs(exp, local or [], "--local"),
                          archived=_programs(exp, archived or [], "--archived"))
        reads = exp.reads()
        for old, new in _pairs(inputs or [], "--input"):
            old_abs = os.path.normpath(os.path.join(exp.command.working_dir, old))
            if old_abs not in reads:
                _fail(f"--input {old}: command {cid} did not read {old_abs}", EXIT_USAGE)
            if not os.path.isfile(new):
                _fail(f"--input {old}={new}: {new} is not a regular file", EXIT_USAGE)
            changes.inputs[old_abs] = os.path.abspath(new)
        text = command if command is not None else exp.command.text

        def plan_lines(where: str) -> list[str]:
            return rerun_plan_lines(cid, exp.command.text, text, changes, where)

        if in_place:
            _rerun_in_place(exp, changes, text, plan_lines("in place: the host's files, "
                                                           "programs and libraries"))
        seen: dict[str, Any] = {}

        def show_plan(notes: dict[str, Any]) -> None:
            seen.update(notes)
            lines = plan_lines("sandboxed: writes go to the output directory")
            lines.append(f"  programs and libraries: {len(notes['archived_programs'])} from the "
                         f"archive, {len(notes['local'])} from the host")
            print("\n".join("shournal: " + line for line in lines), file=sys.stderr)

        try:
            report = run_replay(exp, output, share_net, changes, show_plan)
        except ReplayError as e:
            _replay_failed(e)
        report["derivedFrom"] = cid
        report["recorded"] = _record_sandboxed(exp, report, changes, seen, text)
    if output_format is HumanOrJson.json:
        _write(json.dumps(report, ensure_ascii=True, indent=1) + "\n")
    else:
        _write(render_human(report))
        if report["recorded"] is not None:
            _write(f"recorded as command {report['recorded']}, derived from {cid}\n")
    raise typer.Exit(0 if report["exit_status"]["replayed"] == 0 else 1)


def rerun_plan_lines(cid: int, recorded: str, text: str, changes: Any, where: str) -> list[str]:
    """What `rerun` will do, for stderr: recorded command text, paths and
    values made printable."""
    from shournal.terminal import printable

    lines = [f"rerun derived from command {cid}: {recorded}",
             f"  command line: {text}", f"  {where}"]
    lines += [f"  input {o} shows {n}" for o, n in changes.inputs.items()]
    lines += [f"  env {k}={v}" for k, v in changes.env.items()]
    return [printable(line) for line in lines]


def _rerun_in_place(exp: Any, changes: Any, text: str, plan: list[str]) -> None:
    """Run the new command in the recorded working directory on the host,
    recorded with its apparatus and derived_from; exits."""
    import os
    import sys

    from shournal.capture.runner import RunError, run_observed

    print("\n".join("shournal: " + line for line in plan), file=sys.stderr)
    cwd = exp.command.working_dir
    try:
        os.chdir(cwd)
    except OSError as e:
        _fail(f"cannot enter {cwd}: {e.strerror}", EXIT_USAGE)
    os.environ.update(changes.env)
    argv = exp.manifest.get("argv") if changes.command is None else None
    if not (isinstance(argv, list) and argv):
        argv = ["/bin/sh", "-c", text]
    try:
        status = run_observed([str(a) for a in argv], apparatus=True,
                              derived_from=exp.command.id)
    except RunError as e:
        _fail(str(e), e.status)
    raise typer.Exit(0 if status == 0 else 1)


def _record_sandboxed(exp: Any, report: dict[str, Any], changes: Any, notes: dict[str, Any],
                      text: str) -> int | None:
    """Store the sandboxed rerun (shournal.reproduce.rerun); its id, or
    None with one warning when it could not be stored."""
    import sys

    from shournal.capture.listener import load_listener_config, store_record
    from shournal.reproduce.rerun import sandbox_record

    try:
        cfg = load_listener_config()
        return store_record(sandbox_record(exp, report, changes, notes, text, cfg), cfg)
    except Exception as e:  # noqa: BLE001 -- the run happened; say why it is not recorded
        print(f"shournal: the rerun is not recorded: {e}", file=sys.stderr)
        return None


class Switch(StrEnum):
    on = "on"
    off = "off"
    status = "status"


def apparatus_switch(
    state: Annotated[Switch, typer.Argument(help="on, off or status.")] = Switch.status,
    shell_pid: Annotated[
        int | None,
        typer.Option("--shell-pid", help="The shell (default: the parent process).",
                     show_default=False, metavar="PID"),
    ] = None,
) -> None:
    """Record a shell's next command lines with their apparatus (as `run
    --apparatus`), from the command line after this one; [apparatus] paths
    does it per directory."""
    import os

    from shournal.capture import apparatus
    from shournal.capture.listener import load_listener_config

    shell = os.getppid() if shell_pid is None else shell_pid
    if shell < 1 or not os.path.isdir(f"/proc/{shell}"):
        _fail(f"no process {shell}", EXIT_USAGE)
    try:
        if os.stat(f"/proc/{shell}").st_uid != os.getuid():
            _fail(f"process {shell} is not yours", EXIT_USAGE)
        if state is not Switch.status:
            apparatus.set_shell_state(load_listener_config(), shell, state is Switch.on)
    except OSError as e:
        _fail(f"apparatus {state.value}: {e}", EXIT_USAGE)
    on = apparatus.shell_state(shell)
    _write(f"apparatus {'on' if on else 'off'} for shell {shell}"
           + (" (from the next command line)\n" if state is not Switch.status else "\n"))
