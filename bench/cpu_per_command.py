"""CPU per recorded command line, and 20 lines pasted at once.

Runs from a checkout (no `make install` needed; as root): builds the
native parts into a temporary directory with a setuid copy of the helper,
like tests/fixtures_shell.py, and drives interactive bash shells of the
test user `shournal-test` on a pty (pexpect), in three set-ups:

  plain     bash without shournal
  listener  shournal with the Python listener per command line
  daemon    shournal with shournal-forward and the store daemon
  null      shournal with bench/null_listener.c as the listener (stores
            nothing): the C part alone -- shell hooks, helper, holder
  lab       daemon, its journal a lab store on PostgreSQL (`SHOURNAL_DB_URL`;
            bench/lab_pg.py: a private server, the test user added as with
            `shournal server add-user`, durable defaults); the server's own
            CPU (its postgres processes, /proc ticks) is shown beside

CPU: this process is made a child subreaper, so every process of a run
(shell, helper, holder, listener or forwarder, the detached daemon) stays
in its tree: the CPU time of the tree (live processes: utime+stime+cutime+
cstime from /proc; reaped by us: RUSAGE_CHILDREN) is taken after --warmup
lines (start-ups, the journal's creation) once everything is stored, and
again after --lines more lines once everything is stored; the difference
divided by --lines is the CPU per command line (the daemon's part shown
separately, /proc counting in 10 ms ticks per process; the shell's own,
exact, from its schedstat).  --meter cgroup
(the default where a cpuacct or cgroup2 hierarchy is mounted) takes the
total from a control group made for the run instead: the shell and every
process started after it are in it, and the kernel sums their CPU to the
nanosecond -- a process of ~3 ms is not charged 0 or 10 ms by the tick
that happened to hit it, so a few hundred lines resolve 0.1 ms.

The runtime directory (markers, the daemon's socket, the warnings files:
every line touches it) is a tmpfs by default, as systemd-logind gives a
login ($XDG_RUNTIME_DIR=/run/user/<uid>); --runtime-dir disk puts it in
the home, on /var/tmp (what a machine without logind gives: /tmp).  The
spool and the lines' starts are in the home in both.

Paste: --paste lines `true` are written to the pty at once; the time until
the last prompt appears, minus the same for plain bash.

--rounds N repeats the modes N times, alternating their order, and prints
the median (and range) of the per-round differences to plain bash: one
run's figure varies by +-10% (CPU) and more (paste) on a 2-vCPU VM.

--cpu-idle: how idle CPUs wait.  `halt` leaves the machine as it is (an
idle CPU halts, here in the guest's haltpoll state); `poll` holds a
PM QoS request of 0 us on /dev/cpu_dma_latency for the run (what tuned's
latency-performance profile does), so that idle CPUs poll instead of
halting; `halt,poll` measures every mode in both, alternating, each
against plain bash in the same one.  On a virtual machine a line's
processes wake each other several times; on an idle machine each wake
may find the CPU halted, and the same work then costs more CPU time
(docs/benchmarks.md); `poll` shows the work alone.

    sudo .venv/bin/python bench/cpu_per_command.py --lines 20 --paste 20
    sudo .venv/bin/python bench/cpu_per_command.py --lines 200 --modes plain,daemon --rounds 5
    sudo .venv/bin/python bench/cpu_per_command.py --lines 200 --paste 0 --gap 0.3 \
        --modes plain,daemon,lab --rounds 3
    sudo .venv/bin/python bench/cpu_per_command.py --lines 200 --paste 0 --gap 0.3 \
        --modes plain,daemon,lab --rounds 2 --cpu-idle halt,poll
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import pexpect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import bench_home, children_cpu  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
USER = "shournal-test"
PROMPT = "BENCH-CPU-PROMPT$ "
PR_SET_CHILD_SUBREAPER = 36


def build(root: Path, repo: Path = REPO) -> dict[str, Path]:
    build_dir = root / "build"
    build_dir.mkdir(parents=True)
    subprocess.run(["make", "-s", "-C", str(repo / "native"), f"BUILD={build_dir}"],
                   check=True, capture_output=True)
    helper = root / "shournal-suid"
    shutil.copy2(build_dir / "shournal-suid", helper)
    os.chown(helper, 0, 0)
    helper.chmod(0o4755)
    null = build_dir / "null_listener"
    subprocess.run(["cc", "-O2", "-I", str(REPO / "native"), "-o", str(null),
                    str(REPO / "bench" / "null_listener.c")], check=True)
    return {
        "repo": repo,
        "null": null,
        "helper": helper,
        "preload": build_dir / "libshournal_preload.so",
        "forward": build_dir / "shournal-forward",
    }


RUNTIME_DIR = "tmpfs"  # --runtime-dir
LAB_URL = ""  # the lab store of mode lab (started by main)
LAB_SERVER = 0  # its postmaster's pid


def make_home(uid: int, gid: int) -> Path:
    home = bench_home("shournal-bench-cpu-", uid, gid)
    if RUNTIME_DIR == "tmpfs":
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"mode=0700,uid={uid},gid={gid},size=64m",
                        "shournal-bench-run", str(home / "run")], check=True)
    return home


def remove_home(home: Path) -> None:
    if RUNTIME_DIR == "tmpfs":
        subprocess.run(["umount", "--lazy", str(home / "run")], check=False)
    shutil.rmtree(home, ignore_errors=True)


def env_for(mode: str, home: Path, paths: dict[str, Path]) -> dict[str, str]:
    venv = REPO / ".venv" / "bin"
    env = {
        "HOME": str(home), "USER": USER, "LOGNAME": USER, "LANG": "C.UTF-8", "TERM": "dumb",
        "PATH": f"{venv}:/usr/local/bin:/usr/bin:/bin",
        "XDG_RUNTIME_DIR": str(home / "run"),
        "SHOURNAL_SUID_PATH": str(paths["helper"]),
        "SHOURNAL_PRELOAD_LIB": str(paths["preload"]),
        "SHOURNAL_SHELL_DIR": str(paths["repo"] / "shell"),
        "SHOURNAL_PY_LISTENER": str(venv / "shournal-listener"),
        "SHOURNAL_DAEMON": str(venv / "shournal-daemon"),
        # the checkout's package, whichever one the venv was installed from
        "PYTHONPATH": str(paths["repo"]),
    }
    listener = {"daemon": paths["forward"], "lab": paths["forward"], "null": paths["null"]}
    if mode == "lab":
        env["SHOURNAL_DB_URL"] = LAB_URL
    env["SHOURNAL_LISTENER"] = str(listener.get(mode, venv / "shournal-listener"))
    return env


def spawn(mode: str, home: Path, paths: dict[str, Path]) -> pexpect.spawn:
    rc = home / f"bashrc.{mode}"
    text = f"PS1='{PROMPT}'\nunset PROMPT_COMMAND\nHISTFILE={home}/hist.{mode}\n"
    if mode != "plain":
        text += f"source {paths['repo']}/shell/shournal.bash\nSHOURNAL_ENABLE\n"
    rc.write_text(text)
    env = env_for(mode, home, paths)
    argv = ["runuser", "-u", USER, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
            "bash", "--noprofile", "--rcfile", str(rc), "-i"]
    child = pexpect.spawn(argv[0], argv[1:], cwd=str(home / "work"), encoding="utf-8",
                          timeout=120, dimensions=(50, 300))
    child.expect_exact(PROMPT)
    return child


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_recorded(home: Path) -> None:
    """Wait until every recorder of this home is done and the daemon has
    stored its spool."""
    rundir = home / "run" / "shournal"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        # the recorders are orphans of ours (we are the subreaper): one that
        # ended is a zombie until reaped, and a zombie answers kill(pid, 0)
        reap_all(block=False)
        alive = False
        for m in rundir.glob("*.*"):
            if m.suffix in (".run", ".end", ".store") and m.stem.isdigit():
                try:
                    os.kill(int(m.stem), 0)
                    alive = True
                except ProcessLookupError:
                    pass
        if not alive:
            break
        time.sleep(0.05)
    sys.path.insert(0, str(REPO))
    from shournal.capture.spool import backlog_of

    spools = [home / ".local" / "share" / "shournal" / "spool" / key for key in keys(home)]
    while any(backlog_of(s)[0] for s in spools) and time.monotonic() < deadline:
        time.sleep(0.05)


def keys(home: Path) -> list[str]:
    """The journal keys of this home's daemons: the default journal's, the lab store's."""
    sys.path.insert(0, str(REPO))
    from shournal._paths import journal_key

    envs = [{"HOME": str(home)}] + ([{"HOME": str(home), "SHOURNAL_DB_URL": LAB_URL}]
                                   if LAB_URL else [])  # fmt: skip
    return [journal_key(env) for env in envs]


