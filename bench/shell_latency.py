"""Prompt latency of N concurrent interactive shells, each typing a line
every --interval seconds, with and without shournal; and whether every
command line was stored exactly once.

Runs from a checkout (as root, no `make install` needed): the native parts
are built into a temporary directory with a setuid copy of the helper, and
the shells are interactive bash shells of the test user `shournal-test` on
ptys, set up exactly as bench/cpu_per_command.py sets them up (its build(),
make_home(), spawn() and wait_recorded() are used), in two modes:

  plain   bash without shournal
  daemon  shournal with shournal-forward and the store daemon

The modes alternate (round 0: plain then daemon, round 1: daemon then
plain, ...), each phase with a fresh home (one user, one daemon, N shells).
In a phase, shell i sends its first line at i * interval / N and then one
every `interval` seconds (`true s<i>-<k>`, unique).  A line is only typed
once the shell's previous prompt is back: a line whose time has come while
the prompt is still missing is sent the moment the prompt appears (counted
as `late`).  One thread polls every pty (no per-shell threads competing for
the interpreter), so the figure is Enter -> the prompt's bytes read by the
driver, including the driver's own scheduling delay (the plain phase shows
that floor).

After a daemon phase the shells exit, every recorder and the spool are
waited for, and the journal is read: every typed line (warm-up lines
included) must be stored exactly once.

The load average is recorded before and after each phase: on a shared
machine the figures are only meaningful next to it.

    sudo .venv/bin/python bench/shell_latency.py --shells 8 --duration 60

Targets (issue): median <= 5 ms, p99 <= 50 ms, every command stored once.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pexpect

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as c  # noqa: E402
import cpu_per_command as cpc  # noqa: E402

MODES = ("plain", "daemon")


def percentile(values: list[float], p: int) -> float:
    """The p-th percentile (1..99) of values, inclusive method."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def stored_counts(home: Path) -> Counter[str] | None:
    """How often each `true ...` line is in the journal of this home."""
    db = home / ".local" / "share" / "shournal" / "journal.sqlite"
    if not db.exists():
        return None
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
    try:
        rows = con.execute(
            "SELECT text, count(*) FROM command WHERE text LIKE 'true %' GROUP BY text"
        ).fetchall()
    finally:
        con.close()
    return Counter({text: n for text, n in rows})


def drive(shells: list[pexpect.spawn], duration: float, interval: float) -> dict:
    """Type a line every `interval` seconds in each shell for `duration`
    seconds; the Enter-to-prompt latencies and the lines typed."""
    n = len(shells)
    prompt = cpc.PROMPT
    start = time.perf_counter()
    end = start + duration
    next_send = [start + i * interval / n for i in range(n)]
    sent_at: list[float | None] = [None] * n
    count = [0] * n
    bufs = [""] * n
    fds = {sh.child_fd: i for i, sh in enumerate(shells)}
    latencies: list[float] = []
    per_shell: list[list[float]] = [[] for _ in range(n)]
    typed: list[str] = []
    late = 0
    while True:
        now = time.perf_counter()
        for i, sh in enumerate(shells):
            if sent_at[i] is None and now >= next_send[i] and now < end:
                line = f"true s{i}-{count[i]}"
                if now - next_send[i] > 0.01:
                    late += 1
                sh.send(line + "\n")
                sent_at[i] = time.perf_counter()
                typed.append(line)
                count[i] += 1
                next_send[i] += interval
        pending = [sh.child_fd for i, sh in enumerate(shells) if sent_at[i] is not None]
        if not pending and now >= end:
            break
        idle = [next_send[i] for i in range(n) if sent_at[i] is None]
        wait = min([t - time.perf_counter() for t in idle] + [0.05])
        ready, _, _ = select.select(pending, [], [], max(wait, 0.0))
        for fd in ready:
            i = fds[fd]
            bufs[i] += shells[i].read_nonblocking(65536, timeout=0)
            t = time.perf_counter()
            if prompt in bufs[i]:
                took = t - sent_at[i]  # type: ignore[operator]
                latencies.append(took)
                per_shell[i].append(took)
                sent_at[i] = None
                bufs[i] = bufs[i].rsplit(prompt, 1)[1]
    return {"latencies": latencies, "per_shell": per_shell, "typed": typed, "late": late}


