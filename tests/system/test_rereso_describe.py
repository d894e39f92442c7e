"""`shournal describe tool|benchmark` on journals written by the real
store writer: the bundles validate against the shipped schemas, file
arguments become placeholders, bad input writes nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from fixtures_cli import run_shournal

from shournal.hashing import partial_xxh64_bytes
from shournal.journal import Journal
from shournal.record import CommandRecord, FileEvent
from shournal.rereso import schema
from shournal.rereso.describe import (
    UNSPECIFIED_LICENSE,
    DescribeError,
    Meta,
    describe_benchmark,
    describe_tool,
)
from shournal.rereso.image import RUNNER
from shournal.rereso.invocation import analyze, placeholders
from shournal.rereso.recombine import accepts

T0 = 1_700_000_000_000_000_000

TOOL = b"""import json, sys
import helper
rows = open(sys.argv[1]).read().split()
json.dump({"rows": len(rows), "tag": helper.TAG}, open(sys.argv[2], "w"))
"""
HELPER = b'TAG = "v1"\n'
CSV1 = b"a,b,c\n1,2,3\n4,5,6\n"
CSV2 = b"a,b,c\n7,8,9\n"


def ev(path: Path, data: bytes | None = None, *, archive: bool = False) -> FileEvent:
    data = path.read_bytes() if data is None else data
    return FileEvent(os.fsencode(path), len(data), T0, 0o100644, partial_xxh64_bytes(data),
                     content=data if archive else None)


def add(journal: Journal, cwd: Path, text: str, reads: list[FileEvent],
        writes: list[FileEvent] | None = None) -> int:
    return journal.add(CommandRecord(
        text=text, return_value=0, start_ns=T0, end_ns=T0 + 1, working_dir=str(cwd),
        username="u", hostname="h", session_uuid=None, hash_chunk_size=256, hash_max_reads=3,
        reads=reads, writes=writes or []))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    w = tmp_path / "work"
    (w / "data").mkdir(parents=True)
    (w / "tool.py").write_bytes(TOOL)
    (w / "helper.py").write_bytes(HELPER)
    (w / "data" / "in1.csv").write_bytes(CSV1)
    (w / "data" / "in2.csv").write_bytes(CSV2)
    (w / "out1.json").write_bytes(b'{"rows": 3, "tag": "v1"}')
    (w / "out2.json").write_bytes(b'{"rows": 2, "tag": "v1"}')
    return w


def record_runs(journal: Journal, w: Path) -> list[int]:
    tool_reads = [ev(w / "tool.py", archive=True), ev(w / "helper.py")]
    return [
        add(journal, w, f"python3 tool.py data/in{n}.csv out{n}.json",
            [*tool_reads, ev(w / "data" / f"in{n}.csv")], [ev(w / f"out{n}.json")])
        for n in (1, 2)
    ]


def test_tool_bundle_is_valid_and_its_runner_runs_the_tool(journal: Journal, work: Path):
    ids = record_runs(journal, work)
    dest = work.parent / "bundle"
    res = describe_tool(journal, ids, dest, Meta())
    doc = yaml.safe_load((dest / schema.TOOL_DESCRIPTOR).read_text())
    assert schema.errors(doc, schema.TOOL_SCHEMA) == []
    assert doc["rereso-tool-version"] == "0.3"
    assert doc["metadata"]["name"] == "tool.py"
    assert doc["license"] == {"custom": UNSPECIFIED_LICENSE}
    assert doc["container"] == "tool.py.sif"
    assert doc["commands"] == [{
        "name": "tool.py [input.csv] [output.json]",
        "input-formats": [{"media-type": "text/csv"}],
        "output-formats": [{"media-type": "application/json"}],
    }]
    assert any("no --license" in n for n in res.notes)
    assert any("tool.py.sif is not built" in n for n in res.notes)
    definition = (dest / "tool.py.def").read_text()
    assert "%runscript\n    exec /opt/rereso/rereso-run \"$@\"" in definition
    assert "    bin/tool.py /usr/local/bin/tool.py\n" in definition
    assert f"    {work / 'tool.py'}\n" in definition and f"    {work / 'helper.py'}\n" in definition
    assert str(work / "data") not in definition  # inputs are not the tool's
    # The wrapper runs the recorded script (absolute path) on a new input.
    new = work.parent / "new.csv"
    new.write_bytes(b"x\ny\nz\nw\n")
    out = work.parent / "new.json"
    env = dict(os.environ, PYTHONPATH=str(work))
    subprocess.run([str(dest / RUNNER), "1", str(new), str(out)], check=True, env=env)
    assert yaml.safe_load(out.read_text()) == {"rows": 4, "tag": "v1"}
    bad = subprocess.run([str(dest / RUNNER), "1", str(new)], capture_output=True, text=True)
    assert bad.returncode == 2 and "tool.py [input.csv] [output.json]" in bad.stderr
    # The launcher makes the command's name its invocation: bin/tool.py runs
    # the recorded script by its absolute path.
    launcher = (dest / "bin" / "tool.py").read_text()
    assert launcher.endswith(f'exec python3 {work / "tool.py"} "$@"\n')
    out.unlink()
    subprocess.run([str(dest / "bin" / "tool.py"), str(new), str(out)], check=True, env=env)
    assert yaml.safe_load(out.read_text()) == {"rows": 4, "tag": "v1"}


def test_metadata_options_and_licence(journal: Journal, work: Path):
    ids = record_runs(journal, work)
    dest = work.parent / "b"
    res = describe_tool(journal, ids, dest, Meta(name="Row counter", description="Counts rows.",
                                                references=("https://example.org/rc",),
                                                license="MIT"))
    doc = yaml.safe_load((dest / schema.TOOL_DESCRIPTOR).read_text())
    assert doc["metadata"] == {"name": "Row counter", "description": "Counts rows.",
                               "references": ["https://example.org/rc"]}
    assert doc["license"] == {"spdx": "MIT"}
    assert doc["container"] == "Row-counter.sif" and (dest / "Row-counter.def").exists()
    assert not any("license" in n for n in res.notes)


def test_placeholders_for_numbered_option_and_relative_arguments(journal: Journal, work: Path):
    sub = work / "sub"
    sub.mkdir()
    cid = add(journal, sub,
              "python3 ../tool.py -v ../data/in1.csv --second=../data/in2.csv --out=r.json name",
              [ev(work / "tool.py"), ev(work / "data" / "in1.csv"), ev(work / "data" / "in2.csv")],
              [ev(sub / "r.json", b"{}")])

    inv = analyze(journal.find(command_id=cid)[0])
    assert inv.tool == ("python3", str(work / "tool.py"))
    name = inv.pattern()
    assert name == "tool.py -v [input1.csv] --second=[input2.csv] --out=[output.json] name"
    assert placeholders(name) == [("input", ".csv"), ("input", ".csv"), ("output", ".json")]
    assert [os.path.basename(v.path) for v in inv.tool_reads] == [b"tool.py"]


def test_distinct_patterns_are_distinct_commands(journal: Journal, work: Path):
    ids = record_runs(journal, work)
    ids.append(add(journal, work, "LC_ALL=C python3 tool.py --fast data/in1.csv out1.json",
                   [ev(work / "tool.py"), ev(work / "data" / "in1.csv")],
                   [ev(work / "out1.json")]))
    dest = work.parent / "b"
    describe_tool(journal, ids, dest, Meta(license="MIT"))
    doc = yaml.safe_load((dest / schema.TOOL_DESCRIPTOR).read_text())
    assert [c["name"] for c in doc["commands"]] == [
        "tool.py [input.csv] [output.json]", "tool.py --fast [input.csv] [output.json]"]
    runner = (dest / RUNNER).read_text()
    assert f"exec python3 {work / 'tool.py'} \"${{1}}\" \"${{2}}\"\n" in runner
    # The wrapper's shell applies the assignment: no `env` needed in the image.
    assert (f"    export LC_ALL=C\n    exec python3 {work / 'tool.py'} --fast \"${{1}}\" \"${{2}}\""
            in runner)


def test_unknown_media_type_falls_back_with_a_notice(journal: Journal, work: Path):
    blob = work / "input.zzq"
    blob.write_bytes(b"\x00\x01\x02\xfe\xff")
    cid = add(journal, work, "python3 tool.py input.zzq", [ev(work / "tool.py"), ev(blob)])
    dest = work.parent / "b"
    res = describe_tool(journal, [cid], dest, Meta(license="MIT"))
    doc = yaml.safe_load((dest / schema.TOOL_DESCRIPTOR).read_text())
    assert doc["commands"][0]["input-formats"] == [{"media-type": "application/octet-stream"}]
    assert f"{blob}: media type unknown, using application/octet-stream" in res.notes


def _nothing_written(parent: Path, dest: Path) -> None:
    assert not dest.exists()
    assert not [p for p in parent.iterdir() if p.name.startswith(f".{dest.name}.")]


def test_bad_input_writes_nothing(journal: Journal, work: Path):
    ids = record_runs(journal, work)
    no_reads = add(journal, work, "python3 tool.py", [])
    other = add(journal, work, "python3 other.py data/in1.csv",
                [ev(work / "tool.py"), ev(work / "data" / "in1.csv")])
    piped = add(journal, work, "python3 tool.py data/in1.csv | sort > out.txt",
                [ev(work / "tool.py"), ev(work / "data" / "in1.csv")])
    dest = work.parent / "b"
    cases = [
        ([no_reads], "read no recorded files"),
        ([piped], r"is not one program run \(it uses the shell's \| >\)"),
        ([ids[0], other], "runs of different programs"),
        ([ids[0], 999], "no command with id 999"),
    ]
    for command_ids, message in cases:
        with pytest.raises(DescribeError, match=message):
            describe_tool(journal, command_ids, dest, Meta())
        _nothing_written(work.parent, dest)
    dest.mkdir()
    (dest / "keep").write_text("x")
    with pytest.raises(DescribeError, match="exists and is not empty"):
        describe_tool(journal, ids, dest, Meta())
    assert [p.name for p in dest.iterdir()] == ["keep"]


def test_benchmark_from_commands_copies_recorded_versions(journal: Journal, work: Path):
    """An archived version is copied as it was read, not as it is today."""
    ids = record_runs(journal, work)
    archived = add(journal, work, "python3 tool.py data/in3.csv out3.json",
                   [ev(work / "tool.py"), ev(work / "data" / "in3.csv", CSV2 + b"3,3,3\n",
                                             archive=True)])
    (work / "data" / "in3.csv").write_bytes(b"today\n")
    dest = work.parent / "bench"
    res = describe_benchmark(journal, dest, Meta(license="CC0-1.0"), command_ids=[*ids, archived])
    assert res.bundles == [dest] and res.notes == []
    doc = yaml.safe_load((dest / schema.BENCHMARK_DESCRIPTOR).read_text())
    assert schema.errors(doc, schema.BENCHMARK_SCHEMA) == []
    assert doc["format"] == {"media-type": "text/csv"}
    assert doc["license"] == {"spdx": "CC0-1.0"}
    assert doc["benchmarks"] == [{"path": "in1.csv"}, {"path": "in2.csv"}, {"path": "in3.csv"}]
    assert (dest / "in1.csv").read_bytes() == CSV1
    assert (dest / "in3.csv").read_bytes() == CSV2 + b"3,3,3\n"


def test_benchmark_refuses_content_that_is_neither_archived_nor_unchanged(journal: Journal,
                                                                         work: Path):
    ids = record_runs(journal, work)
    (work / "data" / "in1.csv").write_bytes(CSV1.replace(b"6", b"0"))
    (work / "data" / "in2.csv").unlink()
    dest = work.parent / "bench"
    with pytest.raises(DescribeError) as exc:
        describe_benchmark(journal, dest, Meta(), command_ids=ids)
    msg = str(exc.value)
    assert f"{work}/data/in1.csv (changed since it was recorded: hash differs)" in msg
    assert f"{work}/data/in2.csv (missing)" in msg
    _nothing_written(work.parent, dest)


def test_benchmark_from_rfile_needs_a_recorded_read(journal: Journal, work: Path):
    record_runs(journal, work)
    dest = work.parent / "bench"
    res = describe_benchmark(journal, dest, Meta(license="MIT"), rfiles=[work / "data" / "in2.csv"])
    doc = yaml.safe_load((dest / schema.BENCHMARK_DESCRIPTOR).read_text())
    assert doc["benchmarks"] == [{"path": "in2.csv"}] and res.notes == []
    assert (dest / "in2.csv").read_bytes() == CSV2
    never = work / "never.csv"
    never.write_bytes(b"x,y\n1,2\n")
    other = work.parent / "other"
    with pytest.raises(DescribeError, match="no recorded command read this file's content"):
        describe_benchmark(journal, other, Meta(), rfiles=[never])
    _nothing_written(work.parent, other)


def test_benchmark_of_mixed_types_is_one_bundle_per_type(tmp_path: Path):
    (tmp_path / "a.csv").write_bytes(CSV1)
    (tmp_path / "b.csv").write_bytes(CSV2)
    (tmp_path / "c.json").write_bytes(b'{"x": 1}\n')
    dest = tmp_path / "mixed"
    res = describe_benchmark(None, dest, Meta(name="Mixed"),
                             paths=[tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.json"])
    assert res.bundles == [dest / "text-csv", dest / "application-json"]
    assert any("2 media types: one bundle per type" in n for n in res.notes)
    for bundle, media, files in ((dest / "text-csv", "text/csv", ["a.csv", "b.csv"]),
                                 (dest / "application-json", "application/json", ["c.json"])):
        doc = yaml.safe_load((bundle / schema.BENCHMARK_DESCRIPTOR).read_text())
        assert schema.errors(doc, schema.BENCHMARK_SCHEMA) == []
        assert doc["format"]["media-type"] == media
        assert [b["path"] for b in doc["benchmarks"]] == files
        assert doc["license"] == {"custom": UNSPECIFIED_LICENSE}


def test_benchmark_licences_per_set_and_per_file(tmp_path: Path):
    """--license is the set's default (the schema's set-level license);
    --license-file PATH=SPDX gives one file its own (benchmarks[].license),
    PATH by the file's name in the set or its path."""
    for name, data in (("a.csv", CSV1), ("b.csv", CSV2), ("c.json", b'{"x": 1}\n')):
        (tmp_path / name).write_bytes(data)
    dest = tmp_path / "set"
    res = describe_benchmark(
        None, dest, Meta(license="CC0-1.0"),
        paths=[tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.json"],
        file_licenses={"b.csv": "CC-BY-4.0", str(tmp_path / "c.json"): "MIT"})
    assert res.notes == ["the files have 2 media types: one bundle per type: text-csv/ "
                         "(2 text/csv), application-json/ (1 application/json)"]
    csv = yaml.safe_load((dest / "text-csv" / schema.BENCHMARK_DESCRIPTOR).read_text())
    js = yaml.safe_load((dest / "application-json" / schema.BENCHMARK_DESCRIPTOR).read_text())
    for doc in (csv, js):
        assert schema.errors(doc, schema.BENCHMARK_SCHEMA) == []
        assert doc["license"] == {"spdx": "CC0-1.0"}
    assert csv["benchmarks"] == [{"path": "a.csv"},
                                 {"path": "b.csv", "license": {"spdx": "CC-BY-4.0"}}]
    assert js["benchmarks"] == [{"path": "c.json", "license": {"spdx": "MIT"}}]


def test_benchmark_licensed_file_by_file_needs_no_set_licence(tmp_path: Path):
    for name, data in (("a.csv", CSV1), ("b.csv", CSV2)):
        (tmp_path / name).write_bytes(data)
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    every = tmp_path / "every"
    res = describe_benchmark(None, every, Meta(), paths=paths,
                             file_licenses={"a.csv": "MIT", "b.csv": "Apache-2.0"})
    doc = yaml.safe_load((every / schema.BENCHMARK_DESCRIPTOR).read_text())
    assert schema.errors(doc, schema.BENCHMARK_SCHEMA) == [] and res.notes == []
    assert "license" not in doc
    assert [b["license"] for b in doc["benchmarks"]] == [{"spdx": "MIT"}, {"spdx": "Apache-2.0"}]
    # One file without a licence of its own: the set's is the unspecified one.
    some = tmp_path / "some"
    res = describe_benchmark(None, some, Meta(), paths=paths, file_licenses={"a.csv": "MIT"})
    doc = yaml.safe_load((some / schema.BENCHMARK_DESCRIPTOR).read_text())
    assert doc["license"] == {"custom": UNSPECIFIED_LICENSE}
    assert doc["benchmarks"] == [{"path": "a.csv", "license": {"spdx": "MIT"}}, {"path": "b.csv"}]
    assert any("licence is unspecified" in n for n in res.notes)


def test_benchmark_licence_errors_write_nothing(tmp_path: Path):
    (tmp_path / "a.csv").write_bytes(CSV1)
    dest = tmp_path / "set"
    for spdx, files, message in (
        ("MIT License", {}, "'MIT License' is not an SPDX licence identifier"),
        (None, {"a.csv": "GPL/3"}, "'GPL/3' is not an SPDX licence identifier"),
        (None, {"nope.csv": "MIT"}, "--license-file nope.csv: no such file in the set"),
    ):
        with pytest.raises(DescribeError, match=message):
            describe_benchmark(None, dest, Meta(license=spdx), paths=[tmp_path / "a.csv"],
                               file_licenses=files)
        _nothing_written(tmp_path, dest)


def test_accepts_says_why_not():
    cmd = {"name": "tool.py [input.csv] [output.json]",
           "input-formats": [{"media-type": "text/csv", "schemas": ["https://s/x.json"]}]}
    assert accepts(cmd, {"media-type": "text/csv", "schemas": ["https://s/x.json"]}) is None
    assert accepts(cmd, {"media-type": "application/json"}) == (
        "it accepts text/csv; the set is application/json")
    assert accepts(cmd, {"media-type": "text/csv"}) == (
        "the set does not declare the schemas https://s/x.json (its text/csv input needs them)")
    two = {"name": "t <input1.csv> <input2.csv>", "input-formats": [{"media-type": "text/csv"}]}
    assert accepts(two, {"media-type": "text/csv"}) == (
        "needs --input input2.csv=PATH (a file)")


def test_cli_bad_input_is_one_line_exit_2(cli_env: dict[str, str], tmp_path: Path):
    with Journal.open(cli_env["SHOURNAL_DB_URL"], create=True) as journal:
        cid = add(journal, tmp_path, "true", [])
    dest = tmp_path / "b"
    for args, message in (
        (["describe", "tool", str(cid), "-o", str(dest)], "read no recorded files"),
        (["describe", "tool", "77", "-o", str(dest)], "no command with id 77"),
        (["describe", "benchmark", "-o", str(dest)], "give --command-id ID"),
        (["describe", "tool", "77", "-o", str(dest), "--license", "GPL 3"],
         "'GPL 3' is not an SPDX licence identifier"),
        (["describe", "benchmark", str(tmp_path), "-o", str(dest), "--license-file", "x.csv"],
         "--license-file x.csv: give PATH=SPDX"),
        (["describe", "benchmark", str(tmp_path), "-o", str(dest), "--license-file",
          "x.csv=MIT;rm"], "'MIT;rm' is not an SPDX licence identifier"),
        (["recombine", str(tmp_path), str(tmp_path), "-o", str(dest)],
         "rereso-tool.yml: No such file"),
        (["recombine", "--host", str(tmp_path), str(tmp_path), "-o", str(dest)],
         "rereso-tool.yml: No such file"),
        (["recombine", str(tmp_path), str(tmp_path)], "give --output OUT_DIR (or --plan)"),
        (["recombine", str(tmp_path), str(tmp_path), "--plan", "--input", "automaton.dot"],
         "--input automaton.dot: give NAME=PATH"),
        (["recombine", str(tmp_path), str(tmp_path), "-o", str(dest), "--input",
          f"automaton.dot={tmp_path / 'nope.dot'}"], "nope.dot is not a readable file"),
    ):
        res = run_shournal(args, cli_env)
        assert res.returncode == 2, (args, res.stderr)
        assert res.stderr.startswith("shournal: ") and res.stderr.count("\n") == 1, res.stderr
        assert message in res.stderr and "Traceback" not in res.stderr
        assert not dest.exists()


def test_tool_image_refuses_a_recorded_path_that_is_not_normalised(journal: Journal, work: Path):
    """A forged apparatus manifest names a read through `..`: the image is
    not built from it (one line naming the command and the path, nothing
    written); the normalised path gets past that check (positive
    control: it fails later, for its content not being archived)."""
    from shournal.store.archive import encode_manifest

    def with_manifest(path: str) -> int:
        cid = journal.add(CommandRecord(
            text="python3 tool.py data/in1.csv out1.json", return_value=0, start_ns=T0,
            end_ns=T0 + 1, working_dir=str(work), username="u", hostname="h",
            session_uuid=None, hash_chunk_size=256, hash_max_reads=3,
            reads=[ev(work / "tool.py"), ev(work / "data" / "in1.csv")],
            writes=[ev(work / "out1.json")],
            apparatus=encode_manifest({"reads": [[path, 1, T0, 0o100644, None, "0" * 32,
                                                  None]], "writes": [], "env": {}})))
        return cid

    dest = work.parent / "tool"
    forged = "/usr/lib/../../" + str(work / "secret").lstrip("/")
    bad = with_manifest(forged)
    with pytest.raises(DescribeError) as exc:
        describe_tool(journal, [bad], dest, Meta())
    assert f"command {bad}" in str(exc.value) and repr(forged) in str(exc.value)
    _nothing_written(work.parent, dest)
    good = with_manifest("/usr/lib/libfake.so")
    with pytest.raises(DescribeError, match="lacks the recorded content of: /usr/lib/libfake"):
        describe_tool(journal, [good], dest, Meta())
    _nothing_written(work.parent, dest)
