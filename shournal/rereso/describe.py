"""Tool and benchmark bundles from recorded commands: the library behind
``shournal describe tool`` and ``shournal describe benchmark``.

A bundle is written into a fresh directory next to the destination and
renamed into place at the end, so bad input leaves nothing on disk.  Every
descriptor is validated against its shipped schema before it is written.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shournal.confined import UnsafePath, recorded_path, refusal
from shournal.reproduce.experiment import load_manifest
from shournal.rereso import image, schema
from shournal.rereso.content import (
    ContentSource,
    ContentUnavailable,
    FileVersion,
    default_source,
    read_regular,
    recorded_content,
)
from shournal.rereso.image import RUNNER, RUNNER_IN_CONTAINER
from shournal.rereso.invocation import Invocation, InvocationError, analyze
from shournal.rereso.mediatype import detect, unknown_notice

if TYPE_CHECKING:
    from shournal.journal import Journal
    from shournal.store.archive import Contents

UNSPECIFIED_LICENSE = (
    "Unspecified: no licence was given when this bundle was made "
    "(shournal describe without --license)."
)


class DescribeError(Exception):
    """A bundle cannot be made as asked (one-line message); nothing was
    written."""


# An SPDX licence identifier by its syntax (SPDX specification, annex
# "SPDX License Expressions": idstring = 1*(ALPHA / DIGIT / "-" / "."),
# with an optional "+", or a LicenseRef-): the descriptors' ``spdx`` field
# holds one identifier, not an expression.  A syntax check, not a lookup
# in the SPDX licence list, which changes with its releases.
_SPDX_ID = re.compile(
    r"(?:DocumentRef-[A-Za-z0-9.-]+:)?LicenseRef-[A-Za-z0-9.-]+|[A-Za-z0-9][A-Za-z0-9.-]*\+?"
)


def check_spdx(value: str) -> str:
    """``value`` if it is an SPDX licence identifier by its syntax.

    :raises DescribeError: it is not.
    """
    if not _SPDX_ID.fullmatch(value):
        raise DescribeError(
            f"{value!r} is not an SPDX licence identifier (letters, digits, '-' and '.', "
            "as MIT or CC-BY-4.0; LicenseRef-NAME for others)"
        )
    return value


def parse_file_license(text: str) -> tuple[str, str]:
    """``PATH=SPDX`` (of ``--license-file``) as (PATH, SPDX).

    :raises DescribeError: no ``=``, an empty PATH or an invalid SPDX id.
    """
    path, sep, spdx = text.rpartition("=")
    if not sep or not path:
        raise DescribeError(f"--license-file {text}: give PATH=SPDX")
    return path, check_spdx(spdx)


@dataclass(frozen=True, slots=True)
class Meta:
    name: str | None = None
    description: str | None = None
    references: tuple[str, ...] = ()
    license: str | None = None  # SPDX identifier

    def __post_init__(self) -> None:
        if self.license is not None:
            check_spdx(self.license)


@dataclass(slots=True)
class Result:
    dest: Path
    bundles: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one line each, for stderr


def license_data(spdx: str | None, notes: list[str], what: str) -> dict[str, str]:
    if spdx:
        return {"spdx": spdx}
    notes.append(f"no --license given: {what} says the licence is unspecified")
    return {"custom": UNSPECIFIED_LICENSE}


def metadata(meta: Meta, name: str, description: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": meta.name or name}
    desc = meta.description or description
    if desc:
        out["description"] = desc
    if meta.references:
        out["references"] = list(meta.references)
    return out


def slug(text: str) -> str:
    """A file name made of ``text``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "tool"


def dump_yaml(doc: dict[str, Any]) -> str:
    import yaml

    return str(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False))


