"""The per-user store daemon and its spool (shournal/capture/daemon.py,
shournal/capture/spool.py, native/shournal_forward.c): real shells on a pty as the
unprivileged test user, through the setuid helper."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path

import pytest
from fixtures_shell import (
    PROMPT,
    REPO,
    Shell,
    build_native,
    daemon_file,
    journal_url,
    spool_of,
    wait_for,
    wait_stored,
    write_config,
)

from shournal.capture import protocol
from shournal.capture import spool as sp
from shournal.record import CommandRecord, FileEvent
from shournal.store import Store

LOCK_SECONDS = 20  # longer than the store's busy timeout (15 s)


def _daemon_path(install) -> Path:
    if not install.pythonpath:
        return REPO / ".venv" / "bin" / "shournal-daemon"
    path = install.root / "shournal-daemon"
    if not path.exists():
        path.write_text('#!/bin/sh\nexec /usr/bin/python3 -m shournal.capture.daemon "$@"\n')
        path.chmod(0o755)
    return path


def daemon_env(install) -> dict[str, str]:
    return {
        "SHOURNAL_LISTENER": str(install.root / "build" / "shournal-forward"),
        "SHOURNAL_DAEMON": str(_daemon_path(install)),
        "SHOURNAL_PY_LISTENER": str(install.listener),
    }


def rundir(home: Path) -> Path:
    return home / "run" / "shournal"


def warnings_text(home: Path) -> str:
    """What the listeners and the daemon left for the shells to show (the
    shared file and those of each shell session)."""
    text = ""
    for path in sorted(rundir(home).glob("warnings*")):
        try:
            text += path.read_text()
        except FileNotFoundError:
            pass  # a shell took it meanwhile
    return text


def file_sizes(directory: Path) -> list[int]:
    sizes = []
    with suppress(FileNotFoundError):
        for path in directory.iterdir():
            with suppress(FileNotFoundError):
                sizes.append(path.stat().st_size)
    return sizes


def daemon_pid(home: Path, env: dict[str, str] | None = None) -> int | None:
    """The pid of the daemon holding the lock of the journal of a shell of
    `home` (with `env` added to its environment), if it runs."""
    return _lock_pid(daemon_file(home, protocol.DAEMON_LOCK, **(env or {})))


def _lock_pid(lock: Path) -> int | None:
    try:
        pid = int(lock.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    return pid if b"daemon" in cmdline else None


def kill_daemon(home: Path) -> None:
    """A test's clean-up: SIGKILL the daemons (one per journal) of the
    runtime directory of `home`, if any run."""
    for lock in rundir(home).glob("daemon.*.lock"):
        pid = _lock_pid(lock)
        if pid is not None:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def listener_env(install, listener: str) -> dict[str, str]:
    """A shell's environment for what stores its command lines: "daemon"
    (the store daemon), anything else the Python listener per line."""
    return daemon_env(install) if listener == "daemon" else {}


@pytest.fixture
def home(install, user_home):
    yield user_home
    kill_daemon(user_home)


def spool_backlog(home: Path, env: dict[str, str] | None = None) -> int:
    """The backlog of the spool of the journal of a shell of `home` (with
    `env` added to its environment)."""
    return sp.backlog_of(spool_of(home, **(env or {})))[0]


def stored_texts(home: Path) -> Counter[str]:
    store = Store(journal_url(home), create=False)
    try:
        with store.reading() as conn:
            rows = conn.exec_driver_sql("SELECT text FROM command").fetchall()
    finally:
        store.close()
    return Counter(r[0] for r in rows)


def wait_drained(home: Path, timeout: float = 60.0, env: dict[str, str] | None = None) -> None:
    wait_stored(home, timeout)
    wait_for(lambda: spool_backlog(home, env) == 0, "the spool to drain", timeout)


def as_user(install, argv: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen(["runuser", "-u", install.user.pw_name, "--", *argv], **kw)


class JournalLock:
    """A write transaction held on the journal by another process of the
    user (what a long `shournal delete` or a second writer does)."""

    def __init__(self, install, home: Path) -> None:
        db = home / ".local" / "share" / "shournal" / "journal.sqlite"
        code = (
            "import sqlite3, sys\n"
            f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n"
            "c.execute('ROLLBACK')\n"
        )
        self.proc = as_user(install, ["/usr/bin/python3", "-c", code],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "locked\n"

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


def spooled_behind_a_lock(
    install, home: Path, lines: list[str], env: dict[str, str] | None = None
) -> tuple[Shell, JournalLock]:
    """A bash through the daemon whose first command is stored, then the
    journal locked by another process and ``lines`` run: they wait in the
    spool."""
    sh = Shell("bash", install, home, extra_env=daemon_env(install) if env is None else env)
    sh.run("echo before > before")
    wait_drained(home)
    lock = JournalLock(install, home)
    for line in lines:
        sh.run(line)
    wait_stored(home)  # spooled: the forwarders are done
    assert spool_backlog(home) == len(lines)
    return sh, lock


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_commands_are_stored_once_through_the_daemon(kind, install, home):
    sh = Shell(kind, install, home, extra_env=daemon_env(install))
    lines = [f"echo {i} > out{i}" for i in range(5)] + ["true", "false"]
    outs = [sh.run(line) for line in lines]
    pid = daemon_pid(home)
    sh.exit()
    wait_drained(home)
    assert not any("shournal" in o for o in outs), outs
    assert pid is not None, "no daemon ran"
    assert daemon_file(home, protocol.DAEMON_SOCKET).exists()
    texts = stored_texts(home)
    assert all(texts[line] == 1 for line in lines), texts
    store = Store(journal_url(home), create=False)
    with store.reading() as conn:
        written = {bytes(r[0]) for r in conn.exec_driver_sql("SELECT basename FROM write_event")}
        rv = dict(conn.exec_driver_sql("SELECT text, return_value FROM command").fetchall())
    store.close()
    assert {b"out%d" % i for i in range(5)} <= written
    assert rv["false"] == 1 and rv["true"] == 0


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_helper_hands_over_to_a_running_daemon_without_the_forwarder(kind, install, home):
    """With a daemon up, the setup helper (`setup --forward`) hands the
    command line over itself: shournal-forward is never exec'd as the
    listener, and every command line is stored once.  Without a daemon it
    is (it waits for the one the shell starts): see the fault tests."""
    wrapper_dir = home / "fw"  # root's: the user cannot change it
    wrapper_dir.mkdir()
    log = wrapper_dir / "calls"
    log.touch()
    log.chmod(0o666)
    wrapper = wrapper_dir / "shournal-forward"  # the name makes it the forwarder
    real = install.root / "build" / "shournal-forward"
    wrapper.write_text(f'#!/bin/sh\necho "call:$*" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    wrapper_dir.chmod(0o755)
    env = {**daemon_env(install), "SHOURNAL_LISTENER": str(wrapper)}
    sh = Shell(kind, install, home, extra_env=env)
    sh.run(": warm-up")
    wait_for(lambda: daemon_pid(home) is not None, "the daemon to start")
    wait_drained(home)
    log.write_text("")
    lines = [f"echo {i} > out{i}" for i in range(4)] + ["true"]
    for line in lines:
        sh.run(line)
    sh.exit()
    wait_drained(home)
    calls = log.read_text().splitlines()
    assert "call:" not in calls, calls  # the listener's call has no arguments
    texts = stored_texts(home)
    assert all(texts[line] == 1 for line in lines), texts


def test_journal_locked_longer_than_the_busy_timeout_loses_nothing(install, home):
    lines = [f"echo {i} > locked{i}" for i in range(3)]
    sh, lock = spooled_behind_a_lock(install, home, lines)
    started = time.monotonic()
    # The daemon gives up one attempt after the busy timeout and says so.
    wait_for(lambda: "locked" in warnings_text(home), "the locked-journal warning", 60)
    text = warnings_text(home)
    assert text.count("\n") == 1, text  # one warning for the condition
    assert "kept in the spool" in text and "echo 0 > locked0" in text, text
    while time.monotonic() - started < LOCK_SECONDS:
        time.sleep(0.5)
    assert spool_backlog(home) == len(lines)
    lock.release()
    out = sh.run("true")
    sh.exit()
    wait_drained(home)
    texts = stored_texts(home)
    assert all(texts[line] == 1 for line in lines), texts
    # The shell shows it at its next prompt.
    assert "shournal: the journal is locked" in out, out


@pytest.fixture(scope="module")
def long_backoff_preload(install) -> Path:
    """The preload library with a start-up back-off (DAEMON_RESPAWN_MS in
    native/preload/daemon.c) of ten minutes instead of a second: a
    killed daemon must be started again by the next command line however
    soon after its own start it died; with the real second, whether a test
    hits the back-off depends on the machine's speed."""
    dest = install.root / "long-backoff"
    build_native(dest, "CFLAGS=-O2 -DDAEMON_RESPAWN_MS=600000",
                 str(dest / "libshournal_preload.so"))
    dest.chmod(0o755)
    (dest / "libshournal_preload.so").chmod(0o644)
    return dest / "libshournal_preload.so"


