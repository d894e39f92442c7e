"""CLI start-up on the 1-million-command journal (bench/journal_gen.py builds
and caches it): wall time of every command that only reads, whole
processes, warm and cold (``drop_caches`` before each run; needs root,
skipped otherwise): ``shournal query --history 5`` and ``shournal query
--wfile F`` (F a probe file the journal records; the typer-free fast
path), ``query --cwd D --history 5`` (D a working directory of the
journal; the full CLI), ``lineage F``, ``status F``, ``stats --cwd D``,
``history``, ``doctor`` and ``--help``.  ``python -c pass`` of the same
interpreter is the floor, ``python -c 'import typer'`` that of every
command the typer CLI answers.  ``--only NAME`` (repeatable) picks commands.

Each build is installed as ``make install`` installs it: a fresh venv with
``pip install`` of the source tree (not editable: an editable install's
import hook costs every start-up several ms) and the build's
scripts/write_installed.py, run through its ``bin/shournal`` launcher.
``--build`` names the builds (a checkout directory, or a git revision of
this repository exported with ``git archive``; default: this checkout);
with two, the old and new code run alternately, in a random order per
round, so a shared machine's load hits both alike.

Also per build and command the cumulative import time (``python -X
importtime``: the sum of the top-level imports, each the best of
``--import-reps`` runs), which depends little on the load, and the largest
imports.

Targets: <= 150 ms wall for the fast path, warm and cold (issue 15);
<= 100 ms warm and <= 150 ms cold for every reading command (issue 28).

    nice .venv/bin/python bench/cli_startup.py --build main --build . --tag NAME

writes results/cli_startup-NAME.json.  The journal is found through
``$SHOURNAL_DB_URL`` (``--journal env``) or, as for a user, at the default
place with a default config file (``--journal default``: a symbolic link in
a private ``$XDG_DATA_HOME``, the config file ``shournal`` writes).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

import journal_gen  # noqa: E402

TARGET_MS = 150


def drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def install(build: str, dest: Path) -> Path:
    """A venv at ``dest`` with ``build`` pip-installed into it (as `make
    install` does); its bin/ directory."""
    src = Path(build)
    if not (src / "pyproject.toml").exists():
        src = dest.with_suffix(".src")
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-c", f"safe.directory={REPO}", "-C", str(REPO), "archive", build],
            check=True, capture_output=True,
        ).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(["python3", "-m", "venv", str(dest)], check=True)
    subprocess.run([str(dest / "bin" / "pip"), "install", "-q", "--no-cache-dir", str(src)],
                   check=True, stderr=subprocess.DEVNULL)  # fmt: skip
    # as `make install` then does (the build's own script: its launcher)
    subprocess.run([str(dest / "bin" / "python"), str(src / "scripts" / "write_installed.py"),
                    "/usr/local"], check=True)  # fmt: skip
    return dest / "bin"


def run_once(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """Wall, user and system time of one process, in ms."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=[
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
    ])  # fmt: skip
    _pid, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # 1: nothing found, or doctor's findings
        raise RuntimeError(f"{' '.join(argv)}: exit status {code}")
    return {"wall": wall * 1000, "user": usage.ru_utime * 1000, "sys": usage.ru_stime * 1000}


def import_total(argv: list[str], env: dict[str, str], reps: int) -> tuple[float, list[Any]]:
    """The sum of the top-level imports' cumulative times (ms), each the
    best of ``reps`` runs (so one slow run on a busy machine does not
    count), and the largest of them."""
    # the interpreter of a console script (its #! line) or the interpreter itself
    python = argv[0] if Path(argv[0]).name.startswith("python") else str(
        Path(argv[0]).with_name("python")
    )
    args = argv[1:] if python == argv[0] else argv
    best: dict[str, int] = {}
    for _ in range(reps):
        err = subprocess.run([python, "-X", "importtime", *args], env=env,
                             capture_output=True, text=True).stderr  # fmt: skip
        for line in err.splitlines():
            m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
            if m and len(m[2]) == 1:
                best[m[3]] = min(best.get(m[3], 1 << 62), int(m[1]))
    top = sorted(best.items(), key=lambda kv: -kv[1])
    return round(sum(best.values()) / 1000, 1), [(n, round(us / 1000, 1)) for n, us in top[:12]]


