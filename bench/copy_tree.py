"""Workload 1: `cp -a` of a large source tree (Debian's linux-source-6.1:
78,579 files), monitored vs unmonitored, cold and warm page cache.

Every full run stores into a fresh journal, which is then checked: the
number of stored writes below the destination and reads below the source
must equal the number of files, with no dropped or lost events.  The
journal's size per stored event is recorded too (bench/storage.py looks
at storage in more detail).

Targets (issue): overhead within 3 percentage points of the floor and at
most 10%; storage at most 100 bytes per file event.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as c  # noqa: E402

TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
PACKAGE = "linux-source-6.1"


def ensure_tree(work: Path, user: c.User) -> Path:
    """Extract the tarball once into the workspace; return the tree."""
    src_root = c.user_dir(work / "src", user)
    tree = src_root / "linux-source-6.1"
    done = src_root / ".extracted"
    if done.exists():
        return tree
    if not TARBALL.exists():
        c.log(f"apt-get install {PACKAGE}")
        c.sh(["apt-get", "install", "-y", "--no-install-recommends", PACKAGE],
             env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    if tree.exists():
        shutil.rmtree(tree)
    c.log(f"extracting {TARBALL} into {src_root}")
    c.sh(["runuser", "-u", user.name, "--", "tar", "-xJf", str(TARBALL), "-C", str(src_root)])
    done.touch()
    return tree


def count_files(tree: Path) -> int:
    out = subprocess.run(
        ["find", str(tree), "-type", "f", "-printf", "."], capture_output=True, check=True
    ).stdout
    return len(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    c.common_args(p, reps=5)
    p.add_argument(
        "--no-reads",
        action="store_true",
        help="record reads only below $HOME (the default config), i.e. store only the writes",
    )
    args = p.parse_args(argv)
    t_start = time.time()
    user, work = c.bench_user(args)
    tree = ensure_tree(work, user)
    nfiles = count_files(tree)
    dst = work / "copy-dst"
    c.log(f"source tree {tree}: {nfiles} files")

    read_includes = ["$HOME"] if args.no_reads else ["$HOME", str(tree)]
    bench = c.Bench(
        user, work, "copy_tree", read_includes=read_includes, nofile=args.nofile,
        profile=args.profile, listener_cpu=args.listener_cpu, cpu_share=args.cpu_share,
    )
    body = f"cp -a {tree} {dst}"

    def prepare() -> None:
        if dst.exists():
            subprocess.run(["rm", "-rf", str(dst)], check=True)

    def check_full(rec: dict) -> None:
        js = c.journal_stats(
            rec["journal"], {"writes_below_dst": (0, str(dst)), "reads_below_src": (1, str(tree))}
        )
        want_reads = 0 if args.no_reads else nfiles
        counts = (
            js.get("commands") == 1
            and js.get("writes_below_dst") == nfiles
            and js.get("reads_below_src") == want_reads
        )
        c.judge_full(rec, js, counts, lambda: (
            f"stored {js['file_events']} events, {js['bytes_per_event'] or 0:.1f} B/ev; writes "
            f"{js.get('writes_below_dst')}/{nfiles} reads {js.get('reads_below_src')}/{want_reads}"
            f" lost {js.get('lost_events')}"
        ), args.profile)

    records, summaries = c.run_caches(
        bench, args, body=body, cwd=work, prepare=prepare, check_full=check_full
    )
    prepare()

    full_ok = [r for r in records if r["variant"] == "full" and r.get("valid") and r["rep"] >= 0]
    bpe = c.median([r["journal_stats"]["bytes_per_event"] for r in full_ok])
    c.print_table(
        f"copy_tree: cp -a of {nfiles} files ({'writes only' if args.no_reads else 'writes+reads'}"
        f" stored), nofile={args.nofile or 'inherited'}",
        summaries,
        "full <= +10% and within 3pp of floor; storage <= 100 B/event",
    )
    print(f"storage: median {bpe and round(bpe, 1)} bytes per stored file event "
          f"({len(full_ok)} valid full runs)")
    c.print_problems(records)
    for r in records:
        if r["variant"] in ("floor", "relay") and (
            r.get("floor_overflows") or r.get("floor_fd_errors")
        ):
            print(f"  {r['variant']} lost events: {r['cache']} rep {r['rep']}: overflows "
                  f"{r['floor_overflows']} fd errors {r['floor_fd_errors']}")
    c.write_run(args, "copy_tree", t_start, {
        "command": body,
        "files": nfiles,
        "reads_stored": not args.no_reads,
        "summaries": summaries,
        "storage_bytes_per_event_median": bpe,
        "runs": records,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
