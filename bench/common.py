"""Shared machinery of the benchmarks (see bench/README.md).

Method (as in the paper): the same command is run unmonitored ("plain"),
monitored by the full pipeline ("full": `shournal run`; the holder takes
stat, path and partial hash of every event, the real listener filters and
stores) and the "floor" (the helper, namespace and mount marks are in
place, but the holder discards every event right after reading it:
SHOURNAL_BENCH_FLOOR=1, and bench/null_listener.c as the listener).  The
floor separates the kernel's price from ours.  Optionally "relay": the
holder does all its work and bench/null_listener.c receives the records
(full minus Python).

Each repetition runs the variants once, in an order drawn at random
(the paper's alternating pairs, with the floor as a third member); ratios
are taken within a repetition (full/plain, floor/plain) and their median
is reported.  Cold runs drop the page cache before every run; warm runs
only `sync` and are preceded by one discarded warm-up run per variant.

The timed part is the command itself, measured from inside the observed
bash with $EPOCHREALTIME (no fork, no extra file events).  The wall time
of the whole `shournal run` (helper set-up, listener start, storing the
command) is recorded next to it as "total".

Everything runs as an unprivileged user (default `shournal-bench`, created
if missing) through `runuser`; the orchestration itself needs root (drop
caches, loop mount, apt).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pwd
import random
import resource
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("SHOURNAL_BENCH_CACHE", "/var/tmp/shournal-bench"))
DEFAULT_USER = "shournal-bench"
DEFAULT_RESULTS = BENCH_DIR / "results"
SHOURNAL = os.environ.get("SHOURNAL_BIN", "/usr/local/bin/shournal")
VENV_PYTHON = "/usr/local/lib/shournal/venv/bin/python"
VARIANTS = ("plain", "full", "floor")
# Optional: the holder's work without Python (bench/null_listener.c receives
# the records): how the price of "full" splits between C and Python.
ALL_VARIANTS = (*VARIANTS, "relay")


# ------------------------------------------------------------------ helpers


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(cmd: Sequence[str] | str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    if isinstance(cmd, str):
        cmd = ["bash", "-c", cmd]
    return subprocess.run(list(cmd), check=check, **kw)


# Passed on to a benchmark user's commands run with as_user() when set: a
# development build (a setuid copy of the helper, the work tree's listener).
USER_ENV_PASS = ("SHOURNAL_SUID_PATH", "SHOURNAL_LISTENER", "PYTHONPATH", "SHOURNAL_PRELOAD_LIB")


def user_env(home: Path, user: str) -> list[str]:
    """NAME=VALUE of the clean environment a benchmark user's commands get."""
    env = {"HOME": str(home), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
           "PATH": "/usr/local/bin:/usr/bin:/bin", "XDG_RUNTIME_DIR": str(home / "run")}
    env.update({k: os.environ[k] for k in USER_ENV_PASS if k in os.environ})
    return [f"{k}={v}" for k, v in env.items()]


def as_user(user: str, home: Path) -> list[str]:
    """The argv prefix running a command as ``user`` with only :func:`user_env`."""
    return ["runuser", "-u", user, "--", "env", "-i", *user_env(home, user)]


def timed(argv: Sequence[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """(wall seconds, result) of running ``argv`` in ``cwd`` to its end; a
    failure ends the benchmark with the command's output."""
    start = time.perf_counter()
    res = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if res.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv[-6:])}: {res.stdout.strip()} "
                         f"{res.stderr.strip()}")
    return elapsed, res


