"""ReReSo end to end, as the unprivileged test user with the real setuid
helper: record a small tool with `shournal run`, describe it and two
benchmark sets, and recombine the tool with a second CSV set (run, each
run journaled) and a JSON set (refused, with the reason)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from fixtures_shell import journal_url
from test_run import commands, run_as_user

from shournal.journal import Journal
from shournal.rereso import schema

pytestmark = [pytest.mark.root]

# A tool with a helper module and a config file it finds next to itself:
# the python tool of bench/rereso_image.py.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from rereso_image import PY_HELPER as HELPER  # noqa: E402
from rereso_image import PY_INI as INI  # noqa: E402
from rereso_image import PY_TOOL as TOOL  # noqa: E402

CSVS = {
    "in1.csv": "a,b\n1,2\n3,4\n",
    "in2.csv": "a,b\n5,6\n",
    "b1.csv": "a,b\n10,20\n30,40\n50,60\n",
    "b2.csv": "a,b\n7,7\n",
}


def _expected(csv: str) -> dict:
    rows = [line.split(",") for line in csv.split()]
    return {"rows": len(rows) - 1, "sum": sum(int(v) for r in rows[1:] for v in r),
            "unit": "mm"}


def _write_as_user(install, path: Path, text: str) -> None:
    path.write_text(text)
    os.chown(path, install.user.pw_uid, install.user.pw_gid)


def test_describe_and_recombine_recorded_tool(install, user_home):
    work = user_home / "work"
    for name, text in {"tool.py": TOOL, "helper.py": HELPER, "tool.ini": INI, **CSVS,
                       "j1.json": '{"a": [1, 2]}\n', "bad.csv": "a,b\nx,y\n"}.items():
        _write_as_user(install, work / name, text)
    for n in (1, 2):
        res = run_as_user(install, user_home, "run", "--", "python3", "tool.py",
                          f"in{n}.csv", f"out{n}.json")
        assert res.returncode == 0, res.stderr
    runs = commands(user_home, command_text="python3 tool.py in%")
    assert len(runs) == 2
    ids = [str(c.id) for c in runs]

    res = run_as_user(install, user_home, "describe", "tool", *ids, "-o", "tool-bundle",
                      "--name", "sum-rows", "--license", "MIT")
    assert res.returncode == 0, res.stderr
    assert "sum-rows.sif is not built: command" in res.stderr
    assert "recorded without its apparatus" in res.stderr
    assert not (work / "tool-bundle" / "sum-rows.sif").exists()
    tool = yaml.safe_load((work / "tool-bundle" / "rereso-tool.yml").read_text())
    assert schema.errors(tool, schema.TOOL_SCHEMA) == []
    assert tool["commands"] == [{
        "name": "tool.py [input.csv] [output.json]",
        "input-formats": [{"media-type": "text/csv"}],
        "output-formats": [{"media-type": "application/json"}],
    }]
    definition = (work / "tool-bundle" / "sum-rows.def").read_text()
    for own in ("tool.py", "helper.py", "tool.ini"):  # read by the runs, named by no argument
        assert f"    {work / own}\n" in definition

    sets = {
        "set-a": ["--command-id", ids[0], "--command-id", ids[1]],
        "set-b": ["b1.csv", "b2.csv"],
        "set-json": ["j1.json"],
        "set-bad": ["bad.csv"],
    }
    for name, args in sets.items():
        res = run_as_user(install, user_home, "describe", "benchmark", *args, "-o", name,
                          "--license", "CC0-1.0")
        assert res.returncode == 0, res.stderr
        doc = yaml.safe_load((work / name / "rereso-benchmark.yml").read_text())
        assert schema.errors(doc, schema.BENCHMARK_SCHEMA) == []
    assert (work / "set-a" / "in1.csv").read_text() == CSVS["in1.csv"]
    assert yaml.safe_load((work / "set-json" / "rereso-benchmark.yml").read_text())[
        "format"] == {"media-type": "application/json"}

    res = run_as_user(install, user_home, "recombine", "--host", "tool-bundle", "set-b",
                      "set-json", "-o", "results", "--output-format", "json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert [(p["set"], p["match"], p["reason"]) for p in report["pairs"]] == [
        ("set-b", True, None),
        ("set-json", False, "it accepts text/csv; the set is application/json"),
    ]
    assert [(r["benchmark"], r["exit_status"]) for r in report["runs"]] == [
        ("set-b/b1.csv", 0), ("set-b/b2.csv", 0)]
    for r, name in zip(report["runs"], ("b1", "b2"), strict=True):
        (out,) = r["outputs"]
        assert out == str(work / "results" / "set-b" / name / "output.json")
        assert json.loads(Path(out).read_text()) == _expected(CSVS[f"{name}.csv"])
        # The command's name is the invocation, with the bundle's launcher.
        assert r["invocation"] == ["tool.py", str(work / "set-b" / f"{name}.csv"), out]
    assert report["not_run"] == [
        {"set": "set-json", "benchmark": None, "command_number": 1,
         "command": "tool.py [input.csv] [output.json]",
         "reason": "no match: it accepts text/csv; the set is application/json"}]
    # Each run is a journaled command that wrote its output.
    store = Journal.open(journal_url(user_home), create=True)
    try:
        for r in report["runs"]:
            (cmd,) = store.find(wfile=r["outputs"][0])
            assert cmd.text.startswith("tool.py ") and cmd.return_value == 0
    finally:
        store.close()

    # Recorded without the apparatus: no image, so no container mode.
    res = run_as_user(install, user_home, "recombine", "tool-bundle", "set-b", "-o",
                      "results-image")
    assert res.returncode == 2
    assert res.stderr.startswith("shournal: ") and res.stderr.count("\n") == 1, res.stderr
    assert "the container sum-rows.sif is missing; use --host" in res.stderr
    assert not (work / "results-image").exists()

    # Nothing to run is an error on stderr, with the refused pair's reason.
    res = run_as_user(install, user_home, "recombine", "--host", "tool-bundle", "set-json",
                      "-o", "results2")
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.splitlines() == [
        "shournal: no benchmark set matches a command of the tool: nothing was run",
        "  set-json x command 1 (tool.py [input.csv] [output.json]): no match: "
        "it accepts text/csv; the set is application/json"]
    assert not (work / "results2").exists()

    # A run that fails is reported in the table, and so in the status.
    res = run_as_user(install, user_home, "recombine", "--host", "tool-bundle", "set-bad",
                      "-o", "results3")
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "set-bad x command 1 (tool.py [input.csv] [output.json]): match"
    assert lines[1].split() == ["benchmark", "command", "exit", "status", "outputs"]
    assert lines[2].split() == ["set-bad/bad.csv", "1:", "tool.py", "[input.csv]",
                                "[output.json]", "1", "-"]
    log = (work / "results3" / "set-bad" / "bad" / "command-1.log").read_text()
    assert "ValueError" in log