def publish(dest: Path, build: Callable[[Path], None]) -> None:
    """Run ``build`` on a fresh directory beside ``dest`` and rename it to
    ``dest`` (which must not exist or be an empty directory).

    :raises DescribeError: ``dest`` cannot be used.
    """
    dest = Path(os.path.abspath(dest))
    if os.path.lexists(dest):
        if not dest.is_dir() or dest.is_symlink():
            raise DescribeError(f"{dest} exists and is not a directory")
        if any(dest.iterdir()):
            raise DescribeError(f"{dest} exists and is not empty")
    if not dest.parent.is_dir():
        raise DescribeError(f"{dest.parent} is not a directory")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    except OSError as e:
        raise DescribeError(f"cannot write into {dest.parent}: {e.strerror}") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
        build(tmp)
        if os.path.isdir(dest):
            os.rmdir(dest)
        os.rename(tmp, dest)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise DescribeError(f"cannot write {dest}: {e.strerror}") from None
        raise


def _write(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    data = text.encode() if isinstance(text, str) else text
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _load_commands(journal: Journal, ids: Sequence[int]) -> list[Invocation]:
    invs = []
    for cid in dict.fromkeys(ids):
        found = journal.find(command_id=cid) if 0 <= cid < 2**63 else []
        if not found:
            raise DescribeError(f"no command with id {cid} in the journal")
        try:
            invs.append(analyze(found[0]))
        except InvocationError as e:
            raise DescribeError(str(e)) from None
    return invs


class _Types:
    """Media types of recorded versions, each looked up once."""

    def __init__(self, source: ContentSource, notes: list[str]) -> None:
        self._source = source
        self._notes = notes
        self._seen: dict[tuple[bytes, int, int | None], str] = {}

    def of(self, version: FileVersion) -> str:
        key = (version.path, version.size, version.hash)
        if key not in self._seen:
            try:
                data: bytes | None = recorded_content(version, self._source)[0]
            except ContentUnavailable:
                data = None  # the name still tells something
            name = version.shown.rsplit("/", 1)[-1]
            found = detect(name, data)
            if found.unknown:
                self._notes.append(unknown_notice(version.shown))
            self._seen[key] = found.value
        return self._seen[key]


# -- tools ------------------------------------------------------------------------


def _runner_line(inv: Invocation) -> str:
    """The wrapper's lines for ``inv``'s pattern: the recorded ``NAME=value``
    assignments exported by the wrapper's shell itself (the image holds only
    what the runs read, so no ``env`` program), then the exec of the tool as
    recorded (a script by its absolute path), file arguments from "$1"...."""
    words = list(inv.argv[: inv.prefix_len])
    if len(inv.tool) == 2:  # interpreter + script
        words[-1] = inv.tool[1]
    elif "/" in words[0]:
        words[0] = inv.tool[0]
    out = [shlex.quote(w) for w in words]
    by_index = {f.index: n for n, f in enumerate(inv.files, 1)}
    for i in range(inv.prefix_len, len(inv.argv)):
        n = by_index.get(i)
        if n is None:
            out.append(shlex.quote(inv.argv[i]))
        else:
            prefix = inv.files[n - 1].prefix
            out.append((shlex.quote(prefix) if prefix else "") + f'"${{{n}}}"')
    exports = [" ".join(["export", *map(shlex.quote, inv.assignments)])] if inv.assignments else []
    return "\n    ".join([*exports, "exec " + " ".join(out)])


_LAUNCHER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*")


def _launcher(invs: list[Invocation], notes: list[str]) -> tuple[str, str] | None:
    """(name, script) of the program a command's name starts with, when
    it is not a program on PATH as it is: a script run by its interpreter
    (``tool.py`` runs ``python3 /abs/tool.py``), a program run by its
    path, or a program run with ``NAME=value`` assignments.  The bundle
    ships it in ``bin/`` and the image in ``/usr/local/bin``, so the
    command's name is its invocation in both."""
    inv = invs[0]
    if not _LAUNCHER_NAME.fullmatch(inv.shown):
        return None
    words = list(inv.argv[: inv.prefix_len])
    if len(inv.tool) == 2:  # interpreter + script
        words[-1] = inv.tool[1]
    elif "/" in words[0]:
        words[0] = inv.tool[0]
    elif not inv.assignments:
        return None  # found on PATH as it is
    else:
        found = shutil.which(words[0])
        if found is None or os.path.dirname(found) == "/usr/local/bin":
            return None
        words[0] = found
    assignments = {tuple(i.assignments) for i in invs}
    exports = ""
    if len(assignments) == 1 and inv.assignments:
        exports = " ".join(["export", *map(shlex.quote, inv.assignments)]) + "\n"
    elif len(assignments) > 1:
        notes.append(f"the runs of {inv.shown} differ in their environment assignments: its "
                     f"launcher bin/{inv.shown} sets none")
    script = (f"#!/bin/sh\n# Runs {inv.shown} as the recorded runs did (generated by shournal "
              f"describe tool).\n{exports}exec {' '.join(map(shlex.quote, words))} \"$@\"\n")
    return inv.shown, script


def _runner_script(patterns: list[tuple[str, Invocation]]) -> str:
    usage = "\n".join(
        f"    echo {shlex.quote(f'  {n} {name}')} >&2" for n, (name, _inv) in enumerate(patterns, 1)
    )
    cases = "\n".join(
        f"{n})\n    [ $# -eq {len(inv.files)} ] || usage\n    {_runner_line(inv)}\n    ;;"
        for n, (_name, inv) in enumerate(patterns, 1)
    )
    return f"""#!/bin/sh
# Runs the commands of rereso-tool.yml (generated by shournal describe tool
# from recorded runs): rereso-run N FILE...  N is the command's number in
# rereso-tool.yml (1 = first), FILE... replace its placeholders in order.
set -eu
usage() {{
    echo 'usage: rereso-run N FILE...  (N: the command; FILE...: its placeholders)' >&2
{usage}
    exit 2
}}
[ $# -ge 1 ] || usage
n=$1
shift
case "$n" in
{cases}
*)
    usage
    ;;
esac
"""


def _definition(name: str, sif: str, patterns: list[tuple[str, Invocation]],
                tool_files: Iterable[str], built: bool, launcher: str | None = None) -> str:
    files = [f"    {RUNNER} {RUNNER_IN_CONTAINER}"]
    if launcher is not None:
        files.append(f"    bin/{launcher} {image.LAUNCHER_DIR}/{launcher}")
    skipped = []
    for path in tool_files:
        (skipped if any(c.isspace() for c in path) else files).append(f"    {path}")
    help_lines = "\n".join(f"    {n} {p}" for n, (p, _i) in enumerate(patterns, 1))
    note = "".join(f"#   not listed (whitespace in the path):{p}\n" for p in skipped)
    if built:
        head = f"""# {sif}, beside this file, was built by shournal from the apparatus
# archive: the exact versions of every file the recorded runs read.  This
# definition builds a like image with Apptainer instead: %files lists the
# image's files at their recorded paths, which Apptainer copies from the
# building host as they are then (maybe other versions).
"""
    else:
        head = f"""# NOT ENOUGH FOR A RUNNABLE IMAGE: {sif}, which rereso-tool.yml names,
# is built from the apparatus archive, and the recorded runs were not
# recorded with it (shournal run --apparatus).  %files lists the tool's own
# files the recorded runs read, at their recorded paths (Apptainer copies
# them from the building host as they are then), and the wrapper that
# %runscript calls.
"""
    return f"""# Apptainer definition of {name}, generated by shournal describe tool.
#
{head}{note}Bootstrap: scratch

%files
{chr(10).join(files)}

%runscript
    exec {RUNNER_IN_CONTAINER} "$@"

%help
    {name}: apptainer run {sif} N FILE...  with N one of
{help_lines}
"""


def _image_files(journal: Journal, invs: list[Invocation]) -> image.Rootfs | None:
    """The files of the tool's image: what the runs read except the files
    their command lines named, from their apparatus manifests; None when a
    run was recorded without its apparatus.

    :raises DescribeError: content the image needs is not archived.
    """
    from shournal.reproduce.experiment import load_manifest

    named = {f.version.shown for inv in invs for f in inv.files}
    root = image.Rootfs()
    missing: dict[str, str] = {}
    for inv in sorted(invs, key=lambda i: i.command.id):
        man = load_manifest(journal, inv.command.id)
        if man is None:
            return None
        for path, _size, _mtime, mode, _hsh, digest, why in man["reads"]:
            try:
                recorded_path(path)
            except UnsafePath as bad:
                raise DescribeError(refusal(f"command {inv.command.id}", path, bad)) from None
            if path in named or not image.want(path, mode):
                continue
            if digest is None or why is not None:
                missing[path] = (why or "not archived").replace("_", " ")
                continue
            missing.pop(path, None)
            root.files[path] = (digest, mode)  # the newest run's version
    archive = journal.apparatus_content()
    for path in image.blobs_missing(root, archive):
        missing[path] = f"not in the archive {archive.local.root}"
    if missing:
        raise DescribeError(
            "the apparatus archive lacks the recorded content of: "
            + "; ".join(f"{p} ({why})" for p, why in sorted(missing.items()))
        )
    return root


def describe_tool(
    journal: Journal,
    command_ids: Sequence[int],
    dest: Path,
    meta: Meta,
    source: ContentSource | None = None,
) -> Result:
    """Write the tool bundle of the recorded commands ``command_ids`` (runs
    of one tool) to ``dest``: ``rereso-tool.yml``, the wrapper
    ``rereso-run`` and the Apptainer definition ``<name>.def``.

    :raises DescribeError: unknown id, a command that read no files, runs
        of different programs, or ``dest`` unusable.
    """
    if not command_ids:
        raise DescribeError("no command id given")
    invs = _load_commands(journal, command_ids)
    tools = dict.fromkeys(inv.tool for inv in invs)
    if len(tools) > 1:
        shown = "; ".join(
            f"command {inv.command.id} runs {' '.join(inv.tool)}"
            for inv in {inv.tool: inv for inv in invs}.values()
        )
        raise DescribeError(f"the commands are runs of different programs: {shown}")
    result = Result(dest)
    types = _Types(source or default_source(journal), result.notes)
    patterns: dict[str, list[Invocation]] = {}
    for inv in invs:
        patterns.setdefault(inv.pattern(), []).append(inv)
    commands = []
    for name, runs in patterns.items():
        entry: dict[str, Any] = {"name": name}
        for key, role in (("input-formats", "inputs"), ("output-formats", "outputs")):
            # One format per placeholder, in order (the paper's classify-all
            # takes [images.json] [classifier.onnx]: two input formats).
            formats = []
            for k, f in enumerate(getattr(runs[0], role)):
                seen = dict.fromkeys(types.of(getattr(inv, role)[k].version) for inv in runs)
                if len(seen) > 1:
                    result.notes.append(f"{name}: its {f.placeholder} had the media types "
                                        f"{', '.join(seen)} in the runs: {next(iter(seen))} "
                                        "is written")
                formats.append({"media-type": next(iter(seen))})
            entry[key] = formats
        commands.append(entry)
    first = invs[0]
    name = meta.name or first.shown
    base = slug(name)
    sif, definition = f"{base}.sif", f"{base}.def"
    doc = {
        "rereso-tool-version": schema.RERESO_VERSION,
        "metadata": metadata(meta, name, f"Recorded with shournal: {first.command.text}"),
        "license": license_data(meta.license, result.notes, schema.TOOL_DESCRIPTOR),
        "commands": commands,
        "container": sif,
    }
    schema.check(doc, schema.TOOL_SCHEMA, schema.TOOL_DESCRIPTOR)
    ordered = [(n, runs[0]) for n, runs in patterns.items()]
    tool_files = dict.fromkeys(
        [*(inv.tool[1] for inv in invs if len(inv.tool) == 2)]
        + [v.shown for inv in invs for v in inv.tool_reads]
    )

    root = _image_files(journal, invs)
    if root is not None:
        tool_files = dict.fromkeys(sorted(root.files))
    runner = _runner_script(ordered)
    launcher = _launcher(invs, result.notes)

    def build(tmp: Path) -> None:
        _write(tmp / schema.TOOL_DESCRIPTOR, dump_yaml(doc))
        _write(tmp / RUNNER, runner, 0o755)
        if launcher is not None:
            (tmp / "bin").mkdir()
            _write(tmp / "bin" / launcher[0], launcher[1], 0o755)
        _write(tmp / definition, _definition(name, sif, ordered, tool_files, root is not None,
                                             launcher[0] if launcher else None))
        if root is not None:
            _build_image(root, runner, tmp / definition, tmp / sif, tmp / ".build",
                         {inv.tool[0] for inv in invs}, result.notes,
                         dict([launcher]) if launcher else {}, journal.apparatus_content())

    publish(dest, build)
    result.bundles.append(Path(os.path.abspath(dest)))
    if root is None:
        without = [str(inv.command.id) for inv in invs
                   if load_manifest(journal, inv.command.id) is None]
        result.notes.append(
            f"{sif} is not built: command {', '.join(without)} was recorded without its "
            f"apparatus (shournal run --apparatus); {definition} and {RUNNER} are written"
        )
    return result


def _build_image(root: image.Rootfs, runner: str, definition: Path, sif: Path, work: Path,
                 programs: set[str], notes: list[str], launchers: dict[str, str],
                 archive: Contents) -> None:
    from shournal.store.archive import ArchiveError

    work.mkdir()
    try:
        from_host = image.complete(root, archive, sorted(programs))
        image.materialise(root, archive, work / "rootfs", runner, from_host, launchers)
        image.build_sif(work / "rootfs", definition, sif, work)
    except (image.ImageError, ArchiveError) as e:
        raise DescribeError(f"cannot build {sif.name}: {e}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if from_host:
        notes.append(f"{sif.name}: {len(from_host)} files the runs did not read are taken "
                     f"from this host (the wrapper's /bin/sh, Python's landmark): "
                     f"{', '.join(from_host)}")


# -- benchmarks -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _BenchFile:
    name: str
    data: bytes
    origin: str  # shown in messages
    source: str  # its absolute path, as recorded or given


def _bench_files(
    journal: Journal | None,
    command_ids: Sequence[int],
    rfiles: Sequence[Path],
    paths: Sequence[Path],
    source: ContentSource | None,
) -> list[_BenchFile]:
    files: list[_BenchFile] = []
    missing: list[str] = []
    if command_ids:
        assert journal is not None
        src = source or default_source(journal)
        for inv in _load_commands(journal, command_ids):
            if not inv.inputs:
                raise DescribeError(
                    f"command {inv.command.id} ({inv.command.text}) names no file it read"
                )
            for f in inv.inputs:
                try:
                    recorded_path(f.version.path)
                except UnsafePath as why:
                    raise DescribeError(refusal(f"command {inv.command.id}", f.version.path,
                                                why)) from None
                try:
                    data, origin = recorded_content(f.version, src)
                except ContentUnavailable as e:
                    missing.append(str(e))
                    continue
                files.append(_BenchFile(f.version.shown.rsplit("/", 1)[-1], data,
                                        f"{f.version.shown} ({origin})", f.version.shown))
    if missing:
        raise DescribeError(
            "the recorded versions of these input files are neither archived nor on disk: "
            + "; ".join(missing)
        )
    if rfiles:
        assert journal is not None
        from shournal.data import QueryError

        for rf in rfiles:
            try:
                readers = journal.find(rfile=rf, limit=1)
            except QueryError as e:
                raise DescribeError(str(e)) from None
            if not readers:
                raise DescribeError(f"{rf}: no recorded command read this file's content")
            files.append(_disk_file(rf))
    files.extend(_disk_file(p) for p in paths)
    if not files:
        raise DescribeError("no benchmark files given")
    return files


def _unique(files: list[_BenchFile]) -> list[_BenchFile]:
    """``files`` one per name (a set's paths are names).

    :raises DescribeError: two different contents have the same name.
    """
    unique: dict[str, _BenchFile] = {}
    for f in files:
        old = unique.get(f.name)
        if old is not None and old.data != f.data:
            raise DescribeError(
                f"two different files are both named {f.name}: {old.origin} and {f.origin}"
            )
        unique.setdefault(f.name, f)
    return list(unique.values())


def _licenses_by_name(files: list[_BenchFile], given: Mapping[str, str]) -> dict[str, str]:
    """The SPDX id of each file named in ``given`` (PATH -> SPDX), by the
    name of the file in the set: PATH is that name, or the file's path.

    :raises DescribeError: an invalid id, or a PATH naming no file.
    """
    out: dict[str, str] = {}
    for path, spdx in given.items():
        check_spdx(spdx)
        absolute = os.path.abspath(path)
        names = {f.name for f in files if path == f.name or absolute == f.source}
        if not names:
            raise DescribeError(f"--license-file {path}: no such file in the set")
        out.update(dict.fromkeys(names, spdx))
    return out


def _disk_file(path: Path) -> _BenchFile:
    got = read_regular(os.fsencode(path))
    if isinstance(got, str):
        raise DescribeError(f"{path}: {got}")
    return _BenchFile(path.name, got, str(path), os.path.abspath(path))


def describe_benchmark(
    journal: Journal | None,
    dest: Path,
    meta: Meta,
    *,
    command_ids: Sequence[int] = (),
    rfiles: Sequence[Path] = (),
    paths: Sequence[Path] = (),
    source: ContentSource | None = None,
    file_licenses: Mapping[str, str] | None = None,
) -> Result:
    """Write a benchmark set of the input files of ``command_ids`` (their
    recorded versions), the files ``rfiles`` (which recorded commands
    read) and ``paths``: the files and ``rereso-benchmark.yml``.  Files of
    different media types make one bundle per type, in subdirectories
    of ``dest`` named after the type.  ``meta.license`` is each set's
    licence, ``file_licenses`` (PATH -> SPDX, PATH a file's name in the
    set or its path) a file's own; a set whose every file has its own
    has no set licence, else an unspecified one when none is given.

    :raises DescribeError: unknown ids, no input files, a recorded version
        that is neither archived nor still on disk, clashing names, an
        invalid SPDX id, a ``file_licenses`` PATH naming no file.
    """
    result = Result(dest)
    every = _bench_files(journal, command_ids, rfiles, paths, source)
    own = _licenses_by_name(every, file_licenses or {})
    files = _unique(every)
    groups: dict[str, list[_BenchFile]] = {}
    for f in files:
        found = detect(f.name, f.data)
        if found.unknown:
            result.notes.append(unknown_notice(f.origin))
        groups.setdefault(found.value, []).append(f)
    default_name = Path(os.path.abspath(dest)).name
    what = (f"input files of commands {', '.join(map(str, dict.fromkeys(command_ids)))}"
            if command_ids else None)
    docs = {}
    notes: list[str] = []
    for media, members in groups.items():
        name = meta.name or default_name
        if len(groups) > 1:
            name = f"{name} ({media})"
        doc: dict[str, Any] = {
            "rereso-benchmark-version": schema.RERESO_VERSION,
            "metadata": metadata(meta, name,
                                 f"Recorded with shournal: {what}" if what else None),
        }
        # The schema's rule that a set without a licence needs one per
        # benchmark names a "content" property, so it checks nothing: the
        # rule is kept here.
        if meta.license or any(f.name not in own for f in members):
            doc["license"] = license_data(meta.license, notes, schema.BENCHMARK_DESCRIPTOR)
        doc["format"] = {"media-type": media}
        doc["benchmarks"] = [
            {"path": f.name, **({"license": {"spdx": own[f.name]}} if f.name in own else {})}
            for f in members
        ]
        if len(groups) > 1:
            doc["metadata"]["name"] = name
        schema.check(doc, schema.BENCHMARK_SCHEMA, schema.BENCHMARK_DESCRIPTOR)
        docs[media] = doc
    result.notes.extend(dict.fromkeys(notes))

    def build(tmp: Path) -> None:
        for media, members in groups.items():
            where = tmp / slug(media) if len(groups) > 1 else tmp
            where.mkdir(exist_ok=True)
            for f in members:
                _write(where / f.name, f.data)
            _write(where / schema.BENCHMARK_DESCRIPTOR, dump_yaml(docs[media]))

    publish(dest, build)
    root = Path(os.path.abspath(dest))
    if len(groups) > 1:
        result.bundles = [root / slug(m) for m in groups]
        result.notes.append(
            f"the files have {len(groups)} media types: one bundle per type: "
            + ", ".join(f"{slug(m)}/ ({len(groups[m])} {m})" for m in groups)
        )
    else:
        result.bundles = [root]
    return result
