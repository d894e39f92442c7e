"""The fallback runtime folder /tmp/shournal-<uid>, made first by another
user: the victim's real shell does not use it (tests/system/
test_runtime_security.py), and says so once, with the owner, and `shournal
doctor` names the fix.  In a private /tmp (tmpfs in a new mount namespace):
the machine's /tmp, which other tests use, is left alone."""

from __future__ import annotations

import shlex

import pytest
from fixtures_shell import PROMPT, REPO, Install, recorded, wait_for

pytestmark = [pytest.mark.root]


def _spawn(kind: str, install: Install, home, squat: bool):
    import pexpect

    victim, other = install.user, install.other
    env = install.env(home)
    del env["XDG_RUNTIME_DIR"]  # the fallback in /tmp
    if kind == "bash":
        rc = home / ".bashrc"
        rc.write_text(f"PS1='{PROMPT}$ '\nsource {REPO}/shell/shournal.bash\nSHOURNAL_ENABLE\n")
        argv = ["bash", "--noprofile", "--rcfile", str(rc), "-i"]
    else:
        rc = home / ".zshrc"
        rc.write_text(f"PS1='{PROMPT}%# '\nunsetopt PROMPT_SP\n"
                      f"source {REPO}/shell/shournal.zsh\nSHOURNAL_ENABLE\n")
        env["ZDOTDIR"] = str(home)
        argv = ["zsh", "-i"]
    rundir = f"/tmp/shournal-{victim.pw_uid}"
    lines = ["mount -t tmpfs -o mode=1777 tmpfs /tmp"]
    if REPO.is_relative_to("/tmp"):  # a checkout under /tmp (a CI clone) stays visible
        repo = shlex.quote(str(REPO))
        keep = shlex.quote(str(home / "repo"))
        lines = [f"mkdir {keep}", f"mount --bind {repo} {keep}", *lines,
                 f"mkdir -p {repo}", f"mount --bind {keep} {repo}"]  # fmt: skip
    if squat:
        lines.append(f"runuser -u {other.pw_name} -- mkdir -m 777 {rundir}")
    lines.append(shlex.join(["exec", "runuser", "-u", victim.pw_name, "--", "env", "-i",
                             *[f"{k}={v}" for k, v in env.items()], *argv]))
    proc = pexpect.spawn("unshare", ["--mount", "--propagation", "private", "sh", "-ec",
                                     " && ".join(lines)],
                         cwd=str(home / "work"), encoding="utf-8", codec_errors="replace",
                         timeout=60, dimensions=(50, 400))  # fmt: skip
    proc.expect(PROMPT)
    return proc, rundir


def _run(proc, line: str) -> str:
    proc.sendline(line)
    proc.expect(PROMPT)
    return proc.before


@pytest.mark.parametrize("kind", ["bash", "zsh"])
@pytest.mark.parametrize("squat", [True, False], ids=["squatted", "control"])
def test_a_squatted_runtime_folder_is_named_once_in_the_shell_and_by_doctor(
        install, user_home, kind, squat):
    import pexpect

    proc, rundir = _spawn(kind, install, user_home, squat)
    try:
        start = proc.before
        later = _run(proc, "echo one > one.txt") + _run(proc, "echo two > two.txt")
        doctor = _run(proc, "shournal doctor")
        proc.sendline("exit")
        proc.expect(pexpect.EOF)
    finally:
        proc.close(force=True)
    told = [line for line in start.splitlines() if "runtime folder" in line]
    if squat:
        assert len(told) == 1, start
        assert told[0].startswith(f"shournal: runtime folder {rundir} belongs to uid "
                                  f"{install.other.pw_uid}, not to you"), told
        assert "no warnings" in told[0] and "shournal doctor" in told[0]
        assert "runtime folder" not in later  # once
        assert f"FAIL runtime folder: {rundir} belongs to uid {install.other.pw_uid}" in doctor
        assert f"ask root to remove {rundir} (its owner: {install.other.pw_name})" in doctor
    else:
        assert told == [] and "runtime folder" not in later, start + later
        assert f"ok   runtime folder: {rundir}" in doctor, doctor
    # either way the lines are recorded (the listener stores them itself;
    # its markers were in the private /tmp: waited for in the journal)
    def texts() -> list[str]:
        try:
            return [c.text for c in recorded(user_home, create=False, command_text="echo %")]
        except Exception:  # noqa: BLE001 - not there yet
            return []

    wait_for(lambda: len(texts()) == 2, "both lines stored", timeout=60)
    assert texts() == ["echo one > one.txt", "echo two > two.txt"]
