"""What a full-screen terminal library costs a command at start-up: the
wall time of ``python -c "import M"`` (the interpreter's own start
included, ``python -c pass`` is the floor) for the maintained libraries
`shournal search` could be built on, each in a venv of its own with only
it installed.  The search's first screen has 150 ms, start-up included
(docs/design.md, "The interactive search").

    nice .venv/bin/python bench/tui_imports.py --tag NAME

writes results/tui_imports-NAME.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import common  # noqa: E402

# (name, pip requirement, what a full-screen application imports)
LIBRARIES = [
    ("prompt_toolkit", "prompt_toolkit", "prompt_toolkit.application"),
    ("urwid", "urwid", "urwid"),
    ("textual", "textual", "textual.app"),
]


def wall(python: str, code: str) -> float:
    t = time.perf_counter()
    subprocess.run([python, "-c", code], check=True)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=20)
    common.results_args(p)
    args = p.parse_args(argv)
    t_start = time.time()
    cache = Path(os.environ.get("SHOURNAL_BENCH_CACHE", "/var/tmp/shournal-bench")) / "tui-venvs"
    pythons = {}
    versions = {}
    for name, requirement, _module in LIBRARIES:
        venv = cache / name
        if not (venv / "bin" / "python").exists():
            subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q", requirement], check=True)
        pythons[name] = str(venv / "bin" / "python")
        versions[name] = subprocess.run(
            [pythons[name], "-c", f"import importlib.metadata as m; print(m.version({name!r}))"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
    times: dict[str, list[float]] = {"python -c pass": []}
    times.update({name: [] for name, _, _ in LIBRARIES})
    for name, _, module in LIBRARIES:  # compile the .pyc files first
        wall(pythons[name], f"import {module}")
    for _ in range(args.reps):
        # interleaved, so that the machine's load hits all alike
        times["python -c pass"].append(wall(pythons["prompt_toolkit"], "pass"))
        for name, _, module in LIBRARIES:
            times[name].append(wall(pythons[name], f"import {module}"))
    result = {
        name: {
            "version": versions.get(name),
            "median_ms": statistics.median(v) * 1000,
            "min_ms": min(v) * 1000,
        }
        for name, v in times.items()
    }
    result["loadavg_end"] = os.getloadavg()  # type: ignore[assignment]
    for name, r in result.items():
        if isinstance(r, dict):
            print(f"{name:16} {r['version'] or '':8} median {r['median_ms']:6.1f} ms  "
                  f"min {r['min_ms']:6.1f} ms")  # fmt: skip
    common.write_run(args, "tui_imports", t_start, {"result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
