"""`shournal doctor` against the real setuid helper, as the test user."""

from __future__ import annotations

import shutil
import subprocess

import pytest

pytestmark = [pytest.mark.root]


def doctor(install, home, **extra_env):
    env = {**install.env(home), **extra_env}
    return subprocess.run(
        ["runuser", "-u", install.user.pw_name, "--", "env", "-i",
         *[f"{k}={v}" for k, v in env.items()], str(install.cli), "doctor"],
        cwd=home / "work", capture_output=True, text=True, timeout=120,
    )


def lines(out: str) -> dict[str, str]:
    """check name -> 'ok'/'FAIL'"""
    res = {}
    for line in out.splitlines():
        if line.startswith(("ok ", "FAIL ")):
            status, rest = line.split(None, 1)
            res[rest.split(":", 1)[0]] = status
    return res


def test_doctor_on_a_working_install(install, user_home):
    r = doctor(install, user_home)
    got = lines(r.stdout)
    for name in ("setuid helper", "mount namespace + fanotify mount marks",
                 "programs can join a command's namespace", "group", "preload library",
                 "listener", "config", "store"):
        assert got.get(name) == "ok", (name, r.stdout)
    # not run from a recording shell: exactly that is reported, with its fix
    assert got["recording in this shell"] == "FAIL", r.stdout
    assert "shournal init bash" in r.stdout
    assert r.returncode == 1


def test_doctor_names_a_helper_without_setuid_bit(install, user_home, tmp_path):
    plain = tmp_path / "shournal-suid"
    shutil.copy(install.helper, plain)
    plain.chmod(0o755)
    tmp_path.chmod(0o755)
    r = doctor(install, user_home, SHOURNAL_SUID_PATH=str(plain))
    got = lines(r.stdout)
    assert got["setuid helper"] == "FAIL", r.stdout
    assert "fix:" in r.stdout and r.returncode == 1


def test_rc_check_reads_the_restart_marker(monkeypatch):
    from shournal import doctor as d

    monkeypatch.delenv(d.RESTART_ENV, raising=False)
    assert d._rc_check() is None
    monkeypatch.setenv(d.RESTART_ENV, "0:2:/home/u/.bashrc")
    assert d._rc_check().ok
    monkeypatch.setenv(d.RESTART_ENV, "3:9:/home/u/my:rc")
    c = d._rc_check()
    assert not c.ok and not c.blocks
    assert "3 line(s) of /home/u/my:rc above SHOURNAL_ENABLE (line 9)" in c.detail


def test_doctor_checks_the_replay_sandbox(install, user_home):
    r = doctor(install, user_home)
    got = lines(r.stdout)
    assert got["unprivileged user namespaces (replay, rerun)"] == "ok", r.stdout
    assert got["bubblewrap (replay, rerun)"] == "ok", r.stdout
    # Without bwrap on PATH: the line and its fix.
    empty = user_home / "bin"  # where the test user can run a program
    empty.mkdir(mode=0o755)
    r = doctor(install, user_home, PATH=str(empty))
    got = lines(r.stdout)
    assert got["bubblewrap (replay, rerun)"] == "FAIL", r.stdout
    assert "fix: apt-get install bubblewrap" in r.stdout
    # A bwrap that cannot make its sandbox: its own error and the fix.
    (empty / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (empty / "bwrap").chmod(0o755)
    r = doctor(install, user_home, PATH=str(empty))
    assert lines(r.stdout)["bubblewrap (replay, rerun)"] == "FAIL", r.stdout
    assert "No permissions to create new namespace" in r.stdout
    assert "unprivileged_userns_clone" in r.stdout


def test_doctor_says_which_typed_lines_are_not_recorded(monkeypatch):
    from shournal import doctor as d

    monkeypatch.setenv("HISTCONTROL", "ignoreboth")
    c = d._history_check()
    assert c.ok and c.detail.startswith("HISTCONTROL=ignoreboth: space-prefixed lines are not")
    monkeypatch.delenv("HISTCONTROL")
    assert "HIST_IGNORE_SPACE" in d._history_check().detail