@pytest.mark.parametrize("backoff", ["default", "long"])
def test_daemon_killed_between_spool_and_journal_replays_once(
    backoff, install, home, request
):
    env = daemon_env(install)
    if backoff == "long":
        env["SHOURNAL_PRELOAD_LIB"] = str(request.getfixturevalue("long_backoff_preload"))
    lines = [f"echo {i} > killed{i}" for i in range(3)]
    sh, lock = spooled_behind_a_lock(install, home, lines, env)
    pid = daemon_pid(home)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: daemon_pid(home) is None, "the daemon to die")
    lock.release()
    sh.run("echo after > after")  # starts a new daemon, which replays
    sh.exit()
    wait_for(lambda: daemon_pid(home) not in (None, pid), "a new daemon")
    wait_drained(home)
    texts = stored_texts(home)
    assert all(texts[line] == 1 for line in [*lines, "echo after > after"]), texts


def test_daemon_killed_right_after_its_start_is_started_again(
    install, home, long_backoff_preload
):
    """Killed before any other command line of the shell saw it: the next
    command line starts a new one although the back-off since the start
    has not passed (the dead daemon had taken the lock)."""
    env = {**daemon_env(install), "SHOURNAL_PRELOAD_LIB": str(long_backoff_preload)}
    sh = Shell("bash", install, home, extra_env=env)
    sh.run("echo first > first")  # starts the daemon
    wait_for(lambda: daemon_pid(home) is not None, "the daemon")
    wait_stored(home)  # spooled (or stored): nothing in flight
    pid = daemon_pid(home)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: daemon_pid(home) is None, "the daemon to die")
    sh.run("echo after > after")
    sh.exit()
    wait_for(lambda: daemon_pid(home) not in (None, pid), "a new daemon")
    wait_drained(home)
    texts = stored_texts(home)
    assert texts["echo first > first"] == 1 and texts["echo after > after"] == 1, texts


