"""A bounded fuzzer of the setuid helper: mutated argv, odd things on fd 3
and junk on its sockets, run as the unprivileged test user against the real
setuid build (and, for the argument parser, an ASan/UBSan build).

Every invocation goes through tests/native/suid_fuzz_run.c, a child
subreaper, so whatever it leaves behind (holder, listener) is accounted for.
What must hold for each one:
  - no crash: no process of the invocation dies of a signal;
  - no hang: all of them have exited by TIMEOUT_MS (else they are killed and
    it counts as a failure);
  - no privileged action: the sentinel (tests/native/suid_fuzz_sentinel.c),
    the only program given as exec target or listener, never runs with any
    uid or gid of root or any capability (it copies /proc/self/status into a
    file it creates, so a root-owned file means it ran as root), and no file
    appears in the invocation's working directory (a core dump, a file made
    as root).

Deterministic: SHOURNAL_FUZZ_SEED (default below) and the iteration number
make each case; SHOURNAL_FUZZ_ITERATIONS sets the count (the default keeps
this module within about a minute); SHOURNAL_FUZZ_HELPER fuzzes another
setuid build (e.g. an installed one) instead of the fresh one, and
SHOURNAL_FUZZ_NATIVE builds the ASan helper from another copy of native/."""

from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fixtures_shell import REPO, Install
from test_suid_security import (
    BASE_ENV,
    NO_SUCH_PID,
    Recorders,
    as_user,
    parse_status,
    run,
    spawn,
    user_dir,
)

from shournal import limits
from shournal.capture import protocol

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: setuid copies and a second user"),
]

SEED = int(os.environ.get("SHOURNAL_FUZZ_SEED", "20261124"))
ITERATIONS = int(os.environ.get("SHOURNAL_FUZZ_ITERATIONS", "3000"))
ASAN_ITERATIONS = ITERATIONS // 5  # each start of an ASan binary costs more
TIMEOUT_MS = 10_000  # far above any legitimate invocation (~20 ms)
NATIVE_TESTS = Path(__file__).resolve().parents[1] / "native"
USAGE = 2  # EXIT_USAGE of native/shournal_suid.c
# execve(2) limits: one argument below 128 KiB (MAX_ARG_STRLEN), all of them
# with the environment below ARG_MAX (2 MiB with the usual 8 MiB stack);
# messages travel hex-encoded in the runner's argv
MAX_BLOB = 60_000
MAX_ARGV_BYTES = 1_000_000

SETUP_OPTS: list[list[bytes]] = [
    [b"--no-read"], [b"--writable-reads"], [b"--no-hash"], [b"--hash", b"256:3"],
    [b"--archive-max-size", b"512000"], [b"--archive-ext", b"sh"], [b"--no-archive"],
    [b"--archive-name", b"Makefile"],
    [b"--discard-events"], [b"--exclude-mount", b"/nonexistent"], [b"--forward"],
]
# options with a count limit in setup
LIMITED: dict[tuple[bytes, ...], int] = {
    (b"--exclude-mount", b"/nonexistent"): limits.MAX_EXCLUDES,
    (b"--archive-ext", b"sh"): limits.MAX_ARCHIVE_EXT,
    (b"--archive-name", b"Makefile"): limits.MAX_ARCHIVE_EXT,
}
WORDS: list[bytes] = [
    b"setup", b"exec", b"check", b"--version", b"--help", b"--", b"-", b"",
    *(o[0] for o in SETUP_OPTS), b"--lazy-listener", b"--prepared", b"--spare",
    b"--no-read=1",
    b"0", b"1", b"-1", b"-0", b"+1", b" 1", b"1 ", b"01", b"0x10", b"1e3", b"7", b"8",
    b"40960", b"40961", b"86400", b"86401", b"2147483647", b"2147483648", b"-2147483648",
    b"4294967295", b"4294967296", b"9223372036854775807", b"9223372036854775808",
    b"-9223372036854775809", b"18446744073709551616", b"9" * 40, b"\xd9\xa1",
    b"1:1", b"8:1", b"256:3", b":", b"256:", b":3", b"256:3:3", b"40960:2147483647",
    b"8:4294967296", b"=", b"A=1", b"=1", b"A=", b"PATH=/tmp", b"LD_PRELOAD=/tmp/x.so",
    b"/", b"//", b".", b"..", b"/nonexistent", b"relative", b"/proc/self/exe", b"/dev/null",
    b"/bin/sh", b"\xff\xfe\xfd", b"\xc3\x28", b"%s%n%x%p", b"a" * 32, b"a" * 33,
    b"tar.gz", b"a/b", b"\t", b"\n", b"/" + b"a" * 4094, b"/" + b"a" * 4095,
    b"/" + b"a" * 4096, b"x" * 131_000,
]


