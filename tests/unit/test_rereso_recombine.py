"""Planning `shournal recombine` on the ReReSo authors' published
case-study descriptors (tests/data/rereso-case-studies, CC0-1.0, copied
unchanged): which command meets which benchmark set, and why not;
placeholders and their roles; benchmark files published compressed."""

from __future__ import annotations

import io
import json
import lzma
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from shournal.rereso.recombine import (
    CANNOT,
    INPUT,
    NEEDS,
    NO_MATCH,
    OUTPUT,
    RUNS,
    RecombineError,
    check_file,
    load_bundle,
    parse_command,
    plan,
)
from shournal.rereso.schema import BENCHMARK_DESCRIPTOR, BENCHMARK_SCHEMA

CASES = Path(__file__).resolve().parents[1] / "data" / "rereso-case-studies"
TOOLS = {
    "dumux-3.8.0": CASES / "dumux/ci-tools/dumux-3.8.0-dune-2.10",
    "dumux-3.9.0": CASES / "dumux/ci-tools/dumux-3.9.0-dune-2.10",
    "runtest": CASES / "dumux/ci-tools/runtest",
    "koch2024a": CASES / "dumux/koch2024a-repro",
    "hpm": CASES / "hpm/native-tools",
    "nfc": CASES / "hpm/nfc-tool",
}
SETS = [CASES / "dumux" / s for s in ("example-benchmarks", "paper-benchmark", "koch2024a-repro")]
SETS += [CASES / "hpm/other-log-benchmarks" / s
         for s in ("abbadingo-one", "alfred", "disc", "hadoop", "mit-ar")]
X_TAR = {"example-benchmarks", "paper-benchmark", "koch2024a-repro"}


def test_the_published_descriptors_are_copied_with_their_licence_headers():
    ymls = sorted(CASES.rglob("*.yml"))
    assert len(ymls) == 14
    for f in ymls:
        assert "SPDX-License-Identifier: CC0-1.0" in f.read_text(), f


def _pairs(tool: str) -> dict[tuple[str, str], tuple[str, str | None]]:
    the_plan = plan(TOOLS[tool], SETS, None)
    return {(p.bench.name, p.command.name.split()[0]): (p.state, p.reason)
            for p in the_plan.pairs}


def test_expected_pairs_of_the_published_case_studies():
    runs = {(tool, s, c) for tool in TOOLS
            for (s, c), (state, _r) in _pairs(tool).items() if state == RUNS}
    assert runs == (
        {(t, s, c) for t, c in (("dumux-3.8.0", "run-rereso-dumux-benchmark"),
                                ("dumux-3.9.0", "run-rereso-dumux-benchmark"),
                                ("koch2024a", "unpack-and-run")) for s in X_TAR}
        | {("hpm", s, c) for s in ("hadoop", "mit-ar") for c in ("select-and-merge", "learn")}
    )


def test_reasons_say_why_not():
    hpm = _pairs("hpm")
    # Schemas as a subset: the alfred logs are not timed.
    assert hpm["alfred", "learn"] == (NO_MATCH, (
        "the set does not declare the schemas "
        "https://aqua.tools/rereso/releases/download/0.3/timed-logs-0.3.json5 "
        "(its application/json input needs them)"))
    assert hpm["hadoop", "convert-format"] == (
        NO_MATCH, "it accepts application/zip; the set is application/json")
    # A second input the benchmark does not give: planned, with the option.
    assert hpm["hadoop", "validate"] == (
        NEEDS, "needs --input automaton.dot=PATH (text/vnd.graphviz)")
    assert hpm["paper-benchmark", "validate"][0] == NO_MATCH
    # runtest takes a tar and an HDF5 file but names only one.
    assert _pairs("runtest")["koch2024a-repro", "run-rereso-runtest-benchmark"] == (CANNOT, (
        "it needs 2 inputs (application/x-tar, application/x-hdf5); a benchmark gives one, "
        "and its name has no placeholder for the second (application/x-hdf5)"))
    # The nfc tool declares no formats: it matches nothing, and says so.
    assert set(_pairs("nfc").values()) == {
        (NO_MATCH, "it declares no input or output formats: no set can satisfy it")}


