"""The apparatus per shell (`shournal apparatus on|off`) and per directory
([apparatus] paths): real bash and zsh of the test user on a pty."""

from __future__ import annotations

import os

import pytest
from fixtures_shell import Shell, wait_stored, write_config
from test_reproduce_e2e import _as_user, _manifest, analysis  # noqa: F401
from test_run import commands

pytestmark = [pytest.mark.root]

RUN = "python3 analysis.py data.csv config.ini"


def _recorded(home) -> list[bool]:
    """For each recorded run of the analysis: recorded with its apparatus?"""
    wait_stored(home)
    return [_manifest(home, c.id) is not None for c in commands(home) if c.text == RUN]


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_apparatus_on_and_off_per_shell(install, user_home, analysis, kind) -> None:  # noqa: F811
    sh = Shell(kind, install, user_home)
    sh.run(f"cd {analysis}")
    sh.run(RUN)
    assert "apparatus on for shell" in sh.run("shournal apparatus on")
    sh.run(RUN)
    sh.run(RUN)
    assert "apparatus off" in sh.run("shournal apparatus off")
    sh.run(RUN)
    sh.exit()
    assert _recorded(user_home) == [False, True, True, False]
    cid = [c.id for c in commands(user_home) if c.text == RUN][1]
    man = _manifest(user_home, cid)
    reads = {r[0]: r for r in man["reads"]}
    # Beyond a normal record: the interpreter, archived from the event fd.
    assert reads[os.path.realpath("/usr/bin/python3")][5] is not None
    assert reads[str(analysis / "data.csv")][5] is not None
    assert man["umask"] is not None and man["env"].get("HOME") == str(user_home)


def test_another_shell_is_not_switched_on(install, user_home, analysis) -> None:  # noqa: F811
    one = Shell("bash", install, user_home)
    other = Shell("bash", install, user_home)
    one.run("shournal apparatus on")
    other.run(f"cd {analysis}")
    other.run(RUN)
    other.exit()
    one.run("shournal apparatus off")
    one.exit()
    assert _recorded(user_home) == [False]


def test_apparatus_per_directory(install, user_home, analysis) -> None:  # noqa: F811
    paper = analysis / "paper2"
    paper.mkdir()
    for name in ("analysis.py", "data.csv", "config.ini"):
        _as_user(install, user_home, paper / name, (analysis / name).read_text())
    os.chown(paper, install.user.pw_uid, install.user.pw_gid)
    write_config(user_home, '[apparatus]\npaths = ["~/work/paper2"]\n', install)
    sh = Shell("bash", install, user_home)
    sh.run(f"cd {analysis}")
    sh.run(RUN)  # outside: plain
    # a config change takes effect once a listener has read it (it leaves
    # the paths for the shell)
    wait_stored(user_home)
    sh.run("cd paper2")
    sh.run(RUN)  # the line after the cd: inside
    sh.run(RUN)
    sh.run("cd ..")
    sh.run(RUN)
    sh.exit()
    assert _recorded(user_home) == [False, True, True, False]


def test_apparatus_on_through_the_store_daemon(install, user_home, analysis) -> None:  # noqa: F811
    """With the store daemon, which reads the shell's environment for the
    manifest from its forwarder's /proc entry: the helper must not make
    the hand-over itself there (setup --forward), its /proc entry is not
    the user's to read."""
    from test_daemon import daemon_env, daemon_pid, wait_drained

    sh = Shell("bash", install, user_home, extra_env=daemon_env(install))
    try:
        sh.run(f"cd {analysis}")
        sh.run(RUN)
        assert "apparatus on for shell" in sh.run("shournal apparatus on")
        sh.run(RUN)
        sh.run("shournal apparatus off")
        sh.exit()
        wait_drained(user_home)
        assert _recorded(user_home) == [False, True]
        cid = [c.id for c in commands(user_home) if c.text == RUN][1]
        man = _manifest(user_home, cid)
        assert man["umask"] is not None and man["env"].get("HOME") == str(user_home)
    finally:
        pid = daemon_pid(user_home)
        if pid is not None:
            os.kill(pid, 9)