@dataclass
class Case:
    argv: list[bytes]  # from argv[0]
    fd3: str  # a kind of tests/native/suid_fuzz_run.c
    msgs: list[bytes]  # to the helper on fd 3, after its first message
    syncs: list[bytes]  # to the holder's sync socket (SETUP_DONE's third fd)

    def describe(self) -> str:
        def short(a: bytes) -> str:
            return repr(a) if len(a) <= 60 else f"{a[:40]!r}...<{len(a)} bytes>"
        args = [short(a) for a in self.argv]
        if len(args) > 24:
            args[12:-8] = [f"...<{len(args) - 20} more>..."]
        return (f"argv=[{', '.join(args)}] fd3={self.fd3} "
                f"msgs={[short(m) for m in self.msgs]} syncs={[short(m) for m in self.syncs]}")


@dataclass
class Targets:
    sentinel: bytes
    pids: list[bytes]  # for exec: the user's holder, another user's, ...


def _hex(rng: random.Random) -> bytes:
    """A message for the holder's relay socket, for the sentinel's argv."""
    kind = rng.randrange(4)
    if kind == 0:
        data = protocol.FLUSH.pack(protocol.MSG_FLUSH, rng.getrandbits(32))
    elif kind == 1:
        data = rng.randbytes(rng.randrange(8))
    elif kind == 2:
        data = struct.pack("=I", rng.getrandbits(32)) + rng.randbytes(rng.randrange(4, 200))
    else:
        tail = rng.randbytes(rng.randrange(1, MAX_BLOB))
        data = protocol.FLUSH.pack(protocol.MSG_FLUSH, 1) + tail
    return data.hex().encode()


def _valid(rng: random.Random, t: Targets) -> list[bytes]:
    kind = rng.choice(["version", "check", "setup", "setup", "exec", "exec", "exec"])
    if kind == "version":
        return [b"shournal-suid", b"--version"]
    if kind == "check":
        return [b"shournal-suid", b"check"]
    if kind == "exec":
        env = [b"A=1", b"PATH=/usr/bin:/bin", b"B="][: rng.randrange(4)]
        return [b"shournal-suid", b"exec", rng.choice(t.pids), t.sentinel,
                str(len(env)).encode(), *env, b"sentinel", *(_hex(rng) for _ in range(2))]
    opts: list[bytes] = []
    for _ in range(rng.randrange(4)):
        opts += rng.choice(SETUP_OPTS)
    if rng.random() < 0.5:
        opts.append(b"--lazy-listener")
        if rng.random() < 0.5:
            opts += [b"--prepared", rng.choice([b"1", b"600", b"86400"])]
            if rng.random() < 0.5:
                opts.append(b"--spare")
    return [b"shournal-suid", b"setup", *opts, b"--", t.sentinel,
            *(_hex(rng) for _ in range(rng.randrange(4)))]