def phase(mode: str, args: argparse.Namespace, paths: dict[str, Path], uid: int, gid: int) -> dict:
    home = cpc.make_home(uid, gid)
    load_before = os.getloadavg()
    shells = []
    warm_lines: list[str] = []
    try:
        for _ in range(args.shells):
            sh = cpc.spawn(mode, home, paths)
            sh.delaybeforesend = None  # pexpect sleeps 50 ms before each send by default
            shells.append(sh)
        # Warm-up: start-ups, the daemon's start, the journal's creation.
        for k in range(args.warmup):
            for i, sh in enumerate(shells):
                line = f"true warm{i}-{k}"
                sh.sendline(line)
                sh.expect_exact(cpc.PROMPT)
                warm_lines.append(line)
        if mode != "plain":
            cpc.wait_recorded(home)
        load_start = os.getloadavg()
        got = drive(shells, args.duration, args.interval)
        load_end = os.getloadavg()
        for sh in shells:
            sh.sendline("exit")
        for sh in shells:
            sh.expect(pexpect.EOF)
    finally:
        for sh in shells:
            sh.close(force=True)
    result: dict = {
        "mode": mode,
        "shells": args.shells,
        "duration_s": args.duration,
        "interval_s": args.interval,
        "loadavg_before_spawn": load_before,
        "loadavg_start": load_start,
        "loadavg_end": load_end,
        "lines": len(got["latencies"]),
        "late_lines": got["late"],
    }
    ms = [v * 1000 for v in got["latencies"]]
    result.update({
        "median_ms": statistics.median(ms),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms),
        "per_shell_median_ms": [statistics.median([v * 1000 for v in s]) for s in got["per_shell"]],
    })
    if mode != "plain":
        t0 = time.monotonic()
        cpc.wait_recorded(home)
        result["drain_after_exit_s"] = time.monotonic() - t0
        counts = stored_counts(home) or Counter()
        expected = warm_lines + got["typed"]
        result["typed_total"] = len(expected)
        result["stored_distinct"] = sum(1 for line in expected if counts[line] >= 1)
        result["missing"] = [line for line in expected if counts[line] == 0]
        result["duplicated"] = {t: n for t, n in counts.items() if n > 1}
        result["unexpected"] = sorted(set(counts) - set(expected))
        result["stored_exactly_once"] = (
            not result["missing"] and not result["duplicated"] and not result["unexpected"]
        )
        cpc.stop_daemon(home)
    result["latencies_ms"] = [round(v, 3) for v in ms]  # us resolution keeps the file small
    cpc.reap_all(block=False)
    shutil.rmtree(home, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--shells", type=int, default=8)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of typing per phase")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between a shell's lines")
    p.add_argument("--warmup", type=int, default=2, help="lines per shell before measuring")
    p.add_argument("--rounds", type=int, default=1, help="plain/daemon pairs, order alternating")
    c.results_args(p)
    args = p.parse_args(argv)
    c.require_root()
    import pwd

    pw = pwd.getpwnam(cpc.USER)
    root = Path(tempfile.mkdtemp(prefix="shournal-bench-shells-", dir="/var/tmp"))
    root.chmod(0o755)
    t_start = time.time()
    phases = []
    try:
        paths = cpc.build(root)
        c.sh(["chmod", "-R", "a+rX", str(root)])
        for r in range(args.rounds):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                c.log(f"shell_latency: round {r}, {mode}, {args.shells} shells, "
                      f"{args.duration:.0f} s, load {os.getloadavg()[0]:.2f}")
                phases.append({"round": r, **phase(mode, args, paths, pw.pw_uid, pw.pw_gid)})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n== {args.shells} shells, a line every {args.interval} s each, "
          f"{args.duration:.0f} s per phase: Enter -> prompt ==")
    print(f"{'round':>5} {'mode':>7} {'lines':>6} {'late':>5} {'median ms':>9} {'p90 ms':>8} "
          f"{'p99 ms':>8} {'max ms':>8} {'load 1m start/end':>18} {'stored once':>12}")
    for ph in phases:
        once = "-" if ph["mode"] == "plain" else (
            f"{ph['stored_distinct']}/{ph['typed_total']}"
            + ("" if ph["stored_exactly_once"] else " NO"))
        print(f"{ph['round']:>5} {ph['mode']:>7} {ph['lines']:>6} {ph['late_lines']:>5} "
              f"{ph['median_ms']:>9.2f} {ph['p90_ms']:>8.2f} {ph['p99_ms']:>8.2f} "
              f"{ph['max_ms']:>8.1f} {ph['loadavg_start'][0]:>8.2f}/{ph['loadavg_end'][0]:<9.2f} "
              f"{once:>12}")
    print("targets (daemon): median <= 5 ms, p99 <= 50 ms, every command stored exactly once")
    c.write_run(args, "shell_latency", t_start, {"phases": phases})
    failed = any(ph["mode"] != "plain" and not ph["stored_exactly_once"] for ph in phases)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
