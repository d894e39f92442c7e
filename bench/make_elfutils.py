"""Workload 3: `make -j2` of a real C project (Debian's elfutils source),
monitored vs unmonitored, cold and warm page cache.

Set-up (once, needs network): a deb-src stanza is derived at run time from
/etc/apt/sources.list.d/debian.sources (same URIs, suites, components and
key, `Types: deb-src`) into the temporary file
/etc/apt/sources.list.d/shournal-bench-src.sources, which is removed again
(and the package lists refreshed) when the set-up is done.  Then
`apt-get build-dep -y elfutils`, `apt-get source elfutils` (as the bench
user, in the workspace) and `./configure` (CFLAGS: see CONFIGURE).

Every run starts from `make clean` (unobserved) and times `make -j2`.
Full runs are checked: no lost or dropped events, and the stored writes
below the source tree are compared with the files `find -newer` reports
as modified during the build.

Target (issue): overhead at most 2%.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as c  # noqa: E402

SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
TMP_SOURCES = Path("/etc/apt/sources.list.d/shournal-bench-src.sources")
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def deb_src_stanzas(text: str) -> str:
    """deb822 stanzas of `text` that list binary packages, as deb-src."""
    out = []
    for stanza in text.split("\n\n"):
        lines = [ln for ln in stanza.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        fields = {}
        for ln in lines:
            key, _, value = ln.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes") == "no":
            continue
        new = []
        for ln in lines:
            if ln.split(":", 1)[0].strip().lower() == "types":
                new.append("Types: deb-src")
            else:
                new.append(ln)
        out.append("\n".join(new))
    if not out:
        raise SystemExit(f"no 'Types: deb' stanza in {SOURCES}")
    return "# temporary, written by shournal bench/make_elfutils.py\n" + "\n\n".join(out) + "\n"


def apt(*args: str) -> None:
    c.sh(["apt-get", *args], env=APT_ENV)


# elfutils 0.188 uses curl options that bookworm's curl deprecates; the
# build has -Werror (Debian builds with its own flags).
CONFIGURE = ["./configure", "-q", "CFLAGS=-g -O2 -Wno-error=deprecated-declarations"]


def ensure_source(bench: c.Bench) -> Path:
    root = c.user_dir(bench.work / "elfutils", bench.user)
    fetched = root / ".fetched"
    done = root / ".configured"
    if done.exists():
        return Path(done.read_text().strip())
    if not fetched.exists():
        try:
            TMP_SOURCES.write_text(deb_src_stanzas(SOURCES.read_text()))
            c.log(f"wrote {TMP_SOURCES}; apt-get update")
            apt("update", "-q")
            c.log("apt-get build-dep -y elfutils")
            apt("build-dep", "-y", "-q", "--no-install-recommends", "elfutils")
            apt("install", "-y", "-q", "--no-install-recommends", "dpkg-dev")
            c.log(f"apt-get source elfutils (as {bench.user.name}, in {root})")
            bench.user_run(["apt-get", "source", "-q", "elfutils"], root)
        finally:
            if TMP_SOURCES.exists():
                TMP_SOURCES.unlink()
                c.log(f"removed {TMP_SOURCES}; apt-get update")
                apt("update", "-q")
        fetched.touch()
    tree = next(p for p in sorted(root.iterdir()) if p.is_dir() and p.name.startswith("elfutils-"))
    c.log(f"configuring {tree}: {' '.join(CONFIGURE)}")
    bench.user_run(CONFIGURE, tree)
    c.log("one untimed build to check it works, then make clean")
    bench.user_run(["make", "-j2", "-s"], tree, stdout=subprocess.DEVNULL)
    bench.user_run(["make", "-s", "clean"], tree, stdout=subprocess.DEVNULL)
    done.write_text(str(tree) + "\n")
    return tree


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    c.common_args(p, reps=3)
    p.add_argument("--jobs", type=int, default=2, help="make -jN")
    p.add_argument("--setup-only", action="store_true")
    args = p.parse_args(argv)
    t_start = time.time()
    user, work = c.bench_user(args)
    root = work / "elfutils"
    bench = c.Bench(
        user, work, "make_elfutils", read_includes=["$HOME", str(root)], nofile=args.nofile,
        profile=args.profile, listener_cpu=args.listener_cpu, cpu_share=args.cpu_share,
    )
    tree = ensure_source(bench)
    if args.setup_only:
        return 0
    marker = bench.tmp / "build-start"
    body = f"make -j{args.jobs} -s >/dev/null"

    def prepare() -> None:
        bench.user_run(["make", "-s", "clean"], tree, stdout=subprocess.DEVNULL)
        if marker.exists():
            marker.unlink()
        bench.user_run(["touch", str(marker)], tree)
        time.sleep(0.01)  # mtimes after the marker's

    def check_full(rec: dict) -> None:
        js = c.journal_stats(rec["journal"], {"writes_below_tree": (0, str(tree))})
        found = subprocess.run(
            ["find", str(tree), "-type", "f", "-newer", str(marker), "-printf", "."],
            capture_output=True,
            check=False,
        ).stdout
        js["files_modified_by_build"] = len(found)
        checks = js.get("commands") == 1 and js.get("writes_below_tree", 0) >= len(found)
        c.judge_full(rec, js, checks, lambda: (
            f"stored {js.get('file_events')} events, {js.get('writes_below_tree')} writes below "
            f"the tree vs {len(found)} files modified, lost {js.get('lost_events')}"
            f" {js.get('lost_by_reason', '')}"
        ), args.profile)

    records, summaries = c.run_caches(
        bench, args, body=body, cwd=tree, prepare=prepare, check_full=check_full
    )

    c.print_table(
        f"make_elfutils: make -j{args.jobs} in {tree.name}, nofile={args.nofile or 'inherited'}",
        summaries,
        "full <= +2%",
    )
    c.print_problems(records)
    for r in records:
        if r.get("rc"):
            print(f"  {r['variant']} {r['cache']} rep {r['rep']}: make exited {r['rc']}")
    c.write_run(args, "make_elfutils", t_start, {
        "command": body,
        "tree": str(tree),
        "cpus": os.cpu_count(),
        "summaries": summaries,
        "runs": records,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