def daemon_pid(home: Path) -> int | None:
    # (`daemon.lock`: the one daemon per user of trees older than journal keys,
    # measured as mode `daemon@DIR`)
    for name in [f"daemon.{key}.lock" for key in keys(home)] + ["daemon.lock"]:
        try:
            pid = int((home / "run" / "shournal" / name).read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            continue
        return pid
    return None


def server_cpu(postmaster: int) -> float:
    """CPU seconds of the lab store's server: its postmaster (with the
    backends that ended, in its cutime) and its live children."""
    procs = all_stats()
    return sum(cpu for pid, (ppid, cpu) in procs.items() if postmaster in (pid, ppid))


def stop_daemon(home: Path) -> None:
    pid = daemon_pid(home)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)


def reap_all(block: bool = True) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _stat(pid: int) -> tuple[int, float] | None:
    """(ppid, utime+stime+cutime+cstime in seconds) of a process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = sum(int(f) for f in fields[11:15])
    return int(fields[1]), ticks / os.sysconf("SC_CLK_TCK")


def all_stats() -> dict[int, tuple[int, float]]:
    """_stat of every process."""
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(int(name))) is not None:
            procs[int(name)] = st
    return procs


def tree_cpu(daemon: int | None) -> tuple[float, float]:
    """CPU seconds of every process this one started, finished or not (a
    process reaped by a live one is in its cutime, one reaped by us -- the
    subreaper -- in our RUSAGE_CHILDREN), and the daemon's part."""
    reap_all(block=False)
    procs = all_stats()
    me, total = os.getpid(), children_cpu()
    for ppid, cpu in procs.values():
        while ppid not in (me, 0, 1) and ppid in procs:
            ppid = procs[ppid][0]
        if ppid == me:
            total += cpu
    return total, procs.get(daemon, (0, 0.0))[1] if daemon else 0.0