MANY = 20_000


@pytest.mark.parametrize("phase", ["running", "reading"])
def test_daemon_killed_during_a_20000_file_command_line(phase, install, home):
    """SIGKILL of the daemon while a command line writes 20,000 files
    ("running": before its forwarder hands it over) or while the daemon
    reads its events ("reading": a background process keeps the command
    line open after its prompt).  Reading, the forwarder hands it to the
    next daemon, which finds the control message the killed one took
    (shournal.capture.spool.keep_started); the events the killed one had are
    counted as lost on the way and said.  Every command is stored once."""
    sh = Shell("bash", install, home, extra_env=daemon_env(install))
    sh.run("echo before > before")
    wait_drained(home)
    pid = daemon_pid(home)
    assert pid is not None
    work = home / "work"
    started = spool_of(home) / "started"
    out = ""
    if phase == "running":
        line = (f"mkdir many && (cd many && seq {MANY} | xargs touch) && "
                "while [ ! -e go ]; do sleep 0.05; done")
        sh.proc.sendline(line)
        wait_for(lambda: (work / "many").is_dir() and len(os.listdir(work / "many")) == MANY,
                 "the files", 120)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: daemon_pid(home) is None, "the daemon to die")
        (work / "go").touch()
        sh.proc.expect(PROMPT, timeout=60)
    else:
        line = (f"mkdir many && (cd many && seq {MANY} | xargs touch) && "
                "(sleep 300 >/dev/null 2>&1 & echo $! > sleeper)")
        sh.run(line)
        # Written in place (spool.keep_started): the file exists before its
        # one small write lands, and a daemon killed in between took nothing
        # a successor could resume.
        wait_for(lambda: any(size > 0 for size in file_sizes(started)),
                 "the daemon to take the command line's control message")
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: daemon_pid(home) is None, "the daemon to die")
    out += sh.run("echo after > after")  # starts a new daemon
    if phase == "reading":
        os.kill(int((work / "sleeper").read_text()), signal.SIGTERM)
    wait_for(lambda: daemon_pid(home) not in (None, pid), "a new daemon")
    wait_drained(home)
    out += sh.run("true")
    sh.exit()
    wait_drained(home)
    texts = stored_texts(home)
    assert all(texts[t] == 1 for t in ("echo before > before", line, "echo after > after")), texts
    store = Store(journal_url(home), create=False)
    with store.reading() as conn:
        cid, dropped, lost, relay = conn.exec_driver_sql(
            "SELECT id, dropped_writes, lost_events, lost_relay FROM command WHERE text = ?",
            (line,),
        ).one()
        writes = conn.exec_driver_sql(
            "SELECT count(*) FROM write_event WHERE command_id = ?", (cid,)
        ).scalar()
    store.close()
    print(f"phase {phase}: {writes} write events stored, {dropped} dropped (cap), "
          f"{lost} lost (relay {relay})")
    assert file_sizes(started) == []  # (made when a daemon first keeps a line)
    # (past the write cap, events are counted as dropped)
    if phase == "running":
        assert lost == 0 and writes + dropped >= MANY, (writes, dropped, lost)
        return
    # what was not stored is counted, with its reason
    assert lost > 0 and relay == lost, (lost, relay)
    assert writes + dropped + lost >= MANY, (writes, dropped, lost)
    assert "killed while it read this command line" in out + warnings_text(home), out


