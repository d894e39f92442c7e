"""Which journal a command line goes into is decided by that line's own
shell environment (SHOURNAL_DB_URL, XDG_CONFIG_HOME, XDG_DATA_HOME, HOME),
never by the environment of whichever shell started the store daemon:
real shells on a pty as the unprivileged test user, through the setuid
helper, two of them sharing one runtime directory (as two terminals of one
user do)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures_shell import Shell, as_owner_of, journal_url, wait_for, write_config
from test_daemon import as_user, daemon_env, listener_env, rundir

from shournal.errors import StoreMissing
from shournal.store import Store


@pytest.fixture
def home2(install) -> Iterator[Path]:
    """A second home of the test user (a scratch home for a project)."""
    path = Path(tempfile.mkdtemp(prefix="shournal-home2-", dir="/var/tmp"))
    (path / "work").mkdir()
    subprocess.run(["chown", "-R", f"{install.user.pw_uid}:{install.user.pw_gid}", str(path)],
                   check=True)
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def daemon_pids(home: Path) -> list[int]:
    """Every store daemon of the runtime directory of `home` that runs."""
    pids = []
    for lock in rundir(home).glob("daemon*.lock"):
        try:
            pid = int(lock.read_text().split()[0])
            if b"daemon" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(pid)
        except (OSError, ValueError, IndexError):
            continue
    return pids


def kill_daemons(home: Path) -> None:
    for pid in daemon_pids(home):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_for(lambda: not daemon_pids(home), "the daemons to die")


@pytest.fixture
def home(install, user_home):
    yield user_home
    kill_daemons(user_home)


def texts(home: Path, url: str) -> list[str]:
    """The command texts of the journal `url` (none if it does not exist)."""
    path = url.removeprefix("sqlite:///")
    if not os.path.exists(path):
        return []
    try:
        with as_owner_of(home), Store(url, create=False) as store, store.reading() as conn:
            return [r[0] for r in conn.exec_driver_sql("SELECT text FROM command")]
    except StoreMissing:  # being created
        return []


def other_env(variant: str, home: Path, home2: Path) -> tuple[dict[str, str], str]:
    """The second shell's environment and the URL of its journal."""
    if variant == "url":
        url = f"sqlite:///{home}/proj.sqlite"
        return {"SHOURNAL_DB_URL": url}, url
    if variant == "data":
        return ({"XDG_DATA_HOME": str(home2)},
                f"sqlite:///{home2}/shournal/journal.sqlite")
    if variant == "config":
        url = f"sqlite:///{home2}/configured.sqlite"
        (home2 / "shournal").mkdir()
        (home2 / "shournal" / "config.toml").write_text(f'[store]\nurl = "{url}"\n')
        subprocess.run(["chown", "-R", f"{os.stat(home2).st_uid}:{os.stat(home2).st_gid}",
                        str(home2)], check=True)
        return {"XDG_CONFIG_HOME": str(home2)}, url
    assert variant == "home"
    return ({"HOME": str(home2), "XDG_RUNTIME_DIR": str(home / "run")},
            f"sqlite:///{home2}/.local/share/shournal/journal.sqlite")


def wait_all_stored(home: Path, urls: list[str], n: int) -> None:
    """Until `n` command lines are in the journals `urls` together (each
    line is stored once, somewhere)."""
    wait_for(lambda: sum(len(texts(home, u)) for u in urls) >= n, f"{n} stored lines", 90)


@pytest.mark.parametrize(
    "kind,variant",
    [("bash", "url"), ("zsh", "url"), ("bash", "data"), ("bash", "config"), ("bash", "home")],
)
def test_two_shells_typing_alternately_each_line_in_its_own_journal(
    kind, variant, install, home, home2
):
    env_b, url_b = other_env(variant, home, home2)
    url_a = journal_url(home)
    a = Shell(kind, install, home, extra_env=daemon_env(install))
    b = Shell(kind, install, home, extra_env={**daemon_env(install), **env_b})
    want_a, want_b = [], []
    for i in range(3):
        want_a.append(f"echo a{i} > a{i}")
        a.run(want_a[-1])
        want_b.append(f"echo b{i} > b{i}")
        b.run(want_b[-1])
    wait_all_stored(home, [url_a, url_b], 6)
    assert sorted(texts(home, url_a)) == sorted(want_a)
    assert sorted(texts(home, url_b)) == sorted(want_b)

    # The daemon(s) killed; the other shell types first and starts one.
    kill_daemons(home)
    for i in range(3, 6):
        want_b.append(f"echo b{i} > b{i}")
        b.run(want_b[-1])
        want_a.append(f"echo a{i} > a{i}")
        a.run(want_a[-1])
    wait_all_stored(home, [url_a, url_b], 12)
    assert sorted(texts(home, url_a)) == sorted(want_a)
    assert sorted(texts(home, url_b)) == sorted(want_b)
    a.exit()
    b.exit()


