"""CLI start-up on the 1-million-command journal (bench/journal_gen.py builds
and caches it): wall time of ``shournal query --history 5`` and ``shournal
query --wfile F`` (F a probe file the journal records), whole processes
measured with hyperfine, warm and cold (``drop_caches`` before each run;
needs root, skipped otherwise).  ``python -c pass`` is the floor.  Also the
import time of the biggest modules (``python -X importtime``, best of 3).

Target (issue 15): <= 150 ms wall for both, warm and cold.

    nice .venv/bin/python bench/cli_startup.py --tag NAME   # results/cli_startup-NAME.json

The machine's load average goes into the result: on a shared machine wall
times mean little, user + system CPU time (also recorded) more.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import journal_gen  # noqa: E402
from query_perf import cli_env  # noqa: E402

TARGET_MS = 150
DROP = "sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'"


def hyperfine(commands: list[str], env: dict[str, str], runs: int, cold: bool,
              out: Path) -> list[dict[str, Any]]:  # fmt: skip
    argv = ["hyperfine", "-N", "-i", "--export-json", str(out), "-r", str(runs)]
    argv += ["--prepare", DROP] if cold else ["-w", "3"]
    subprocess.run([*argv, *commands], env=env, check=True, stdout=subprocess.DEVNULL)
    results = json.loads(out.read_text())["results"]
    return [
        {
            "command": r["command"],
            "median_ms": round(r["median"] * 1000, 1),
            "mean_ms": round(r["mean"] * 1000, 1),
            "min_ms": round(r["min"] * 1000, 1),
            "user_ms": round(r["user"] * 1000, 1),
            "system_ms": round(r["system"] * 1000, 1),
            "runs": len(r["times"]),
        }
        for r in results
    ]


def import_times(argv: list[str], env: dict[str, str], top: int = 15) -> list[tuple[str, float]]:
    """The modules with the largest cumulative import time (best of 3), in ms."""
    best: dict[str, int] = {}
    for _ in range(3):
        err = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env,
                             capture_output=True, text=True).stderr  # fmt: skip
        for line in err.splitlines():
            m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
            if m and len(m[2]) <= 4:
                name = m[3]
                best[name] = min(best.get(name, 1 << 62), int(m[1]))
    ranked = sorted(best.items(), key=lambda kv: -kv[1])[:top]
    return [(name, round(us / 1000, 1)) for name, us in ranked]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", type=Path, default=journal_gen.DEFAULT_DB)
    p.add_argument("--runs", type=int, default=20, help="warm runs per command")
    p.add_argument("--cold-runs", type=int, default=5)
    p.add_argument("--tag", default="")
    args = p.parse_args(argv)

    meta = journal_gen.ensure_journal(args.db)
    # Bytecode, as an installed package has it (PYTHONDONTWRITEBYTECODE or
    # a fresh checkout would measure compiling the sources instead).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(BENCH_DIR.parent / "shournal")],
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    probe = next(p for p in meta["probes"] if p["kind"] == "write" and p["mtime_matches"])
    shournal = f"{sys.executable} -m shournal"
    commands = [
        f"{sys.executable} -c pass",
        f"{shournal} query --history 5",
        f"{shournal} query --wfile {probe['path']}",
    ]
    result: dict[str, Any] = {
        "benchmark": "cli_startup",
        "journal": {k: meta[k] for k in ("commands", "file_events")},
        "load_before": os.getloadavg()[0],
        "target_ms": TARGET_MS,
    }
    with tempfile.TemporaryDirectory(prefix="shournal-startup-") as tmp:
        home = Path(tmp)
        env = cli_env(f"sqlite:///{args.db}", home)
        env["PYTHONPATH"] = str(BENCH_DIR.parent)
        # not the checkout: `python -m` puts the cwd first on sys.path
        os.chdir(home)
        result["warm"] = hyperfine(commands, env, args.runs, False, home / "warm.json")
        if os.geteuid() == 0:
            result["cold"] = hyperfine(commands, env, args.cold_runs, True, home / "cold.json")
        result["imports_history"] = import_times(
            ["-m", "shournal", "query", "--history", "5"], env
        )
    result["load_after"] = os.getloadavg()[0]
    name = f"cli_startup-{args.tag}.json" if args.tag else "cli_startup.json"
    out = BENCH_DIR / "results" / name
    out.write_text(json.dumps(result, indent=1) + "\n")
    for kind in ("warm", "cold"):
        for r in result.get(kind, []):
            print(f"{kind:4} {r['median_ms']:8.1f} ms median  (user {r['user_ms']:.0f} ms, "
                  f"sys {r['system_ms']:.0f} ms)  {r['command']}")  # fmt: skip
    print(f"load average {result['load_before']:.1f} -> {result['load_after']:.1f}; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