def _mutate(rng: random.Random, argv: list[bytes]) -> None:
    op = rng.randrange(12)
    j = rng.randrange(1, len(argv)) if len(argv) > 1 else 1
    if op == 0 and len(argv) > 1:  # replace
        argv[j] = rng.choice(WORDS)
    elif op == 1:  # insert
        argv.insert(rng.randrange(1, len(argv) + 1), rng.choice(WORDS))
    elif op == 2 and len(argv) > 1:  # delete
        del argv[j]
    elif op == 3 and len(argv) > 1:  # repeat a pair (options at and past their limits)
        argv[j:j] = argv[j:j + 2] * rng.choice([1, 2, 31, 32, 33, 63, 64, 65, 300])
    elif op == 4 and len(argv) > 2:  # swap
        k = rng.randrange(1, len(argv))
        argv[j], argv[k] = argv[k], argv[j]
    elif op == 5:  # move (or add) "--"
        argv[:] = [a for a in argv if a != b"--"]
        argv.insert(rng.randrange(1, len(argv) + 1), b"--")
    elif op == 6 and len(argv) > 1:  # truncate
        del argv[j:]
    elif op == 7 and len(argv) > 1 and argv[j].lstrip(b"-").isdigit():  # a number's neighbours
        v = int(argv[j])
        argv[j] = str(rng.choice([v - 1, v + 1, -v, v + 2**31, v + 2**32, v * 2**64])).encode()
    elif op in (10, 11):  # an option many times, among the options: at and past its limit
        opt, limit = rng.choice([*LIMITED.items(), (rng.choice(SETUP_OPTS), 64)])
        end = argv.index(b"--") if b"--" in argv else len(argv)
        at = rng.randrange(min(2, end), end + 1)
        argv[at:at] = list(opt) * (limit + rng.choice([-1, 0, 1]))
    elif op == 8:  # argv[0]
        argv[0] = rng.choice([b"", b"x" * 131_000, b"\xff", b"%n%s", b"/nonexistent"])
    elif len(argv) > 1 and argv[j]:  # a byte
        b = bytearray(argv[j])
        b[rng.randrange(len(b))] = rng.randrange(1, 256)  # no NUL: it ends an argument
        argv[j] = bytes(b)


def _messages(rng: random.Random) -> list[bytes]:
    go = protocol.GO.pack(protocol.MSG_GO, 0)
    pick = rng.randrange(9)
    if pick == 0:
        return []
    if pick == 1:
        return [go]
    if pick == 2:
        return [protocol.GO.pack(protocol.MSG_GO, rng.getrandbits(32)), go]
    if pick == 3:
        return [rng.randbytes(rng.randrange(8))]  # short, maybe zero-length
    if pick == 4:
        return [go + rng.randbytes(rng.randrange(1, MAX_BLOB))]  # GO with a tail
    if pick == 5:
        return [protocol.COMMAND.pack(protocol.MSG_COMMAND, 0, 0, 0, bytes(16), bytes(16)) + b"ls"]
    if pick == 6:
        return [struct.pack("=I", rng.getrandbits(32)) + rng.randbytes(rng.randrange(60))]
    return [go, go, rng.randbytes(rng.randrange(16))]


def make_case(seed: int, i: int, t: Targets) -> Case:
    rng = random.Random(f"{seed}:{i}")
    argv = _valid(rng, t)
    # a third valid (the paths past the parser), a third one mutation away
    for _ in range(rng.choice([0, 0, 1, 1, 2, 4])):
        _mutate(rng, argv)
    if rng.random() < 0.8:
        fd3 = "seqpacket"
    else:
        fd3 = rng.choice(["closed", "file", "devnull", "pipe", "stream", "dgram",
                          "seqpacket-eof", "listen"])
    if b"--spare" in argv and rng.random() < 0.8:
        fd3 += "+spare"  # a socket on fd 4 too
    syncs = [rng.randbytes(rng.randrange(9)) for _ in range(rng.randrange(3))]
    msgs = _messages(rng)
    budget = MAX_ARGV_BYTES - sum(2 * len(m) + 4 for m in msgs + syncs)
    while sum(len(a) + 1 for a in argv) > budget:
        argv.pop()
    return Case(argv, fd3, msgs, syncs)


# ------------------------------------------------------------- the runs


@dataclass
class Fuzz:
    install: Install
    runner: Path
    sentinel: Path
    marks: Path  # where the sentinel leaves its reports (1777)
    cwd: Path  # the invocation's working directory, the user's: must stay empty
    targets: Targets