GAP = 0.0  # --gap
METER = "proc"  # --meter


def _cgroup_base() -> tuple[Path, str] | None:
    """A hierarchy to make the run's control group in, and its CPU file:
    cgroup v1's cpuacct, else a cgroup2 mount (where every group has
    cpu.stat)."""
    if Path("/sys/fs/cgroup/cpuacct/cpuacct.usage").exists():
        return Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage"
    for base in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        if (base / "cgroup.controllers").exists():
            return base, "cpu.stat"
    return None


class CgroupMeter:
    """CPU seconds of every process in a control group made for one run."""

    def __init__(self) -> None:
        found = _cgroup_base()
        if found is None:
            raise SystemExit("--meter cgroup: no cpuacct or cgroup2 hierarchy is mounted")
        base, self.name = found
        self.dir = Path(tempfile.mkdtemp(prefix="shournal-bench-", dir=base))

    def enter(self, pid: int) -> None:
        """Move `pid` and what it started so far into the group (what they
        start later is born in it)."""
        kids: dict[int, list[int]] = {}
        for p, (ppid, _cpu) in all_stats().items():
            kids.setdefault(ppid, []).append(p)
        todo = [pid]
        while todo:
            p = todo.pop()
            with suppress(OSError):
                (self.dir / "cgroup.procs").write_text(str(p))
            todo += kids.get(p, [])

    def seconds(self) -> float:
        text = (self.dir / self.name).read_text()
        if self.name == "cpuacct.usage":
            return int(text) / 1e9
        usage = next(ln for ln in text.splitlines() if ln.startswith("usage_usec"))
        return int(usage.split()[1]) / 1e6

    def remove(self) -> None:
        """Once its processes have ended (the subreaper has reaped them)."""
        for _ in range(100):
            try:
                self.dir.rmdir()
                return
            except OSError:
                time.sleep(0.05)


