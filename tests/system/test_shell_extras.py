"""What users reach for first, in a real shell on a pty: TAB completion of
`shournal` (the files scripts/shell_docs.py generates), and the default
script archive (a Python script, a Makefile, a config) restored from what
`shournal query` lists."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures_shell import REPO, Install, Shell

pytestmark = [pytest.mark.shell, pytest.mark.root]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r|\x07")


@pytest.fixture(scope="module")
def share(install: Install) -> Iterator[Path]:
    """The generated completion files, readable by the test user."""
    out = install.root / "share"
    subprocess.run([sys.executable, str(REPO / "scripts" / "shell_docs.py"), str(out)],
                   check=True)  # fmt: skip
    subprocess.run(["chmod", "-R", "a+rX", str(out)], check=True)
    yield out
    shutil.rmtree(out, ignore_errors=True)


def _completed_line(sh: Shell, typed: str, expect: str) -> str:
    """Type ``typed`` and a TAB; wait until the line shows ``expect``; the
    line is then discarded (Ctrl-U) and a prompt awaited."""
    sh.proc.send(typed + "\t")
    sh.proc.expect(re.escape(expect), timeout=30)
    shown = _ANSI.sub("", sh.proc.before + sh.proc.after)
    sh.proc.send("\x15")  # kill the line
    sh.run("")
    return shown


def test_bash_completes_commands_and_options_on_a_pty(install, user_home, share):
    comp = share / "bash-completion" / "completions" / "shournal"
    sh = Shell("bash", install, user_home, rc_after=f"source {comp}\n")
    try:
        assert "shournal query" in _completed_line(sh, "shournal que", "shournal query ")
        assert "--wfile" in _completed_line(sh, "shournal query --wf", "--wfile ")
        assert "describe tool" in _completed_line(sh, "shournal describe to", "describe tool ")
        sh.exit()
    except BaseException:
        sh.proc.terminate(force=True)
        raise


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completes_commands_and_options_on_a_pty(install, user_home, share):
    fdir = share / "zsh" / "vendor-completions"
    rc = f"fpath=({fdir} $fpath)\nautoload -Uz compinit && compinit -u\n"
    sh = Shell("zsh", install, user_home, rc_extra=rc)
    try:
        assert "shournal query" in _completed_line(sh, "shournal que", "shournal query")
        assert "--wfile" in _completed_line(sh, "shournal query --wf", "--wfile")
        sh.exit()
    except BaseException:
        sh.proc.terminate(force=True)
        raise


ANALYZE = b"import sys\nprint(sum(int(x) for x in open(sys.argv[1])))\n"
MAKEFILE = b"total.txt: numbers.txt analyze.py\n\tpython3 analyze.py numbers.txt > total.txt\n"
CONFIG = b"threshold: 3\n"


def test_scripts_makefile_and_config_are_archived_and_restored(install, user_home):
    """With the default config: `make` reads the Makefile, python3 the
    script, the script a config; each is archived once and restored
    byte for byte from the file id `query --wfile` lists."""
    work = user_home / "work"
    for name, data in (("analyze.py", ANALYZE), ("Makefile", MAKEFILE), ("params.yaml", CONFIG),
                       ("numbers.txt", b"1\n2\n3\n")):  # fmt: skip
        (work / name).write_bytes(data)
        os.chown(work / name, install.user.pw_uid, install.user.pw_gid)
    if shutil.which("make") is None:
        pytest.skip("needs make")
    sh = Shell("bash", install, user_home)
    try:
        sh.run("make total.txt")
        sh.run("cat params.yaml analyze.py > /dev/null && "
               "python3 analyze.py numbers.txt > again.txt")
        out = sh.run("shournal query --wfile total.txt --output-format json")
        body = _ANSI.sub("", out)
        (cmd,) = json.loads(body[body.index("["):body.rindex("]") + 1])
        archived = {os.path.basename(r["path"]): r["id"] for r in cmd["fileReadEvents"]
                    if r["isStoredToDisk"]}  # fmt: skip
        assert {"Makefile", "analyze.py"} <= set(archived), cmd["fileReadEvents"]
        assert cmd["match"] == "exact"
        sh.run("mkdir -p restored && cd restored")
        for name in ("analyze.py", "Makefile"):
            sh.run(f"shournal restore --file-id {archived[name]}")
        out = sh.run("shournal query --command-text params.yaml --output-format json")
        body = _ANSI.sub("", out)
        (cmd2,) = json.loads(body[body.index("["):body.rindex("]") + 1])
        yaml_ids = [r["id"] for r in cmd2["fileReadEvents"]
                    if r["path"].endswith("params.yaml") and r["isStoredToDisk"]]  # fmt: skip
        assert yaml_ids, cmd2["fileReadEvents"]
        sh.run(f"shournal restore --file-id {yaml_ids[0]}")
        sh.exit()
    except BaseException:
        sh.proc.terminate(force=True)
        raise
    restored = work / "restored"
    assert (restored / "analyze.py").read_bytes() == ANALYZE
    assert (restored / "Makefile").read_bytes() == MAKEFILE
    assert (restored / "params.yaml").read_bytes() == CONFIG