@pytest.fixture(scope="module")
def fuzz(install: Install) -> Iterator[Fuzz]:
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler for the fuzzer's programs")
    root = Path(tempfile.mkdtemp(prefix="shournal-fuzz-", dir="/var/tmp"))
    recorders = Recorders(install)
    sleeper = None
    try:
        root.chmod(0o755)
        marks = root / "marks"
        marks.mkdir()
        marks.chmod(0o1777)
        cwd = user_dir(root, install.user, "cwd")
        runner, sentinel = root / "run", root / "sentinel"
        cc = ["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o"]
        subprocess.run([*cc, str(runner), str(NATIVE_TESTS / "suid_fuzz_run.c")], check=True)
        subprocess.run([*cc, str(sentinel), f'-DSENTINEL_MARKS="{marks}"',
                        str(NATIVE_TESTS / "suid_fuzz_sentinel.c")], check=True)
        # pids to join: the user's own holder (joined), another user's holder,
        # an ordinary process of the user, root's (all refused), none
        mine = recorders.start(install.user, ["/bin/sleep", "3600"])
        other = recorders.start(install.other, ["/bin/sleep", "3600"])
        sleeper = spawn([*as_user(install.user), "/bin/sleep", "3600"])
        pids = [mine.holder, mine.holder, other.holder, sleeper, mine.listener, 1, os.getpid()]
        targets = Targets(str(sentinel).encode(),
                          [str(p).encode() for p in pids] + [NO_SUCH_PID.encode()])
        yield Fuzz(install, runner, sentinel, marks, cwd, targets)
    finally:
        if sleeper is not None:
            os.kill(sleeper, 9)  # our unreaped child
            os.waitpid(sleeper, 0)
        recorders.close()
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Outcome:
    problems: list[str]
    child: str  # "exit N" / "signal N" of the helper's process
    setup_done: bool
    sentinel_ran: int


def run_case(fz: Fuzz, helper: Path, case: Case, env: dict[str, str]) -> Outcome:
    user = fz.install.user
    argv: list[str | bytes] = [str(fz.runner), user.pw_name, str(TIMEOUT_MS), case.fd3,
                               str(fz.cwd)]
    for m in case.msgs:
        argv += ["-m", m.hex()]
    for m in case.syncs:
        argv += ["-s", m.hex()]
    argv += ["--", str(helper), *case.argv]
    r = run(argv, env=env, timeout=TIMEOUT_MS / 1000 + 20)  # type: ignore[arg-type]
    problems = []
    if r.rc != 0:
        problems.append(f"runner failed ({r.rc}): {r.err[-500:]}")
    child = ""
    setup_done = False
    for line in r.out.splitlines():
        words = line.split()
        if words[0] == "child":
            child = " ".join(words[1:])
        # SIGKILL: the runner's, for a hang (reported as such)
        if "signal" in words and words[-1] != str(signal.SIGKILL.value):
            problems.append(f"crash: {line}")
        if words[0] == "hang":
            problems.append(f"hang: {line}")
        if words[0] == "recv" and words[1] == str(protocol.MSG_SETUP_DONE):
            setup_done = True
    if not child:
        problems.append(f"no exit status of the helper: {r.out!r}")
    ran = 0
    for p in sorted(fz.marks.iterdir()):
        st = p.lstat()
        if not p.name.startswith("ran.") or st.st_uid != user.pw_uid or st.st_gid != user.pw_gid:
            problems.append(f"file {p.name} made by uid {st.st_uid} gid {st.st_gid}")
        else:
            ran += 1
            status = parse_status(p.read_text())
            ids = {*status.get("Uid", ["?"]), *status.get("Gid", ["?"])}
            caps = [int(status.get(c, ["1"])[0], 16) for c in
                    ("CapInh", "CapPrm", "CapEff", "CapAmb")]
            if ids != {str(user.pw_uid), str(user.pw_gid)} or any(caps):
                problems.append(f"the sentinel ran with Uid {status.get('Uid')} "
                                f"Gid {status.get('Gid')} caps {caps}")
        p.unlink()
    for p in sorted(fz.cwd.iterdir()):
        st = p.lstat()
        problems.append(f"file {p.name} appeared in the cwd (uid {st.st_uid} gid {st.st_gid})")
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    if problems:
        problems.append(f"helper's stderr: {r.err[-1500:]!r}")
    return Outcome(problems, child, setup_done, ran)