def _record(i: int) -> CommandRecord:
    return CommandRecord(
        text=f"cmd {i}", return_value=i, start_ns=1_700_000_000_000_000_000 + i * 1000,
        end_ns=1_700_000_000_000_000_000 + i * 1000 + 5, working_dir="/w", username="u",
        hostname="h", session_uuid=bytes(range(16)), hash_chunk_size=256, hash_max_reads=3,
        writes=[FileEvent(b"/w/f%d" % i, 3, 7, 0o100644, 42)],
        reads=[FileEvent(b"/w/s.sh", 5, 9, 0o100644, None, b"echo\n")],
    )


def test_spool_torn_tail_is_dropped_and_the_rest_kept(tmp_path):
    spool = sp.Spool(tmp_path / "spool")
    spool.append([_record(0), _record(1)])
    spool.append([_record(2)])
    spool.close()
    path = tmp_path / "spool" / "records"
    whole = path.stat().st_size
    torn = sp.frame(_record(3))
    with open(path, "ab") as fh:
        fh.write(torn[: len(torn) - 3])  # a crash during the write
    spool = sp.Spool(tmp_path / "spool")
    assert spool.torn_bytes == len(torn) - 3
    assert path.stat().st_size == whole
    got = [rec for _end, rec in spool.pending(10)]
    assert got == [_record(0), _record(1), _record(2)]
    spool.append([_record(4)])  # appends go on after the cut
    recs = spool.pending(10)
    assert [r.text for _e, r in recs] == ["cmd 0", "cmd 1", "cmd 2", "cmd 4"]
    spool.commit(recs[1][0])
    spool.close()
    assert sp.backlog_of(tmp_path / "spool") == (2, spool.end - recs[1][0])
    spool = sp.Spool(tmp_path / "spool")
    assert [r.text for _e, r in spool.pending(10)] == ["cmd 2", "cmd 4"]
    # A damaged byte inside a record ends the spool there, not before.
    spool.close()
    data = bytearray(path.read_bytes())
    data[recs[3][0] - 2] ^= 0xFF
    path.write_bytes(bytes(data))
    spool = sp.Spool(tmp_path / "spool")
    assert [r.text for _e, r in spool.pending(10)] == ["cmd 2"]