def children_cpu() -> float:
    """CPU seconds (user + system) of every reaped child so far, exact: the
    kernel's RUSAGE_CHILDREN."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def require_root() -> None:
    if os.geteuid() != 0:
        sys.exit("the benchmarks need root (drop_caches, loop mount, runuser, apt-get)")


def sync() -> None:
    os.sync()


def drop_caches() -> None:
    """`sync; echo 3 > /proc/sys/vm/drop_caches`"""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def median(values: Sequence[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def pct(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"


def fmt_s(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


# -------------------------------------------------------------- bench user


@dataclass
class User:
    name: str
    uid: int
    gid: int
    home: str


def ensure_user(name: str = DEFAULT_USER) -> User:
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        log(f"creating user {name}")
        sh(["useradd", "-m", "-s", "/bin/bash", name])
        pw = pwd.getpwnam(name)
    return User(pw.pw_name, pw.pw_uid, pw.pw_gid, pw.pw_dir)


def bench_home(
    prefix: str, uid: int, gid: int, subdirs: Sequence[str] = ("run", "work"),
    files: dict[str, str] | None = None,
) -> Path:
    """A fresh home under /var/tmp owned by uid:gid, with ``subdirs`` and
    ``files`` (relative path: text) in it; its run/ is private, as the
    helper requires of the runtime directory."""
    home = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    for sub in subdirs:
        (home / sub).mkdir()
    for rel, text in (files or {}).items():
        (home / rel).write_text(text)
    subprocess.run(["chown", "-R", f"{uid}:{gid}", str(home)], check=True)
    home.chmod(0o755)
    (home / "run").chmod(0o700)
    return home


def chown_tree(path: Path, user: User) -> None:
    sh(["chown", "-R", f"{user.uid}:{user.gid}", str(path)])


def user_dir(path: Path, user: User, mode: int = 0o755) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, user.uid, user.gid)
    os.chmod(path, mode)
    return path


# --------------------------------------------------------------- workspace


def _mounted(target: Path) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == str(target) for line in f)


def ensure_workspace(user: User, kind: str = "loop", size: str = "40G") -> Path:
    """The directory the workloads live in.

    kind "loop" (default): a journaled ext4 image mounted through a loop
    device with direct I/O (no double caching, drop_caches reaches the
    disk).  Why not the root file system of the benchmark VM: it is ext4
    *without a journal*, where creating files right after deleting many
    makes ext4's inode allocator skip every "recently deleted" inode
    (recently_deleted() in find_inode_bit), which made `cp -a` of the tree
    5-8x slower for a minute after each `rm -rf` -- an artefact that
    would swamp what we measure.

    kind "dir": a plain directory under the cache (for machines whose
    file system is fine).
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    if kind == "dir":
        return user_dir(CACHE / "work", user)
    target = CACHE / "fs"
    if _mounted(target):
        return target
    image = CACHE / "ext4.img"
    if not image.exists():
        log(f"creating {size} sparse ext4 image {image}")
        sh(["truncate", "-s", size, str(image)])
        sh(["mkfs.ext4", "-q", "-F", "-L", "shournal-bench", "-E", "nodiscard", str(image)])
    target.mkdir(exist_ok=True)
    loop = sh(
        ["losetup", "--find", "--show", "--direct-io=on", str(image)],
        capture_output=True,
        text=True,
    ).stdout.strip()
    sh(["mount", "-o", "discard", loop, str(target)])
    os.chown(target, user.uid, user.gid)
    log(f"mounted {image} ({loop}) on {target}")
    return target


# ----------------------------------------------------------- floor listener


def build_null_listener(user: User) -> Path:
    src = BENCH_DIR / "null_listener.c"
    out_dir = CACHE / "bin"
    out_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(out_dir, 0o755)
    out = out_dir / "null_listener"
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        sh(["cc", "-O2", "-Wall", "-Wextra", "-I", str(BENCH_DIR.parent / "native"), "-o",
            str(out), str(src)])
        os.chmod(out, 0o755)
    return out


def build_floor_helper() -> Path:
    """The setuid helper built with --discard-events (native/Makefile's
    bench-helper), as a setuid-root copy for the floor variant: the
    installed helper does not take that switch."""
    build = CACHE / "native"
    sh(["make", "-s", "-C", str(BENCH_DIR.parent / "native"), f"BUILD={build}", "bench-helper"])
    out_dir = CACHE / "bin"
    out_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(out_dir, 0o755)
    out = out_dir / "shournal-suid-floor"
    shutil.copy2(build / "bench" / "shournal-suid", out)
    os.chown(out, 0, 0)
    os.chmod(out, 0o4755)
    return out


def write_cpu_listener(out_path: Path) -> Path:
    """A listener that runs the real one under /usr/bin/time: wall, user
    and system seconds of the listener go to out_path."""
    script = CACHE / "bin" / "cpu_listener"
    script.write_text(
        "#!/bin/sh\n"
        f'exec /usr/bin/time -o "$SHOURNAL_BENCH_CPU_OUT" -f "%e %U %S" {VENV_PYTHON} '
        "-m shournal.capture.listener\n"
    )
    os.chmod(script, 0o755)
    return script


def write_profile_listener(out_path: Path) -> Path:
    """A listener that runs the real one under cProfile (diagnostics)."""
    script = CACHE / "bin" / "profile_listener"
    script.write_text(
        "#!/bin/sh\n"
        f'exec {VENV_PYTHON} -m cProfile -o "{out_path}.$$" -m shournal.capture.listener\n'
    )
    os.chmod(script, 0o755)
    return script


# ------------------------------------------------------------------ config

CONFIG_TEMPLATE = """\
# Written by bench/common.py: every event is processed and stored.
[write_events]
max_event_count = 0
exclude_hidden = false
exclude_paths = [{write_excludes}]

[read_events]
max_event_count = 0
exclude_hidden = false
include_paths = [{read_includes}]
"""


def _toml_list(paths: Sequence[str]) -> str:
    return ", ".join(json.dumps(p) for p in paths)


# ------------------------------------------------------------------ runner


