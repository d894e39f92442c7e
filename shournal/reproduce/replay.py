"""`shournal replay ID [-o OUTDIR]`: run a command recorded with its
apparatus again, in a bubblewrap sandbox built from the archive, and give
a verdict per recorded output.

The sandbox (no privileged code: bwrap in an unprivileged user namespace):

* the host's root read-only, a private ``/tmp``, ``/dev`` and ``/proc`` of
  its own, no network unless ``--share-net``, the recorded host name;
* the writable places are OUTDIR only: the recorded working directory and
  the directory of every recorded output are each replaced by their mirror
  in OUTDIR (host path ``/a/b`` <-> ``OUTDIR/a/b``), so the command writes
  where it wrote then and it lands in OUTDIR; a directory that no longer
  exists is replaced from its nearest existing ancestor down;
* every archived file the command read shows its archived content: the
  blob, materialised once in ``OUTDIR/.shournal/inputs``, bound read-only
  over its path (programs and libraries too, as Rex does); a read file
  that is also a recorded output is copied instead, so that the command
  may rewrite it;
* the recorded environment (a redacted secret takes its value from the
  current environment, or stays unset), umask, working directory, argv
  (``shournal run``) or command line (``sh -c``).

A replay never writes outside OUTDIR.  Its output and error go to
``OUTDIR/.shournal/stdout`` and ``stderr``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shournal.confined import (
    Confined,
    ConfinedError,
    UnsafePath,
    mirror,
    recorded_path,
    refusal,
    remove_tree,
    remove_tree_at,
)
from shournal.hashing import content_digest
from shournal.redact import is_redacted
from shournal.reproduce.diff import classify_read
from shournal.reproduce.experiment import Experiment
from shournal.store.archive import ArchiveError, Contents
from shournal.terminal import printable

# Never bound from the archive: the sandbox has its own.
_SPECIAL = ("/proc/", "/sys/", "/dev/")
META = ".shournal"


class ReplayError(Exception):
    """The replay cannot be set up (one line)."""


class ContentNotReadable(ReplayError):
    """Archived content the replay needs that this reader cannot read (a
    colleague's not shared with them, or never stored in the journal):
    ``lines``, one per file."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(lines[0] if len(lines) == 1 else f"{lines[0]} (and {len(lines) - 1} more)")
        self.lines = lines


def check_readable(exp: Experiment, changes: Changes | None = None) -> None:
    """Refuse, before anything is made, a replay of ``exp`` (with
    ``changes``) whose archived inputs are not all readable here.

    :raises ContentNotReadable: one line per read file whose content is
        neither in the journal for this reader nor in this host's archive.
    """
    changes = changes or Changes()
    wanted: dict[str, list[str]] = {}
    for path, f in sorted(exp.reads().items()):
        if (path.startswith(_SPECIAL) or not stat.S_ISREG(f["mode"]) or f["digest"] is None
                or path in changes.inputs):
            continue
        if (classify_read(path, f["mode"]) == "programs_libraries"
                and changes.host_program(path)):
            continue
        wanted.setdefault(f["digest"], []).append(path)
    missing = exp.contents().unreadable(wanted)
    paths = [path for digest in missing for path in wanted.get(digest, [])]
    if paths:
        raise ContentNotReadable(_not_readable(exp, paths))


def _not_readable(exp: Experiment, paths: list[str]) -> list[str]:
    return [f"command {exp.command.id}: the archived content of {path} is not readable "
            "(not in the journal for you, nor in this host's archive)" for path in sorted(paths)]


def _mirror(outdir: Path, path: str) -> Path:
    """Where ``path`` (checked by :func:`checked_paths`) is shown in OUTDIR."""
    return outdir / mirror(path)


def checked_paths(exp: Experiment) -> None:
    """Refuse a command whose recorded working directory, read or written
    path is not absolute and normalised (a journal is input from outside:
    ``/../../home/victim/.bashrc`` must not name a file outside OUTDIR).

    :raises ReplayError: one line naming the command and the path.
    """
    what = f"command {exp.command.id}"
    for path in (exp.command.working_dir, *exp.reads(), *exp.writes()):
        try:
            recorded_path(path)
        except UnsafePath as why:
            raise ReplayError(refusal(what, path, why)) from None


def _existing_ancestor(path: str) -> str:
    p = path
    while not os.path.isdir(p):
        p = os.path.dirname(p)
    return p


def _under(path: str, dirs: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


@dataclass(slots=True)
class Changes:
    """What `shournal rerun` changes (Rex's runnew); empty: a replay."""

    command: str | None = None  # run this command line (sh -c) instead
    inputs: dict[str, str] = field(default_factory=dict)  # recorded path -> host file
    env: dict[str, str] = field(default_factory=dict)
    local_all: bool = False  # programs and libraries from the host
    local: set[str] = field(default_factory=set)  # these recorded programs from the host
    archived: set[str] = field(default_factory=set)  # these from the archive (over local_all)

    def host_program(self, path: str) -> bool:
        if path in self.archived:
            return False
        return self.local_all or path in self.local


def _top_dirs(dirs: list[str]) -> list[str]:
    """``dirs`` without those below another one of them: a directory below
    a writable one is its mirror's subdirectory already (bound twice, its
    files would be walked, compared and recorded twice)."""
    out: list[str] = []
    for d in sorted(set(dirs), key=lambda d: (d.count("/"), d)):
        if not _under(d, out):
            out.append(d)
    return out


def plan(exp: Experiment, outdir: Confined, archive: Contents, share_net: bool,
         bwrap: str, changes: Changes | None = None,
         ) -> tuple[list[str], dict[str, str], int, dict[str, Any]]:
    """(argv of bwrap, environment, umask, notes) for replaying ``exp``
    (with ``changes``); materialises the inputs and the mirror directories
    in ``outdir``, never outside it.

    :raises ReplayError: no apparatus, a recorded path that is not
        normalised, or OUTDIR cannot be written.
    """
    changes = changes or Changes()
    man = exp.manifest
    if man is None:
        raise ReplayError(f"command {exp.command.id} was recorded without its apparatus "
                          "(shournal run --apparatus)")
    checked_paths(exp)
    try:
        return _plan(exp, man, outdir, archive, share_net, bwrap, changes)
    except ConfinedError as e:
        raise ReplayError(str(e)) from None


def _plan(exp: Experiment, man: dict[str, Any], out: Confined, archive: Contents,
          share_net: bool, bwrap: str, changes: Changes,
          ) -> tuple[list[str], dict[str, str], int, dict[str, Any]]:
    cwd = exp.command.working_dir
    reads = exp.reads()
    writes = {p: f for p, f in exp.writes().items()
              if stat.S_ISREG(f["mode"]) and not p.startswith(_SPECIAL)}
    wanted = sorted({cwd, *(os.path.dirname(p) for p in writes)})
    writable: list[str] = []
    for d in wanted:
        top = _existing_ancestor(d)
        if top == "/":
            raise ReplayError(f"cannot make {d} writable in the sandbox: it no longer "
                              "exists and neither does any parent below /")
        writable.append(top)
    writable = _top_dirs(writable)
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", "--new-session"]
    if share_net:
        args.append("--share-net")
    if man.get("hostname"):
        args += ["--hostname", man["hostname"]]
    for d in writable:
        out.mkdirs(mirror(d))
        args += ["--bind", str(_mirror(out.root, d)), d]
    for d in wanted:
        out.mkdirs(mirror(d))
    inputs = f"{META}/inputs"
    out.mkdirs(inputs)
    notes: dict[str, Any] = {"from_archive": 0, "from_host": [], "not_shown": [],
                             "stubs": [], "writable": writable, "local": [],
                             "archived_programs": []}
    made: dict[tuple[str, int], Path] = {}
    unreadable: list[str] = []
    for path, f in sorted(reads.items()):
        if path.startswith(_SPECIAL) or not stat.S_ISREG(f["mode"]):
            continue
        inside = _under(path, writable)
        new_file = changes.inputs.get(path)
        if new_file is not None:
            if inside:
                _stub(out, path, notes)
            args += ["--ro-bind", new_file, path]
            continue
        program = classify_read(path, f["mode"]) == "programs_libraries"
        if program and changes.host_program(path):
            notes["local"].append(path)
            # Outside the mirrors the host's file shows anyway; inside,
            # the mirror hides it: bind it over its stub.
            if inside and os.path.isfile(path):
                _stub(out, path, notes)
                args += ["--ro-bind", path, path]
            elif inside:
                notes["not_shown"].append(path)
            continue
        if program:
            notes["archived_programs"].append(path)
        digest = f["digest"]
        if digest is None:
            # Not archived (too large, changed...): inside a mirror, show
            # the host's file if it is still there; outside, it is anyway.
            if inside and os.path.isfile(path):
                _stub(out, path, notes)
                args += ["--ro-bind", path, path]
                notes["from_host"].append(path)
            elif inside:
                notes["not_shown"].append(path)
            continue
        if path in writes and inside:
            # read and written: a writable copy in the mirror
            try:
                out.write(mirror(path), archive.get(digest), f["mode"] & 0o777)
            except ArchiveError:
                unreadable.append(path)  # damaged, or gone since check_readable
                continue
            notes["from_archive"] += 1
            continue
        if not inside and not os.path.isfile(path):
            notes["not_shown"].append(path)  # no file to bind over
            continue
        key = (digest, f["mode"] & 0o777)  # never a setuid copy
        blob = made.get(key)
        if blob is None:
            name = f"{inputs}/{digest}-{key[1]:o}"
            try:
                out.write(name, archive.get(digest), key[1] | 0o400)
            except ArchiveError:
                unreadable.append(path)
                continue
            blob = out.shown(name)
            made[key] = blob
        if inside:
            _stub(out, path, notes)
        args += ["--ro-bind", str(blob), path]
        notes["from_archive"] += 1
    if unreadable:
        # (replay removes what it made of OUTDIR)
        raise ContentNotReadable(_not_readable(exp, unreadable))
    args += ["--chdir", cwd, "--"]
    argv = man.get("argv")
    if changes.command is not None:
        args += ["/bin/sh", "-c", changes.command]
    elif isinstance(argv, list) and argv:
        args += [str(a) for a in argv]
    else:
        args += ["/bin/sh", "-c", exp.command.text]
    env = {}
    notes["unset_secrets"] = []
    for k, v in man["env"].items():
        if is_redacted(v):  # (a secret, or a URL with its password hidden)
            if k in os.environ:
                env[k] = os.environ[k]
            else:
                notes["unset_secrets"].append(k)
        else:
            env[k] = v
    env.update(changes.env)
    umask = man.get("umask")
    return args, env, umask if isinstance(umask, int) else 0o022, notes


def _stub(out: Confined, path: str, notes: dict[str, Any]) -> None:
    """The mount point of a read-only bind inside a mirror (bwrap cannot
    create it there as a file); removed after the run."""
    rel = mirror(path)
    if out.lstat(rel) is not None:
        return
    out.write(rel, b"", 0o644)
    notes["stubs"].append(rel)


def verdicts(exp: Experiment, out: Confined, notes: dict[str, Any]) -> list[dict[str, Any]]:
    """identical / differs (size, content) / missing per recorded output,
    then extra: written now, not then.  Read through ``out``: a symlink
    the command left in OUTDIR is not followed, a FIFO not opened."""
    writes = {p: f for p, f in exp.writes().items()
              if stat.S_ISREG(f["mode"]) and not p.startswith(_SPECIAL)}
    chunk, reads = exp.command.hash_chunk_size, exp.command.hash_max_reads
    result = []
    for path, f in sorted(writes.items()):
        data = out.read(mirror(path))
        if data is None:
            result.append({"path": path, "verdict": "missing"})
            continue
        entry: dict[str, Any] = {"path": path}
        if len(data) != f["size"]:
            entry.update(verdict="differs", what="size", size=[f["size"], len(data)])
        elif f["digest"]:
            same = content_digest(data).hex() == f["digest"]
            entry.update(verdict="identical" if same else "differs")
            if not same:
                entry["what"] = "content"
        elif f["hash"] is not None and chunk and reads:
            from shournal.hashing import partial_xxh64_bytes

            same = partial_xxh64_bytes(data, chunk, reads) == f["hash"]
            entry.update(verdict="identical" if same else "differs",
                         basis="size and partial hash")
            if not same:
                entry["what"] = "content"
        elif f["size"] == 0:
            entry.update(verdict="identical")
        else:
            entry.update(verdict="differs", what="unknown: no digest recorded")
        result.append(entry)
    inputs_copied = set(exp.reads()) & set(writes)
    for rel in made_files(out, notes):
        host = "/" + rel
        if host not in writes and host not in inputs_copied:
            result.append({"path": host, "verdict": "extra"})
    return result


def made_files(out: Confined, notes: dict[str, Any]) -> list[str]:
    """The regular files in the writable mirrors after the run (paths
    relative to OUTDIR, each once), without the bind mount points."""
    stubs = set(notes["stubs"])
    found: list[str] = []
    for d in _top_dirs(notes["writable"]):
        found += [rel for rel, _st, _dfd, _name in out.files(mirror(d)) if rel not in stubs]
    return found


def replay(exp: Experiment, outdir: Path | None, share_net: bool = False,
           changes: Changes | None = None, show_plan: Any = None,
           keep: bool = True) -> dict[str, Any]:
    """Replay ``exp`` (with ``changes``: rerun); ``show_plan(notes)`` is
    called before the command runs.  Without ``outdir`` the run goes to a
    new directory under $TMPDIR, removed after unless ``keep``; the
    archived inputs materialised for the sandbox are removed either way
    (they are the archive's, not the run's)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ReplayError("bubblewrap is not installed (apt-get install bubblewrap)")
    if exp.manifest is None:
        raise ReplayError(f"command {exp.command.id} was recorded without its apparatus "
                          "(shournal run --apparatus)")
    checked_paths(exp)  # before anything is made on disk
    check_readable(exp, changes)
    temporary = outdir is None
    if outdir is None:
        try:
            outdir = Path(tempfile.mkdtemp(prefix="shournal-replay-"))
        except OSError as exc:
            raise ReplayError(f"cannot create a directory in {tempfile.gettempdir()}: "
                              f"{exc.strerror}") from None
    else:
        outdir = Path(os.path.abspath(outdir))
        try:
            if os.path.lexists(outdir) and (not outdir.is_dir() or any(outdir.iterdir())):
                raise ReplayError(f"{outdir} exists and is not an empty directory")
        except OSError as exc:
            raise ReplayError(f"cannot use {outdir}: {exc.strerror}") from None
    made = temporary or not os.path.lexists(outdir)  # removed again on an error
    done = False
    try:
        with Confined(outdir, create=True) as out:
            report = _replay(exp, out, share_net, changes, show_plan, bwrap)
        done = True
    except ConfinedError as e:
        raise ReplayError(str(e)) from None
    finally:
        if (temporary and not (keep and done)) or (made and not done):
            remove_tree(outdir)
    report["kept"] = not temporary or keep
    return report


def _replay(exp: Experiment, out: Confined, share_net: bool, changes: Changes | None,
            show_plan: Any, bwrap: str) -> dict[str, Any]:
    args, env, umask, notes = plan(exp, out, exp.contents(), share_net, bwrap, changes)
    if show_plan is not None:
        show_plan(notes)
    stdout = out.open(f"{META}/stdout", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        stderr = out.open(f"{META}/stderr", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except BaseException:
        os.close(stdout)
        raise
    start_ns = time.time_ns()
    try:
        proc = subprocess.run(args, env=env, stdin=subprocess.DEVNULL, stdout=stdout,
                              stderr=stderr, preexec_fn=lambda: os.umask(umask), check=False)
    finally:
        os.close(stdout)
        os.close(stderr)
    end_ns = time.time_ns()
    for stub in notes["stubs"]:
        st = out.lstat(stub)
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_size == 0:
            with contextlib.suppress(OSError):
                out.unlink(stub)
    with contextlib.suppress(ConfinedError):
        with out.directory(META) as meta:
            remove_tree_at(meta, "inputs")
    outputs = verdicts(exp, out, notes)
    identical = bool(outputs) and all(o["verdict"] == "identical" for o in outputs)
    return {
        "command": exp.command.id,
        "outdir": str(out.root),
        "exit_status": {"recorded": exp.command.return_value, "replayed": proc.returncode},
        "outputs": outputs,
        "identical": identical and proc.returncode == exp.command.return_value,
        "from_archive": notes["from_archive"],
        "from_host": notes["from_host"],
        "not_shown": notes["not_shown"],
        "unset_secrets": notes["unset_secrets"],
        "not_archived": exp.manifest.get("not_archived", {}) if exp.manifest else {},
        "time_ns": [start_ns, end_ns],
    }


def render_human(rep: dict[str, Any]) -> str:
    """The report for a terminal: recorded paths and names made printable."""
    lines = [f"{o['verdict']:9} {o['path']}" + (f"  ({o['what']})" if "what" in o else "")
             for o in rep["outputs"]]
    es = rep["exit_status"]
    if es["recorded"] != es["replayed"]:
        lines.append(f"exit status differs: recorded {es['recorded']}, "
                     f"replayed {es['replayed']}")
    where = (f"outputs in {rep['outdir']}" if rep.get("kept", True)
             else f"outputs were in {rep['outdir']}, removed (--keep or -o OUTDIR keeps them)")
    lines.append(f"{rep['from_archive']} files from the archive, {where}")
    if rep["not_archived"]:
        lines.append("not archived when recorded: " + ", ".join(
            f"{n} {k.replace('_', ' ')}" for k, n in rep["not_archived"].items()))
    if rep["from_host"]:
        lines.append(f"{len(rep['from_host'])} read files from the host (not archived)")
    if rep["not_shown"]:
        lines.append(f"{len(rep['not_shown'])} read files neither archived nor on the host: "
                     + ", ".join(rep["not_shown"][:5]))
    if rep["unset_secrets"]:
        lines.append("redacted and not set now: " + ", ".join(rep["unset_secrets"]))
    return "".join(printable(line) + "\n" for line in lines)
