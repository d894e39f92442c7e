"""``shournal export``: rules from journals written by the real store writer
(no root, no shell); the Makefile and Snakefile are run by the real GNU
make and Snakemake in a copy that holds only the leaf inputs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures_lineage import J

from shournal.provenance.export import export_workflow, skipped_message
from shournal.provenance.graph import DiskTarget


def _run(fmt: str, out_dir: Path, copy: Path) -> subprocess.CompletedProcess[str]:
    """``make -n`` / ``snakemake -n`` (what they plan must be accepted),
    then the real run; the first that fails is returned."""
    if fmt == "make":
        argv = ["make", "-C", str(copy), "-f", str(out_dir / "Makefile")]
    else:
        if shutil.which("snakemake") is None:
            pytest.fail("snakemake is not installed (scripts/apt-deps.sh installs it)")
        argv = ["snakemake", "-s", str(out_dir / "Snakefile"), "-d", str(copy), "--cores", "1"]
    dry = subprocess.run([argv[0], "-n", *argv[1:]], capture_output=True, text=True, timeout=300)
    if dry.returncode != 0:
        return dry
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("fmt", ["make", "snakemake"])
def test_a_command_that_rewrote_a_file_in_place_joins_the_rule_before_it(
    fmt: str, j: J, tmp_path: Path
) -> None:
    raw = b"a,2\nb,1\na,3\n" * 20
    v1, v2 = raw, raw.replace(b"a", b"X")
    out = b"".join(sorted(v2.splitlines(keepends=True)))
    c_cp = j.cmd("cp in f", 10, reads=[j.v("in", raw, 1)], writes=[j.v("f", v1, 10)])
    c_sed = j.cmd("sed -i s/a/X/ f", 20, reads=[j.v("f", v1, 10)], writes=[j.v("f", v2, 20)])
    c_sort = j.cmd("sort f > out", 30, reads=[j.v("f", v2, 20)], writes=[j.v("out", out, 30)])
    j.disk("in", raw, 1)
    j.disk("f", v2, 20)
    target = j.disk("out", out, 30)
    result = export_workflow(
        j.lineage(DiskTarget(str(target))), j.reader(), fmt, str(tmp_path / "wf")  # type: ignore[arg-type]
    )
    assert [[c.id for c in r.commands] for r in result.rules] == [[c_cp, c_sed], [c_sort]]
    assert [(r.name, r.inputs, r.outputs) for r in result.rules] == [
        ("cp_f", ["in"], ["f"]),
        ("sort_out", ["f"], ["out"]),
    ]
    assert result.leaf_inputs == ["in"] and result.root == str(j.root)
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy2(j.root / "in", copy / "in")
    run = _run(fmt, tmp_path / "wf", copy)
    assert run.returncode == 0, run.stderr
    assert (copy / "out").read_bytes() == out
    assert (copy / "f").read_bytes() == v2


def test_what_cannot_be_expressed_is_named_and_left_as_comments(j: J, tmp_path: Path) -> None:
    notes, count, other = b"line\n" * 30, b"30 notes.txt\n", b"elsewhere\n" * 9
    c_vim = j.cmd("vim notes.txt", 10, writes=[j.v("notes.txt", notes, 10)])
    j.cmd("wc -l notes.txt > count", 20, reads=[j.v("notes.txt", notes, 10)],
          writes=[j.v("count", count, 20)])  # fmt: skip
    c_out = j.cmd("cat count ../other/o > both", 30,
                  reads=[j.v("count", count, 20), j.v("../other/o", other, 3)],
                  writes=[j.v("both", count + other, 30)])  # fmt: skip
    j.disk("notes.txt", notes, 10)
    j.disk("count", count, 20)
    j.disk("../other/o", other, 3)
    target = j.disk("both", count + other, 30)
    lin = j.lineage(DiskTarget(str(target)))
    # Default root: wide enough for every file, so only vim is left out.
    result = export_workflow(lin, j.reader(), "snakemake", str(tmp_path / "a"))
    assert [(s.command_ids, s.reason) for s in result.skipped] == [([c_vim], "vim is interactive")]
    assert result.root == str(j.root.parent)
    assert result.leaf_inputs == ["other/o", "w/notes.txt"]  # vim's output must be provided
    text = Path(result.path).read_text()
    assert f"# Not expressed: command {c_vim}: vim is interactive\n#   $ vim notes.txt\n" in text
    message = skipped_message(result, "snakemake")
    assert message is not None and "\n" not in message
    assert f"{c_vim} (vim notes.txt): vim is interactive" in message
    # A root that leaves out an input: that command is named too.
    result = export_workflow(lin, j.reader(), "make", str(tmp_path / "b"), root=str(j.root))
    reasons = {s.command_ids[0]: s.reason for s in result.skipped}
    assert reasons[c_out] == f"reads {j.root.parent / 'other' / 'o'}, outside the root {j.root}"
    assert "# Not expressed: command" in Path(result.path).read_text()
    # An existing file is not replaced without force.
    from shournal.provenance.export import ExportError

    with pytest.raises(ExportError, match="exists"):
        export_workflow(lin, j.reader(), "make", str(tmp_path / "b"), root=str(j.root))


@pytest.mark.parametrize("archived", [True, False])
def test_rules_are_named_after_the_script_that_ran(j: J, tmp_path: Path, archived: bool) -> None:
    script = j.v("countwords.py", b"print(1)\n", 5)
    if archived:
        script.content = b"print(1)\n"
    books = j.v("books/isles.txt", b"words\n", 1)
    j.cmd("python3 -u countwords.py books/isles.txt isles.dat", 10, reads=[script, books],
          writes=[j.v("isles.dat", b"1\n", 10)])  # fmt: skip
    j.disk("countwords.py", b"print(1)\n", 5)
    j.disk("books/isles.txt", b"words\n", 1)
    target = j.disk("isles.dat", b"1\n", 10)
    result = export_workflow(j.lineage(DiskTarget(str(target))), j.reader(), "snakemake",
                             str(tmp_path / "wf"))  # type: ignore[arg-type]
    assert [r.name for r in result.rules] == ["countwords_isles"]


def test_scripts_are_the_archived_versions_or_with_current_scripts_the_files(
    j: J, tmp_path: Path
) -> None:
    script_v1 = b"print(1)\n"
    script_path = j.root / "run.py"
    ev = j.v("run.py", script_v1, 5)
    ev.content = script_v1  # archived
    j.cmd("python3 run.py > out", 10, reads=[ev], writes=[j.v("out", b"1\n", 10)])
    j.disk("run.py", b"print(2)\n", 50)  # edited since
    target = j.disk("out", b"1\n", 10)
    lin = j.lineage(DiskTarget(str(target)))
    result = export_workflow(lin, j.reader(), "make", str(tmp_path / "a"))
    assert (tmp_path / "a" / "scripts" / "run.py").read_bytes() == script_v1
    (rule,) = result.rules
    step = (tmp_path / "a" / "steps" / f"{rule.name}.sh").read_text()
    assert 'python3 "$SHOURNAL_SCRIPTS"/run.py > out' in step
    # the script on disk is not the version that ran: said, and the archived one runs
    assert [(c.path, c.copy) for c in result.changed] == [("run.py", "scripts/run.py")]
    copy = tmp_path / "copy"
    copy.mkdir()
    assert _run("make", tmp_path / "a", copy).returncode == 0
    assert (copy / "out").read_bytes() == b"1\n"
    result = export_workflow(lin, j.reader(), "make", str(tmp_path / "b"), current_scripts=True)
    (rule,) = result.rules
    assert rule.inputs == ["run.py"] and not result.scripts
    assert "python3 run.py > out" in (tmp_path / "b" / "steps" / f"{rule.name}.sh").read_text()
    assert [(c.path, c.copy) for c in result.changed] == [("run.py", None)]
    assert os.path.exists(script_path)


def test_absolute_paths_under_the_root_become_relative(j: J, tmp_path: Path) -> None:
    data = b"payload\n" * 12
    text = f"cat {j.root}/in > '{j.root}/out'"
    j.cmd(text, 10, reads=[j.v("in", data, 1)], writes=[j.v("out", data, 10)])
    j.disk("in", data, 1)
    target = j.disk("out", data, 10)
    result = export_workflow(
        j.lineage(DiskTarget(str(target))), j.reader(), "make", str(tmp_path / "wf")
    )
    (rule,) = result.rules
    step = (tmp_path / "wf" / "steps" / f"{rule.name}.sh").read_text()
    assert "\ncat ./in > './out'\n" in step
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.move(j.root / "in", copy / "in")  # the original tree must not be used
    (j.root / "out").unlink()
    run = _run("make", tmp_path / "wf", copy)
    assert run.returncode == 0, run.stderr
    assert (copy / "out").read_bytes() == data and not (j.root / "out").exists()


def test_a_script_the_command_line_does_not_name_is_reported(j: J, tmp_path: Path) -> None:
    from shournal.provenance.export import unnamed_message

    main, helpers = j.v("main.py", b"import helpers\n", 5), j.v("helpers.py", b"X = 1\n", 5)
    main.content, helpers.content = b"import helpers\n", b"X = 1\n"
    cid = j.cmd("python3 main.py > out", 10, reads=[main, helpers], writes=[j.v("out", b"1\n", 10)])
    target = j.disk("out", b"1\n", 10)
    result = export_workflow(
        j.lineage(DiskTarget(str(target))), j.reader(), "snakemake", str(tmp_path / "wf")
    )
    (rule,) = result.rules
    unnamed = [(c, p, copy.name) for c, p, copy in rule.unnamed]
    assert unnamed == [(cid, "helpers.py", "helpers.py")]
    text = Path(result.path).read_text()
    assert re.search(r"\npython3 \{input\.script_\d:q\} > out\n", text), text
    assert "#   helpers.py (the version that ran: scripts/helpers.py)" in text
    message = unnamed_message(result)
    assert message is not None and f"helpers.py (command {cid})" in message


def _analysis(j: J) -> tuple[Path, dict[str, int], bytes]:
    """sort, a Python script (archived), a failed retry: the lineage of out."""
    raw, clean = b"b 2\na 1\n" * 50, b"a 1\nb 2\n" * 50
    script = b"import sys\nprint(open(sys.argv[1]).read().upper())\n"
    sv = j.v("an.py", script, 1)
    sv.content = script
    ids = {
        "sort": j.cmd("sort raw.txt > clean.txt", 10, 11, reads=[j.v("raw.txt", raw, 0)],
                      writes=[j.v("clean.txt", clean, 11)]),
        "py": j.cmd("python3 an.py clean.txt > out.txt", 20, 22,
                    reads=[sv, j.v("clean.txt", clean, 11)],
                    writes=[j.v("out.txt", clean.upper(), 22)]),
    }  # fmt: skip
    j.disk("raw.txt", raw, 0)
    return j.disk("out.txt", clean.upper(), 22), ids, script


def test_rocrate_is_a_valid_process_run_crate(j: J, tmp_path: Path) -> None:
    from records_check import issues, validate_crate

    from shournal.provenance.records import export_record

    target, ids, script = _analysis(j)
    lin = j.lineage(DiskTarget(str(target)))
    crate = tmp_path / "crate"
    result = export_record(lin, j.reader(), "rocrate", str(crate))
    assert result.commands == 2 and (crate / "scripts" / "an.py").read_bytes() == script
    report = validate_crate(crate, tmp_path)
    assert issues(report) == [] and report["passed"], report["issues"]
    assert report["statistics"]["total_passed_checks"] > 0
    doc = json.loads((crate / "ro-crate-metadata.json").read_text())
    by_id = {e["@id"]: e for e in doc["@graph"]}
    py = by_id[f"#command-{ids['py']}"]
    assert py["@type"] == "CreateAction"
    assert py["description"] == "python3 an.py clean.txt > out.txt"
    assert py["instrument"] == {"@id": "scripts/an.py"}
    assert "SoftwareApplication" in by_id["scripts/an.py"]["@type"]
    assert py["result"] == {"@id": target.as_uri()}
    assert by_id[target.as_uri()]["contentSize"] == str(target.stat().st_size)
    assert {o["@id"] for o in py["object"]} == {"scripts/an.py", (j.root / "clean.txt").as_uri()}
    assert py["actionStatus"] == "http://schema.org/CompletedActionStatus"
    sort = by_id[f"#command-{ids['sort']}"]
    assert by_id[sort["instrument"]["@id"]] == {
        "@id": "#program-sort", "@type": "SoftwareApplication", "name": "sort"}
    assert sort["startTime"] < sort["endTime"] <= py["startTime"]
    assert by_id[sort["agent"]["@id"]]["@type"] == "Person"


def test_rocrate_validator_rejects_a_crate_without_its_required_parts(
    j: J, tmp_path: Path
) -> None:
    """Positive control: the validator as the test runs it does report a
    REQUIRED issue (here the missing licence)."""
    from records_check import issues, validate_crate

    from shournal.provenance.records import export_record

    target, _, _ = _analysis(j)
    crate = tmp_path / "crate"
    export_record(j.lineage(DiskTarget(str(target))), j.reader(), "rocrate", str(crate))
    meta = crate / "ro-crate-metadata.json"
    doc = json.loads(meta.read_text())
    del next(e for e in doc["@graph"] if e["@id"] == "./")["license"]
    meta.write_text(json.dumps(doc))
    found = issues(validate_crate(crate, tmp_path))
    assert any("license" in i for i in found), found


def test_prov_json_reads_back_with_the_prov_library(j: J, tmp_path: Path) -> None:
    from prov.model import ProvActivity, ProvAgent, ProvEntity
    from records_check import read_prov

    from shournal.provenance.records import export_record

    target, ids, _ = _analysis(j)
    result = export_record(j.lineage(DiskTarget(str(target))), j.reader(), "prov",
                           str(tmp_path / "p"))  # fmt: skip
    doc = read_prov(Path(result.path))
    records = doc.get_records()
    activities = {str(r.identifier): r for r in records if isinstance(r, ProvActivity)}
    entities = {str(r.identifier): r for r in records if isinstance(r, ProvEntity)}
    assert set(activities) == {f"shournal:command-{i}" for i in ids.values()}
    assert len(entities) == 4 and any(isinstance(r, ProvAgent) for r in records)
    py = activities[f"shournal:command-{ids['py']}"]
    assert py.get_startTime() < py.get_endTime()
    label = {e: next(iter(r.get_attribute("prov:label"))) for e, r in entities.items()}
    by_path = {os.path.basename(v): k for k, v in label.items()}
    rel = {(type(r).__name__, str(r.formal_attributes[0][1]), str(r.formal_attributes[1][1]))
           for r in records if type(r).__name__ in ("ProvUsage", "ProvGeneration")}  # fmt: skip
    act = f"shournal:command-{ids['py']}"
    assert ("ProvUsage", act, by_path["clean.txt"]) in rel
    assert ("ProvUsage", act, by_path["an.py"]) in rel
    assert ("ProvGeneration", by_path["out.txt"], act) in rel
    assert ("ProvGeneration", by_path["clean.txt"], f"shournal:command-{ids['sort']}") in rel
    assoc = [r for r in records if type(r).__name__ == "ProvAssociation"]
    plans = {str(r.formal_attributes[0][1]): r.formal_attributes[2][1] for r in assoc}
    assert str(plans[act]) == by_path["an.py"] and plans[f"shournal:command-{ids['sort']}"] is None


@pytest.mark.parametrize("fmt", ["make", "snakemake"])
def test_a_file_written_in_several_versions_makes_a_workflow_that_runs(
    fmt: str, j: J, tmp_path: Path
) -> None:
    """Issue 27.1: config.json written twice, each version read by one run
    of a step; config.json itself a target too (its last version)."""
    v1, v2, a, b = b"a=1\n", b"a=2\n", b"x=1\n", b"x=2\n"
    j.cmd("printf 'a=1\\n' > config.json", 10, writes=[j.v("config.json", v1, 10)])
    j.cmd("mkdir -p results && sed s/a/x/ config.json > results/a.txt", 20,
          reads=[j.v("config.json", v1, 10)], writes=[j.v("results/a.txt", a, 20)])  # fmt: skip
    j.cmd("printf 'a=2\\n' > config.json", 30, writes=[j.v("config.json", v2, 30)])
    j.cmd("sed s/a/x/ config.json > results/b.txt", 40,
          reads=[j.v("config.json", v2, 30)], writes=[j.v("results/b.txt", b, 40)])  # fmt: skip
    targets = [j.disk("results/a.txt", a, 20), j.disk("results/b.txt", b, 40),
               j.disk("config.json", v2, 30)]  # fmt: skip
    lin = j.lineage(*[DiskTarget(str(t)) for t in targets])
    result = export_workflow(lin, j.reader(), fmt, str(tmp_path / "wf"))  # type: ignore[arg-type]
    copy = tmp_path / "copy"
    copy.mkdir()
    run = _run(fmt, tmp_path / "wf", copy)
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert (copy / "results" / "a.txt").read_bytes() == a
    assert (copy / "results" / "b.txt").read_bytes() == b
    assert (copy / "config.json").read_bytes() == v2
    assert result.versioned == ["config.json"] and result.skipped == []
    outputs = [o for r in result.rules for o in r.outputs]
    assert len(outputs) == len(set(outputs)), outputs  # no file made by two rules


def test_a_version_no_rule_makes_beside_one_a_rule_makes_is_refused(j: J, tmp_path: Path) -> None:
    """A path read in a version written outside the journal and rewritten
    by a step: a one-line refusal naming the file, nothing written."""
    from shournal.provenance.export import Unexportable

    v1, v2, a, b = b"a=1\n", b"a=2\n", b"x=1\n", b"x=2\n"
    j.cmd("sed s/a/x/ config.json > a.txt", 20, reads=[j.v("config.json", v1, 10)],
          writes=[j.v("a.txt", a, 20)])  # fmt: skip
    j.cmd("printf 'a=2\\n' > config.json", 30, writes=[j.v("config.json", v2, 30)])
    j.cmd("sed s/a/x/ config.json > b.txt", 40, reads=[j.v("config.json", v2, 30)],
          writes=[j.v("b.txt", b, 40)])  # fmt: skip
    targets = [j.disk("a.txt", a, 20), j.disk("b.txt", b, 40)]
    lin = j.lineage(*[DiskTarget(str(t)) for t in targets])
    with pytest.raises(Unexportable, match=re.escape(f"{j.root / 'config.json'} is read in")):
        export_workflow(lin, j.reader(), "snakemake", str(tmp_path / "wf"))
    assert not (tmp_path / "wf").exists()


@pytest.mark.parametrize("fmt", ["make", "snakemake"])
def test_a_heredoc_with_an_indented_body_runs_as_recorded(
    fmt: str, j: J, tmp_path: Path
) -> None:
    """Issue 27.3: make strips the leading whitespace of recipe lines and
    reads $, @, - and +; the recorded text must reach bash unchanged."""
    text = (
        "python3 - <<'EOF' > out.txt\n"
        "for i in range(2):\n"
        "    print(i, '$x', '@a')\n"
        "EOF"
    )
    out = b"0 $x @a\n1 $x @a\n"
    j.cmd(text, 10, writes=[j.v("out.txt", out, 10)])
    target = j.disk("out.txt", out, 10)
    result = export_workflow(j.lineage(DiskTarget(str(target))), j.reader(), fmt,  # type: ignore[arg-type]
                             str(tmp_path / "wf"))  # fmt: skip
    assert result.skipped == [] and len(result.rules) == 1
    copy = tmp_path / "copy"
    copy.mkdir()
    run = _run(fmt, tmp_path / "wf", copy)
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert (copy / "out.txt").read_bytes() == out


@pytest.mark.parametrize("fmt", ["make", "snakemake"])
def test_a_workflow_without_a_rule_is_an_error_with_the_reasons(
    fmt: str, j: J, tmp_path: Path
) -> None:
    """Issue 27.4: every step inexpressible: no empty Makefile/Snakefile."""
    from shournal.provenance.export import ExportError

    notes = b"line\n" * 30
    cid = j.cmd("vim notes.txt", 10, writes=[j.v("notes.txt", notes, 10)])
    target = j.disk("notes.txt", notes, 10)
    lin = j.lineage(DiskTarget(str(target)))
    with pytest.raises(ExportError) as e:
        export_workflow(lin, j.reader(), fmt, str(tmp_path / "wf"))  # type: ignore[arg-type]
    assert type(e.value).__name__ == "Unexportable"
    assert str(e.value) == (
        f"no step of the lineage can be written as a "
        f"{'Makefile' if fmt == 'make' else 'Snakefile'}: command {cid}: vim is interactive"
    )
    assert not (tmp_path / "wf").exists()


def test_a_leaf_script_edited_since_it_ran_is_named(j: J, tmp_path: Path) -> None:
    """Issue 27.2: calc.py (not archived) changed after the run that made
    the result: the export says it cannot guarantee that step."""
    from shournal.provenance.export import changed_message

    script = b"print('lines=3')\n"
    cid = j.cmd("python3 calc.py > out", 10, reads=[j.v("calc.py", script, 5)],
                writes=[j.v("out", b"lines=3\n", 10)])  # fmt: skip
    j.disk("calc.py", b"print('LINES=3')\n", 50)  # same size, other content
    target = j.disk("out", b"lines=3\n", 10)
    result = export_workflow(j.lineage(DiskTarget(str(target))), j.reader(), "make",
                             str(tmp_path / "wf"))  # fmt: skip
    assert [(c.path, c.command_ids, c.copy) for c in result.changed] == [("calc.py", [cid], None)]
    (line,) = changed_message(result)
    assert line.startswith(f"calc.py differs from the version command {cid} read")
    assert "cannot guarantee" in line
    assert "# CHANGED since command" in Path(result.path).read_text()
    # back to the version that ran (another mtime): nothing to say
    j.disk("calc.py", script, 60)
    result = export_workflow(j.lineage(DiskTarget(str(target))), j.reader(), "make",
                             str(tmp_path / "wf2"))  # fmt: skip
    assert result.changed == []


def test_rocrate_is_read_by_runcrate_report(j: J, tmp_path: Path) -> None:
    """A second consumer: runcrate's report resolves every action's
    instrument, objects and results to entities of the crate."""
    import shutil
    import subprocess
    import sys

    from shournal.provenance.records import export_record

    target, ids, _script = _analysis(j)
    crate = tmp_path / "crate"
    export_record(j.lineage(DiskTarget(str(target))), j.reader(), "rocrate", str(crate))
    exe = shutil.which("runcrate", path=str(Path(sys.executable).parent))
    assert exe is not None
    res = subprocess.run([exe, "report", str(crate)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    blocks = [b.splitlines() for b in res.stdout.strip().split("\n\n")]
    assert [b[0] for b in blocks] == [f"action: #command-{ids['sort']}",
                                      f"action: #command-{ids['py']}"]
    assert blocks[0][1] == "  instrument: #program-sort (SoftwareApplication)"
    assert blocks[1][1] == "  instrument: scripts/an.py (['File', 'SoftwareApplication'])"
    assert blocks[1][-2:] == ["  outputs:", f"    {target.as_uri()}"]
    # What runcrate resolves, every reference of every action is: an entity
    # of the crate, never a dangling id.
    doc = json.loads((crate / "ro-crate-metadata.json").read_text())
    defined = {e["@id"] for e in doc["@graph"]}
    for action in (e for e in doc["@graph"] if e["@type"] == "CreateAction"):
        for key in ("instrument", "object", "result", "agent"):
            refs = action.get(key, [])
            for ref in refs if isinstance(refs, list) else [refs]:
                assert ref["@id"] in defined, (action["@id"], key, ref)


def test_rocrate_gives_the_recorded_environment_redacted(j: J, tmp_path: Path) -> None:
    """A command recorded with its apparatus carries its environment as
    Process Run Crate PropertyValues: the manifest's (redacted when
    recorded) and redacted again with the patterns of today."""
    from records_check import issues, validate_crate

    from shournal.provenance.records import export_record
    from shournal.redact import MARKER as REDACTED
    from shournal.store.archive import encode_manifest

    manifest = encode_manifest({"env": {"LANG": "C.UTF-8", "API_TOKEN": REDACTED,
                                        "DB_PASS": "hunter2"}})
    raw = j.v("raw.txt", b"b\na\n", 0)
    cid = j.cmd("sort raw.txt -o sorted.txt", 10, 11, reads=[raw],
                writes=[j.v("sorted.txt", b"a\nb\n", 11)], apparatus=manifest)
    j.disk("raw.txt", b"b\na\n", 0)
    target = j.disk("sorted.txt", b"a\nb\n", 11)
    crate = tmp_path / "crate"
    export_record(j.lineage(DiskTarget(str(target))), j.reader(), "rocrate", str(crate),
                  secret_env_names=("*TOKEN*", "*PASS*"))
    text = (crate / "ro-crate-metadata.json").read_text()
    assert "hunter2" not in text
    by_id = {e["@id"]: e for e in json.loads(text)["@graph"]}
    action = by_id[f"#command-{cid}"]
    env = {by_id[r["@id"]]["name"]: by_id[r["@id"]]["value"] for r in action["environment"]}
    assert env == {"LANG": "C.UTF-8", "API_TOKEN": REDACTED, "DB_PASS": REDACTED}
    assert {by_id[r["@id"]]["@type"] for r in action["environment"]} == {"PropertyValue"}
    report = validate_crate(crate, tmp_path)
    assert issues(report) == [] and report["passed"], report["issues"]
    report = validate_crate(crate, tmp_path, level="recommended")
    found = [i for i in issues(report, "RECOMMENDED") if "environment" in i]
    assert found == [], found


def test_rocrate_gives_a_written_directory_as_a_collection(j: J, tmp_path: Path) -> None:
    """Several files one command wrote in one directory are also one
    Collection among its results; runcrate and the validator read it."""
    import shutil
    import subprocess
    import sys

    from records_check import issues, validate_crate

    from shournal.provenance.records import export_record

    raw = j.v("raw.txt", b"b\na\n", 0)
    cid = j.cmd("split -l 1 raw.txt parts/p", 10, 11, reads=[raw],
                writes=[j.v("parts/paa", b"b\n", 11), j.v("parts/pab", b"a\n", 11)])
    j.disk("raw.txt", b"b\na\n", 0)
    targets = [j.disk("parts/paa", b"b\n", 11), j.disk("parts/pab", b"a\n", 11)]
    crate = tmp_path / "crate"
    export_record(j.lineage(*(DiskTarget(str(t)) for t in targets)), j.reader(), "rocrate",
                  str(crate))
    doc = json.loads((crate / "ro-crate-metadata.json").read_text())
    by_id = {e["@id"]: e for e in doc["@graph"]}
    results = [r["@id"] for r in by_id[f"#command-{cid}"]["result"]]
    (coll,) = [by_id[r] for r in results if by_id[r]["@type"] == "Collection"]
    assert coll["name"] == str(j.root / "parts")
    assert sorted(p["@id"] for p in coll["hasPart"]) == [t.as_uri() for t in targets]
    assert set(results) == {coll["@id"], *(t.as_uri() for t in targets)}
    assert coll["mainEntity"] == {"@id": targets[0].as_uri()}
    assert {"@id": coll["@id"]} in by_id["./"]["mentions"]
    report = validate_crate(crate, tmp_path)
    assert issues(report) == [] and report["passed"], report["issues"]
    # What the profile recommends for a Collection is there too.
    report = validate_crate(crate, tmp_path, level="recommended")
    found = [i for i in issues(report, "RECOMMENDED") if "Collection" in i]
    assert found == [], found
    exe = shutil.which("runcrate", path=str(Path(sys.executable).parent))
    assert exe is not None
    res = subprocess.run([exe, "report", str(crate)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0 and coll["@id"] in res.stdout, res.stderr


INVALID = Path(__file__).resolve().parents[1] / "data" / "ro-crate" / "invalid-process-run-crate"


@pytest.mark.parametrize(("fixture", "message"), [
    ("action_bad_environment",
     "If the Action has an environment, it should point to entities of type PropertyValue"),
    ("action_not_mentioned",
     "The Action SHOULD be referenced from the Root Data Entity via mentions"),
    ("collection_no_haspart", "The Collection SHOULD have a hasPart"),
    ("collection_no_mainentity", "The Collection SHOULD have a mainEntity"),
    ("collection_not_mentioned",
     "The Collection SHOULD be referenced from the Root Data Entity via mentions"),
])
def test_the_validator_as_run_rejects_its_own_invalid_fixtures(
    fixture: str, message: str, tmp_path: Path
) -> None:
    """Negative controls: the checks the export's environment, collections
    and mentions pass do fail on the validator's invalid fixtures (copied
    from crs4/rocrate-validator), as the tests run the validator."""
    from records_check import issues, validate_crate

    crate = tmp_path / fixture
    shutil.copytree(INVALID / fixture, crate)
    report = validate_crate(crate, tmp_path, level="recommended")
    found = issues(report, "REQUIRED") + issues(report, "RECOMMENDED")
    assert any(message in i for i in found), found


def test_rocrate_names_the_image_a_recombine_run_ran_in(j: J, tmp_path: Path) -> None:
    from records_check import issues, validate_crate

    from shournal.provenance.records import SIF_IMAGE, export_record

    bench = j.v("set/logs.json", b"{}\n", 0)
    cid = j.cmd("python3 -m shournal.rereso.sandbox bwrap '/tmp/img/rootfs|/srv/tools/hpm.sif' "
                f"{j.root}/out arg:learn 'in:|{j.root}/set/logs.json' 'out:|automaton.dot'",
                10, 11, reads=[bench], writes=[j.v("out/automaton.dot", b"digraph {}\n", 11)])
    j.disk("set/logs.json", b"{}\n", 0)
    target = j.disk("out/automaton.dot", b"digraph {}\n", 11)
    crate = tmp_path / "crate"
    export_record(j.lineage(DiskTarget(str(target))), j.reader(), "rocrate", str(crate))
    by_id = {e["@id"]: e for e in
             json.loads((crate / "ro-crate-metadata.json").read_text())["@graph"]}
    image = by_id[by_id[f"#command-{cid}"]["containerImage"]["@id"]]
    assert image == {"@id": "#container-/srv/tools/hpm.sif", "@type": "ContainerImage",
                     "additionalType": {"@id": SIF_IMAGE}, "name": "hpm.sif",
                     "alternateName": "/srv/tools/hpm.sif"}
    report = validate_crate(crate, tmp_path)
    assert issues(report) == [] and report["passed"], report["issues"]


def test_the_note_is_the_description_in_rocrate_and_prov(j: J, tmp_path: Path) -> None:
    """`shournal note`: a command's note is its CreateAction's description
    (the crate still valid) and its activity's dcterms:description (read
    back by the prov library), its tags shournal:tags."""
    from prov.model import ProvActivity
    from records_check import issues, read_prov, validate_crate

    from shournal.journal import Journal
    from shournal.provenance.records import export_record

    target, ids, _ = _analysis(j)
    Journal(j.store).set_note(ids["py"], 'the command behind figure 3 "</script>"')
    Journal(j.store).add_tags(ids["py"], ["fig3", "paper2"])
    lin = j.lineage(DiskTarget(str(target)))
    crate = tmp_path / "crate"
    export_record(lin, j.reader(), "rocrate", str(crate))
    report = validate_crate(crate, tmp_path)
    assert issues(report) == [] and report["passed"], report["issues"]
    graph = json.loads((crate / "ro-crate-metadata.json").read_text())["@graph"]
    by_id = {e["@id"]: e for e in graph}
    assert by_id[f"#command-{ids['py']}"]["description"] == (
        'the command behind figure 3 "</script>"'
    )
    assert by_id[f"#command-{ids['sort']}"]["description"] == "sort raw.txt > clean.txt"
    result = export_record(lin, j.reader(), "prov", str(tmp_path / "p"))
    doc = read_prov(Path(result.path))
    acts = {str(r.identifier): r for r in doc.get_records() if isinstance(r, ProvActivity)}
    py = acts[f"shournal:command-{ids['py']}"]
    assert [str(v) for v in py.get_attribute("dcterms:description")] == [
        'the command behind figure 3 "</script>"'
    ]
    assert not acts[f"shournal:command-{ids['sort']}"].get_attribute("dcterms:description")
    raw = json.loads(Path(result.path).read_text())
    assert raw["activity"][f"shournal:command-{ids['py']}"]["shournal:tags"] == ["fig3", "paper2"]
