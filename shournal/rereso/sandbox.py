"""One run of a tool bundle's command inside its image, as ``shournal
recombine`` starts it under ``shournal run``:

    python -m shournal.rereso.sandbox ROOTFS RUNNER N (in:PATH | out:PATH)...

The benchmark files (``in:``) are copied into a staging directory bound
read-only at :data:`~shournal.rereso.image.IN_DIR`, the command runs in
bubblewrap on the image's root ``ROOTFS`` with a second staging directory
at :data:`~shournal.rereso.image.OUT_DIR`, and the outputs it made there
are copied to their ``out:`` paths.  The copies are what the journal sees:
shournal's fanotify marks are on the mounts of the recorded command's
namespace, and bubblewrap's bind mounts are new mounts, unmarked; so the
recorded command reads the benchmark and writes the outputs itself, and
lineage, diff and export work on it.  Exit status: the command's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from shournal.rereso.image import IN_DIR, OUT_DIR, ImageError, sandbox_argv


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("shournal: usage: sandbox ROOTFS RUNNER N (in:PATH|out:PATH)...", file=sys.stderr)
        return 2
    rootfs, runner, number, *files = argv
    with tempfile.TemporaryDirectory(prefix="shournal-rereso.") as tmp:
        stage_in, stage_out = Path(tmp, "in"), Path(tmp, "out")
        stage_in.mkdir()
        stage_out.mkdir()
        args: list[str] = []
        outputs: list[tuple[str, Path]] = []
        for n, spec in enumerate(files):
            role, _, path = spec.partition(":")
            # A number keeps two files of the same name apart.
            name = f"{n}-{os.path.basename(path)}"
            if role == "in":
                shutil.copyfile(path, stage_in / name)
                args.append(f"{IN_DIR}/{name}")
            elif role == "out":
                outputs.append((name, Path(path)))
                args.append(f"{OUT_DIR}/{name}")
            else:
                print(f"shournal: not in:PATH or out:PATH: {spec}", file=sys.stderr)
                return 2
        try:
            cmd = sandbox_argv(Path(rootfs), stage_in, stage_out, [runner, number, *args])
        except ImageError as e:
            print(f"shournal: {e}", file=sys.stderr)
            return 2
        status = subprocess.call(cmd, stdin=subprocess.DEVNULL)
        for name, target in outputs:
            made = stage_out / name
            if made.is_file() and not made.is_symlink():
                _copy_to(made, target)
    return status


def _copy_to(made: Path, target: Path) -> None:
    """Copy an output to ``target``, never writing through a symlink
    planted there."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    with open(fd, "wb") as dst, open(made, "rb") as src:
        shutil.copyfileobj(src, dst)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