def test_given_second_input_makes_validate_run(tmp_path: Path):
    dot = tmp_path / "a.dot"
    dot.write_text("digraph { }\n")
    the_plan = plan(TOOLS["hpm"], SETS, tmp_path / "out", {"automaton.dot": dot})
    (hadoop,) = [p for p in the_plan.pairs
                 if p.bench.name == "hadoop" and p.command.name.startswith("validate")]
    assert hadoop.state == RUNS
    assert [(s.name, path) for s, path in hadoop.extra] == [("automaton.dot", dot)]
    with pytest.raises(RecombineError, match=r"no command of native-tools has an input "
                       r"placeholder \[result.csv\]"):
        plan(TOOLS["hpm"], SETS, None, {"result.csv": dot})


def test_sets_are_keyed_by_folder_not_metadata_name():
    # hadoop and mit-ar share their metadata.name.
    hadoop, mit = (load_bundle(s, BENCHMARK_DESCRIPTOR, BENCHMARK_SCHEMA) for s in SETS[-2:])
    assert hadoop.doc["metadata"]["name"] == mit.doc["metadata"]["name"]
    assert (hadoop.name, mit.name) == ("hadoop", "mit-ar")


def test_placeholder_roles():
    def roles(name: str, n_in: int, n_out: int = 1) -> list[tuple[str, str, int | None]]:
        doc = {"name": name, "input-formats": [{"media-type": "a/b"}] * n_in,
               "output-formats": [{"media-type": "c/d"}] * n_out}
        return [(s.name, s.role, s.format) for s in parse_command(1, doc).slots]

    assert roles("validate -a [automaton.dot] -i [validation.json] -o [result.csv]", 2) == [
        ("automaton.dot", INPUT, 0), ("validation.json", INPUT, 1), ("result.csv", OUTPUT, None)]
    assert roles("learn -i [train.json] -o [automaton.dot]", 1) == [
        ("train.json", INPUT, 0), ("automaton.dot", OUTPUT, None)]
    # The schema's own example, and shournal's named roles in any order.
    assert roles("myTool <inputFile> -l <logFile> <resultFile>", 1, 2) == [
        ("inputFile", INPUT, 0), ("logFile", OUTPUT, None), ("resultFile", OUTPUT, None)]
    assert roles("t.py --out=[output.json] [input.csv]", 1) == [
        ("output.json", OUTPUT, None), ("input.csv", INPUT, 0)]
    # Not a file name, so not a placeholder: a word as written.
    assert roles("t [../x] [a/b] [] [.hidden]", 1) == []
    bad = parse_command(1, {"name": "t 'unclosed", "input-formats": [{"media-type": "a/b"}]})
    assert bad.error and "cannot be split" in bad.error


def _set(tmp_path: Path, media: str, files: dict[str, bytes | None]) -> Any:
    d = tmp_path / "set"
    d.mkdir()
    (d / BENCHMARK_DESCRIPTOR).write_text(
        "rereso-benchmark-version: '0.3'\nmetadata:\n  name: s\nlicense:\n  spdx: CC0-1.0\n"
        f"format:\n  media-type: {media}\nbenchmarks:\n"
        + "".join(f"  - path: {name}\n" for name in files))
    for name, data in files.items():
        if data is not None:
            (d / name).write_bytes(data)
    return load_bundle(d, BENCHMARK_DESCRIPTOR, BENCHMARK_SCHEMA)


def _tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("case/params.input")
        data = b"[Grid]\nCells = 10\n"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.skipif(shutil.which("zstd") is None, reason="zstd is not installed")
