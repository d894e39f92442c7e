"""The push that never blocks (docs/lab.md "Failures", "shournal sync"):
real shells of the lab's users record through the setuid helper and their
store daemons while the lab's server is cut off, stopped, or refuses
their password, and every command arrives exactly once when it is back.

Each test takes tens of seconds (a cut link fails a push only after the
client's timeouts); they are marked `slow` and run in `make test`."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures_lab import DATABASE, Lab, LabHost
from fixtures_shell import PROMPT, REPO, spool_of, wait_for

from shournal.capture import protocol
from shournal.capture.sync_state import STATE_FILE, SyncState, read_state, when
from shournal.errors import SERVER_CREDENTIALS, SERVER_DOWN, SERVER_UNREACHABLE

pytestmark = [pytest.mark.root, pytest.mark.slow]

WARNING = "kept in the spool"


def daemon_env(host: LabHost) -> dict[str, str]:
    """The shell hands its lines to the store daemon (as in
    tests/system/test_daemon.py)."""
    install = host.install
    daemon = REPO / ".venv" / "bin" / "shournal-daemon"
    if install.pythonpath:
        daemon = install.root / "shournal-daemon"
        if not daemon.exists():
            daemon.write_text('#!/bin/sh\nexec /usr/bin/python3 -m shournal.capture.daemon "$@"\n')
            daemon.chmod(0o755)
    return {
        "SHOURNAL_LISTENER": str(install.root / "build" / "shournal-forward"),
        "SHOURNAL_DAEMON": str(daemon),
        "SHOURNAL_PY_LISTENER": str(install.listener),
    }


def spool(host: LabHost) -> Path:
    return spool_of(host.home, SHOURNAL_DB_URL=host.url)


def state(host: LabHost) -> SyncState | None:
    return read_state(spool(host))


def daemon_pids(host: LabHost) -> list[int]:
    pids = []
    for pid in _pids_in(host.home / "run"):
        try:
            os.kill(pid, 0)
        except OSError:
            continue
        pids.append(pid)
    return pids


def stored(lab: Lab, host: LabHost) -> Counter[str]:
    rows = lab.admin("SELECT text FROM command WHERE owner = %s", (host.name,))
    return Counter(r[0] for r in rows)


def sync(host: LabHost, *argv: str) -> subprocess.CompletedProcess[str]:
    return host.shournal("sync", *argv, **daemon_env(host))


def warnings(out: str) -> list[str]:
    return [line for line in out.splitlines() if WARNING in line]


def _stop_daemons(host: LabHost) -> None:
    for pid in daemon_pids(host):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not daemon_pids(host), "the store daemons to end")


@pytest.fixture
def outage(lab_clean: Lab) -> Iterator[Lab]:
    """The lab, each host with no daemon and an empty spool before and
    after; the links, the server and the passwords as they were after."""
    pgpass = {h.name: (h.home / ".pgpass").read_text() for h in lab_clean.hosts}
    for h in lab_clean.hosts:
        _stop_daemons(h)
        shutil.rmtree(h.home / ".local" / "share" / "shournal" / "spool", ignore_errors=True)
    yield lab_clean
    for h in lab_clean.hosts:
        if not h.link_up():
            h.set_link(True)
    if not any(h.accepts() for h in lab_clean.hosts):
        lab_clean.start_server()  # (a test stopped it)
    for h in lab_clean.hosts:
        (h.home / ".pgpass").write_text(pgpass[h.name])
        _stop_daemons(h)
        shutil.rmtree(h.home / ".local" / "share" / "shournal" / "spool", ignore_errors=True)


def _first_line_stored(lab: Lab, host: LabHost, sh, line: str) -> str:
    out = sh.run(line)
    wait_for(lambda: stored(lab, host)[line] == 1, f"`{line}` in the server", 60)
    return out


def test_a_cut_link_while_200_lines_are_typed_loses_and_duplicates_nothing(outage: Lab) -> None:
    a = outage.hosts[0]
    sh = a.shell(**daemon_env(a))
    out = _first_line_stored(outage, a, sh, "echo before-cut")
    a.set_link(False)
    lines = [f"echo cut-{i}" for i in range(200)]
    for line in lines:
        out += sh.run(line)
    wait_for(lambda: (s := state(a)) is not None and s.cause == SERVER_UNREACHABLE,
             "a failed push", 90)
    assert stored(outage, a)["echo cut-199"] == 0
    res = sync(a, "--timeout", "0")
    assert res.returncode == 3 and SERVER_UNREACHABLE in res.stdout, res
    assert "backlog: 0" not in res.stdout, res.stdout
    a.set_link(True)
    wait_for(a.accepts, "the server from the host again", 60)
    res = sync(a)
    assert res.returncode == 0, res
    assert "backlog: 0 command(s)" in res.stdout and "last error: none" in res.stdout, res.stdout
    out += sh.run("echo after")
    sh.exit()
    wait_for(lambda: stored(outage, a)["echo after"] == 1, "the last line", 60)
    texts = stored(outage, a)
    assert all(texts[line] == 1 for line in ["echo before-cut", *lines]), texts
    assert [t for t, n in texts.items() if n != 1] == [], texts
    # one warning in this shell, naming the cause, not one per command
    shown = warnings(out)
    assert len(shown) == 1 and SERVER_UNREACHABLE in shown[0], shown


def test_wrong_password_then_fixed_loses_nothing_and_warns_once(outage: Lab) -> None:
    """Two shells of the user; each is told once."""
    a = outage.hosts[0]
    pgpass = a.home / ".pgpass"
    good = pgpass.read_text()
    password = good.split(":")[-1].strip()
    pgpass.write_text(good.replace(password, "not-the-password"))
    sh, sh2 = a.shell(**daemon_env(a)), a.shell(**daemon_env(a))
    lines = [f"echo pw-{i}" for i in range(6)]
    out = out2 = ""
    for i, line in enumerate(lines):
        if i % 2:
            out2 += sh2.run(line)
        else:
            out += sh.run(line)
    wait_for(lambda: (s := state(a)) is not None and s.cause == SERVER_CREDENTIALS,
             "the push refused", 60)
    refused = sync(a, "--timeout", "5")
    assert refused.returncode == 3, refused
    assert SERVER_CREDENTIALS in refused.stdout, refused.stdout
    for line in lines[:2]:
        out += sh.run(line + "-again")
        out2 += sh2.run(line + "-again2")
    assert stored(outage, a) == Counter()
    pgpass.write_text(good)
    res = sync(a)
    assert res.returncode == 0, res
    out += sh.run("echo fixed")
    out2 += sh2.run("echo fixed2")
    sh.exit()
    sh2.exit(124)  # (two lines `exit 123` would be two commands of one text)
    wait_for(lambda: stored(outage, a)["echo fixed"] == 1, "the last line", 60)
    texts = stored(outage, a)
    assert all(texts[line] == 1 for line in lines), texts
    assert [t for t, n in texts.items() if n != 1] == [], texts
    # one warning in each shell
    for text in (out, out2):
        shown = warnings(text)
        assert len(shown) == 1 and SERVER_CREDENTIALS in shown[0], shown
    # the password is in no warning, no state file, no output
    state_text = (spool(a) / STATE_FILE).read_text()
    for text in (out, out2, state_text, refused.stdout, refused.stderr, res.stdout, res.stderr,
                 a.shournal("doctor").stdout):
        assert password not in text


def test_the_server_stopped_during_a_20000_file_command_loses_nothing(outage: Lab) -> None:
    a = outage.hosts[0]
    many = 20_000
    sh = a.shell(**daemon_env(a))
    out = _first_line_stored(outage, a, sh, "echo before-stop")
    work = a.home / "work"
    shutil.rmtree(work / "many", ignore_errors=True)
    (work / "go").unlink(missing_ok=True)
    line = (f"mkdir many && (cd many && seq {many} | xargs touch) && "
            "while [ ! -e go ]; do sleep 0.05; done")
    sh.proc.sendline(line)
    wait_for(lambda: (work / "many").is_dir() and len(os.listdir(work / "many")) == many,
             "the files", 120)
    outage.stop_server()
    (work / "go").touch()
    sh.proc.expect(PROMPT, timeout=120)
    out += sh.proc.before
    wait_for(lambda: (s := state(a)) is not None and s.cause == SERVER_DOWN, "a failed push", 90)
    down = sync(a, "--timeout", "5")
    assert down.returncode == 3 and SERVER_DOWN in down.stdout, down
    assert "backlog: 1 command(s)" in down.stdout, down.stdout
    doctor = a.shournal("doctor").stdout
    assert "lab sync" in doctor and SERVER_DOWN in doctor, doctor
    outage.start_server()
    res = sync(a)
    assert res.returncode == 0, res
    out += sh.run("echo after")
    sh.exit()
    (work / "go").unlink()
    shutil.rmtree(work / "many")
    wait_for(lambda: stored(outage, a)["echo after"] == 1, "the last line", 60)
    texts = stored(outage, a)
    assert texts[line] == 1 and [t for t, n in texts.items() if n != 1] == [], texts
    ((writes, dropped, lost),) = outage.admin(
        "SELECT (SELECT count(*) FROM write_event w WHERE w.command_id = c.id), "
        "c.dropped_writes, c.lost_events FROM command c WHERE c.text = %s", (line,))
    assert lost == 0 and writes + dropped >= many, (writes, dropped, lost)
    shown = warnings(out)
    assert len(shown) == 1 and SERVER_DOWN in shown[0], shown


def test_the_daemon_killed_mid_push_stores_each_command_once(outage: Lab) -> None:
    """A backlog of command lines with 200 file events each is pushed; the
    daemon is killed while a transaction of the push is writing, and the
    next one (started by `shournal sync`) pushes the rest, none twice."""
    a = outage.hosts[0]
    n = 130
    sh = a.shell(**daemon_env(a))
    _first_line_stored(outage, a, sh, "echo before")
    a.set_link(False)
    lines = [f"mkdir -p k{i} && touch k{i}/f{{1..200}}" for i in range(n)]
    for line in lines:
        sh.run(line)
    wait_for(lambda: (s := state(a)) is not None and s.cause == SERVER_UNREACHABLE,
             "a failed push", 90)
    (pid,) = daemon_pids(a)
    a.set_link(True)
    wait_for(a.accepts, "the server from the host again", 60)
    res = sync(a, "--timeout", "0")  # push now, without waiting for it
    assert res.returncode in (1, 3), res
    # a transaction of the push has written in the server: kill now
    wait_for(lambda: outage.admin(
        "SELECT count(*) FROM pg_stat_activity WHERE usename = %s "
        "AND backend_xid IS NOT NULL", (a.name,))[0][0] > 0, "the push writing", 90)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not daemon_pids(a), "the daemon to die")
    at_kill = sum(stored(outage, a)[line] for line in lines)
    assert at_kill < n, at_kill  # killed mid-push
    deadline = time.monotonic() + 120
    while (res := sync(a)).returncode != 0 and time.monotonic() < deadline:
        pass  # (a push longer than sync's own timeout)
    assert res.returncode == 0, res
    sh.exit()
    texts = stored(outage, a)
    assert all(texts[line] == 1 for line in lines), texts
    assert [t for t, n in texts.items() if n != 1] == [], texts
    (events,) = outage.admin(
        "SELECT count(*) FROM write_event WHERE owner = %s", (a.name,))[0]
    assert events >= n * 200, events
    for i in range(n):
        shutil.rmtree(a.home / "work" / f"k{i}", ignore_errors=True)


def test_two_hosts_pushing_one_shared_spool_dir_at_once_store_each_command_once(
    outage: Lab,
) -> None:
    """A compute node ("node1", its link cut) spools into a shared
    spool_dir; two login hosts of the same user push it at the same time
    (`shournal sync` on each); each command is stored once, and only the
    node empties its own file, after their confirmations."""
    from dataclasses import replace

    from shournal.capture.spool import backlog_of

    a, b = outage.hosts
    shared = a.home / "shared-spool"
    config = a.home / ".config" / "shournal" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[store]\nspool_dir = "{shared}"\n')
    subprocess.run(["chown", "-R", f"{a.user.pw_uid}:{a.user.pw_gid}", str(a.home / ".config")],
                   check=True)
    node = replace(a, hostname="node1")
    logins = [replace(b, user=a.user, home=a.home, hostname=f"login{i}") for i in (1, 2)]

    def env_of(host: LabHost) -> dict[str, str]:
        """Each host its own runtime and data folders (the home is shared)."""
        run, data = a.home / f"run-{host.hostname}", a.home / f"data-{host.hostname}"
        for d in (run, data):
            d.mkdir(mode=0o700, exist_ok=True)
            os.chown(d, a.user.pw_uid, a.user.pw_gid)
        return {"XDG_RUNTIME_DIR": str(run), "XDG_DATA_HOME": str(data), **daemon_env(host)}

    try:
        node.set_link(False)
        sh = node.shell(**env_of(node))
        lines = [f"echo shared-{i}" for i in range(100)]
        for line in lines:
            sh.run(line)
        node_spool = spool_of(a.home, SHOURNAL_DB_URL=node.url,
                              XDG_DATA_HOME=str(a.home / "data-node1"))
        wait_for(lambda: (s := read_state(node_spool)) is not None
                 and s.cause == SERVER_UNREACHABLE, "a failed push", 90)
        wait_for(lambda: len(list((shared / "node1").glob("*/records"))) == 1, "the node's file")
        (records,) = (shared / "node1").glob("*/records")
        wait_for(lambda: backlog_of(records.parent)[0] == len(lines), "every line spooled", 60)
        assert stored(outage, a) == Counter()
        # the node's daemon stopped: it would (rightly) shorten its file as
        # soon as it sees the login hosts' confirmations; with it gone, any
        # shortening below would be the login hosts' (which must never write it)
        daemons = _pids_in(a.home / "run-node1")
        assert daemons, "the node's daemon runs"
        for pid in daemons:
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not any(_alive(p) for p in daemons), "the node's daemon gone")

        results: list[subprocess.CompletedProcess[str]] = []
        pushers = [
            threading.Thread(target=lambda h=h: results.append(
                h.shournal("sync", **env_of(h))))
            for h in logins
        ]  # fmt: skip
        for t in pushers:
            t.start()
        for t in pushers:
            t.join()
        assert [r.returncode for r in results] == [0, 0], results
        texts = stored(outage, a)
        assert all(texts[line] == 1 for line in lines), texts
        assert [t for t, n in texts.items() if n != 1] == [], texts
        # the node's file is still whole: only the node shortens it
        assert backlog_of(records.parent)[0] == len(lines)
        res = node.shournal("sync", "--timeout", "30", **env_of(node))
        assert "backlog: 0 command(s)" in res.stdout, res
        assert backlog_of(records.parent)[0] == 0
        sh.exit()
    finally:
        config.unlink()
        for h in (node, *logins):
            for pid in _pids_in(a.home / f"run-{h.hostname}"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for d in (shared, *[a.home / f"{k}-{h.hostname}" for h in (node, *logins)
                            for k in ("run", "data")]):
            shutil.rmtree(d, ignore_errors=True)
    texts = stored(outage, a)
    assert [t for t, n in texts.items() if n != 1] == [], texts


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")


def _pids_in(rundir: Path) -> list[int]:
    pids = []
    for lock in (rundir / "shournal").glob(protocol.DAEMON_LOCK % "*"):
        try:
            pids.append(int(lock.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def test_a_read_only_server_keeps_the_commands_and_says_so(outage: Lab) -> None:
    """The server takes the user's sessions read-only (as a hot standby
    or a read-only maintenance window does): SQLSTATE 25006."""
    from shournal.errors import SERVER_READ_ONLY

    a = outage.hosts[0]
    setting = f'ALTER ROLE "{a.name}" IN DATABASE {DATABASE}'
    outage.admin(f"{setting} SET default_transaction_read_only = on")
    try:
        sh = a.shell(**daemon_env(a))
        out = sh.run("echo read-only-0") + sh.run("echo read-only-1")
        wait_for(lambda: (s := state(a)) is not None and s.cause == SERVER_READ_ONLY,
                 "the push refused", 60)
        res = sync(a, "--timeout", "5")
        assert res.returncode == 3 and SERVER_READ_ONLY in res.stdout, res
        assert stored(outage, a) == Counter()
    finally:
        outage.admin(f"{setting} RESET default_transaction_read_only")
    res = sync(a)
    assert res.returncode == 0, res
    out += sh.run("echo writable")
    sh.exit()
    wait_for(lambda: stored(outage, a)["echo writable"] == 1, "the last line", 60)
    texts = stored(outage, a)
    assert texts["echo read-only-0"] == texts["echo read-only-1"] == 1, texts
    shown = warnings(out)
    assert len(shown) == 1 and SERVER_READ_ONLY in shown[0], shown


def test_doctor_shows_the_running_daemons_last_push_not_only_its_state_files(
        outage: Lab) -> None:
    """While pushes succeed, the state file's time of the last push is
    rewritten at most every daemon._STATE_REFRESH seconds (a file per typed
    line cost CPU); `shournal doctor` asks the running daemon for the newer
    one, as `shournal sync` does."""
    a = outage.hosts[0]
    sh = a.shell(**daemon_env(a))
    _first_line_stored(outage, a, sh, "echo first-push")
    wait_for(lambda: (s := state(a)) is not None and s.last_push is not None, "the state file")
    first = state(a).last_push  # type: ignore[union-attr]
    assert first is not None
    wait_for(lambda: time.time() >= first + 1.0, "the next second", 5)
    _first_line_stored(outage, a, sh, "echo second-push")
    doctor = a.shournal("doctor").stdout
    (shown,) = [line.split("last successful push: ")[1][:23] for line in doctor.splitlines()
                if "last successful push: " in line]  # fmt: skip
    assert shown >= when(first + 1.0), doctor
    sh.exit()
