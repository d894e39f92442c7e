"""Price of an apparatus record of `make -jN` of elfutils' libelf.

Four variants, in an order drawn at random in each repetition, each after
`make -C libelf clean` (unobserved), warm page cache:

* plain: `make -jN -C libelf` unobserved;
* record: `shournal run -- ...` (a normal record);
* apparatus-first: `shournal run --apparatus -- ...` into an empty
  archive (every file the build read is archived);
* apparatus-repeat: the same into an archive that already holds one
  apparatus record of this build (deduplicated: only the new outputs'
  digests and what changed).

The figure of the issue is the whole `shournal run` (set-up, the build,
the listener storing and archiving; run waits for it): apparatus-repeat
against record (target: at most +10% wall).  The build alone (timed in the
observed bash with $EPOCHREALTIME) is recorded as well.

The elfutils source is the one bench/make_elfutils.py sets up (its
--setup-only; the lib/ directory, which libelf links, is built once
here).  A development build: pass SHOURNAL_BIN, SHOURNAL_SUID_PATH,
SHOURNAL_LISTENER, SHOURNAL_PRELOAD_LIB as for apparatus.py.

    .venv/bin/python bench/apparatus_make.py --reps 3 --workspace dir
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as c  # noqa: E402
from make_elfutils import ensure_source  # noqa: E402

VARIANTS = ("plain", "record", "apparatus-first", "apparatus-repeat")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2, help="make -jN")
    p.add_argument("--user", default=c.DEFAULT_USER)
    p.add_argument("--workspace", choices=("loop", "dir"), default="loop")
    c.results_args(p)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    t_start = time.time()
    user, work = c.bench_user(args)
    bench = c.Bench(user, work, "apparatus_make", read_includes=["$HOME", str(work)])
    tree = ensure_source(bench)
    bench.user_run(["make", "-s", f"-j{args.jobs}", "-C", "lib"], tree, stdout=subprocess.DEVNULL)
    libelf = tree / "libelf"
    body = f"make -j{args.jobs} -s >/dev/null"
    # The archive of apparatus-repeat, holding one record of the build.
    kept = bench.state / "data-repeat"
    shutil.rmtree(kept, ignore_errors=True)
    c.user_dir(kept, user, 0o700)

    def one(variant: str) -> dict:
        bench.user_run(["make", "-s", "clean"], libelf, stdout=subprocess.DEVNULL)
        c.sync()
        if variant == "plain":
            return bench.run("plain", body, libelf)
        rec = bench.run(
            "full", body, libelf, run_opts=("--apparatus",) if "apparatus" in variant else (),
            data_home=kept if variant == "apparatus-repeat" else None,
        )
        rec["variant"] = variant
        if rec["exit"] != 0 or rec.get("rc"):
            raise SystemExit(f"{variant}: exit {rec['exit']} rc {rec.get('rc')}: "
                             f"{rec.get('stderr', '')}")
        if variant != "apparatus-repeat":
            bench.discard_data(rec)
        return rec

    c.log("warm-up, and the first record of the archive apparatus-repeat uses")
    for v in VARIANTS:
        one(v)
    rng = random.Random(args.seed)
    records = []
    for rep in range(args.reps):
        order = list(VARIANTS)
        rng.shuffle(order)
        for v in order:
            rec = one(v)
            rec["rep"] = rep
            rec.pop("data_home", None)
            rec.pop("journal", None)
            c.log(f"rep {rep + 1}/{args.reps} {v:16}: build {c.fmt_s(rec['inner_s'])} s  "
                  f"whole {rec['total_s']:.2f} s  load {rec['load_before']:.2f}")
            records.append(rec)

    def med(v: str, key: str) -> float | None:
        return c.median([r[key] for r in records if r["variant"] == v])

    def ratio(a: str, b: str, key: str) -> float | None:
        by_rep: dict[int, dict[str, dict]] = {}
        for r in records:
            by_rep.setdefault(r["rep"], {})[r["variant"]] = r
        return c.median([x[a][key] / x[b][key] for x in by_rep.values()])

    summary = {
        "reps": args.reps,
        "median_total_s": {v: med(v, "total_s") for v in VARIANTS},
        "median_build_s": {v: med(v, "inner_s") for v in VARIANTS},
        "ratio_total": {f"{v}/record": ratio(v, "record", "total_s") for v in VARIANTS[2:]},
        "ratio_total_vs_plain": {f"{v}/plain": ratio(v, "plain", "total_s")
                                 for v in VARIANTS[1:]},
        "loadavg_end": os.getloadavg(),
        "load_before_runs": [r["load_before"] for r in records],
    }
    archive = kept / "shournal" / "archive"
    summary["archive_bytes_after_repeats"] = sum(
        f.stat().st_size for f in archive.rglob("*") if f.is_file()) if archive.exists() else None
    for k, v in summary.items():
        print(f"{k}: {v}")
    c.write_run(args, "apparatus_make", t_start,
                {"command": f"cd {libelf} && {body}", "summary": summary, "runs": records})
    return 0


if __name__ == "__main__":
    sys.exit(main())