def shell_cpu(child: pexpect.spawn) -> tuple[int, float]:
    """(pid, CPU seconds so far, exact: schedstat) of the shell, runuser's
    child."""
    with open(f"/proc/{child.pid}/task/{child.pid}/children") as f:
        pid = int(f.read().split()[0])
    return pid, int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def context_switches() -> int:
    """The machine's context switches since boot (every process's, this
    driver's too: plain bash's run is the baseline)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("ctxt "):
            return int(line.split()[1])
    return 0


def run_lines(
    mode: str, n: int, warmup: int, paths: dict[str, Path], uid: int, gid: int
) -> tuple[float, float, float, float]:
    """CPU seconds per line of `true`: all processes, the daemon's part and
    the shell's own, after `warmup` lines (start-ups, the journal's
    creation); and the machine's context switches per line (each one a
    wake of a process on some CPU)."""
    home = make_home(uid, gid)
    child = spawn(mode, home, paths)
    meter = CgroupMeter() if METER == "cgroup" else None
    if meter:
        meter.enter(child.pid)
    for _ in range(warmup):
        child.sendline("true")
        child.expect_exact(PROMPT)
    wait_recorded(home)
    daemon = daemon_pid(home)
    cpu0, d0 = tree_cpu(daemon)
    if meter:
        cpu0 = meter.seconds()
    server0 = server_cpu(LAB_SERVER) if mode == "lab" else 0.0
    shell, s0 = shell_cpu(child)
    switches = context_switches()
    for _ in range(n):
        child.sendline("true")
        child.expect_exact(PROMPT)
        if GAP:
            time.sleep(GAP)
    wait_recorded(home)
    switches = context_switches() - switches
    cpu1, d1 = tree_cpu(daemon)
    if meter:
        cpu1 = meter.seconds()
    if mode == "lab":
        server = (server_cpu(LAB_SERVER) - server0) / n
        print(f"lab       server CPU per line {server * 1000:.2f} ms "
              "(its postgres processes, 10 ms ticks)", flush=True)
    shell_again, s1 = shell_cpu(child)
    assert shell_again == shell
    finish(child, home)
    if meter:
        meter.remove()
    return (cpu1 - cpu0) / n, (d1 - d0) / n, (s1 - s0) / n, switches / n


def finish(child: pexpect.spawn, home: Path) -> None:
    """Exit the shell, let everything be stored, stop the daemon, reap what
    is left and remove the home."""
    child.sendline("exit")
    child.expect(pexpect.EOF)
    child.close()
    wait_recorded(home)
    stop_daemon(home)
    reap_all()
    remove_home(home)


def paste(mode: str, n: int, paths: dict[str, Path], uid: int, gid: int) -> float:
    """Seconds from writing `n` lines at once to the last prompt."""
    home = make_home(uid, gid)
    child = spawn(mode, home, paths)
    for _ in range(3):  # warm: the daemon runs, caches are filled
        child.sendline("true")
        child.expect_exact(PROMPT)
    settle_markers = time.monotonic() + 30
    while time.monotonic() < settle_markers and any(
        p.suffix in (".end", ".store") for p in (home / "run" / "shournal").glob("*.*")
    ):
        time.sleep(0.05)
    start = time.monotonic()
    child.send("true\n" * n)
    for _ in range(n):
        child.expect_exact(PROMPT)
    took = time.monotonic() - start
    finish(child, home)
    return took


@contextmanager
def cpu_idle(regime: str):
    """`poll`: idle CPUs poll while in it (a PM QoS request of 0 us,
    dropped when the file is closed); `halt`: as they are."""
    if regime == "halt":
        yield
        return
    fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, (0).to_bytes(4, "little"))
        yield
    finally:
        os.close(fd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--paste", type=int, default=20)
    ap.add_argument("--modes", default="plain,listener,daemon",
                    help="comma-separated; MODE@DIR: that mode of another checkout (its "
                         "native parts, shell files and package; e.g. the tree before a "
                         "change, from `git worktree add`), measured in the same rounds")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat every mode this often, the order reversed each round; "
                         "the medians of the per-round differences are printed")
    ap.add_argument("--gap", type=float, default=0.0,
                    help="seconds between a prompt and the next line (0: at once, as a "
                         "script; 0.3: typed, each line stored on its own -- the daemon "
                         "batches lines arriving within 0.15 s of each other)")
    ap.add_argument("--runtime-dir", choices=("tmpfs", "disk"), default="tmpfs",
                    help="the test user's $XDG_RUNTIME_DIR: a tmpfs (as logind gives) "
                         "or a directory in the home")
    ap.add_argument("--meter", choices=("cgroup", "proc"),
                    default="cgroup" if _cgroup_base() else "proc",
                    help="where the total CPU comes from: a control group made for each "
                         "run (exact; the default where one can be made) or the process "
                         "tree's /proc and rusage times (10 ms ticks)")
    ap.add_argument("--cpu-idle", default="halt",
                    help="how idle CPUs wait during the measurement: halt (as the machine "
                         "is), poll (a PM QoS request of 0 us), or halt,poll (both, "
                         "alternating, each against plain bash in the same)")
    args = ap.parse_args()
    regimes = args.cpu_idle.split(",")
    if not regimes or any(r not in ("halt", "poll") for r in regimes):
        ap.error("--cpu-idle: halt, poll or halt,poll")
    global RUNTIME_DIR, GAP, METER, LAB_URL, LAB_SERVER
    RUNTIME_DIR = args.runtime_dir
    GAP = args.gap
    METER = args.meter
    print(f"runtime directory: {RUNTIME_DIR}; gap {GAP} s; meter {METER}; checkout {REPO}",
          flush=True)
    if os.geteuid() != 0:
        print("run as root (a setuid copy of the helper is made)", file=sys.stderr)
        return 2
    import pwd

    pw = pwd.getpwnam(USER)
    root = Path(tempfile.mkdtemp(prefix="shournal-bench-cpu-", dir="/var/tmp"))
    root.chmod(0o755)
    modes = args.modes.split(",")
    stack = ExitStack()
    try:
        if any(m.partition("@")[0] == "lab" for m in modes):
            import lab_pg

            # Before we become the subreaper: the server's daemonised
            # postmaster must not be a process of our tree.
            server = stack.enter_context(lab_pg.lab_server([USER], durable=True))
            LAB_URL, LAB_SERVER = server.url(USER), server.postmaster()
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            print("prctl(PR_SET_CHILD_SUBREAPER) failed", file=sys.stderr)
            return 1
        trees = {REPO: build(root / "0")}
        for mode in modes:
            repo = Path(mode.partition("@")[2] or REPO).resolve()
            if repo not in trees:
                trees[repo] = build(root / str(len(trees)), repo)
        subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
        rounds: list[dict[str, tuple[float, float]]] = []
        # (a mode's label names its regime when there are two)
        def label(mode: str, regime: str) -> str:
            return mode if len(regimes) == 1 else f"{mode}/{regime}"

        for r in range(args.rounds):
            results = {}
            for regime in regimes if r % 2 == 0 else regimes[::-1]:
                with cpu_idle(regime):
                    for mode in modes if r % 2 == 0 else modes[::-1]:
                        kind, _, tree = mode.partition("@")
                        paths = trees[Path(tree or REPO).resolve()]
                        per, per_d, per_s, cs = run_lines(kind, args.lines, args.warmup, paths,
                                                          pw.pw_uid, pw.pw_gid)
                        pasted = (paste(kind, args.paste, paths, pw.pw_uid, pw.pw_gid)
                                  if args.paste else 0.0)
                        results[label(mode, regime)] = (per, pasted)
                        print(f"{label(mode, regime):9s} CPU per line {per * 1000:8.2f} ms "
                              f"(daemon {per_d * 1000:6.2f} ms, shell {per_s * 1000:5.2f} ms,"
                              f" {cs:.0f} context switches)"
                              f"  {args.paste} lines pasted {pasted * 1000:8.1f} ms  "
                              f"(round {r}, load {os.getloadavg()[0]:.2f})", flush=True)
            rounds.append(results)
            for regime in regimes:
                plain = results.get(label("plain", regime))
                for mode in modes:
                    if plain is not None and mode != "plain":
                        per, pasted = results[label(mode, regime)]
                        print(f"{label(mode, regime):9s} added: CPU per line "
                              f"{(per - plain[0]) * 1000:.2f} ms, "
                              f"paste {(pasted - plain[1]) * 1000:.1f} ms")
        if args.rounds > 1 and "plain" in modes:
            for regime in regimes:
                base = label("plain", regime)
                for mode in modes:
                    if mode == "plain":
                        continue
                    key = label(mode, regime)
                    cpu = [(x[key][0] - x[base][0]) * 1000 for x in rounds]
                    pst = [(x[key][1] - x[base][1]) * 1000 for x in rounds]
                    print(f"{key:9s} added, median of {args.rounds} rounds: CPU per line "
                          f"{statistics.median(cpu):.2f} ms ({min(cpu):.2f}-{max(cpu):.2f}), "
                          f"paste {statistics.median(pst):.1f} ms "
                          f"({min(pst):.1f}-{max(pst):.1f})")
        if LAB_URL:
            print(f"lab store: {server.admin('SELECT count(*) FROM command')[0][0]} commands "
                  "stored", flush=True)
    finally:
        stack.close()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
