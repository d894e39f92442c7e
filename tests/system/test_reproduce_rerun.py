"""`shournal rerun` is recorded and linked to its origin (derivedFrom), as
the unprivileged test user through the setuid helper."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from test_reproduce_e2e import COMMAND, _as_user, _last_id, _manifest, _record, analysis  # noqa: F401
from test_run import cli_as_user, commands, run_as_user

from shournal.hashing import content_digest

pytestmark = [pytest.mark.root]


def _query_json(install, home, *criteria: str) -> list[dict]:
    res = run_as_user(install, home, "query", *criteria, "--output-format", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_sandboxed_rerun_is_recorded_and_linked(install, user_home, analysis) -> None:  # noqa: F811
    assert _record(install, user_home, *COMMAND).returncode == 0
    cid = _last_id(user_home)
    _as_user(install, user_home, analysis / "new.csv", "name,value\nx,10\n")
    outdir = user_home / "o"
    res = run_as_user(install, user_home, "rerun", str(cid), "--input", "data.csv=new.csv",
                      "-o", str(outdir), "--output-format", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    rep = json.loads(res.stdout)
    new = rep["recorded"]
    assert isinstance(new, int) and new == _last_id(user_home) and new != cid
    result = outdir / str(analysis).lstrip("/") / "results.txt"
    assert result.read_text() == "rows=1 total=20.000\n"
    # query: the file in OUTDIR was written by the rerun, derived from cid.
    (obj,) = _query_json(install, user_home, "--wfile", str(result))
    assert obj["id"] == new and obj["derivedFrom"] == cid
    assert [e["path"] for e in obj["fileReadEvents"]] == [str(analysis / "new.csv")]
    assert "derivedFrom" not in _query_json(install, user_home, "--command-id", str(cid))[0]
    human = run_as_user(install, user_home, "query", "--command-id", str(new))
    assert f"Derived from command {cid} (shournal rerun)" in human.stdout, human.stdout
    lin = run_as_user(install, user_home, "lineage", str(result))
    assert f"command {new} " in lin.stdout and f"derived from command {cid}" in lin.stdout
    lin = json.loads(run_as_user(install, user_home, "lineage", str(result),
                                 "--output-format", "json").stdout)
    assert [c.get("derivedFrom") for c in lin["commands"]] == [cid]
    man = _manifest(user_home, new)
    assert man["observed"] is False and man["derived_from"] == cid
    (w,) = man["writes"]
    assert w[0] == str(analysis / "results.txt")
    assert w[5] == content_digest(b"rows=1 total=20.000\n").hex()
    # diff origin/rerun names exactly the changed input and output, and the link.
    res = run_as_user(install, user_home, "diff", str(cid), str(new), "--output-format", "json")
    assert res.returncode == 1, res.stderr
    d = json.loads(res.stdout)
    changed = {(f["side"], f["path"]) for f in d["files"] if f["change"] != "same"}
    assert changed == {("read", str(analysis / "data.csv")),
                       ("write", str(analysis / "results.txt"))}, d["files"]
    assert d["derivedFrom"] == {"a": None, "b": cid}
    res = run_as_user(install, user_home, "diff", str(cid), str(new))
    assert f"b derived from command {cid}" in res.stdout, res.stdout


def test_rerun_in_place_is_recorded_as_any_command_and_linked(
    install, user_home, analysis  # noqa: F811
) -> None:
    assert _record(install, user_home, *COMMAND).returncode == 0
    cid = _last_id(user_home)
    editor = user_home / "ed.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/data.csv/new.csv/' \"$1\"\n")
    editor.chmod(0o755)
    _as_user(install, user_home, analysis / "new.csv", "name,value\nx,10\n")
    cmd = cli_as_user(install, user_home, "rerun", str(cid), "--in-place", "--edit",
                      "--env", "EXTRA=1")
    i = cmd.index("env") + 2
    cmd[i:i] = [f"EDITOR={editor}"]
    res = subprocess.run(cmd, cwd=user_home, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "command line: python3 analysis.py new.csv config.ini" in res.stderr
    # It ran in the real tree, in the recorded working directory.
    assert (analysis / "results.txt").read_text() == "rows=1 total=20.000\n"
    new = _last_id(user_home)
    (view,) = commands(user_home, command_id=new)
    assert view.derived_from == cid and view.working_dir == str(analysis)
    assert str(analysis / "results.txt").encode() in {e.path for e in view.writes}
    assert str(analysis / "new.csv").encode() in {e.path for e in view.reads}
    man = _manifest(user_home, new)
    assert man["derived_from"] == cid and man.get("observed", True)
    assert man["env"]["EXTRA"] == "1"
    # Options that need the sandbox are refused, nothing run.
    res = run_as_user(install, user_home, "rerun", str(cid), "--in-place", "-o", "x")
    assert res.returncode == 2 and res.stderr.startswith("shournal: --in-place")
    assert res.stderr.count("\n") == 1


def test_rerun_local_and_archived_programs(install, user_home, analysis) -> None:  # noqa: F811
    assert _record(install, user_home, *COMMAND).returncode == 0
    cid = _last_id(user_home)
    python = os.path.realpath("/usr/bin/python3")
    res = run_as_user(install, user_home, "rerun", str(cid), "--local",
                      os.path.basename(python), "-o", str(user_home / "o1"))
    assert res.returncode == 0, res.stderr
    (line,) = [x for x in res.stderr.splitlines() if "programs and libraries" in x]
    assert line.endswith(", 1 from the host"), line
    res = run_as_user(install, user_home, "rerun", str(cid), "--local-all", "--archived",
                      python, "-o", str(user_home / "o2"))
    assert res.returncode == 0, res.stderr
    (line,) = [x for x in res.stderr.splitlines() if "programs and libraries" in x]
    assert line.split(":")[-1].startswith(" 1 from the archive"), line
    res = run_as_user(install, user_home, "rerun", str(cid), "--local", "no-such-prog")
    assert res.returncode == 2 and "ran no such program" in res.stderr
    assert res.stderr.count("\n") == 1


def test_sandboxed_rerun_records_and_shows_each_file_once(
    install, user_home, analysis  # noqa: F811
) -> None:
    """The working directory and an output's directory below it are both
    writable: each file they hold is one output, one `extra` line, one
    write of the recorded rerun (main walked the nested mirror twice)."""
    (analysis / "sub").mkdir()
    os.chown(analysis / "sub", install.user.pw_uid, install.user.pw_gid)
    assert _record(install, user_home, "sh", "-c", "echo a > sub/out.txt").returncode == 0
    cid = _last_id(user_home)
    res = run_as_user(install, user_home, "rerun", str(cid), "--command",
                      "echo a > sub/out.txt; echo b > sub/new.txt; echo c > top.txt",
                      "-o", str(user_home / "o"))
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines.count(f"identical {analysis / 'sub' / 'out.txt'}") == 1, res.stdout
    assert lines.count(f"extra     {analysis / 'sub' / 'new.txt'}") == 1, res.stdout
    assert lines.count(f"extra     {analysis / 'top.txt'}") == 1, res.stdout
    new = _last_id(user_home)
    written = [w[0] for w in _manifest(user_home, new)["writes"]]
    assert sorted(written) == sorted({str(analysis / "sub" / "out.txt"),
                                      str(analysis / "sub" / "new.txt"),
                                      str(analysis / "top.txt")}), written
    (view,) = commands(user_home, command_id=new)
    assert len(view.writes) == 3, [e.path for e in view.writes]


def test_diff_ignores_shournals_own_variables(install, user_home, analysis) -> None:  # noqa: F811
    """A shell's `_` and shournal's `_SHOURNAL_*` differ for every command
    line: never an environment difference; a real variable is (positive
    control)."""
    ids = []
    for n in (1, 2):
        env = {"_": f"/usr/bin/x{n}", "_SHOURNAL_SEQ": str(n), "_SHOURNAL_SHELL_PID": str(n),
               "SHOURNAL_SESSION_ID": f"s{n}", "PLAIN": "same"}
        assert _record(install, user_home, *COMMAND, env=env).returncode == 0
        ids.append(_last_id(user_home))
    res = run_as_user(install, user_home, "diff", *map(str, ids), "--output-format", "json")
    rep = json.loads(res.stdout)
    assert "environment" not in rep["differs"], rep.get("environment")
    assert _record(install, user_home, *COMMAND, env={"PLAIN": "other"}).returncode == 0
    res = run_as_user(install, user_home, "diff", str(ids[0]), str(_last_id(user_home)),
                      "-d", "2")
    assert "env ~PLAIN: same -> other" in res.stdout, res.stdout
    assert "_SHOURNAL" not in res.stdout and "env -_=" not in res.stdout, res.stdout