@dataclass
class Bench:
    """One benchmark setting: who runs what where."""

    user: User
    work: Path  # the workspace (loop-mounted ext4)
    name: str
    read_includes: Sequence[str] = ("$HOME",)
    nofile: int | None = None  # soft RLIMIT_NOFILE for every variant; None: inherited
    profile: bool = False  # run the full listener under cProfile
    listener_cpu: bool = False  # record the full listener's CPU time
    cpu_share: bool = False  # sample every run with `perf record -a -g`
    state: Path = field(init=False)

    def __post_init__(self) -> None:
        self.state = user_dir(self.work / "state" / self.name, self.user, 0o700)
        self.cfg_home = user_dir(self.state / "config", self.user, 0o700)
        self.runtime = user_dir(self.state / "run", self.user, 0o700)
        # The listener leaves warnings here (shournal._paths.runtime_dir());
        # `shournal run` does not create it, and without it they are lost.
        user_dir(self.runtime / "shournal", self.user, 0o700)
        self.tmp = user_dir(self.state / "tmp", self.user, 0o700)
        self.null_listener = build_null_listener(self.user)
        self.floor_helper = build_floor_helper()
        cfg_dir = user_dir(self.cfg_home / "shournal", self.user, 0o700)
        (cfg_dir / "config.toml").write_text(
            CONFIG_TEMPLATE.format(
                write_excludes=_toml_list([str(self.tmp)]),
                read_includes=_toml_list(list(self.read_includes)),
            )
        )
        os.chown(cfg_dir / "config.toml", self.user.uid, self.user.gid)
        self.counter = 0

    # The environment of every variant: identical except for what makes the
    # variant.
    def base_env(self, data_home: Path) -> dict[str, str]:
        return {
            "HOME": self.user.home,
            "USER": self.user.name,
            "LOGNAME": self.user.name,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "XDG_CONFIG_HOME": str(self.cfg_home),
            "XDG_DATA_HOME": str(data_home),
            "XDG_RUNTIME_DIR": str(self.runtime),
            **{k: os.environ[k] for k in USER_ENV_PASS if k in os.environ},
        }

    def as_user(self, argv: Sequence[str], env: dict[str, str], cwd: Path) -> list[str]:
        cmd = ["runuser", "-u", self.user.name, "--", "env", "-i"]
        cmd += [f"{k}={v}" for k, v in env.items()]
        if self.nofile:
            cmd += ["prlimit", f"--nofile={self.nofile}:"]
        return cmd + ["sh", "-c", f"cd {shlex.quote(str(cwd))} && exec \"$@\"", "sh", *argv]

    def user_run(self, argv: Sequence[str], cwd: Path, check: bool = True, **kw):
        """Run a preparation step as the bench user (never observed)."""
        env = self.base_env(self.state / "data-prep")
        return sh(self.as_user(argv, env, cwd), check=check, **kw)

    def run(self, variant: str, body: str, cwd: Path, *, run_opts: Sequence[str] = (),
            data_home: Path | None = None) -> dict:
        """Run `body` (a bash snippet) once as `variant`; return the record.
        run_opts: options of `shournal run` (e.g. --apparatus); data_home:
        the journal's XDG_DATA_HOME, kept as it is (default: a fresh one)."""
        self.counter += 1
        n = self.counter
        timefile = self.tmp / f"time.{n}"
        if data_home is None:
            data_home = self.state / f"data.{n}"
            if data_home.exists():
                shutil.rmtree(data_home)
            user_dir(data_home, self.user, 0o700)
        env = self.base_env(data_home)
        wrapped = (
            f"__s=$EPOCHREALTIME; {body}\n__rc=$?; __e=$EPOCHREALTIME; "
            f"printf '%s %s %s\\n' \"$__s\" \"$__e\" \"$__rc\" > {shlex.quote(str(timefile))}"
        )
        argv: list[str] = ["bash", "-c", wrapped]
        stats = self.tmp / f"null.{n}"
        prof = self.tmp / f"prof.{n}"
        cpu_out = self.tmp / f"cpu.{n}"
        if variant == "full" and self.profile:
            env["SHOURNAL_LISTENER"] = str(write_profile_listener(prof))
        elif variant == "full" and self.listener_cpu:
            env["SHOURNAL_LISTENER"] = str(write_cpu_listener(cpu_out))
            env["SHOURNAL_BENCH_CPU_OUT"] = str(cpu_out)
        if variant in ("floor", "relay"):
            env["SHOURNAL_LISTENER"] = str(self.null_listener)
            env["SHOURNAL_NULL_STATS"] = str(stats)
            if variant == "floor":
                env["SHOURNAL_BENCH_FLOOR"] = "1"  # the holder discards every event
                env["SHOURNAL_SUID_PATH"] = str(self.floor_helper)
        if variant in ("full", "floor", "relay"):
            argv = [SHOURNAL, "run", *run_opts, "--", *argv]
        rec: dict = {"variant": variant, "run": n, "load_before": loadavg()}
        perf = PerfRecorder(self.tmp / f"perf.{n}") if self.cpu_share else None
        t0 = time.perf_counter()
        proc = sh(self.as_user(argv, env, cwd), check=False, capture_output=True, text=True)
        rec["total_s"] = time.perf_counter() - t0
        if perf:
            rec["cpu_share"] = perf.stop()
        rec["exit"] = proc.returncode
        if proc.stderr.strip():
            rec["stderr"] = proc.stderr.strip()[-2000:]
        try:
            start, end, rc = timefile.read_text().split()
            rec["inner_s"] = float(end) - float(start)
            rec["rc"] = int(rc)
            timefile.unlink()
        except (OSError, ValueError):
            rec["inner_s"] = None
            rec["rc"] = None
        warnings = self.runtime / "shournal" / "warnings"
        if warnings.exists():
            rec["listener_warnings"] = warnings.read_text().strip().splitlines()
            warnings.unlink()
        if variant in ("floor", "relay"):
            try:
                ev, ovf, err = stats.read_text().split()
                rec["floor_events"], rec["floor_overflows"], rec["floor_fd_errors"] = (
                    int(ev),
                    int(ovf),
                    int(err),
                )
                stats.unlink()
            except (OSError, ValueError):
                rec["floor_events"] = None
        if variant == "full" and self.listener_cpu and cpu_out.exists():
            try:
                wall, user, system = cpu_out.read_text().split()[-3:]
                rec["listener_wall_s"], rec["listener_user_s"], rec["listener_sys_s"] = (
                    float(wall),
                    float(user),
                    float(system),
                )
                cpu_out.unlink()
            except ValueError:
                pass
        if variant == "full":
            rec["journal"] = data_home / "shournal" / "journal.sqlite"
            if self.profile:
                rec["profiles"] = sorted(str(p) for p in self.tmp.glob(f"prof.{n}.*"))
        rec["data_home"] = data_home
        return rec

    def discard_data(self, rec: dict) -> None:
        shutil.rmtree(rec.pop("data_home"), ignore_errors=True)
        rec.pop("journal", None)


