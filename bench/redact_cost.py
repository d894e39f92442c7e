#!/usr/bin/env python3
"""The CPU secret redaction (shournal.redact) adds to every recorded command
line, and to an archived script.

What the recorder runs per line: ``shournal.redact.redact_text`` with the
compiled patterns of the config (``patterns_for``, cached), exactly as
``shournal.capture.listener.admit`` calls it.  Measured in-process with
``time.process_time`` over many repetitions of each line class (the
regexes compiled once, before timing):

* ``plain``: typical lines holding none of the patterns' trigger
  substrings (the fast pre-check alone: one ``lower()`` and substring
  tests);
* ``near``: lines holding a trigger but no secret (``ssh -p 22``, a URL
  without a password, ``mysql -p db``): the regexes run and find nothing;
* ``secret``: lines with one or two secrets (replaced and counted);
* ``long``: a 4 KiB pasted line without a secret;
* ``user``: the plain lines with one user pattern added (user patterns
  have no pre-check: their regex always runs);
* ``script``: a 100 KiB shell script (``redact_bytes``), per script.

    .venv/bin/python bench/redact_cost.py [--repeat 20000] [--json bench/results/redact_cost.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from shournal import redact

PLAIN = [
    "ls -la", "cd ~/projects/paper2", "git status", "git commit -am 'fix the plot axis'",
    "make -j2", "python3 analyze.py --input data/raw.csv --out results/", "vim README.md",
    "grep -rn TODO src/ | head", "docker run --rm -it debian:12 bash", "cat /etc/os-release",
    "tar xzf archive.tar.gz -C /tmp/x", "Rscript fig3.R", "htop", "du -sh * | sort -h",
    "git log --oneline -20", "pip install -e .", "snakemake -j4 results/all.txt",
    "find . -name '*.py' -newer setup.cfg", "rsync -av data/ backup:/srv/data/", "echo $PATH",
]
NEAR = [
    "mkdir -p out/figs", "ssh -p 22 alice@login.cluster", "curl -fsSL https://example.org/x.sh",
    "mysql -p shop", "scp -P 2222 f host:", "git clone https://github.com/a/b.git",
    "passwd", "grep -r password config/", "cp -p a b", "wget https://x.org/f.tar.gz",
]
SECRET = [
    "export GH_TOKEN=ghp_Qq11Ww22Ee33Rr44Tt55Yy66Uu77Ii88Oo99",
    "curl -u alice:hunter2 https://api.example.org/v1",
    "mysql -uroot -pTopSecret shop < dump.sql",
    "psql postgresql://app:s3cret@db.internal/prod -c 'select 1'",
    "STRIPE_KEY=sk_live_51HyZxWvUtSrQpOnMlKjIh GH=ghp_Qq11Ww22Ee33Rr44Tt55Yy66Uu77Ii88Oo99 ./pay",
]
LONG = ["for f in " + " ".join(f"data/run{i:04d}/part.csv" for i in range(200))
        + "; do wc -l $f; done"]


def _script() -> bytes:
    body = "".join(f'echo "step {i}: processing $1/{i}.dat" && cut -f2 "$1/{i}.dat" | sort -u\n'
                   for i in range(1600))
    data = ("#!/bin/sh\nset -eu\nmysql -uroot -pTopSecret db < q.sql\n" + body).encode()
    return data[: 100 * 1024]


def per_call_us(fn, items, repeat: int) -> float:
    """Median over 5 rounds of the CPU per call, in microseconds."""
    rounds = []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(repeat):
            for it in items:
                fn(it)
        rounds.append((time.process_time() - t0) / (repeat * len(items)) * 1e6)
    return statistics.median(rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=20000)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    builtin = redact.patterns_for(())
    user = redact.patterns_for((("acme", r"acme_[0-9a-f]{32}"),))
    as_recorded = lambda text: redact.redact_text(text, redact.patterns_for(()))  # noqa: E731
    for line in (*PLAIN, *NEAR, *LONG):
        assert redact.redact_text(line, builtin) == (line, {}), line
    for line in SECRET:
        assert redact.redact_text(line, builtin)[1], line
    script = _script()
    assert redact.redact_bytes(script, builtin)[1] == {"password": 1}

    r = args.repeat
    results = {
        "plain": per_call_us(as_recorded, PLAIN, r),
        "near": per_call_us(as_recorded, NEAR, r),
        "secret": per_call_us(as_recorded, SECRET, r),
        "long_4k": per_call_us(as_recorded, LONG, max(r // 20, 1)),
        "user_pattern_plain": per_call_us(lambda t: redact.redact_text(t, user), PLAIN, r),
        "script_100k": per_call_us(lambda d: redact.redact_bytes(d, builtin), [script],
                                   max(r // 2000, 5)),
    }
    out = {
        "unit": "microseconds of CPU per call (median of 5 rounds)",
        "repeat": r,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "load": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d"),
        "results": {k: round(v, 2) for k, v in results.items()},
    }
    for k, v in results.items():
        print(f"{k:20s} {v:9.2f} us")
    print(f"load {out['load']:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
