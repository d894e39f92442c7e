"""CPU of the user and group lookups the setuid helper makes for every
command line (the check that the user is not in group `shournal`, by every
NSS source: docs/security.md), measured in a process of their own
(bench/nss_lookups.c) started --n times, against the same process without
the lookups, in alternating rounds.  Run as root, it also measures both
with `passwd` and `group` looked up in `files` only (this machine's
nsswitch.conf replaced by a bind mount in a private mount namespace, the
machine's own file untouched): the difference is the price of the other
sources' modules (on Debian with systemd: nss-systemd, which getgrouplist
loads in every process, as it asks every source).

    .venv/bin/python bench/nss_group_check.py --n 400 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from common import children_cpu  # noqa: E402

_GROUP = "shournal"


def _per_process(argv: list[str], n: int) -> float:
    """ms of CPU per process (the kernel's exact children's times)."""
    t = children_cpu()
    for _ in range(n):
        pid = os.posix_spawn(argv[0], argv, {})
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{' '.join(argv)} failed: {os.waitstatus_to_exitcode(status)}")
        time.sleep(0.005)  # a process of its own, not a warm loop
    return (children_cpu() - t) / n * 1000


def _measure(binary: Path, n: int, rounds: int) -> tuple[list[float], list[float]]:
    bare, looked = [], []
    for r in range(rounds):
        order = [False, True] if r % 2 == 0 else [True, False]
        for with_lookups in order:
            argv = [str(binary), _GROUP] if with_lookups else [str(binary)]
            (looked if with_lookups else bare).append(_per_process(argv, n))
    return bare, looked


def _report(what: str, bare: list[float], looked: list[float]) -> None:
    diff = [b - a for a, b in zip(bare, looked, strict=True)]
    print(f"{what}: a process {statistics.median(bare):.3f} ms, with the lookups "
          f"{statistics.median(looked):.3f} ms: the lookups {statistics.median(diff):.3f} ms "
          f"({min(diff):.3f}-{max(diff):.3f})", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400, help="processes per round and kind")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.n < 1 or args.rounds < 1:
        ap.error("--n and --rounds must be at least 1")
    with tempfile.TemporaryDirectory(prefix="shournal-nss-") as d:
        binary = Path(d) / "nss_lookups"
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            sys.exit("no C compiler (cc)")
        subprocess.run(
            [cc, "-O2", "-Wl,-z,now", "-o", str(binary), str(BENCH_DIR / "nss_lookups.c")],
            check=True,
        )
        if args.files_only:
            _report("files only", *_measure(binary, args.n, args.rounds))
            return 0
        sources = next(
            (
                " ".join(line.split(":", 1)[1].split())
                for line in Path("/etc/nsswitch.conf").read_text().splitlines()
                if line.startswith("group:")
            ),
            "?",
        )
        _report(f"this machine's nsswitch.conf (group: {sources})",
                *_measure(binary, args.n, args.rounds))
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            print("files only: needs root and unshare(1); not measured")
            return 0
        files_only = Path(d) / "nsswitch.conf"
        files_only.write_text("passwd: files\ngroup: files\nshadow: files\n")
        os.chmod(d, 0o755)
        script = (
            f"mount --bind {files_only} /etc/nsswitch.conf && "
            f"exec {sys.executable} {Path(__file__).resolve()} --files-only "
            f"--n {args.n} --rounds {args.rounds}"
        )
        subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                       check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
