"""``shournal status``: is a file still what its recorded lineage would make?

For each target the whole lineage is walked, and every file version a
command of it read is compared with the file at that path now (size,
mtime, and the partial hash recomputed with the hash settings of the
command that read it: the ``--stat`` rules of :mod:`shournal.query.filestat`).

* A file that is unchanged, or that now holds a version a command of
  the lineage wrote (``sed -i f`` rewrote what an earlier command read),
  is fine.
* A leaf input (no recorded command wrote it) that changed: ``stale``;
  that is gone: ``missing``.
* An intermediate file (a command of the lineage wrote it) that changed
  is ``stale``; one that is gone (moved, deleted) is fine by itself, as
  make's secondary files: its own inputs are checked in turn.
* A target whose content no recorded command wrote: ``unknown``.
* A command of the lineage that exited with a status other than 0 (130:
  interrupted with Ctrl-C) or never finished: ``failed`` (after
  ``missing`` and ``stale``): what it wrote may be partial.

A directory argument checks every file under it whose content a recorded
command wrote (hidden directories and symbolic links are skipped).
"""

from __future__ import annotations

import os
import stat

from shournal.data import QueryFileError, _FrozenValue, _Value
from shournal.provenance.graph import DiskTarget, Lineage, build_lineage
from shournal.query.filestat import MISSING, UP_TO_DATE, file_status

# Not typing.TYPE_CHECKING: typing (and dataclasses) cost `shournal status`
# its start-up (bench/cli_startup.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from datetime import datetime
    from typing import Literal

    from shournal.provenance.readers import JournalReader

    State = Literal["up to date", "stale", "missing", "failed", "unknown"]
    Kind = Literal["stale", "missing", "failed"]


class Problem(_FrozenValue):
    __slots__ = ("kind", "path", "command_id", "read_at", "exit_status", "username", "hostname")
    kind: Kind
    path: bytes
    # stale, missing: the command that read the version (None: the target);
    # failed: the command that failed
    command_id: int | None
    read_at: datetime | None  # that command's start
    # failed: its exit status (None: it never finished, ``incomplete``)
    exit_status: int | None
    # whose the command is (a lab store holds colleagues' shared commands)
    username: str | None
    hostname: str | None

    def __init__(
        self,
        kind: Kind,
        path: bytes,
        command_id: int | None,
        read_at: datetime | None,
        exit_status: int | None = None,
        username: str | None = None,
        hostname: str | None = None,
    ) -> None:
        self._init(kind=kind, path=path, command_id=command_id, read_at=read_at,
                   exit_status=exit_status, username=username, hostname=hostname)  # fmt: skip


class TargetStatus(_Value):
    __slots__ = ("path", "state", "problems", "commands")
    path: str  # as given (or found under a directory argument)
    state: State
    problems: list[Problem]
    commands: int  # commands in the lineage

    def __init__(
        self, path: str, state: State, problems: list[Problem] | None = None, commands: int = 0
    ) -> None:
        self.path = path
        self.state = state
        self.problems = [] if problems is None else problems
        self.commands = commands


def _problems(lin: Lineage) -> list[Problem]:
    """Every changed or missing input of the lineage, one per path (the
    latest reader's), missing ones first."""
    # What a command of the lineage wrote to each path: acceptable states.
    written: dict[bytes, list[tuple[object, int | None, int | None]]] = {}
    for cmd in lin.commands.values():
        for ev in cmd.writes:
            written.setdefault(ev.path, []).append((ev, cmd.hash_chunk_size, cmd.hash_max_reads))
    found: dict[bytes, Problem] = {}
    for node in lin.files.values():
        if node.event is None or node.target:
            continue
        state = file_status(node.event, node.hash_chunk_size, node.hash_max_reads)
        if state == UP_TO_DATE:
            continue
        if state == MISSING:
            if not node.leaf:
                continue
            kind: Literal["stale", "missing"] = "missing"
        else:
            if any(
                file_status(ev, chunk, reads) == UP_TO_DATE  # type: ignore[arg-type]
                for ev, chunk, reads in written.get(node.path, ())
            ):
                continue
            kind = "stale"
        readers = [lin.commands[c] for c in lin.readers(node.id) if c in lin.commands]
        latest = max(readers, key=lambda c: (c.start_time, c.id), default=None)
        problem = Problem(
            kind,
            node.path,
            None if latest is None else latest.id,
            None if latest is None else latest.start_time,
            username=None if latest is None else latest.username,
            hostname=None if latest is None else latest.hostname,
        )
        known = found.get(node.path)
        if known is None or _when(known) < _when(problem):
            found[node.path] = problem
    return sorted(found.values(), key=lambda p: (p.kind != "missing", p.path))


