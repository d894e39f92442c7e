"""Lineage, status and the workflow exports end to end: a small analysis
typed into two real bash sessions of the unprivileged test user (pty,
setuid helper, fanotify), then `shournal lineage`, `status` and `export`
as that user, and the exported Snakefile and Makefile run for real by
snakemake and GNU make in fresh copies holding only the leaf inputs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures_shell import Shell, write_config
from test_run import run_as_user

from shournal.hashing import partial_xxh64

pytestmark = [pytest.mark.shell, pytest.mark.root]

ANALYZE = """import sys

SCALE = 1
rows = [line.rstrip("\\n").split(";") for line in open(sys.argv[1])]
total = sum(int(r[2]) for r in rows) * SCALE
print(f"scale={SCALE} rows={len(rows)} total={total} first={rows[0][0]}")
"""

SESSION_1 = [
    # cleaning: drop the header and the rows without a value
    """awk -F, 'NR > 1 && $3 != "NA" {print $1 "," $2 "," $3}' raw/samples.csv > clean.csv""",
    "sort -t, -k1,1 clean.csv > sorted.csv",
    "cp sorted.csv staged.csv",
    "tr , ';' < staged.csv > semicolons.csv",
    "mkdir -p out && mv semicolons.csv out/input.csv",  # a rename: no file event
    "python3 analyze.py out/input.csv > out/result1.txt",
]
SESSION_2 = [
    # The script is edited in place: sed -i reads it and replaces it (the
    # version read is gone when the holder looks; it is still its read).
    "sed -i 's/^SCALE = 1$/SCALE = 10/' analyze.py",
    "python3 analyze.py out/input.csv > out/result2.txt",
    "cat out/result1.txt out/result2.txt | sort > summary.txt",
]


def _downloaded(work: Path, uid: int, gid: int) -> None:
    """The "download": data and a script made outside the journal, with an
    old mtime as wget and tar leave them."""
    (work / "raw").mkdir()
    rows = ["id,name,value"]
    for i in range(40, 0, -1):
        rows.append(f"s{i:02d},name{i},{'NA' if i % 7 == 0 else i * 3}")
    (work / "raw" / "samples.csv").write_text("\n".join(rows) + "\n")
    (work / "analyze.py").write_text(ANALYZE)
    for p in (work / "raw" / "samples.csv", work / "analyze.py"):
        os.utime(p, (1_600_000_000, 1_600_000_000))
    subprocess.run(["chown", "-R", f"{uid}:{gid}", str(work)], check=True)


def _as_user(install, *argv: str) -> None:
    subprocess.run(["runuser", "-u", install.user.pw_name, "--", *argv], check=True)


def _recorded_matches(path: Path, node: dict, cmd: dict) -> bool:
    """``path`` has the size and partial hash the journal recorded."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        digest = partial_xxh64(fd, size, cmd["hashChunkSize"], cmd["hashMaxCountOfReads"])
    finally:
        os.close(fd)
    return size == node["size"] and str(digest) == node["hash"]