@pytest.mark.parametrize("listener", ["daemon", "python"])
def test_a_url_exported_in_a_running_bash_decides_its_next_lines(listener, install, home):
    """bash keeps an export out of its process's environ (it builds each
    child's environment itself): the journal still follows the export,
    with the store daemon and with the Python listener per line."""
    url_b = f"sqlite:///{home}/exported.sqlite"
    sh = Shell("bash", install, home, extra_env=listener_env(install, listener))
    sh.run("echo before > before")
    sh.run(f"export SHOURNAL_DB_URL={url_b}")
    sh.run("echo after > after")
    sh.run("unset SHOURNAL_DB_URL")
    sh.run("echo again > again")
    wait_all_stored(home, [journal_url(home), url_b], 5)
    assert "echo after > after" in texts(home, url_b)
    assert "echo after > after" not in texts(home, journal_url(home))
    assert {"echo before > before", "echo again > again"} <= set(texts(home, journal_url(home)))
    assert "echo again > again" not in texts(home, url_b)
    sh.exit()


def test_shournal_run_with_a_third_url_beside_two_shells(install, home):
    url_b = f"sqlite:///{home}/proj.sqlite"
    url_c = f"sqlite:///{home}/third.sqlite"
    a = Shell("bash", install, home, extra_env=daemon_env(install))
    b = Shell("bash", install, home, extra_env={**daemon_env(install), "SHOURNAL_DB_URL": url_b})
    a.run("echo a > a")
    env = {**install.env(home), "SHOURNAL_DB_URL": url_c}
    run = as_user(install, ["env", "-i", *[f"{k}={v}" for k, v in env.items()],
                            str(install.cli), "run", "--", "sh", "-c", "echo c > c"],
                  cwd=str(home / "work"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    b.run("echo b > b")
    a.run("echo a2 > a2")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    wait_all_stored(home, [journal_url(home), url_b, url_c], 4)
    assert sorted(texts(home, journal_url(home))) == ["echo a > a", "echo a2 > a2"]
    assert texts(home, url_b) == ["echo b > b"]
    assert len(texts(home, url_c)) == 1 and "echo c > c" in texts(home, url_c)[0]
    a.exit()
    b.exit()


def test_doctor_names_the_journals_the_running_daemons_serve(install, home):
    url_b = f"sqlite:///{home}/proj.sqlite"
    a = Shell("bash", install, home, extra_env=daemon_env(install))
    b = Shell("bash", install, home, extra_env={**daemon_env(install), "SHOURNAL_DB_URL": url_b})
    a.run("echo a > a")
    b.run("echo b > b")
    wait_all_stored(home, [journal_url(home), url_b], 2)
    out = a.run("shournal doctor")
    daemon_lines = [line for line in out.splitlines() if "store daemon" in line]
    assert daemon_lines, out
    text = "\n".join(daemon_lines)
    assert f"{home}/.local/share/shournal/journal.sqlite" in text, out
    assert f"{home}/proj.sqlite" in text, out
    a.exit()
    b.exit()


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_a_spare_namespace_prepared_for_another_journal_does_not_fit(kind, install, home):
    """One exec of the helper prepares two namespaces; the line after next
    takes the second one, prepared (and with its helper's environment)
    before the line in between exported another journal's URL.  Lines:
    1 takes the first of the pair prepared at `enable`, 2 its spare; the
    prompt after 2 prepares the next pair, which 3 (the export) and 4 take
    -- 4 the spare of the old journal, which must not fit; 5 (the unset)
    and 6 likewise the other way."""
    url_b = f"sqlite:///{home}/exported.sqlite"
    sh = Shell(kind, install, home, extra_env=daemon_env(install))
    sh.run("echo one > one")
    sh.run("echo two > two")
    sh.run(f"export SHOURNAL_DB_URL={url_b}")
    sh.run("echo four > four")
    sh.run("unset SHOURNAL_DB_URL")
    sh.run("echo six > six")
    wait_all_stored(home, [journal_url(home), url_b], 6)
    assert sorted(texts(home, url_b)) == ["echo four > four", "unset SHOURNAL_DB_URL"]
    assert sorted(texts(home, journal_url(home))) == [
        "echo one > one", "echo six > six", "echo two > two", f"export SHOURNAL_DB_URL={url_b}"
    ]
    sh.exit()


def test_a_changed_store_url_in_the_config_takes_the_next_lines(install, home):
    """The running daemon re-reads its config: lines after a change of
    [store] url go to the new journal, as every reader's query does."""
    url_b = f"sqlite:///{home}/configured.sqlite"
    write_config(home, "", install)
    sh = Shell("bash", install, home, extra_env=daemon_env(install))
    sh.run("echo one > one")
    wait_all_stored(home, [journal_url(home)], 1)
    pids = daemon_pids(home)
    write_config(home, f'[store]\nurl = "{url_b}"\n', install)
    sh.run("echo two > two")
    wait_all_stored(home, [journal_url(home), url_b], 2)
    assert daemon_pids(home) == pids  # the same daemon
    assert texts(home, journal_url(home)) == ["echo one > one"]
    assert texts(home, url_b) == ["echo two > two"]
    sh.exit()


def test_lines_spooled_before_a_url_change_still_go_to_the_old_journal(tmp_path, monkeypatch):
    """A change of [store] url while lines wait in the spool: they were
    spooled for the journal of their time."""
    import socket

    from test_daemon import _record

    from shournal.capture import daemon as dm

    for var, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"),
                     ("XDG_DATA_HOME", "data"), ("XDG_RUNTIME_DIR", "run")):
        (tmp_path / sub).mkdir(mode=0o700)
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.delenv("SHOURNAL_DB_URL", raising=False)
    config = tmp_path / "config" / "shournal" / "config.toml"
    config.parent.mkdir()

    def configure(url: str) -> None:
        new = config.with_suffix(".new")
        new.write_text(f'[store]\nurl = "{url}"\n')
        new.rename(config)  # another inode: the daemon sees a change

    url_a, url_b = f"sqlite:///{tmp_path}/a.sqlite", f"sqlite:///{tmp_path}/b.sqlite"
    configure(url_a)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    d = dm.Daemon(tmp_path / "run", sock)
    d.config()
    d.spool_record(_record(1))
    configure(url_b)
    d.config()
    d.spool_record(_record(2))
    with d._storing:
        while d.spool.backlog():
            assert d._store_batch()
        d._drop_journal()
    sock.close()
    assert texts(tmp_path, url_a) == ["cmd 1"]
    assert texts(tmp_path, url_b) == ["cmd 2"]


@pytest.mark.parametrize("url_set", [False, True])
def test_the_spool_of_one_daemon_per_user_goes_to_the_default_journal(
    url_set, tmp_path, monkeypatch
):
    """After an upgrade: what waits in <data dir>/spool itself (records,
    inbox) is stored by the daemon of the data directory's default journal
    (the one daemon of then served the default environment), once; a
    daemon of another journal leaves it."""
    import socket

    from test_daemon import _record

    from shournal.capture import daemon as dm
    from shournal.capture import spool as sp

    for var, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"),
                     ("XDG_DATA_HOME", "data"), ("XDG_RUNTIME_DIR", "run")):
        (tmp_path / sub).mkdir(mode=0o700)
        monkeypatch.setenv(var, str(tmp_path / sub))
    other = f"sqlite:///{tmp_path}/other.sqlite"
    if url_set:
        monkeypatch.setenv("SHOURNAL_DB_URL", other)
    else:
        monkeypatch.delenv("SHOURNAL_DB_URL", raising=False)
    old = tmp_path / "data" / "shournal" / "spool"
    spool = sp.Spool(old)
    spool.append([_record(1)])
    spool.close()
    sp.deposit(_record(2), old)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    d = dm.Daemon(tmp_path / "run", sock)
    with d._storing:
        d._adopt_old_spool()
        d._adopt_old_spool()  # (nothing left: nothing stored twice)
        d._drop_journal()
    sock.close()
    default = f"sqlite:///{tmp_path}/data/shournal/journal.sqlite"
    if url_set:
        assert texts(tmp_path, default) == [] and texts(tmp_path, other) == []
        assert (old / "records").exists() and sp.inbox_count(old) == 1
    else:
        assert sorted(texts(tmp_path, default)) == ["cmd 1", "cmd 2"]
        assert not (old / "records").exists() and sp.inbox_count(old) == 0