# ------------------------------------------------------- CPU attribution

# Who a perf sample belongs to, by the task's name (comm, 15 characters).
_SHOURNAL_COMMS = {"shournal-suid": "holder", "shournal-listen": "listener",
                   "null_listener": "listener", "shournal": "cli"}


class PerfRecorder:
    """`perf record -a -g` around one run (--cpu-share).

    Wall times vary by +-10% between runs on a shared VM (a CPU-bound loop
    alone does), so a 2% overhead of a 60 s build cannot be resolved by a
    few repetitions.  Inside one monitored run, though, every CPU sample
    says who used the CPU: the holder (comm shournal-suid), the listener,
    and the kernel's fanotify work in the workload's own processes (a
    `fsnotify` frame in the sample's call chain: the event made at each
    close).  The shares of those in the run's busy samples do not depend
    on how fast the machine happened to be; for a CPU-bound workload
    (`make -j2` on 2 CPUs) they are what the monitored run had to share
    its CPUs with.  perf's own cost applies to every variant alike; the
    wall times of such runs are still reported, but are not the paper's
    figures."""

    def __init__(self, out: Path, freq: int = 499) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            ["perf", "record", "-a", "-g", "-F", str(freq), "-q", "-o", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)  # perf's set-up, outside the run

    def stop(self) -> dict:
        self.proc.send_signal(2)
        self.proc.wait(timeout=120)
        try:
            return perf_shares(self.out)
        finally:
            self.out.unlink(missing_ok=True)
            Path(f"{self.out}.old").unlink(missing_ok=True)


