"""`shournal diff --lineage F1 F2`: the first steps where two results'
lineages diverge, on pipelines recorded by the unprivileged test user."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_reproduce_e2e import _as_user
from test_run import cli_as_user, run_as_user

pytestmark = [pytest.mark.root]

PREP = "import sys\nopen(sys.argv[2], 'w').write(open(sys.argv[1]).read().upper())\n"
SUM = "import sys\nopen(sys.argv[2], 'w').write(str(len(open(sys.argv[1]).read())))\n"


def _pipeline(install, home: Path, name: str, raw: str, prep: str = PREP,
              extra: tuple[str, ...] = ()) -> Path:
    d = home / "work" / name
    d.mkdir()
    d.chmod(0o777)
    for f, text in (("raw.csv", raw), ("prep.py", prep), ("sum.py", SUM)):
        _as_user(install, home, d / f, text)
    for argv in (("python3", "prep.py", "raw.csv", "clean.csv"),
                 ("python3", "sum.py", "clean.csv", "out.txt", *extra)):
        res = subprocess.run(cli_as_user(install, home, "run", "--", *argv), cwd=d,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
    return d / "out.txt"


def _diff(install, home, a: Path, b: Path, *opts: str):
    return run_as_user(install, home, "diff", "--lineage", str(a), str(b), *opts)


def test_diff_lineage_names_the_first_divergence(install, user_home) -> None:
    base = _pipeline(install, user_home, "run1", "a,1\n")
    same = _pipeline(install, user_home, "run2", "a,1\n")
    other_input = _pipeline(install, user_home, "run3", "a,2\n")
    other_script = _pipeline(install, user_home, "run4", "a,1\n",
                             prep=PREP.replace(".upper()", ".lower()"))
    other_param = _pipeline(install, user_home, "run5", "a,1\n", extra=("--verbose",))
    res = _diff(install, user_home, base, same)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "do not differ" in res.stdout
    # A different raw input: the first step (prep) diverges by that input;
    # the step after it only by what prep made.
    res = _diff(install, user_home, base, other_input, "--output-format", "json")
    assert res.returncode == 1, res.stderr
    rep = json.loads(res.stdout)
    (first,) = rep["first_divergence"]
    assert first["depth"] == 2 and "prep.py" in first["a"]["command"]
    assert [(d["what"], d["path"]) for d in first["own"]] == [("input", "raw.csv")]
    (last,) = [s for s in rep["steps"] if s["depth"] == 1]
    assert last["own"] == [] and [u["path"] for u in last["upstream"]] == ["clean.csv"]
    res = _diff(install, user_home, base, other_input)
    assert "depth 2:" in res.stdout and "input raw.csv: content differs" in res.stdout
    assert "then depth 1:" in res.stdout
    # A different script version.
    rep = json.loads(_diff(install, user_home, base, other_script,
                           "--output-format", "json").stdout)
    (first,) = rep["first_divergence"]
    assert [(d["what"], d["path"]) for d in first["own"]] == [("script", "prep.py")]
    # A different parameter, in the last step only.
    rep = json.loads(_diff(install, user_home, base, other_param,
                           "--output-format", "json").stdout)
    (first,) = rep["first_divergence"]
    assert first["depth"] == 1
    assert [d["what"] for d in first["own"]] == ["parameters"]
    # A file no recorded command made: one line, status 2.
    stray = user_home / "work" / "stray.txt"
    _as_user(install, user_home, stray, "x")
    res = _diff(install, user_home, base, stray)
    assert res.returncode == 2 and res.stderr.startswith("shournal: ")
    assert res.stderr.count("\n") == 1
