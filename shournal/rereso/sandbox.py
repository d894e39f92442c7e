"""One run of a tool's command, as ``shournal recombine`` starts it under
``shournal run``:

    python -m shournal.rereso.sandbox MODE TARGET WHERE SPEC...

MODE is ``host`` (TARGET ``-``: the host's programs), ``bwrap`` (TARGET:
``ROOTFS|SIF``, the tool's image unpacked at ROOTFS) or ``apptainer``
(TARGET: ``RUNTIME|SIF``).  The SIF on the command line is what the run's
record names as its container image (``export rocrate``).
WHERE is the run's results folder.  Each SPEC is a word of the command:
``arg:WORD`` as written, ``in:PREFIX|PATH`` an input file,
``in+LAYER:PREFIX|PATH`` an input to decompress first (``xz``, ``zstd``,
``gzip``, ``bzip2``), ``out:PREFIX|NAME`` an output file named NAME.

Inputs to decompress are written into the run's scratch folder.  In a
container the inputs are copied into a staging folder bound read-only at
:data:`~shournal.rereso.image.IN_DIR`, the command runs with a second
staging folder at :data:`~shournal.rereso.image.OUT_DIR` as its working
directory, and every regular file it left there is copied to WHERE.  The
copies are what the journal sees: shournal's fanotify marks are on the
mounts of the recorded command's namespace, and the container's bind
mounts are new mounts, unmarked; so the recorded command reads the
benchmark and writes the outputs itself, and lineage, diff and export work
on it.  Exit status: the command's; 2 for bad arguments.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from shournal.confined import Confined, ConfinedError, read_regular_at
from shournal.rereso.image import IN_DIR, OUT_DIR, ImageError, sandbox_argv

_SUFFIX = {"xz": ".xz", "zstd": ".zst", "gzip": ".gz", "bzip2": ".bz2"}
# Apptainer's action for `exec`: it sources the image's environment.
EXEC_ACTION = "/.singularity.d/actions/exec"


class SpecError(Exception):
    pass


def _split(spec: str) -> tuple[str, str, str]:
    """(kind, prefix, value) of a SPEC."""
    kind, sep, rest = spec.partition(":")
    if not sep:
        raise SpecError(f"not a SPEC: {spec}")
    if kind == "arg":
        return kind, "", rest
    prefix, bar, value = rest.partition("|")
    if not bar or not value or not (kind in ("in", "out") or kind.removeprefix("in+")
                                     in _SUFFIX):
        raise SpecError(f"not a SPEC: {spec}")
    return kind, prefix, value


def staged_name(n: int, kind: str, path: str, taken: set[str]) -> str:
    """The name input ``n`` has in the staging or scratch folder: its own,
    without the compression suffix it is decompressed from."""
    name = os.path.basename(path)
    layer = kind.removeprefix("in+") if kind.startswith("in+") else None
    if layer and name.endswith(_SUFFIX[layer]) and len(name) > len(_SUFFIX[layer]):
        name = name[: -len(_SUFFIX[layer])]
    if name in taken:
        name = f"{n}-{name}"
    taken.add(name)
    return name


def invocation(mode: str, where: Path, specs: list[str],
               scratch: str = "SCRATCH") -> list[str]:
    """The words the tool is started with."""
    words, taken = [], set()
    for n, spec in enumerate(specs):
        kind, prefix, value = _split(spec)
        if kind == "arg":
            words.append(value)
        elif kind == "out":
            words.append(prefix + (f"{OUT_DIR}/{value}" if mode != "host"
                                   else str(where / value)))
        else:
            name = staged_name(n, kind, value, taken)
            if mode != "host":
                words.append(prefix + f"{IN_DIR}/{name}")
            elif kind == "in":
                words.append(prefix + value)
            else:
                words.append(prefix + f"{scratch}/{name}")
    return words


def _decompress(layer: str, src: str, dest: Path) -> None:
    if layer == "zstd":
        with open(dest, "wb") as out:
            res = subprocess.run(["zstd", "-dcq", "--", src], stdout=out,
                                 stderr=subprocess.PIPE, check=False, stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            raise OSError(f"zstd: {' '.join(res.stderr.decode(errors='replace').split())}")
        return
    opener = {"xz": lzma.open, "gzip": gzip.open, "bzip2": bz2.open}[layer]
    with opener(src, "rb") as fh, open(dest, "wb") as out:
        shutil.copyfileobj(fh, out, 1 << 20)


def _collect(stage_out: Path, where: Path) -> None:
    """Copy every regular file the run left in ``stage_out`` to ``where``,
    never through a symbolic link (the tool's, or one planted in
    ``where``): both sides are walked by :class:`shournal.confined.Confined`."""
    with Confined(stage_out) as made, Confined(where, create=True) as out:
        for rel, st, dfd, name in made.files():
            data = read_regular_at(dfd, name)
            if data is not None:
                out.write(rel, data, st.st_mode & 0o755 | 0o644, replace=True)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] not in ("host", "bwrap", "apptainer"):
        print("shournal: usage: sandbox host|bwrap|apptainer TARGET WHERE SPEC...",
              file=sys.stderr)
        return 2
    mode, target, where_s, *specs = argv
    where = Path(where_s)
    with tempfile.TemporaryDirectory(prefix="shournal-rereso.") as tmp:
        stage_in, stage_out = Path(tmp, "in"), Path(tmp, "out")
        stage_in.mkdir()
        stage_out.mkdir()
        try:
            words = invocation(mode, where, specs, str(stage_in))
            taken: set[str] = set()
            for n, spec in enumerate(specs):
                kind, _prefix, value = _split(spec)
                if not kind.startswith("in"):
                    continue
                name = staged_name(n, kind, value, taken)
                if kind != "in":
                    _decompress(kind.removeprefix("in+"), value, stage_in / name)
                elif mode != "host":
                    shutil.copyfile(value, stage_in / name)
        except SpecError as e:
            print(f"shournal: {e}", file=sys.stderr)
            return 2
        except (OSError, lzma.LZMAError, EOFError) as e:
            print(f"shournal: cannot stage the inputs: {e}", file=sys.stderr)
            return 2
        if mode == "host":
            try:
                return subprocess.call(words, stdin=subprocess.DEVNULL, cwd=where)
            except OSError as e:
                print(f"shournal: cannot run {words[0]}: {e.strerror}", file=sys.stderr)
                return 127
        if mode == "bwrap":
            rootfs = Path(target.partition("|")[0])
            action = [EXEC_ACTION] if os.path.isfile(rootfs / EXEC_ACTION.lstrip("/")) else []
            try:
                cmd = sandbox_argv(rootfs, stage_in, stage_out, [*action, *words])
            except ImageError as e:
                print(f"shournal: {e}", file=sys.stderr)
                return 2
        else:
            runtime, _bar, sif = target.partition("|")
            cmd = [runtime, "exec", "--containall", "--bind", f"{stage_in}:{IN_DIR}:ro",
                   "--bind", f"{stage_out}:{OUT_DIR}", "--pwd", OUT_DIR, sif, *words]
        status = subprocess.call(cmd, stdin=subprocess.DEVNULL)
        try:
            _collect(stage_out, where)
        except ConfinedError as e:
            print(f"shournal: {e}", file=sys.stderr)
            return status or 2
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
