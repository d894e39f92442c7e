"""`shournal search` (the interactive search) on the 1-million-command
journal (bench/journal_gen.py builds and caches it), as a user sees it:
a real process on a pseudo-terminal, real key presses.

* first screen: from the process's start to its first screen (the search
  line, the status line and the newest commands; drawn before
  prompt_toolkit is imported) on the terminal, Python's start-up
  included; and to the whole screen (prompt_toolkit's, with the details
  pane);
* keystroke: from a key's bytes written to the terminal to the first
  redraw after it (the list of matches found for the new text within the
  screen's per-key time; a search that has not filled its page goes on
  between keystrokes).  Before each key the screen is left to settle, so
  that a redraw of the previous key's search is not taken for this one's.

The build is installed as `make install` installs it (a fresh venv, not
editable; bench/cli_startup.py's install).

Targets (issue 30): first screen <= 150 ms, each keystroke <= 30 ms.

    nice .venv/bin/python bench/search_tui.py --tag NAME

writes results/search_tui-NAME.json.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

import common  # noqa: E402
import journal_gen  # noqa: E402
from cli_startup import install  # noqa: E402

FIRST_SCREEN_MS, KEY_MS = 150, 30

# What is typed, a key at a time: (name, keys).  ^S cycles the text mode
# (substring -> fuzzy), ^R the filter, ^U clears the line.
SEQUENCES: list[tuple[str, list[bytes]]] = [
    ("git commit", [bytes([c]) for c in b"git commit"]),
    ("snakemake", [bytes([c]) for c in b"snakemake"]),
    ("w:results", [bytes([c]) for c in b"w:results"]),
    ("r:params.yaml", [bytes([c]) for c in b"r:params.yaml"]),
    ("xqzv (no match)", [bytes([c]) for c in b"xqzv"]),
    ("fuzzy gtcm", [b"\x13", *[bytes([c]) for c in b"gtcm"]]),
    ("filter cycle", [b"\x12"] * 5),
]


class Screen:
    """``shournal search`` on a new pty (its controlling terminal)."""

    def __init__(self, argv: list[str], env: dict[str, str], rows: int, cols: int) -> None:
        self.t0 = time.perf_counter()
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its /dev/tty
            import fcntl
            import struct
            import termios

            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execve(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        self.seen = b""

    def read_until(self, marker: bytes, timeout: float = 30) -> float:
        """Seconds from the start until ``marker`` has appeared."""
        deadline = time.monotonic() + timeout
        while marker not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {marker!r} after {timeout}s: {self.seen[-400:]!r}")
            if select.select([self.fd], [], [], left)[0]:
                self.seen += os.read(self.fd, 65536)
        return time.perf_counter() - self.t0

    def settle(self, quiet: float = 0.05, longest: float = 5.0) -> None:
        """Read until nothing came for ``quiet`` seconds (at most ``longest``)."""
        end = time.monotonic() + longest
        while time.monotonic() < end:
            if not select.select([self.fd], [], [], quiet)[0]:
                return
            os.read(self.fd, 65536)

    def schedstat(self) -> tuple[float, float]:
        """Seconds the process has run on a CPU, and waited for one
        (/proc/PID/schedstat, ns): the load of a shared machine lengthens
        the wall times, hardly the first."""
        with open(f"/proc/{self.pid}/schedstat") as f:
            on_cpu, waited, _slices = f.read().split()
        return int(on_cpu) / 1e9, int(waited) / 1e9

    def key(self, data: bytes) -> tuple[float, float, float]:
        """Seconds from writing ``data`` to the first byte of the redraw,
        and the seconds the process ran on a CPU and waited for one
        meanwhile (on a busy machine the wall time less that wait is what
        a quiet one would show, roughly)."""
        cpu0, wait0 = self.schedstat()
        t = time.perf_counter()
        os.write(self.fd, data)
        if not select.select([self.fd], [], [], 10)[0]:
            raise TimeoutError(f"no redraw after {data!r}")
        took = time.perf_counter() - t
        cpu1, wait1 = self.schedstat()
        os.read(self.fd, 65536)
        return took, cpu1 - cpu0, wait1 - wait0

    def close(self) -> None:
        os.write(self.fd, b"\x1b")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
            if done:
                break
            if select.select([self.fd], [], [], 0.05)[0]:
                try:
                    os.read(self.fd, 65536)
                except OSError:
                    pass
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


def stats_ms(values: list[float]) -> dict[str, Any]:
    ms = sorted(v * 1000 for v in values)
    return {
        "n": len(ms),
        "median": statistics.median(ms),
        "p90": ms[min(len(ms) - 1, int(len(ms) * 0.9))],
        "max": ms[-1],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", type=Path, default=journal_gen.DEFAULT_DB)
    p.add_argument("--build", default=".", help="a checkout directory or a git revision")
    p.add_argument("--reps", type=int, default=10, help="first screens and typing rounds")
    p.add_argument("--rows", type=int, default=40)
    p.add_argument("--cols", type=int, default=160)
    common.results_args(p)
    args = p.parse_args(argv)

    t_start = time.time()
    journal_gen.ensure_journal(args.db)
    db = args.db
    venv = Path(os.environ.get("SHOURNAL_BENCH_CACHE", "/var/tmp/shournal-bench")) / "search-venv"
    bindir = install(str(REPO) if args.build == "." else args.build, venv)
    shournal = str(bindir / "shournal")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "SHOURNAL_DB_URL": f"sqlite:///{db}",
    }
    python = str(bindir / "python")
    first: list[float] = []
    full: list[float] = []
    full_cpu: list[float] = []
    first_cpu: list[float] = []
    first_wait: list[float] = []
    floor: list[float] = []
    typed: dict[str, list[float]] = {name: [] for name, _ in SEQUENCES}
    typed_cpu: dict[str, list[float]] = {name: [] for name, _ in SEQUENCES}
    typed_wait: dict[str, list[float]] = {name: [] for name, _ in SEQUENCES}
    load_start = os.getloadavg()
    for rep in range(args.reps):
        t = time.perf_counter()
        os.spawnv(os.P_WAIT, python, [python, "-c", "pass"])
        floor.append(time.perf_counter() - t)
        screen = Screen([shournal, "search"], env, args.rows, args.cols)
        try:
            first.append(screen.read_until(b"matches |"))
            cpu, waited = screen.schedstat()
            first_cpu.append(cpu)
            first_wait.append(waited)
            full.append(screen.read_until(b"session:"))
            full_cpu.append(screen.schedstat()[0])
            screen.settle()
            for name, keys in SEQUENCES:
                for k in keys:
                    took, cpu, waited = screen.key(k)
                    typed[name].append(took)
                    typed_cpu[name].append(cpu)
                    typed_wait[name].append(waited)
                    screen.settle()
                screen.key(b"\x15")  # ^U: an empty line again
                screen.settle()
        finally:
            screen.close()
        common.log(f"round {rep + 1}: first screen {first[-1] * 1000:.1f} ms")

    result = {
        "journal": str(db),
        "first_screen_ms": stats_ms(first),
        "first_screen_cpu_ms": stats_ms(first_cpu),
        "full_screen_ms": stats_ms(full),
        "full_screen_cpu_ms": stats_ms(full_cpu),
        "first_screen_runqueue_wait_ms": stats_ms(first_wait),
        "python_pass_ms": stats_ms(floor),
        "keystroke_ms": {name: stats_ms(v) for name, v in typed.items()},
        "keystroke_cpu_ms": {name: stats_ms(v) for name, v in typed_cpu.items()},
        "keystroke_runqueue_wait_ms": {name: stats_ms(v) for name, v in typed_wait.items()},
        # each key's wall time less the time the process waited for a CPU
        "keystroke_less_wait_ms": {
            name: stats_ms([t - w for t, w in zip(v, typed_wait[name], strict=True)])
            for name, v in typed.items()
        },
        "all_keystrokes_ms": stats_ms([v for vs in typed.values() for v in vs]),
        "targets_ms": {"first_screen": FIRST_SCREEN_MS, "keystroke": KEY_MS},
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
    }
    print(f"first screen: median {result['first_screen_ms']['median']:.1f} ms, "
          f"CPU {result['first_screen_cpu_ms']['median']:.1f} ms, "
          f"waited for a CPU {result['first_screen_runqueue_wait_ms']['median']:.1f} ms "
          f"(python -c pass {result['python_pass_ms']['median']:.1f} ms); "
          f"whole screen (prompt_toolkit) {result['full_screen_ms']['median']:.1f} ms, "
          f"CPU {result['full_screen_cpu_ms']['median']:.1f} ms")  # fmt: skip
    for name, s in result["keystroke_ms"].items():
        c = result["keystroke_cpu_ms"][name]
        q = result["keystroke_less_wait_ms"][name]
        print(f"  {name:18} median {s['median']:6.1f}  p90 {s['p90']:6.1f}  max {s['max']:6.1f} ms"
              f"  CPU median {c['median']:5.1f}  less run-queue wait: median {q['median']:5.1f}"
              f"  p90 {q['p90']:5.1f} ms")  # fmt: skip
    print(f"load average: start {load_start[0]:.1f}, end {result['loadavg_end'][0]:.1f}")
    common.write_run(args, "search_tui", t_start, {"result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