def perf_shares(data: Path) -> dict:
    """Samples of a `perf record -a -g` file by owner: idle, holder,
    listener, cli (`shournal run` itself), perf, fsnotify (the workload's
    processes inside the kernel's fanotify event code) and workload (all
    other busy samples, kernel threads included); plus the holder's and
    fsnotify's share of the busy samples of the workload's time."""
    counts = dict.fromkeys(
        ("idle", "holder", "listener", "cli", "perf", "fsnotify", "workload"), 0)
    proc = subprocess.Popen(["perf", "script", "-i", str(data), "-F", "comm,ip,sym"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            errors="replace")
    assert proc.stdout is not None
    owner, chain = None, False

    def close() -> None:
        if owner == "workload" and chain:
            counts["fsnotify"] += 1
        elif owner is not None:
            counts[owner] += 1

    for line in proc.stdout:
        if line.startswith("\t"):  # a frame of the current sample's call chain
            if owner == "workload" and line.split()[-1:] == ["fsnotify"]:
                chain = True
        elif line.strip():  # a sample's first line: its comm (may contain spaces)
            close()
            comm = line.strip()
            owner = ("idle" if comm == "swapper" else "perf" if comm == "perf"
                     else _SHOURNAL_COMMS.get(comm, "workload"))
            chain = False
    close()
    proc.wait()
    base = counts["workload"] + counts["fsnotify"]
    if base:
        counts["holder_pct"] = 100 * counts["holder"] / base
        counts["fsnotify_pct"] = 100 * counts["fsnotify"] / base
        counts["listener_pct"] = 100 * counts["listener"] / base
    return counts


# --------------------------------------------------------------- journal


def journal_stats(db: Path, prefixes: dict[str, tuple[int, str]] | None = None) -> dict:
    """Counts and size of a journal written by one `shournal run`.

    prefixes: name -> (kind, directory prefix); counts events of that kind
    below the prefix (0 = write, 1 = read).
    """
    out: dict = {"exists": db.exists()}
    if not db.exists():
        return out
    con = sqlite3.connect(db)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        out["commands"] = con.execute("SELECT count(*) FROM command").fetchone()[0]
        row = con.execute(
            "SELECT coalesce(sum(dropped_writes),0), coalesce(sum(dropped_reads),0), "
            "coalesce(sum(lost_events),0) FROM command"
        ).fetchone()
        out["dropped_writes"], out["dropped_reads"], out["lost_events"] = row
        if out["lost_events"]:
            # by reason (shournal.record.LOST_REASONS)
            cols = [r[1] for r in con.execute("PRAGMA table_info(command)")
                    if r[1].startswith("lost_") and r[1] != "lost_events"]
            sums = con.execute(
                "SELECT " + ", ".join(f"coalesce(sum({c}),0)" for c in cols) + " FROM command"
            ).fetchone()
            out["lost_by_reason"] = {c[5:]: n for c, n in zip(cols, sums, strict=True) if n}
        # Schema 3: writes in write_event; a read is a read_event link to a
        # deduplicated read_file version.
        out["writes"] = con.execute("SELECT count(*) FROM write_event").fetchone()[0]
        out["reads"] = con.execute("SELECT count(*) FROM read_event").fetchone()[0]
        out["file_events"] = out["writes"] + out["reads"]
        out["read_files"] = con.execute("SELECT count(*) FROM read_file").fetchone()[0]
        for name, (kind, prefix) in (prefixes or {}).items():
            pre = prefix.rstrip("/").encode() + b"/"
            events = (
                "write_event e"
                if kind == 0
                else "read_event l JOIN read_file e ON e.id = l.read_file_id"
            )
            out[name] = con.execute(
                f"SELECT count(*) FROM {events} JOIN directory d ON d.id = e.directory_id "
                "WHERE substr(d.path, 1, ?) = ?",
                (len(pre), pre),
            ).fetchone()[0]
        try:
            out["bytes_by_object"] = dict(
                con.execute(
                    "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
                )
            )
        except sqlite3.Error:
            pass
    finally:
        con.close()
    # We are root: side files SQLite created must stay the user's.
    st = db.stat()
    for suffix in ("-wal", "-shm", "-journal"):
        side = Path(str(db) + suffix)
        if side.exists():
            os.chown(side, st.st_uid, st.st_gid)
    size = db.stat().st_size
    for suffix in ("-wal", "-journal"):
        extra = Path(str(db) + suffix)
        if extra.exists():
            size += extra.stat().st_size
    out["bytes"] = size
    out["bytes_per_event"] = size / out["file_events"] if out["file_events"] else None
    return out


# ------------------------------------------------------------- the method


def run_groups(
    bench: Bench,
    *,
    cache: str,
    reps: int,
    body: str,
    cwd: Path,
    prepare: Callable[[], None],
    check_full: Callable[[dict], None],
    rng: random.Random,
    variants: Sequence[str] = VARIANTS,
) -> list[dict]:
    """Run `reps` repetitions of every variant in random order.

    prepare(): restores the starting state before each run (untimed,
    unobserved).  check_full(rec): adds journal checks to a full run's
    record (it may keep or discard the journal).
    """
    assert cache in ("cold", "warm")
    records: list[dict] = []

    def one(variant: str, rep: int, pos: int) -> dict:
        prepare()
        if cache == "cold":
            drop_caches()
        else:
            sync()
        rec = bench.run(variant, body, cwd)
        rec.update(cache=cache, rep=rep, position=pos)
        if variant == "full":
            check_full(rec)
        if "data_home" in rec:
            bench.discard_data(rec)
        return rec

    if cache == "warm":
        for v in variants:
            log(f"{bench.name} warm-up: {v}")
            one(v, -1, 0)
    for rep in range(reps):
        order = list(variants)
        rng.shuffle(order)
        for pos, v in enumerate(order):
            rec = one(v, rep, pos)
            log(
                f"{bench.name} {cache} rep {rep + 1}/{reps} {v:5}: inner {fmt_s(rec['inner_s'])} s"
                f"  total {rec['total_s']:.3f} s  load {rec['load_before']:.2f}"
                + (f"  {rec['valid_note']}" if rec.get("valid_note") else "")
            )
            records.append(rec)
    return records


def judge_full(
    rec: dict, js: dict, checks: bool, note: Callable[[], str], profile: bool
) -> None:
    """Mark a full run valid when the journal (``js``, journal_stats) holds
    it, lost and dropped no event and the benchmark's own ``checks`` hold;
    ``valid_note`` says what was stored (``note``, asked only when the
    journal exists), after "INVALID: " when not valid."""
    rec["journal_stats"] = js
    ok = bool(
        js.get("exists")
        and js.get("lost_events") == 0
        and js.get("dropped_writes") == 0
        and js.get("dropped_reads") == 0
        and checks
    )
    rec["valid"] = ok
    text = note() if js.get("exists") else "nothing stored"
    rec["valid_note"] = text if ok else "INVALID: " + text
    if profile and rec.get("profiles"):
        rec["profile_top"] = profile_report(rec["profiles"])


def print_problems(records: list[dict]) -> None:
    """One line for each full run judge_full found invalid."""
    for r in records:
        if r["variant"] == "full" and not r.get("valid"):
            print(f"  problem: {r['cache']} rep {r['rep']}: {r.get('valid_note')} "
                  f"{r.get('listener_warnings', '')} {r.get('stderr', '')}")


def run_caches(
    bench: Bench,
    args: argparse.Namespace,
    *,
    body: str,
    cwd: Path,
    prepare: Callable[[], None],
    check_full: Callable[[dict], None],
) -> tuple[list[dict], list[dict]]:
    """run_groups() for every cache mode of --cache in turn, with one rng
    seeded by --seed; returns all records and one summary per mode."""
    rng = random.Random(args.seed)
    records: list[dict] = []
    summaries = []
    for cache in [m for m in args.cache.split(",") if m]:
        records += run_groups(
            bench, cache=cache, reps=args.reps, body=body, cwd=cwd, prepare=prepare,
            check_full=check_full, rng=rng, variants=variants_arg(args.variants),
        )
        summaries.append(summarize(records, cache))
    return records, summaries


def summarize(records: list[dict], cache: str) -> dict:
    """Median times and median within-repetition ratios."""
    recs = [r for r in records if r["cache"] == cache and r["rep"] >= 0]
    by_rep: dict[int, dict[str, dict]] = {}
    for r in recs:
        by_rep.setdefault(r["rep"], {})[r["variant"]] = r
    out: dict = {"cache": cache, "reps": len(by_rep)}
    for v in ALL_VARIANTS:
        vr = [r for r in recs if r["variant"] == v]
        if not vr:
            continue
        out[f"{v}_inner_median_s"] = median([r["inner_s"] for r in vr])
        out[f"{v}_total_median_s"] = median([r["total_s"] for r in vr])
    for v in ALL_VARIANTS[1:]:
        ratios, tratios = [], []
        for runs in by_rep.values():
            p, m = runs.get("plain"), runs.get(v)
            if p and m and p["inner_s"] and m["inner_s"] is not None:
                ratios.append(m["inner_s"] / p["inner_s"])
                tratios.append(m["total_s"] / p["total_s"])
        if ratios:
            out[f"{v}_ratio_median"] = median(ratios)
            out[f"{v}_ratios"] = ratios
            out[f"{v}_overhead_ci90_pct"] = bootstrap_median_ci([(x - 1) * 100 for x in ratios])
            out[f"{v}_total_ratio_median"] = median(tratios)
    if "full_ratio_median" in out and "floor_ratio_median" in out:
        out["full_minus_floor_pp"] = (out["full_ratio_median"] - out["floor_ratio_median"]) * 100
        # The same gap taken inside each repetition (full and floor ran
        # minutes apart, with the same plain): less exposed to drifts of
        # the machine than the difference of two medians; with a bootstrap
        # interval over repetitions, so a reader sees what the reps resolve.
        gaps = []
        for runs in by_rep.values():
            p, f, fl = runs.get("plain"), runs.get("full"), runs.get("floor")
            if p and f and fl and p["inner_s"] and f["inner_s"] is not None \
                    and fl["inner_s"] is not None:
                gaps.append((f["inner_s"] - fl["inner_s"]) / p["inner_s"] * 100)
        if gaps:
            out["paired_gap_pp"] = median(gaps)
            out["paired_gaps_pp"] = gaps
            out["paired_gap_ci90_pp"] = bootstrap_median_ci(gaps)
    full = [r for r in recs if r["variant"] == "full"]
    if full:
        # What the caller of `shournal run` waits for after the command:
        # listener drain + storing (+ CLI start-up, which plain pays less).
        out["full_after_command_median_s"] = median(
            [r["total_s"] - r["inner_s"] for r in full if r["inner_s"] is not None]
        )
        out["full_invalid_runs"] = sum(1 for r in full if not r.get("valid", False))
        cpu = [r["listener_user_s"] + r["listener_sys_s"] for r in full if "listener_user_s" in r]
        if cpu:
            out["listener_cpu_median_s"] = median(cpu)
    for v in ALL_VARIANTS:
        shares = [r["cpu_share"] for r in recs if r["variant"] == v and "cpu_share" in r]
        for key in ("holder_pct", "fsnotify_pct", "listener_pct"):
            vals = [sh[key] for sh in shares if key in sh]
            if vals:
                out[f"{v}_{key}_median"] = median(vals)
    floor = [r for r in recs if r["variant"] in ("floor", "relay")]
    if floor:
        out["floor_after_command_median_s"] = median(
            [r["total_s"] - r["inner_s"] for r in floor if r["inner_s"] is not None]
        )
        out["floor_lost_runs"] = sum(
            1 for r in floor if r.get("floor_overflows") or r.get("floor_fd_errors")
        )
    return out


def bootstrap_median_ci(values: Sequence[float], level: float = 0.90,
                        resamples: int = 2000) -> tuple[float, float]:
    """Percentile bootstrap interval of the median (fixed seed: the same
    runs always give the same interval)."""
    rng = random.Random(0)
    n = len(values)
    meds = sorted(
        statistics.median(rng.choices(values, k=n)) for _ in range(resamples)
    )
    lo = meds[int((1 - level) / 2 * resamples)]
    hi = meds[min(resamples - 1, int((1 + level) / 2 * resamples))]
    return lo, hi


def print_table(title: str, summaries: list[dict], targets: str = "") -> None:
    print(f"\n== {title} ==")
    hdr = (
        f"{'cache':5} {'reps':>4} {'plain s':>8} {'full s':>8} {'floor s':>8} "
        f"{'full':>8} {'floor':>8} {'full-floor':>10} {'total full':>10} {'after cmd':>9} "
        f"{'invalid':>7}"
    )
    print(hdr)
    for s in summaries:
        pp = s.get("full_minus_floor_pp")
        print(
            f"{s['cache']:5} {s['reps']:>4} {fmt_s(s.get('plain_inner_median_s')):>8} "
            f"{fmt_s(s.get('full_inner_median_s')):>8} {fmt_s(s.get('floor_inner_median_s')):>8} "
            f"{pct(s.get('full_ratio_median')):>8} {pct(s.get('floor_ratio_median')):>8} "
            f"{'n/a' if pp is None else f'{pp:+.1f}pp':>10} "
            f"{pct(s.get('full_total_ratio_median')):>10} "
            f"{fmt_s(s.get('full_after_command_median_s')):>9} "
            f"{s.get('full_invalid_runs', 0):>7}"
            + (f"   relay {pct(s['relay_ratio_median'])}" if "relay_ratio_median" in s else "")
        )
    print(
        "(times: medians of the command's own wall time; full/floor: median of the per-repetition"
        " ratio to plain, as overhead; total full: whole `shournal run` incl. storing vs plain;"
        " after cmd: median seconds `shournal run` needed after the command ended)"
    )
    for s in summaries:
        cis = [f"{v} {lo:+.1f} .. {hi:+.1f}%" for v in ALL_VARIANTS
               if f"{v}_overhead_ci90_pct" in s for lo, hi in [s[f"{v}_overhead_ci90_pct"]]]
        if cis:
            print(f"{s['cache']}: 90% bootstrap intervals of the median overheads: "
                  + ", ".join(cis))
    for s in summaries:
        if "paired_gap_pp" in s:
            lo, hi = s["paired_gap_ci90_pp"]
            print(
                f"{s['cache']}: full-floor within each repetition: median {s['paired_gap_pp']:+.1f}"
                f" pp (90% bootstrap interval {lo:+.1f} .. {hi:+.1f} pp)"
            )
    for s in summaries:
        for v in ALL_VARIANTS:
            if f"{v}_holder_pct_median" in s:
                print(
                    f"{s['cache']} {v}: share of the workload's CPU samples (medians, perf):"
                    f" holder {s[f'{v}_holder_pct_median']:.2f}%,"
                    f" fanotify events in the workload {s[f'{v}_fsnotify_pct_median']:.2f}%,"
                    f" listener {s[f'{v}_listener_pct_median']:.2f}%"
                )
    for s in summaries:
        if "listener_cpu_median_s" in s:
            cpu = s["listener_cpu_median_s"]
            print(f"{s['cache']}: listener CPU (user+sys) median {cpu:.2f} s")
    if targets:
        print(f"targets: {targets}")


# ------------------------------------------------------------------- CLI


def results_args(p: argparse.ArgumentParser) -> None:
    """--results-dir and --tag: where write_results puts the result file."""
    p.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS)
    p.add_argument("--tag", default="", help="suffix of the result file name")


