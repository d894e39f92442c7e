"""The ReReSo container, end to end, as the unprivileged test user with the
real setuid helper: a small Python tool recorded with `shournal run
--apparatus` on two inputs; `describe tool` builds its SIF image; the
image's squashfs partition, unpacked with siftool and unsquashfs, runs the
tool in bubblewrap on a third input, with the output the host's tool gives;
`recombine` runs the bundle in the image on a benchmark bundle, each run
journaled; missing archive content stops `describe tool` with the files
named and nothing written.

No Apptainer here: the SIF is checked with siftool and run with
bubblewrap."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from fixtures_shell import Shell, wait_stored
from test_rereso_system import CSVS, HELPER, INI, TOOL, _expected, _write_as_user
from test_run import commands, run_as_user

from shournal.rereso import schema
from shournal.rereso.image import IN_DIR, OUT_DIR
from shournal.store.archive import Archive

pytestmark = [pytest.mark.root]

NEW_INPUT = "a,b\n100,1\n2,3\n4,5\n"


def _as_user(install, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", install.user.pw_name, "--", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def _record(install, user_home) -> tuple[Path, list[str]]:
    work = user_home / "work"
    for name, text in {"tool.py": TOOL, "helper.py": HELPER, "tool.ini": INI, **CSVS,
                       "new.csv": NEW_INPUT}.items():
        _write_as_user(install, work / name, text)
    for n in (1, 2):
        res = run_as_user(install, user_home, "run", "--apparatus", "--", "python3", "tool.py",
                          f"in{n}.csv", f"out{n}.json")
        assert res.returncode == 0, res.stderr
    runs = commands(user_home, command_text="python3 tool.py in%")
    assert len(runs) == 2
    return work, [str(c.id) for c in runs]


def test_sif_image_runs_the_recorded_tool_on_a_new_input(install, user_home):
    work, ids = _record(install, user_home)
    res = run_as_user(install, user_home, "describe", "tool", *ids, "-o", "tool-bundle",
                      "--name", "sum-rows", "--license", "MIT")
    assert res.returncode == 0, res.stderr
    assert "not built" not in res.stderr
    bundle = work / "tool-bundle"
    tool = yaml.safe_load((bundle / "rereso-tool.yml").read_text())
    assert schema.errors(tool, schema.TOOL_SCHEMA) == []
    assert tool["container"] == "sum-rows.sif"
    sif = bundle / "sum-rows.sif"
    definition = (bundle / "sum-rows.def").read_text()
    assert "%runscript" in definition and f"    {work / 'helper.py'}\n" in definition

    # The SIF: a deffile (the .def beside it) and a squashfs primary
    # system partition.
    listing = _as_user(install, "siftool", "list", str(sif), cwd=work)
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    (deffile,) = [ln for ln in lines if "Def.FILE" in ln]
    (part,) = [ln for ln in lines if "FS (Squashfs/" in ln]
    assert "FS (Squashfs/*System/" in part  # the primary system partition Apptainer runs
    dumped = _as_user(install, "siftool", "dump", deffile.split()[0], str(sif), cwd=work)
    assert dumped.stdout == definition
    squash = work / "rootfs.squashfs"
    with open(squash, "wb") as fh:
        subprocess.run(["runuser", "-u", install.user.pw_name, "--", "siftool", "dump",
                        part.split()[0], str(sif)], stdout=fh, check=True, timeout=120)
    rootfs = work / "rootfs"
    res = _as_user(install, "unsquashfs", "-no-xattrs", "-q", "-d", str(rootfs), str(squash),
                   cwd=work)
    assert res.returncode == 0, res.stderr
    # The image holds the tool's files as the runs read them, and the
    # interpreter that ran them.
    assert (rootfs / str(work / "helper.py").lstrip("/")).read_text() == HELPER
    assert (rootfs / str(work / "tool.ini").lstrip("/")).read_text() == INI
    assert os.path.exists(rootfs / "usr/bin/python3")
    assert not (rootfs / str(work / "in1.csv").lstrip("/")).exists()  # a benchmark, not the tool

    # The tool in the image, on a new input, with nothing of the host but
    # the input and output directories.
    io_in, io_out = work / "io-in", work / "io-out"
    for d in (io_in, io_out):
        d.mkdir()
        os.chown(d, install.user.pw_uid, install.user.pw_gid)
    _write_as_user(install, io_in / "new.csv", NEW_INPUT)
    res = _as_user(install, "bwrap", "--ro-bind", str(rootfs), "/", "--proc", "/proc",
                   "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent",
                   "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
                   "--ro-bind", str(io_in), IN_DIR, "--bind", str(io_out), OUT_DIR,
                   "--", "/.singularity.d/runscript", "1", f"{IN_DIR}/new.csv",
                   f"{OUT_DIR}/new.json", cwd=work)
    assert res.returncode == 0, res.stderr
    host = _as_user(install, "python3", "tool.py", "new.csv", "host-new.json", cwd=work)
    assert host.returncode == 0, host.stderr
    got = (io_out / "new.json").read_text()
    assert got == (work / "host-new.json").read_text()
    assert json.loads(got) == _expected(NEW_INPUT)

    # recombine, in the image, on a benchmark bundle of other CSV files.
    res = run_as_user(install, user_home, "describe", "benchmark", "b1.csv", "b2.csv",
                      "-o", "set-b", "--license", "CC0-1.0")
    assert res.returncode == 0, res.stderr
    res = run_as_user(install, user_home, "recombine", "tool-bundle", "set-b", "-o",
                      "results", "--output-format", "json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert [(r["benchmark"], r["exit_status"]) for r in report["runs"]] == [
        ("set-b/b1.csv", 0), ("set-b/b2.csv", 0)]
    for r, name in zip(report["runs"], ("b1", "b2"), strict=True):
        (out,) = r["outputs"]
        assert json.loads(Path(out).read_text()) == _expected(CSVS[f"{name}.csv"])
        # Journaled: the run read the benchmark and wrote the output.
        (cmd,) = commands(user_home, wfile=out)
        assert "shournal.rereso.sandbox" in cmd.text and cmd.return_value == 0
        assert str(work / "set-b" / f"{name}.csv").encode() in {e.path for e in cmd.reads}


def test_describe_tool_names_the_files_missing_from_the_archive(install, user_home):
    work, ids = _record(install, user_home)
    # Remove the archived helper module: its recorded content is gone.
    archive = Archive(user_home / ".local/share/shournal/archive")
    from shournal.hashing import content_digest

    blob = archive.path_of(content_digest(HELPER.encode()).hex())
    assert blob.exists()
    blob.unlink()
    res = run_as_user(install, user_home, "describe", "tool", *ids, "-o", "tool-bundle")
    assert res.returncode == 2
    assert res.stderr.startswith("shournal: the apparatus archive lacks the recorded content of:")
    assert f"{work / 'helper.py'} (not in the archive" in res.stderr
    assert len(res.stderr.splitlines()) == 1
    assert not (work / "tool-bundle").exists()
    assert not [p for p in work.iterdir() if p.name.startswith(".tool-bundle")]


def test_benchmark_takes_the_apparatus_archived_version_of_a_changed_input(install, user_home):
    """The apparatus archive is a content source: an input changed on disk
    since the recorded run is copied as the run read it."""
    work, ids = _record(install, user_home)
    _write_as_user(install, work / "in1.csv", "a,b\n9,9\n")
    res = run_as_user(install, user_home, "describe", "benchmark", "--command-id", ids[0],
                      "-o", "set-a", "--license", "CC0-1.0")
    assert res.returncode == 0, res.stderr
    assert (work / "set-a" / "in1.csv").read_text() == CSVS["in1.csv"]


ENV_TOOL = """\
import json, os, sys
rows = open(sys.argv[1]).read().split()
json.dump({"rows": len(rows) - 1, "unit": os.environ["UNIT"]}, open(sys.argv[2], "w"))
"""


def test_recorded_environment_assignment_runs_in_the_image(install, user_home):
    """A tool recorded as `UNIT=cm python3 envtool.py IN OUT` (from a real
    shell) runs in its image with the assignment applied, though the image
    holds nothing but what the run read (no `env` program)."""
    work = user_home / "work"
    for name, text in {"envtool.py": ENV_TOOL, **CSVS}.items():
        _write_as_user(install, work / name, text)
    sh = Shell("bash", install, user_home)
    sh.run(f"cd {work}")
    assert "apparatus on for shell" in sh.run("shournal apparatus on")
    sh.run("UNIT=cm python3 envtool.py in1.csv out1.json")
    sh.exit()
    wait_stored(user_home)
    (run,) = commands(user_home, command_text="UNIT=cm python3 envtool.py%")
    assert json.loads((work / "out1.json").read_text())["unit"] == "cm"
    res = run_as_user(install, user_home, "describe", "tool", str(run.id), "-o", "tool-bundle",
                      "--name", "env-tool", "--license", "MIT")
    assert res.returncode == 0, res.stderr
    res = run_as_user(install, user_home, "describe", "benchmark", "b1.csv", "-o", "set-b",
                      "--license", "CC0-1.0")
    assert res.returncode == 0, res.stderr
    res = run_as_user(install, user_home, "recombine", "tool-bundle", "set-b", "-o",
                      "results", "--output-format", "json")
    report = json.loads(res.stdout)
    assert [(r["benchmark"], r["exit_status"]) for r in report["runs"]] == [
        ("set-b/b1.csv", 0)], res.stderr
    assert res.returncode == 0, res.stderr
    (out,) = report["runs"][0]["outputs"]
    assert json.loads(Path(out).read_text()) == {"rows": 3, "unit": "cm"}