def _failed(lin: Lineage) -> list[Problem]:
    """A step of the lineage that exited with a status other than 0 (a
    Ctrl-C is 130) or never finished: the file it wrote may be partial."""
    out = []
    for cmd in lin.commands_by_start():
        if cmd.incomplete:
            status = None
        elif cmd.return_value_known and cmd.return_value != 0:
            status = cmd.return_value
        else:
            continue
        wrote = lin.written(cmd.id)
        path = wrote[0][0].path if wrote else os.fsencode(cmd.working_dir)
        out.append(Problem("failed", path, cmd.id, cmd.start_time, status,
                           cmd.username, cmd.hostname))  # fmt: skip
    return out


def _when(problem: Problem) -> float:
    return 0.0 if problem.read_at is None else problem.read_at.timestamp()


def _files_under(directory: str) -> Iterator[str]:
    for base, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(base, name)
            try:
                if stat.S_ISREG(os.lstat(path).st_mode):
                    yield path
            except OSError:
                continue


def check_target(reader: JournalReader, path: str) -> TargetStatus:
    if not os.path.lexists(path):
        return TargetStatus(path, "missing", [Problem("missing", os.fsencode(path), None, None)])
    lin = build_lineage(reader, [DiskTarget(path)])
    target = lin.files[lin.targets[0]]
    if target.leaf:
        return TargetStatus(path, "unknown")
    problems = _problems(lin) + _failed(lin)
    state: State = "up to date"
    if problems:
        state = problems[0].kind
    return TargetStatus(path, state, problems, len(lin.commands))


def check_status(reader: JournalReader, paths: Iterable[str]) -> list[TargetStatus]:
    """One status per file argument; a directory gives one per file under
    it that a recorded command wrote.

    :raises shournal.data.QueryFileError: a file argument cannot be read.
    """
    result: list[TargetStatus] = []
    for path in paths:
        if os.path.isdir(path):
            for found in _files_under(path):
                try:
                    status = check_target(reader, found)
                except QueryFileError:
                    continue  # unreadable: not ours to judge
                if status.state != "unknown":
                    result.append(status)
        else:
            result.append(check_target(reader, path))
    return result


def _local(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


def _shown(path: bytes) -> str:
    """A path under the working directory relative to it, others absolute."""
    text = os.fsdecode(path)
    try:
        cwd = os.getcwd()
    except OSError:
        return text
    return os.path.relpath(text, cwd) if text.startswith(cwd.rstrip("/") + "/") else text


def status_line(status: TargetStatus, me: tuple[str, str] | None = None) -> str:
    """``PATH: up to date`` / ``PATH: stale: P changed after command N
    read it (TIME)`` / ``PATH: missing: P`` / ``PATH: failed: command N,
    which wrote P, exited with status S`` / ``PATH: unknown: written
    outside the journal``; more problems are counted.  P is relative to
    the working directory when it lies under it.  A command not the
    reader's own here (``me``: (user, host), default the reader's) is
    followed by ``(user@host)``."""
    from shournal.terminal import printable

    head = printable(status.path)
    if status.state == "up to date":
        return f"{head}: up to date"
    if status.state == "unknown":
        return f"{head}: unknown: written outside the journal"
    first = status.problems[0]
    where = printable(_shown(first.path))
    command = f"command {first.command_id}"
    if first.username is not None and first.hostname is not None:
        from shournal.report.whose import not_own

        who = not_own(first.username, first.hostname, me)
        if who is not None:
            command += f" ({who})"
    if first.kind == "missing":
        text = f"{head}: missing: {where}"
    elif first.kind == "failed":
        text = f"{head}: failed: {command}, which wrote {where}, "
        if first.exit_status is None:
            text += "did not finish"
        else:
            text += f"exited with status {first.exit_status}"
            if first.exit_status == 130:
                text += " (interrupted)"
            elif first.exit_status > 128:
                text += f" (signal {first.exit_status - 128})"
    else:
        text = f"{head}: stale: {where} changed after {command} read it"
        if first.read_at is not None:
            text += f" ({_local(first.read_at)})"
    more = len(status.problems) - 1
    if more:
        text += f" (and {more} more)"
    return text


def status_object(status: TargetStatus) -> dict[str, object]:
    return {
        "path": status.path,
        "status": status.state,
        "commands": status.commands,
        "problems": [
            {
                "status": p.kind,
                "path": os.fsdecode(p.path),
                "command": p.command_id,
                "readAt": None if p.read_at is None else p.read_at.isoformat(),
                **({"exitStatus": p.exit_status} if p.kind == "failed" else {}),
                **({} if p.username is None else {"user": p.username, "host": p.hostname}),
            }
            for p in status.problems
        ],
    }