def cli_args(p: argparse.ArgumentParser, reps: int) -> None:
    """The options of a benchmark that runs the shournal CLI as the bench
    user: --reps, --user, --cli and results_args."""
    p.add_argument("--reps", type=int, default=reps)
    p.add_argument("--user", default=DEFAULT_USER, help="unprivileged user (created if missing)")
    p.add_argument("--cli", default=SHOURNAL, help="the shournal executable")
    results_args(p)


def common_args(p: argparse.ArgumentParser, reps: int) -> None:
    p.add_argument("--user", default=DEFAULT_USER, help="unprivileged user (created if missing)")
    p.add_argument("--reps", type=int, default=reps, help="repetitions per cache mode")
    p.add_argument(
        "--cache",
        default="cold,warm",
        help="comma-separated cache modes to run: cold (drop caches before each run), warm",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the run order (default: random)")
    p.add_argument(
        "--nofile",
        type=int,
        default=None,
        help="soft RLIMIT_NOFILE for all variants (default: inherited from runuser, 1024 on "
        "Debian); see README: the listener needs more than 1024 for bursts",
    )
    p.add_argument("--workspace", choices=("loop", "dir"), default="loop")
    results_args(p)
    p.add_argument("--profile", action="store_true", help="run the full listener under cProfile")
    p.add_argument(
        "--listener-cpu",
        action="store_true",
        help="run the full listener under /usr/bin/time and report its CPU seconds",
    )
    p.add_argument(
        "--cpu-share",
        action="store_true",
        help="record every run with `perf record -a -g` and report who used the CPU "
        "(holder, listener, fanotify in the workload); see PerfRecorder",
    )
    p.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated subset of plain,full,floor,relay (plain is always run)",
    )