def test_replay_after_a_commit_whose_offset_was_not_written_stores_once(install, home):
    """A crash after the journal's commit but before the committed offset:
    the restarted daemon finds the command in the journal."""
    uid, gid = install.user.pw_uid, install.user.pw_gid
    write_config(home, "[store]\ndaemon_idle_seconds = 1\n", install)
    spool = sp.Spool(spool_of(home))
    spool.append([_record(0), _record(1)])
    spool.close()
    store = Store(journal_url(home))
    store.add_command(_record(0))  # committed, offset not written
    store.close()
    subprocess.run(["chown", "-R", f"{uid}:{gid}", str(home / ".local")], check=True)
    env = {k: v for k, v in install.env(home).items()}
    proc = as_user(install, ["env", "-i", *[f"{k}={v}" for k, v in env.items()],
                             str(_daemon_path(install))], stderr=subprocess.PIPE)
    _out, err = proc.communicate(timeout=60)  # exits when idle and drained
    assert proc.returncode == 0, err
    assert err == b""
    assert stored_texts(home) == Counter({"cmd 0": 1, "cmd 1": 1})
    assert spool_backlog(home) == 0


def _ppid(pid: int | None) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_two_daemons_racing_to_start_one_wins(install, home):
    env = [f"{k}={v}" for k, v in install.env(home).items()]
    procs = [as_user(install, ["env", "-i", *env, str(_daemon_path(install))],
                     stderr=subprocess.PIPE) for _ in range(3)]
    wait_for(lambda: sum(p.poll() is not None for p in procs) == 2, "two daemons to exit")
    (winner,) = [p for p in procs if p.poll() is None]
    for p in procs:
        if p is not winner:
            assert p.returncode == 0 and p.stderr.read() == b""
    # (runuser forks: the daemon is its child)
    wait_for(lambda: daemon_pid(home) is not None and _ppid(daemon_pid(home)) == winner.pid,
             "the winner to hold the lock")
    sock = daemon_file(home, protocol.DAEMON_SOCKET)
    wait_for(sock.exists, "the daemon's socket")
    assert sock.stat().st_uid == install.user.pw_uid
    assert daemon_file(home, protocol.DAEMON_LOCK).stat().st_mode & 0o777 == 0o600
    winner.kill()
    winner.wait()


def daemon_status(install, home: Path) -> dict:
    """The daemon's MSG_STATUS answer, asked as the user (it answers its
    own user only)."""
    python = "/usr/bin/python3" if install.pythonpath else str(REPO / ".venv" / "bin" / "python")
    code = (
        "import sys\n"
        "from shournal.capture import protocol as p\n"
        "a = p.daemon_request(sys.argv[1], p.MSG_STATUS)\n"
        "print(a[1].decode() if a else '')\n"
    )
    env = [f"{k}={v}" for k, v in install.env(home).items()]
    proc = as_user(install, ["env", "-i", *env, python, "-c", code, str(rundir(home))],
                   stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    return json.loads(out)


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_a_shell_asks_whether_the_daemon_is_up_only_until_it_found_it(kind, install, home):
    """A connect to the daemon's socket wakes the daemon: a shell that found
    it up keeps its pidfd and asks again only once it has exited."""
    sh = Shell(kind, install, home, extra_env=daemon_env(install))
    sh.run("echo first > first")  # starts the daemon
    wait_for(lambda: daemon_file(home, protocol.DAEMON_SOCKET).exists(), "the daemon's socket")
    sh.run("true")
    sh.run("true")  # found it up
    before = daemon_status(install, home)["probes"]
    for i in range(5):
        sh.run(f"echo {i} > p{i}")
    after = daemon_status(install, home)["probes"]
    pid = daemon_pid(home)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: daemon_pid(home) is None, "the daemon to die")
    sh.run("echo after > after")  # finds it gone: starts a new one
    sh.exit()
    assert after == before, (before, after)
    wait_for(lambda: daemon_pid(home) not in (None, pid), "a new daemon")
    wait_drained(home)
    texts = stored_texts(home)
    assert all(texts[f"echo {i} > p{i}"] == 1 for i in range(5)), texts
    assert texts["echo after > after"] == 1, texts