def test_compressed_benchmarks_match_by_declaration(tmp_path: Path):
    logs = json.dumps({"logs": [{"events": ["a", "b"]}]}).encode()
    zst = subprocess.run(["zstd", "-q", "-c"], input=logs, capture_output=True,
                         check=True).stdout
    bench = _set(tmp_path, "application/x-tar", {
        "ok.tar.xz": lzma.compress(_tar()),
        "plain.tar": _tar(),
        "wrong.tar.zst": zst,  # JSON inside
        "../x.tar": None,
        "gone.tar.xz": None,
    })
    (tmp_path / "x.tar").write_bytes(_tar())
    ok, plain, wrong, outside = (check_file(bench, n) for n in (
        "ok.tar.xz", "plain.tar", "wrong.tar.zst", "../x.tar"))
    assert (ok.layer, ok.stem, ok.note, ok.problem) == ("xz", "ok", None, None)
    assert (plain.layer, plain.stem, plain.note) == (None, "plain", None)
    assert wrong.layer == "zstd" and wrong.note == (
        "set/wrong.tar.zst: declared application/x-tar, but its content under the zstd layer "
        "is application/json (run as declared)")
    assert outside.problem == "../x.tar is outside the set's folder"
    missing = check_file(bench, "gone.tar.xz")
    assert missing.problem == "gone.tar.xz is missing"


def test_declared_compressed_type_is_not_decompressed(tmp_path: Path):
    bench = _set(tmp_path, "application/x-xz", {"a.xz": lzma.compress(b"x")})
    assert check_file(bench, "a.xz").layer is None


FAKE_RUNTIME = """#!/usr/bin/env python3
# Apptainer as far as the sandbox uses it: record the call, run the words
# with the bound folders in place of /rereso/in and /rereso/out.
import json, os, subprocess, sys
args = sys.argv[1:]
json.dump(args, open(os.environ["FAKE_LOG"], "w"))
binds = dict(reversed(a.split(":")[:2]) for a in args[3:6:2])
words = [w.replace("/rereso/in", binds["/rereso/in"]).replace("/rereso/out",
         binds["/rereso/out"]) for w in args[9:]]
sys.exit(subprocess.call(words, cwd=binds["/rereso/out"]))
"""


def test_sandbox_runs_apptainer_with_the_staged_folders(tmp_path: Path, monkeypatch):
    from shournal.rereso import sandbox

    runtime = tmp_path / "apptainer"
    runtime.write_text(FAKE_RUNTIME)
    runtime.chmod(0o755)
    log = tmp_path / "argv.json"
    monkeypatch.setenv("FAKE_LOG", str(log))
    bench = tmp_path / "logs.json.xz"
    bench.write_bytes(lzma.compress(b'{"logs": []}\n'))
    where = tmp_path / "where"
    where.mkdir()
    specs = ["arg:cp", "in+xz:|" + str(bench), "out:|output.json"]
    status = sandbox.main(["apptainer", f"{runtime}|/images/hpm.sif", str(where), *specs])
    assert status == 0
    argv = json.loads(log.read_text())
    assert argv[:2] == ["exec", "--containall"]
    assert argv[2] == "--bind" and argv[3].endswith(":/rereso/in:ro")
    assert argv[4] == "--bind" and argv[5].endswith(":/rereso/out")
    assert argv[6:] == ["--pwd", "/rereso/out", "/images/hpm.sif", "cp",
                        "/rereso/in/logs.json", "/rereso/out/output.json"]
    # The output the container wrote is copied out; the input was decompressed.
    assert (where / "output.json").read_bytes() == b'{"logs": []}\n'
    assert sandbox.main(["apptainer", "x", str(where), "bogus"]) == 2


def test_apptainer_is_preferred_when_installed(tmp_path: Path, monkeypatch):
    from shournal.rereso.recombine import container_runtime

    monkeypatch.setenv("PATH", str(tmp_path))
    assert container_runtime() is None
    (tmp_path / "singularity").write_text("#!/bin/sh\n")
    (tmp_path / "singularity").chmod(0o755)
    assert container_runtime() == str(tmp_path / "singularity")
    (tmp_path / "apptainer").write_text("#!/bin/sh\n")
    (tmp_path / "apptainer").chmod(0o755)
    assert container_runtime() == str(tmp_path / "apptainer")


def test_outputs_are_what_the_run_made_not_what_an_earlier_one_left(tmp_path: Path):
    from shournal.rereso.recombine import _files

    where = tmp_path / "w"
    where.mkdir()
    (where / "old.h5").write_bytes(b"old")
    (where / "link").symlink_to("old.h5")
    before = _files(where)
    assert set(before) == {where / "old.h5"}
    (where / "new.h5").write_bytes(b"new")
    after = _files(where)
    assert [p for p, st in after.items() if before.get(p) != st] == [where / "new.h5"]