def fuzz_loop(fz: Fuzz, helper: Path, iterations: int, env: dict[str, str],
              label: str) -> Counter[str]:
    """Run the cases; fail with reproducible descriptions of the bad ones."""
    stats: Counter[str] = Counter()
    failures: list[str] = []
    start = time.monotonic()
    for i in range(iterations):
        case = make_case(SEED, i, fz.targets)
        out = run_case(fz, helper, case, env)
        stats[f"helper {out.child}"] += 1
        stats["setup done"] += out.setup_done
        stats["sentinel ran"] += out.sentinel_ran
        if out.problems and len(failures) < 10:
            failures.append(f"case {i}: {case.describe()}\n    " + "\n    ".join(out.problems))
        stats["failed"] += bool(out.problems)
    elapsed = time.monotonic() - start
    print(f"{label}: seed {SEED}, {iterations} cases in {elapsed:.1f} s: "
          f"{dict(sorted(stats.items()))}")
    assert not failures, (f"{label}: {stats['failed']} of {iterations} cases failed "
                          f"(SHOURNAL_FUZZ_SEED={SEED}; case N is make_case(SEED, N)):\n"
                          + "\n".join(failures))
    return stats


def test_fuzz_the_setuid_helper(fuzz: Fuzz, install: Install):
    helper = Path(os.environ.get("SHOURNAL_FUZZ_HELPER", str(install.helper)))
    assert helper.stat().st_uid == 0 and helper.stat().st_mode & 0o4000, helper
    stats = fuzz_loop(fuzz, helper, ITERATIONS, BASE_ENV, "setuid helper")
    # the cases must reach past the parser, or the fuzzer tests nothing
    if ITERATIONS >= 200:
        assert stats[f"helper exit {USAGE}"] > ITERATIONS // 10, stats
        assert stats["setup done"] > ITERATIONS // 20, stats
        assert stats["sentinel ran"] > ITERATIONS // 10, stats


@pytest.fixture(scope="module")
def asan_helper(install: Install) -> Iterator[Path]:
    """The helper built with AddressSanitizer and UBSan: not setuid (the
    sanitizers' runtimes trust the environment), so it runs as the user and
    fails at the first privileged step, after the whole argument parser."""
    probe = subprocess.run(["cc", "-fsanitize=address,undefined", "-x", "c", "-o", "/dev/null",
                            "-"], input=b"int main(void){return 0;}", capture_output=True)
    if probe.returncode != 0:
        pytest.skip("the compiler cannot build with -fsanitize=address,undefined")
    build = Path(tempfile.mkdtemp(prefix="shournal-asan-", dir="/var/tmp"))
    try:
        build.chmod(0o755)
        flags = "-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined " \
                "-fno-sanitize-recover=all"
        native = os.environ.get("SHOURNAL_FUZZ_NATIVE", str(REPO / "native"))
        subprocess.run(["make", "-s", "-C", native, f"BUILD={build}",
                        f"CFLAGS={flags}", f"{build}/shournal-suid"], check=True,
                       capture_output=True)
        (build / "shournal-suid").chmod(0o755)
        yield build / "shournal-suid"
    finally:
        shutil.rmtree(build, ignore_errors=True)


def test_fuzz_the_argument_parser_under_asan(fuzz: Fuzz, asan_helper: Path):
    env = dict(BASE_ENV, ASAN_OPTIONS="abort_on_error=1:detect_leaks=0",
               UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1")
    stats = fuzz_loop(fuzz, asan_helper, ASAN_ITERATIONS, env, "ASan/UBSan helper")
    if ASAN_ITERATIONS >= 200:
        assert stats[f"helper exit {USAGE}"] > ASAN_ITERATIONS // 10, stats
