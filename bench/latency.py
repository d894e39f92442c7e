"""Latency added to an interactive command line: `true` typed at a bash
prompt, with and without the shournal integration.

Two interactive bash shells run as the bench user on ptys (pexpect): one
with a plain rc file, one whose rc file also runs
`source /usr/local/share/shournal/shournal.bash; SHOURNAL_ENABLE`.  In
each repetition both shells get `true`, in random order; the time from
sending the line to the next prompt appearing (prompt-to-prompt as the
user sees it, including PS0, PROMPT_COMMAND and the helper's set-up) is
measured.  Before each line the driver waits --think seconds, as a
person would; --think 0 types the lines back to back (pasted lines: each
command line then also waits, bounded, for the previous command's
listener to drain, see wait_previous_listener() in the preload library).

The monitored shell's journal is checked at the end: every `true` must be
stored.

Target (issue): at most 5 ms added, median.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import pexpect

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as c  # noqa: E402

PROMPT = "BENCH-PROMPT-7f3a$ "
SHELL_DIR = Path("/usr/local/share/shournal")


def rc_file(bench: c.Bench, monitored: bool) -> Path:
    name = "monitored" if monitored else "plain"
    path = bench.state / f"bashrc.{name}"
    text = (
        f"PS1='{PROMPT}'\n"
        f"HISTFILE={bench.state}/history.{name}\n"
        "unset PROMPT_COMMAND\n"
    )
    if monitored:
        text += f"source {SHELL_DIR}/shournal.bash\nSHOURNAL_ENABLE\n"
    path.write_text(text)
    return path


def spawn(bench: c.Bench, monitored: bool, data_home: Path) -> tuple[pexpect.spawn, float]:
    env = bench.base_env(data_home)
    env["TERM"] = "dumb"
    argv = bench.as_user(
        ["bash", "--noprofile", "--rcfile", str(rc_file(bench, monitored)), "-i"], env, bench.tmp
    )
    t0 = time.perf_counter()
    child = pexpect.spawn(argv[0], argv[1:], encoding="utf-8", timeout=30, echo=False)
    child.delaybeforesend = None  # pexpect sleeps 50 ms before each send by default
    child.expect_exact(PROMPT)
    startup = time.perf_counter() - t0
    return child, startup


def one(child: pexpect.spawn) -> float:
    t0 = time.perf_counter()
    child.sendline("true")
    child.expect_exact(PROMPT)
    return time.perf_counter() - t0


def measure(bench: c.Bench, n: int, think: float, warmup: int, rng: random.Random) -> dict:
    data_plain = c.user_dir(bench.state / f"data.latency-plain-{think}", bench.user, 0o700)
    data_mon = c.user_dir(bench.state / f"data.latency-mon-{think}", bench.user, 0o700)
    for d in (data_plain, data_mon):
        for f in d.glob("shournal/journal.sqlite*"):
            f.unlink()
    plain, st_plain = spawn(bench, False, data_plain)
    mon, st_mon = spawn(bench, True, data_mon)
    shells = {"plain": plain, "monitored": mon}
    times: dict[str, list[float]] = {"plain": [], "monitored": []}
    diffs = []
    try:
        for i in range(warmup + n):
            order = ["plain", "monitored"]
            rng.shuffle(order)
            got = {}
            for name in order:
                time.sleep(think)
                got[name] = one(shells[name])
            if i >= warmup:
                for name, v in got.items():
                    times[name].append(v)
                diffs.append(got["monitored"] - got["plain"])
        for ch in shells.values():
            ch.sendline("exit")
            ch.expect(pexpect.EOF)
    finally:
        for ch in shells.values():
            ch.close(force=True)
    # Pasted lines do not wait for the listeners (only for the holders): up
    # to n listeners may still be storing.  Wait for them, bounded.
    stored = None
    db = data_mon / "shournal" / "journal.sqlite"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if db.exists():
            con = sqlite3.connect(db, timeout=30)
            try:
                stored = con.execute(
                    "SELECT count(*) FROM command WHERE text = 'true'").fetchone()[0]
            except sqlite3.Error:
                stored = None
            finally:
                con.close()
            if stored == n + warmup:
                break
        time.sleep(0.5)
    ms = {k: [v * 1000 for v in vs] for k, vs in times.items()}
    return {
        "think_s": think,
        "n": n,
        "warmup": warmup,
        "plain_median_ms": statistics.median(ms["plain"]),
        "monitored_median_ms": statistics.median(ms["monitored"]),
        "added_median_ms": statistics.median(ms["monitored"]) - statistics.median(ms["plain"]),
        "pairwise_diff_median_ms": statistics.median(diffs) * 1000,
        "plain_p90_ms": statistics.quantiles(ms["plain"], n=10)[-1],
        "monitored_p90_ms": statistics.quantiles(ms["monitored"], n=10)[-1],
        "monitored_max_ms": max(ms["monitored"]),
        "startup_plain_ms": st_plain * 1000,
        "startup_monitored_ms": st_mon * 1000,
        "stored_true_commands": stored,
        "expected_true_commands": warmup + n,
        "plain_ms": ms["plain"],
        "monitored_ms": ms["monitored"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--user", default=c.DEFAULT_USER)
    p.add_argument("--n", type=int, default=100, help="pairs per think time")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument(
        "--think",
        default="0.5,0",
        help="comma-separated pauses (s) before each line; 0 = typed back to back",
    )
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--workspace", choices=("loop", "dir"), default="loop")
    c.results_args(p)
    args = p.parse_args(argv)
    t_start = time.time()
    user, work = c.bench_user(args)
    bench = c.Bench(user, work, "latency")
    rng = random.Random(args.seed)
    rows = []
    for think in [float(t) for t in args.think.split(",") if t]:
        c.log(f"latency: {args.n} pairs, think {think} s")
        rows.append(measure(bench, args.n, think, args.warmup, rng))
    print("\n== latency: `true` at an interactive bash prompt (prompt to prompt) ==")
    print(
        f"{'think s':>7} {'n':>4} {'plain ms':>9} {'shournal ms':>11} {'added ms':>9} "
        f"{'pair diff':>9} {'p90 plain':>9} {'p90 mon':>8} {'max mon':>8} {'stored':>9}"
    )
    for r in rows:
        print(
            f"{r['think_s']:>7} {r['n']:>4} {r['plain_median_ms']:>9.2f} "
            f"{r['monitored_median_ms']:>11.2f} {r['added_median_ms']:>9.2f} "
            f"{r['pairwise_diff_median_ms']:>9.2f} {r['plain_p90_ms']:>9.2f} "
            f"{r['monitored_p90_ms']:>8.2f} {r['monitored_max_ms']:>8.1f} "
            f"{r['stored_true_commands']}/{r['expected_true_commands']:<4}"
        )
    print("(added: difference of medians; pair diff: median of per-pair differences; stored:"
          " `true` commands in the monitored shell's journal / typed)")
    print("target: added <= 5 ms median")
    for r in rows:
        print(f"shell start-up (think {r['think_s']}): plain {r['startup_plain_ms']:.0f} ms, "
              f"with SHOURNAL_ENABLE (re-exec) {r['startup_monitored_ms']:.0f} ms")
    c.write_run(args, "latency", t_start, {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