def _voluntary_switches(pid: int, tid: int | None = None) -> int:
    """Context switches of one of the process's threads (the main thread,
    its accept loop, unless `tid` says which)."""
    status = Path(f"/proc/{pid}/task/{tid or pid}/status").read_text()
    for line in status.splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


def test_a_waiting_daemon_does_not_wake_its_accept_loop_every_second(install, home):
    """Between typed lines the accept loop sleeps until the idle time is
    up (each timed wake costs CPU, and a line may come once a minute)."""
    sh = Shell("bash", install, home, extra_env=daemon_env(install))
    sh.run("echo wake > wake")
    wait_drained(home)
    pid = daemon_pid(home)
    assert pid is not None
    time.sleep(0.5)
    before = _voluntary_switches(pid)
    time.sleep(3.5)
    woken = _voluntary_switches(pid) - before
    sh.run("echo again > again")  # still served
    sh.exit()
    wait_drained(home)
    assert woken <= 1, woken
    assert stored_texts(home)["echo again > again"] == 1


def test_a_waiting_daemon_does_not_look_for_orphaned_starts_every_2_s(install, home):
    """Once no start is on disk (no line runs), the store thread sleeps:
    the next line's worker, a query's drain or a minute passing look
    again -- not a wake every 2 s for an empty directory."""
    sh = Shell("bash", install, home, extra_env=daemon_env(install))
    sh.run("echo first > first")
    wait_drained(home)
    pid = daemon_pid(home)
    assert pid is not None
    store_tid = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))[1]
    time.sleep(2.5)  # (a look due from while the line ran)
    before = _voluntary_switches(pid, store_tid)
    time.sleep(5)
    woken = _voluntary_switches(pid, store_tid) - before
    sh.run("echo again > again")
    sh.exit()
    wait_drained(home)
    assert woken <= 1, woken
    assert stored_texts(home)["echo again > again"] == 1


def test_idle_daemon_exits_after_its_spool_is_drained(install, home):
    write_config(home, "[store]\ndaemon_idle_seconds = 1\n", install)
    sh = Shell("bash", install, home, extra_env=daemon_env(install))
    sh.run("echo idle > idle")
    wait_for(lambda: daemon_pid(home) is not None, "the daemon")
    pid = daemon_pid(home)
    wait_for(lambda: daemon_pid(home) is None, "the idle daemon to exit", 60)
    assert not daemon_file(home, protocol.DAEMON_SOCKET).exists()
    assert stored_texts(home)["echo idle > idle"] == 1
    # The next command line starts a new one.
    sh.run("echo again > again")
    sh.exit()
    wait_drained(home)
    assert stored_texts(home)["echo again > again"] == 1
    assert pid is not None



def daemon_connections(home: Path) -> int:
    """Connections the daemon has accepted and not closed (/proc/net/unix:
    accepted sockets carry the listening socket's path)."""
    path = str(daemon_file(home, protocol.DAEMON_SOCKET))
    n = 0
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8 and parts[7] == path and parts[5] == "03":  # SS_CONNECTED
            n += 1
    return n


def test_query_waits_for_spooled_commands(install, home):
    """A command spooled while the journal is busy is found by a query
    right after it: the query asks the daemon to store it (bounded).  The
    lock goes only once the query is connected to the daemon, so a query
    that does not ask reads the journal without the command."""
    import threading

    sh, lock = spooled_behind_a_lock(install, home, ["echo q > qfile"])
    assert daemon_connections(home) == 0
    done = threading.Event()

    def release_when_asked() -> None:
        while not done.is_set() and daemon_connections(home) == 0:
            time.sleep(0.005)
        lock.release()

    releaser = threading.Thread(target=release_when_asked)
    releaser.start()
    out = sh.run("shournal query --wfile qfile")
    done.set()
    releaser.join()
    sh.exit()
    assert "echo q > qfile" in out, out