def test_lineage_status_and_exports_of_a_recorded_analysis(install, user_home, tmp_path):
    if shutil.which("snakemake") is None:
        pytest.fail("snakemake is not installed (scripts/apt-deps.sh installs it)")
    work = user_home / "work"
    uid, gid = install.user.pw_uid, install.user.pw_gid
    _downloaded(work, uid, gid)
    # Archive shell and Python scripts (explicitly, whatever the default).
    write_config(user_home, '[script_archive]\ninclude_file_extensions = ["sh", "py"]\n', install)
    for lines in (SESSION_1, SESSION_2):
        sh = Shell("bash", install, user_home)
        for line in lines:
            sh.run(line)
        sh.exit()

    # -- lineage ---------------------------------------------------------------
    res = run_as_user(install, user_home, "lineage", "summary.txt", "--output-format", "json")
    assert res.returncode == 0, res.stderr
    lin = json.loads(res.stdout)
    texts = [c["command"] for c in lin["commands"]]
    # every command with a file event, in start-time order; the mv made none
    assert texts == [t for t in SESSION_1 + SESSION_2 if not t.startswith("mkdir")]
    by_text = {c["command"]: c for c in lin["commands"]}
    files = {f["id"]: f for f in lin["files"]}
    target = files[lin["target"]]
    assert target["path"] == str(work / "summary.txt") and target["target"]

    def rel(f: dict) -> str:
        return os.path.relpath(f["path"], work)

    leaves = sorted((rel(f), f["archivedId"] is not None) for f in files.values() if f["leaf"])
    # the download and the script's first version (archived) are the leaves
    assert leaves == [("analyze.py", True), ("raw/samples.csv", False)]
    reads = {(e["command"], rel(files[e["file"]])) for e in lin["edges"] if e["type"] == "read"}
    wrote = {e["file"]: e for e in lin["edges"] if e["type"] == "wrote"}
    run1, run2 = (by_text[SESSION_1[5]], by_text[SESSION_2[1]])
    tr, sed_script = by_text[SESSION_1[3]], by_text[SESSION_2[0]]
    # both runs read the one version of out/input.csv, which tr wrote as
    # semicolons.csv (moved since): the lineage went through the mv
    (input_csv,) = [f for f in files.values() if rel(f) == "out/input.csv"]
    assert (run1["id"], "out/input.csv") in reads and (run2["id"], "out/input.csv") in reads
    assert wrote[input_csv["id"]]["command"] == tr["id"]
    assert wrote[input_csv["id"]]["writtenPath"] == str(work / "semicolons.csv")
    # tr read the copy cp made, which has the content sort wrote: the
    # writer is the cp (the latest writer of that content), the sort is
    # counted as the other candidate
    (staged,) = [f for f in files.values() if rel(f) == "staged.csv"]
    assert (tr["id"], "staged.csv") in reads
    assert wrote[staged["id"]]["command"] == by_text[SESSION_1[2]]["id"]
    assert wrote[staged["id"]]["otherCandidates"] == 1
    # each run shows the script version it ran: two archived versions
    scripts = {
        e["command"]: files[e["file"]]["archivedId"]
        for e in lin["edges"]
        if e["type"] == "read" and rel(files[e["file"]]) == "analyze.py"
    }
    assert None not in scripts.values() and scripts[run1["id"]] != scripts[run2["id"]]
    script_v2 = next(f for f in files.values() if f["archivedId"] == scripts[run2["id"]])
    assert wrote[script_v2["id"]]["command"] == sed_script["id"]
    # the in-place edit read the version it replaced: the script's first
    script_v1 = next(f for f in files.values() if f["archivedId"] == scripts[run1["id"]])
    assert any(e["type"] == "read" and e["command"] == sed_script["id"]
               and e["file"] == script_v1["id"] for e in lin["edges"])  # fmt: skip
    for f in files.values():
        assert {"path", "size", "mtime", "hash"} <= set(f)

    human = run_as_user(install, user_home, "lineage", "summary.txt")
    assert human.returncode == 0 and "[leaf: no recorded command wrote it]" in human.stdout
    dot = run_as_user(install, user_home, "lineage", "summary.txt", "--output-format", "dot")
    assert dot.stdout.startswith("digraph lineage {")

    # -- status ------------------------------------------------------------------
    res = run_as_user(install, user_home, "status", "summary.txt")
    assert (res.returncode, res.stdout) == (0, "summary.txt: up to date\n"), res.stderr
    _as_user(install, "touch", str(work / "raw" / "samples.csv"))
    res = run_as_user(install, user_home, "status", "summary.txt")
    awk = by_text[SESSION_1[0]]["id"]
    expected = f"summary.txt: stale: raw/samples.csv changed after command {awk} read it ("
    assert res.returncode == 1 and res.stdout.startswith(expected), res.stdout

    # -- exports, run for real in copies holding only the leaf inputs ------------
    produced = {
        rel(files[fid]): (files[fid], by_id)
        for fid, e in wrote.items()
        for by_id in [next(c for c in lin["commands"] if c["id"] == e["command"])]
    }
    for fmt, runner in (
        ("snakemake", lambda d, c: ["snakemake", "-s", f"{d}/Snakefile", "-d", str(c),
                                    "--cores", "1", "--quiet"]),
        ("make", lambda d, c: ["make", "-C", str(c), "-f", f"{d}/Makefile"]),
    ):  # fmt: skip
        out_dir = user_home / f"wf-{fmt}"
        res = run_as_user(install, user_home, "export", fmt, "summary.txt", "-o", str(out_dir))
        assert res.returncode == 0, res.stderr
        assert "could not be expressed" not in res.stderr, res.stderr
        copy = tmp_path / f"copy-{fmt}"
        (copy / "raw").mkdir(parents=True)
        shutil.copy2(work / "raw" / "samples.csv", copy / "raw" / "samples.csv")
        # what make and snakemake plan must be accepted before the real run
        dry = runner(out_dir, copy)
        dry.insert(1, "-n")
        planned = subprocess.run(dry, capture_output=True, text=True, timeout=300)
        assert planned.returncode == 0, (fmt, planned.stdout, planned.stderr)
        run = subprocess.run(runner(out_dir, copy), capture_output=True, text=True, timeout=300)
        if run.returncode and os.environ.get("PROV_DEBUG"):
            shutil.copytree(user_home, os.environ["PROV_DEBUG"], symlinks=True)
        assert run.returncode == 0, (fmt, run.stdout, run.stderr, (out_dir / "Snakefile").exists())
        remade = sorted(
            str(p.relative_to(copy)) for p in copy.rglob("*")
            if p.is_file() and ".snakemake" not in p.parts
        )  # fmt: skip
        assert remade == sorted(
            ["raw/samples.csv", "clean.csv", "sorted.csv", "staged.csv", "out/input.csv",
             "out/result1.txt", "out/result2.txt", "summary.txt"]
        ), (fmt, remade)  # fmt: skip
        for name in remade:
            if name in produced:
                node, cmd = produced[name]
                assert _recorded_matches(copy / name, node, cmd), (fmt, name)
        assert (copy / "out" / "result1.txt").read_text().startswith("scale=1 ")
        assert (copy / "out" / "result2.txt").read_text().startswith("scale=10 ")
        if os.environ.get("PROV_DEBUG"):
            shutil.copytree(out_dir, os.environ["PROV_DEBUG"] + "-" + fmt)

    # -- run records: a Process Run Crate and PROV-JSON, read back ----------------
    from records_check import issues, read_prov, validate_crate

    crate = user_home / "crate"
    res = run_as_user(install, user_home, "export", "rocrate", "summary.txt", "-o", str(crate))
    assert res.returncode == 0, res.stderr
    report = validate_crate(crate, tmp_path)
    assert issues(report) == [] and report["passed"], report["issues"]
    graph = json.loads((crate / "ro-crate-metadata.json").read_text())["@graph"]
    actions = {e["description"]: e for e in graph if e["@type"] == "CreateAction"}
    assert list(actions) == texts
    runs = [actions[t]["instrument"]["@id"] for t in texts if t.startswith("python3")]
    # the two runs ran two versions of the script, both copied into the crate
    assert len(set(runs)) == 2 and all(r.startswith("scripts/") for r in runs)
    assert [(crate / r).read_text().count("SCALE = 10") for r in runs] == [0, 1]
    sizes = {e["@id"]: e["contentSize"] for e in graph if "File" in e["@type"]}
    assert sizes[(work / "summary.txt").as_uri()] == str((work / "summary.txt").stat().st_size)

    prov_dir = user_home / "p"
    res = run_as_user(install, user_home, "export", "prov", "summary.txt", "-o", str(prov_dir))
    assert res.returncode == 0, res.stderr
    doc = read_prov(prov_dir / "prov.json")
    activities = [r for r in doc.get_records() if type(r).__name__ == "ProvActivity"]
    assert sorted(str(a.identifier) for a in activities) == sorted(
        f"shournal:command-{c['id']}" for c in lin["commands"]
    )
