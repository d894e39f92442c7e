"""A/B of two builds of the setuid helper on `cp -a` of a tree, without
installing either: what one change to the holder costs per event.

    .venv/bin/python bench/helper_ab.py --a a94fa98 --b WORKTREE \\
        --tree /usr/share --max-files 20000 --reps 5

Each build (a git revision, or WORKTREE for the work tree's native/) is
made with native/Makefile and copied setuid root into the cache.  Both run
the "relay" variant (bench/common.py): the holder does all its work and
bench/null_listener.c receives the records, so no Python start-up or
storing blurs the difference.  Warm cache, one discarded warm-up run per
build, then repetitions alternating the order A,B / B,A.

Reported per build, as medians: the command's wall time, and the holder's
CPU time (user + system), exact rather than sampled: this process is a
child subreaper, so the holder, orphaned when its listener exits, is
reaped here with its rusage.  Divided by the events the listener received,
that is the holder's price per event -- on a VM whose speed varies from
run to run, a steadier figure than any wall time.

The workspace is bench/common.py's (a loop-mounted ext4 by default); the
tree is copied into it once, as the bench user, with its first
--max-files files (sorted by path).  Uses the work tree's `shournal` CLI.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as c  # noqa: E402

REPO = c.BENCH_DIR.parent
WORKTREE = "WORKTREE"
PR_SET_CHILD_SUBREAPER = 36


def build_helper(rev: str, dest: Path) -> Path:
    """native/ of `rev` (or of the work tree) built, setuid root, in dest."""
    dest.mkdir(parents=True, exist_ok=True)
    dest.chmod(0o755)
    src = REPO / "native"
    if rev != WORKTREE:
        archive = subprocess.run(
            # native/Makefile reads the version from shournal/__init__.py
            ["git", "-c", f"safe.directory={REPO}", "-C", str(REPO), "archive", rev, "native",
             "shournal/__init__.py"],
            check=True, capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        src = dest / "native"
    c.sh(["make", "-s", "-B", "-C", str(src), f"BUILD={dest}"])
    helper = dest / "shournal-suid"
    os.chown(helper, 0, 0)
    helper.chmod(0o4755)
    return helper


def ensure_tree(work: Path, user: c.User, tree: Path, max_files: int) -> tuple[Path, int]:
    src = work / f"ab-src-{max_files}"
    listing = subprocess.run(["find", str(tree), "-type", "f"], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    files = sorted(listing)[:max_files]
    done = src / ".copied"
    if not done.exists():
        c.user_dir(src, user)
        names = "\n".join(os.path.relpath(f, tree) for f in files) + "\n"
        pack = subprocess.Popen(["tar", "-C", str(tree), "-cf", "-", "-T", "-"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        unpack = subprocess.Popen(["runuser", "-u", user.name, "--", "tar", "-C", str(src),
                                   "-xf", "-"], stdin=pack.stdout)
        assert pack.stdin is not None and pack.stdout is not None
        pack.stdout.close()
        pack.stdin.write(names.encode())
        pack.stdin.close()
        if pack.wait() != 0 or unpack.wait() != 0:
            raise SystemExit(f"copying {tree} into {src} failed")
        done.touch()
    return src, len(files)


class ABBench(c.Bench):
    """Bench whose `shournal run` uses the helper in self.helper."""

    helper: Path

    def base_env(self, data_home: Path) -> dict[str, str]:
        env = super().base_env(data_home)
        env["SHOURNAL_SUID_PATH"] = str(self.helper)
        return env


def reap_orphans(timeout: float = 30.0) -> float:
    """Reap what was orphaned to us; the holders' CPU seconds."""
    cpu = 0.0
    deadline = time.monotonic() + timeout
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        except ChildProcessError:
            return cpu
        if info is None:
            if time.monotonic() > deadline:
                raise SystemExit("an orphan of the run did not exit")
            time.sleep(0.01)
            continue
        try:
            comm = Path(f"/proc/{info.si_pid}/comm").read_text().strip()
        except OSError:
            comm = ""
        _, _, ru = os.wait4(info.si_pid, 0)
        if comm == "shournal-suid":
            cpu += ru.ru_utime + ru.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--a", default="HEAD", help=f"git revision, or {WORKTREE} (default HEAD)")
    p.add_argument("--b", default=WORKTREE, help=f"git revision, or {WORKTREE} (the default)")
    p.add_argument("--tree", type=Path, default=Path("/usr/share"))
    p.add_argument("--max-files", type=int, default=20000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--user", default=c.DEFAULT_USER)
    p.add_argument("--workspace", choices=("loop", "dir"), default="loop")
    args = p.parse_args(argv)
    c.require_root()
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("prctl(PR_SET_CHILD_SUBREAPER) failed")
    c.SHOURNAL = str(REPO / ".venv" / "bin" / "shournal")
    user = c.ensure_user(args.user)
    work = c.ensure_workspace(user, args.workspace)
    src, nfiles = ensure_tree(work, user, args.tree, args.max_files)
    dst = work / "ab-dst"
    helpers = {"A": build_helper(args.a, c.CACHE / "ab" / "A"),
               "B": build_helper(args.b, c.CACHE / "ab" / "B")}
    bench = ABBench(user, work, "helper_ab", read_includes=("$HOME", str(src)))
    body = f"cp -a {src} {dst}"
    c.log(f"A={args.a} B={args.b}: {body} ({nfiles} files), {args.reps} reps, warm")
    results: dict[str, list[dict]] = {"A": [], "B": []}
    for rep in range(-1, args.reps):  # -1: the warm-up, discarded
        for name in ("A", "B") if rep % 2 == 0 else ("B", "A"):
            subprocess.run(["rm", "-rf", str(dst)], check=True)
            c.sync()
            bench.helper = helpers[name]
            rec = bench.run("relay", body, cwd=work)
            rec["holder_cpu_s"] = reap_orphans()
            bench.discard_data(rec)
            if rec.get("rc") != 0 or not rec.get("floor_events"):
                raise SystemExit(f"{name} rep {rep} failed: {rec}")
            if rep >= 0:
                results[name].append(rec)
            c.log(f"rep {rep} {name}: cmd {rec['inner_s']:.3f} s, holder "
                  f"{rec['holder_cpu_s']:.3f} s CPU, {rec['floor_events']} events")
    subprocess.run(["rm", "-rf", str(dst)], check=True)
    print(f"\n{body}: {nfiles} files, {args.reps} warm reps per build, relay variant")
    print(f"{'build':<28} {'cmd s':>8} {'holder CPU s':>13} {'us/event':>9} {'events':>8}")
    for name, rev in (("A", args.a), ("B", args.b)):
        runs = results[name]
        cmd = statistics.median(r["inner_s"] for r in runs)
        cpu = statistics.median(r["holder_cpu_s"] for r in runs)
        ev = statistics.median(r["floor_events"] for r in runs)
        print(f"{name} {rev:<26} {cmd:>8.3f} {cpu:>13.3f} {cpu / ev * 1e6:>9.2f} {ev:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