def test_query_says_when_spooled_commands_are_not_in_its_result(install, home):
    """The journal stays locked past the query's bounded wait: the query
    shows what the journal has and says, in one line, how many finished
    commands are not in it yet."""
    sh, lock = spooled_behind_a_lock(install, home, ["echo q > qfile"])
    out = sh.run("shournal query --history 5")
    lock.release()
    sh.exit()
    assert "echo before > before" in out and "echo q > qfile" not in out, out
    notes = [line for line in out.splitlines() if line.startswith("shournal: ")]
    assert len(notes) == 1 and "1 finished command(s) not in the journal yet" in notes[0], out


def test_doctor_shows_the_daemon_and_its_backlog(install, home):
    sh, lock = spooled_behind_a_lock(install, home, ["echo d > dfile"])
    out = sh.run("shournal doctor")
    lock.release()
    sh.exit()
    line = next(x for x in out.splitlines() if "store daemon" in x)
    assert f"running (pid {daemon_pid(home)}) for {home}/.local/share/shournal/journal.sqlite, " \
        "1 command(s) waiting in the spool" in line, out


def test_spool_rotation_keeps_new_records(tmp_path, monkeypatch):
    """Once everything is committed a large spool starts afresh; records
    appended after that are pending, whatever inode number the new file
    gets (freed numbers are reused at once)."""
    monkeypatch.setattr(sp, "ROTATE_BYTES", 1)
    spool = sp.Spool(tmp_path / "spool")
    for round_ in range(3):
        spool.append([_record(round_)])
        (end, rec), = spool.pending(10)
        assert rec == _record(round_)
        spool.commit(end)
        assert spool.backlog() == 0 and spool.end == 0
        # The committed offset names the new file (a stale one naming the
        # old inode would apply to a new file that reuses its number).
        ino, off, _crc = (tmp_path / "spool" / "committed").read_text().split()
        assert (int(ino), off) == ((tmp_path / "spool" / "records").stat().st_ino, "0")
        spool.close()
        spool = sp.Spool(tmp_path / "spool")
        assert spool.pending(10) == []
    spool.append([_record(9)])
    spool.close()
    spool = sp.Spool(tmp_path / "spool")
    assert [r for _e, r in spool.pending(10)] == [_record(9)]


def test_a_torn_committed_offset_replays_from_the_start(tmp_path):
    """The committed offset is overwritten in place: one that does not
    check out (a torn write) counts as nothing committed -- the daemon then
    replays every record, each looked up first; one of an earlier version
    (no checksum) is still read."""
    spool = sp.Spool(tmp_path / "spool")
    spool.append([_record(1), _record(2)])
    first_end = spool.pending(1)[0][0]
    spool.commit(first_end)
    spool.close()
    path = tmp_path / "spool" / "committed"
    assert len(path.read_bytes()) == sp.COMMITTED_SIZE
    assert [r for _e, r in sp.Spool(tmp_path / "spool").pending(10)] == [_record(2)]
    ino, off, crc = path.read_text().split()
    path.write_text(f"{ino} {int(off) + 1} {crc}\n")  # a digit of a newer offset
    assert [r for _e, r in sp.Spool(tmp_path / "spool").pending(10)] == [
        _record(1), _record(2)]
    path.write_text(f"{ino} {off}\n")
    assert [r for _e, r in sp.Spool(tmp_path / "spool").pending(10)] == [_record(2)]
    assert sp.backlog_of(tmp_path / "spool")[0] == 1


