"""Size and build time of ReReSo tool bundles with their SIF image
(`shournal describe tool`), for two tools recorded with their apparatus:

* python: a Python script with a helper module and a config file
  (the interpreter, its modules and libraries go into the image);
* c: a small C program built with `make` (cc -O2), run as ./csvsum.

Each tool is recorded on two inputs with `shournal run --apparatus`, then
`describe tool` is timed (--reps times, a fresh output directory each
time; median wall seconds) and the bundle measured: the SIF, the whole
bundle, the number of files in the image and of them taken from the
host.  As a check, the image's squashfs partition is unpacked (siftool
dump, unsquashfs) and the tool run in it with bubblewrap on a third input;
its output must equal the host tool's.

Runs as an unprivileged user (`--user`, default shournal-bench) through
runuser; needs root.  The shournal to use and a development build are
passed as for bench/apparatus.py (--cli, SHOURNAL_SUID_PATH, ...).

    .venv/bin/python bench/rereso_image.py --reps 3
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import as_user, bench_home, cli_args, ensure_user, report_result, timed  # noqa: E402

PY_TOOL = """\
import configparser, json, os, sys
import helper
cfg = configparser.ConfigParser()
cfg.read(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tool.ini"))
rows = [line.split(",") for line in open(sys.argv[1]).read().split()]
json.dump({"rows": len(rows) - 1, "sum": helper.total(rows[1:]),
           "unit": cfg["out"]["unit"]}, open(sys.argv[2], "w"))
"""
PY_HELPER = "def total(rows):\n    return sum(int(v) for row in rows for v in row)\n"
PY_INI = "[out]\nunit = mm\n"
C_TOOL = """\
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "w");
    if (!in || !out) return 1;
    char line[256];
    long sum = 0, rows = 0;
    if (!fgets(line, sizeof line, in)) return 1; /* header */
    while (fgets(line, sizeof line, in)) {
        char *p = line, *end;
        rows++;
        for (;;) {
            sum += strtol(p, &end, 10);
            if (*end != ',') break;
            p = end + 1;
        }
    }
    fprintf(out, "{\\"rows\\": %ld, \\"sum\\": %ld}\\n", rows, sum);
    return fclose(out) != 0;
}
"""
MAKEFILE = "csvsum: csvsum.c\n\tcc -O2 -o csvsum csvsum.c\n"
INPUTS = {"in1.csv": "a,b\n1,2\n3,4\n", "in2.csv": "a,b\n5,6\n", "new.csv": "a,b\n100,1\n2,3\n"}
TOOLS = {
    "python": ({"tool.py": PY_TOOL, "helper.py": PY_HELPER, "tool.ini": PY_INI},
               ["python3", "tool.py"]),
    "c": ({"csvsum.c": C_TOOL, "Makefile": MAKEFILE}, ["./csvsum"]),
}


def _as(user: str, home: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return timed([*as_user(user, home), *argv], cwd)[1]


def _last_ids(home: Path, n: int) -> list[str]:
    with sqlite3.connect(home / ".local/share/shournal/journal.sqlite") as conn:
        rows = conn.execute("SELECT id FROM command ORDER BY id DESC LIMIT ?", (n,)).fetchall()
    return sorted(str(r[0]) for r in rows)


def _measure(cli: str, user: str, home: Path, name: str, reps: int) -> dict:
    files, argv = TOOLS[name]
    work = home / name
    work.mkdir()
    for fname, text in {**files, **INPUTS}.items():
        (work / fname).write_text(text)
    subprocess.run(["chown", "-R", f"{user}:", str(work)], check=True)
    if name == "c":
        _as(user, home, work, "make", "-s")
    for n in (1, 2):
        _as(user, home, work, cli, "run", "--apparatus", "--", *argv, f"in{n}.csv",
            f"out{n}.json")
    ids = _last_ids(home, 2)
    times = []
    for i in range(reps):
        times.append(timed([*as_user(user, home), cli, "describe", "tool", *ids, "-o",
                            f"bundle{i}", "--name", name, "--license", "MIT"], work)[0])
    bundle = work / "bundle0"
    sif = bundle / f"{name}.sif"
    total = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    # The check: the image runs the tool on a new input as the host does.
    part = next(ln.split("|")[0].strip() for ln in
                _as(user, home, work, "siftool", "list", str(sif)).stdout.splitlines()
                if "FS (Squashfs/" in ln)
    squash = work / "rootfs.squashfs"
    squash.write_bytes(subprocess.run(["siftool", "dump", part, str(sif)], check=True,
                                      capture_output=True).stdout)
    subprocess.run(["chown", f"{user}:", str(squash)], check=True)
    _as(user, home, work, "unsquashfs", "-q", "-no-xattrs", "-d", "rootfs", str(squash))
    for d in ("io-in", "io-out"):
        (work / d).mkdir()
    (work / "io-in/new.csv").write_text(INPUTS["new.csv"])
    subprocess.run(["chown", "-R", f"{user}:", str(work / "io-in"), str(work / "io-out")],
                   check=True)
    _as(user, home, work, "bwrap", "--ro-bind", "rootfs", "/", "--proc", "/proc", "--dev",
        "/dev", "--tmpfs", "/tmp", "--unshare-all", "--clearenv", "--setenv", "PATH",
        "/usr/bin:/bin", "--ro-bind", "io-in", "/rereso/in", "--bind", "io-out",
        "/rereso/out", "--", "/.singularity.d/runscript", "1", "/rereso/in/new.csv",
        "/rereso/out/new.json")
    _as(user, home, work, *argv, "new.csv", "host-new.json")
    same = (work / "io-out/new.json").read_bytes() == (work / "host-new.json").read_bytes()
    rootfs = work / "rootfs"
    host_files = (rootfs / "opt/rereso/host-files").read_text().split()
    return {
        "sif_bytes": sif.stat().st_size,
        "bundle_bytes": total,
        "image_files": sum(1 for p in rootfs.rglob("*") if p.is_file() and not p.is_symlink()),
        "image_files_from_host": len(host_files),
        "describe_median_s": statistics.median(times),
        "describe_s": times,
        "image_output_equals_host": same,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli_args(p, reps=3)
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (runuser)")
    user = ensure_user(args.user)
    home = bench_home("shournal-bench-rereso-", user.uid, user.gid, subdirs=("run",))
    try:
        result = {name: _measure(args.cli, args.user, home, name, args.reps) for name in TOOLS}
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)
    report_result(args, "rereso_image", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