def variants_arg(text: str) -> tuple[str, ...]:
    chosen = {v for v in text.split(",") if v}
    unknown = chosen - set(ALL_VARIANTS)
    if unknown:
        sys.exit(f"unknown variants: {', '.join(sorted(unknown))}")
    return tuple(v for v in ALL_VARIANTS if v in chosen or v == "plain")


def machine_info() -> dict:
    info = {
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    # What was measured is the installed copy, not the work tree.
    for key, path in (
        ("installed_listener_mtime", "/usr/local/lib/shournal/venv/lib/python3.11/site-packages/"
         "shournal/capture/listener.py"),
        ("installed_helper_mtime", "/usr/local/libexec/shournal/shournal-suid"),
    ):
        try:
            info[key] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(os.stat(path).st_mtime))
        except OSError:
            pass
    try:
        info["shournal"] = subprocess.run(
            [SHOURNAL, "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        pass
    try:
        info["git_head"] = subprocess.run(
            ["git", "-C", str(BENCH_DIR), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        info["git_dirty"] = bool(
            subprocess.run(
                ["git", "-C", str(BENCH_DIR), "status", "--porcelain", "--", "../shournal",
                 "../native"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
        )
    except OSError:
        pass
    return info


def _jsonable(o):
    if isinstance(o, Path):
        return str(o)
    raise TypeError(type(o).__name__)


def report_result(args: argparse.Namespace, name: str, result: dict, **more: object) -> Path:
    """Print ``result`` with the load average and write it (and ``more``)
    as the result file ``name``."""
    result.setdefault("loadavg", os.getloadavg())
    print(json.dumps(result, indent=1))
    return write_results(args.results_dir, name, {"result": result, **more}, args.tag)


def bench_user(args: argparse.Namespace) -> tuple[User, Path]:
    """Needs root; the bench user (--user) and its workspace (--workspace)."""
    require_root()
    user = ensure_user(args.user)
    return user, ensure_workspace(user, args.workspace)


def write_run(args: argparse.Namespace, name: str, t_start: float, payload: dict) -> Path:
    """write_results of a run started at ``t_start`` (time.time()), with
    its arguments and elapsed seconds (printed too)."""
    elapsed = time.time() - t_start
    print(f"elapsed {elapsed / 60:.1f} min")
    payload = {**payload, "args": vars(args), "elapsed_s": elapsed}
    return write_results(args.results_dir, name, payload, args.tag)


def write_results(results_dir: Path, name: str, payload: dict, tag: str = "") -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}{'-' + tag if tag else ''}.json"
    payload = {"benchmark": name, "machine": machine_info(), **payload}
    path.write_text(json.dumps(payload, indent=1, default=_jsonable) + "\n")
    print(f"\nresults: {path}")
    return path


def profile_report(paths: Sequence[str], top: int = 25) -> str:
    """Top cumulative/internal costs of cProfile dumps."""
    import io
    import pstats

    paths = [p for p in paths if Path(p).exists()]
    if not paths:
        return "(no profile written)"
    buf = io.StringIO()
    st = pstats.Stats(*paths, stream=buf)
    st.sort_stats("tottime").print_stats(top)
    st.sort_stats("cumulative").print_stats(top)
    return buf.getvalue()