def test_journal_disk_full_then_freed_loses_nothing(install, home):
    """The journal's file system fills up: the commands wait in the spool
    (the data dir is elsewhere), one warning says "no space left", and
    they are stored once there is space again."""
    small = home / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(small)],
                   check=True)
    try:
        os.chown(small, install.user.pw_uid, install.user.pw_gid)
        url = f"sqlite:///{small}/journal.sqlite"
        env = {**daemon_env(install), "SHOURNAL_DB_URL": url}
        sh = Shell("bash", install, home, extra_env=env)
        sh.run("echo before > before")
        wait_drained(home, env=env)
        filler = small / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass  # ENOSPC: full
        finally:
            os.close(fd)
        lines = [f"echo {i} > full{i}" for i in range(3)]
        outs = [sh.run(line) for line in lines]
        wait_stored(home)
        assert spool_backlog(home, env) == len(lines)
        # Shown at a prompt after the first failed attempt, only once.
        wait_for(lambda: "no space left" in "".join(outs) + warnings_text(home),
                 f"the disk-full warning (the shell printed {outs!r})")
        filler.unlink()
        outs.append(sh.run("true"))
        sh.exit()
        wait_drained(home, env=env)
        shown = [x for x in "".join(outs).splitlines() if "no space left" in x]
        assert len(shown) == 1, outs
        assert "kept in the spool" in shown[0]
        store = Store(url, create=False)
        with store.reading() as conn:
            texts = Counter(r[0] for r in conn.exec_driver_sql("SELECT text FROM command"))
        store.close()
        assert all(texts[line] == 1 for line in lines), texts
    finally:
        kill_daemon(home)
        wait_for(lambda: daemon_pid(home, env) is None, "the daemon to die")
        subprocess.run(["umount", "-l", str(small)], check=False)


class _FakeStore:
    """has_command/add_command of shournal.store.Store, in memory."""

    def __init__(self) -> None:
        self.added: list[CommandRecord] = []

    def has_command(self, rec: CommandRecord) -> bool:
        return any((r.start_ns, r.text) == (rec.start_ns, rec.text) for r in self.added)

    def add_command(self, rec: CommandRecord) -> int:
        self.added.append(rec)
        return len(self.added)


def test_inbox_is_taken_once_and_a_bad_file_is_left(tmp_path):
    base = tmp_path / "spool"
    first = sp.deposit(_record(0), base)
    sp.deposit(_record(1), base)
    (sp.inbox_dir(base) / "0-1.rec").write_bytes(b"SHSP garbage")
    assert sp.inbox_count(base) == 3
    store = _FakeStore()
    # a taker that stored the first and died before unlinking it
    store.add_command(_record(0))
    assert sp.take_inbox(store, base) == 1
    assert [r.text for r in store.added] == ["cmd 0", "cmd 1"]
    assert not first.exists()
    assert [p.name for p in sp.inbox_dir(base).iterdir()] == ["0-1.rec"]
    assert sp.take_inbox(store, base) == 0


def test_spool_fsync_does_not_hold_the_daemon_lock(tmp_path, monkeypatch):
    """While one batch of command lines is written and fsynced (milliseconds
    on a disk), the daemon's other threads -- accepting forwarders, reading
    other command lines, the store thread -- must not wait for it: only the
    spool's writer lock is held then (a paste of 20 lines waited for 20
    fsyncs in a row).  The record is still durable before spool_record
    returns."""
    import socket as socketlib
    import threading

    from shournal.capture import daemon as dm

    for var, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"),
                     ("XDG_DATA_HOME", "data"), ("XDG_RUNTIME_DIR", "run")):
        (tmp_path / sub).mkdir(mode=0o700)
        monkeypatch.setenv(var, str(tmp_path / sub))
    sock = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_SEQPACKET)
    d = dm.Daemon(tmp_path / "run", sock)
    real_append = d.spool.append
    free_while_writing: list[bool] = []

    def append(recs):
        def probe() -> None:
            got = d.lock.acquire(blocking=False)
            if got:
                d.lock.release()
            free_while_writing.append(got)

        t = threading.Thread(target=probe)
        t.start()
        t.join()
        real_append(recs)

    monkeypatch.setattr(d.spool, "append", append)
    d.spool_record(_record(1))
    assert free_while_writing == [True]
    assert [r for _e, r in sp.Spool(d.spool.dir).pending(10)] == [_record(1)]
    sock.close()