def summary(times: list[dict[str, float]]) -> dict[str, Any]:
    walls = sorted(t["wall"] for t in times)
    return {
        "median_ms": round(statistics.median(walls), 1),
        "min_ms": round(walls[0], 1),
        "p90_ms": round(walls[int(0.9 * (len(walls) - 1))], 1),
        "user_ms": round(statistics.median(t["user"] for t in times), 1),
        "sys_ms": round(statistics.median(t["sys"] for t in times), 1),
        "runs": len(times),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", type=Path, default=journal_gen.DEFAULT_DB)
    p.add_argument("--build", action="append", default=[],
                   help="a checkout directory or a git revision (repeat to compare; default .)")
    p.add_argument("--journal", choices=("env", "default"), default="env")
    p.add_argument("--runs", type=int, default=20, help="warm runs per command")
    p.add_argument("--cold-runs", type=int, default=5)
    p.add_argument("--import-reps", type=int, default=15)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tag", default="")
    p.add_argument("--only", action="append", default=[], help="a command's name (repeat)")
    args = p.parse_args(argv)
    # directories made absolute (the runs happen in a private directory)
    builds = [str(Path(b).resolve()) if Path(b).is_dir() else b for b in args.build or ["."]]

    meta = journal_gen.ensure_journal(args.db)
    probe = next(p for p in meta["probes"] if p["kind"] == "write" and p["mtime_matches"])
    import sqlite3

    with sqlite3.connect(f"file:{args.db}?mode=ro", uri=True) as db:
        (cwd,) = db.execute("SELECT path FROM working_dir ORDER BY id LIMIT 1").fetchone()
    db.close()
    questions = {
        "history": ["query", "--history", "5"],
        "wfile": ["query", "--wfile", probe["path"]],
        "query-cwd": ["query", "--cwd", cwd, "--history", "5"],
        "lineage": ["lineage", probe["path"]],
        "status": ["status", probe["path"]],
        "stats-cwd": ["stats", "--cwd", cwd],
        "history-view": ["history"],
        "doctor": ["doctor"],
        "help": ["--help"],
    }
    if args.only:
        questions = {k: v for k, v in questions.items() if k in args.only}
    result: dict[str, Any] = {
        "benchmark": "cli_startup",
        "journal": {k: meta[k] for k in ("commands", "file_events")},
        "journal_found_by": args.journal,
        "builds": builds,
        "load_before": os.getloadavg(),
        "target_ms": TARGET_MS,
    }
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="shournal-startup-") as tmp:
        home = Path(tmp)
        env = dict(os.environ)
        # A private config, data and runtime dir: the query must not see
        # (or wait for) anything of the user running the benchmark.
        env.update(
            HOME=str(home), XDG_CONFIG_HOME=str(home / "config"),
            XDG_DATA_HOME=str(home / "data"), XDG_RUNTIME_DIR=str(home / "run"),
        )  # fmt: skip
        env.pop("SHOURNAL_DB_URL", None)
        if args.journal == "env":
            env["SHOURNAL_DB_URL"] = f"sqlite:///{args.db}"
        else:
            (home / "data" / "shournal").mkdir(parents=True, mode=0o700)
            (home / "data" / "shournal" / "journal.sqlite").symlink_to(args.db)
        os.chdir(home)
        commands: dict[str, list[str]] = {}
        for i, build in enumerate(builds):
            label = f"{i}:{build}"
            bindir = install(build, home / f"venv{i}")
            if i == 0:
                commands["python -c pass"] = [str(bindir / "python"), "-c", "pass"]
                # the floor of every command the typer CLI answers
                commands["python -c 'import typer'"] = [str(bindir / "python"), "-c",
                                                        "import typer"]  # fmt: skip
                if args.journal == "default":
                    # the commented default config.toml, as a first use writes it
                    subprocess.run([str(bindir / "python"), "-c",
                                    "from shournal.config import load_config; load_config()"],
                                   env=env, check=True)  # fmt: skip
            for q, qargs in questions.items():
                commands[f"{label} {q}"] = [str(bindir / "shournal"), *qargs]
        result["commands"] = {k: " ".join(v) for k, v in commands.items()}
        result["imports"] = {
            name: dict(zip(("total_ms", "top"), import_total(argv_, env, args.import_reps),
                           strict=True))
            for name, argv_ in commands.items()
        }  # fmt: skip
        modes = [("warm", args.runs)]
        if os.geteuid() == 0:
            modes.append(("cold", args.cold_runs))
        for mode, runs in modes:
            times: dict[str, list[dict[str, float]]] = {k: [] for k in commands}
            if mode == "warm":
                for argv_ in commands.values():
                    for _ in range(3):
                        run_once(argv_, env)
            for _ in range(runs):
                order = list(commands)
                rng.shuffle(order)
                for name in order:
                    if mode == "cold":
                        drop_caches()
                    times[name].append(run_once(commands[name], env))
            result[mode] = {name: summary(t) for name, t in times.items()}
    result["load_after"] = os.getloadavg()
    name = f"cli_startup-{args.tag}.json" if args.tag else "cli_startup.json"
    out = BENCH_DIR / "results" / name
    out.write_text(json.dumps(result, indent=1) + "\n")
    for name in result["imports"]:
        cells = [f"imports {result['imports'][name]['total_ms']:6.1f} ms"]
        for mode, _runs in modes:
            r = result[mode][name]
            cells.append(f"{mode} {r['median_ms']:6.1f} ms (user {r['user_ms']:.0f}, "
                         f"sys {r['sys_ms']:.0f})")  # fmt: skip
        print(f"{name:40} " + "  ".join(cells))
    before, after = result["load_before"], result["load_after"]
    print(f"load average {before[0]:.1f} -> {after[0]:.1f}; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
