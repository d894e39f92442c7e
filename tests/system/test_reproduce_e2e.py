"""Reproducing an experiment end to end, as the unprivileged test user
through the setuid helper: `shournal run --apparatus`, `shournal diff`,
`shournal replay`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from fixtures_shell import journal_url
from test_run import cli_as_user, commands, run_as_user

from shournal.hashing import content_digest
from shournal.journal import Journal
from shournal.reproduce.experiment import load_manifest
from shournal.store.archive import Archive

pytestmark = [pytest.mark.root]

ANALYSIS = """\
import configparser, csv, sys
cfg = configparser.ConfigParser()
cfg.read(sys.argv[2])
scale = float(cfg["analysis"]["scale"])
with open(sys.argv[1]) as fh:
    rows = list(csv.DictReader(fh))
total = sum(float(r["value"]) for r in rows) * scale
with open("results.txt", "w") as out:
    out.write(f"rows={len(rows)} total={total:.3f}\\n")
"""
DATA = "name,value\na,1.5\nb,2.5\nc,4\n"
CONFIG = "[analysis]\nscale = 2\n"
COMMAND = ("python3", "analysis.py", "data.csv", "config.ini")


def _as_user(install, home: Path, path: Path, text: str) -> None:
    path.write_text(text)
    os.chown(path, install.user.pw_uid, install.user.pw_gid)


@pytest.fixture
def analysis(install, user_home) -> Path:
    work = user_home / "work"
    _as_user(install, user_home, work / "analysis.py", ANALYSIS)
    _as_user(install, user_home, work / "data.csv", DATA)
    _as_user(install, user_home, work / "config.ini", CONFIG)
    return work


def _record(install, home: Path, *argv: str, env: dict[str, str] | None = None,
            opts: tuple[str, ...] = ()):
    extra = [f"{k}={v}" for k, v in (env or {}).items()]
    cmd = cli_as_user(install, home, "run", "--apparatus", *opts, "--", *argv)
    i = cmd.index("env") + 2  # after `env -i`
    cmd[i:i] = extra
    return subprocess.run(cmd, cwd=home / "work", capture_output=True, text=True, timeout=120)


def _manifest(home: Path, cid: int):
    with Journal.open(journal_url(home), create=True) as journal:
        return load_manifest(journal, cid)


def _last_id(home: Path) -> int:
    return commands(home)[-1].id


def test_record_apparatus_archives_what_was_read_from_the_event_fds(
    install, user_home, analysis
) -> None:
    res = _record(install, user_home, *COMMAND,
                  env={"API_TOKEN": "hunter2-token", "DB_PASSWORD": "pw-42", "PLAIN": "visible"})
    assert res.returncode == 0, res.stderr
    assert (analysis / "results.txt").read_text() == "rows=3 total=16.000\n"
    assert res.stderr.startswith("shournal: apparatus: "), res.stderr
    assert "Traceback" not in res.stderr
    cid = _last_id(user_home)
    man = _manifest(user_home, cid)
    assert man is not None
    reads = {r[0]: r for r in man["reads"]}
    arc = Archive(user_home / ".local" / "share" / "shournal" / "archive")
    for name, text in (("analysis.py", ANALYSIS), ("data.csv", DATA), ("config.ini", CONFIG)):
        entry = reads[str(analysis / name)]
        assert entry[6] is None, (entry, man["not_archived"])
        assert entry[5] == content_digest(text.encode()).hex()
        assert arc.get(entry[5]) == text.encode()
    # Files the user may not write, dropped by a normal record, are there:
    # the interpreter itself and modules of its standard library.
    python = os.path.realpath("/usr/bin/python3")
    assert reads[python][5] is not None
    assert arc.get(reads[python][5]) == Path(python).read_bytes()
    assert any(p.endswith("/csv.py") or "/csv." in p for p in reads)
    (out,) = man["writes"]
    assert out[0] == str(analysis / "results.txt")
    assert out[5] == content_digest(b"rows=3 total=16.000\n").hex()
    assert man["env"]["API_TOKEN"] == man["env"]["DB_PASSWORD"] == "[REDACTED:secret-name]"
    assert man["env"]["PLAIN"] == "visible"
    assert (man["uid"], man["gid"]) == (install.user.pw_uid, install.user.pw_gid)
    assert man["kernel"] == os.uname().release and man["umask"] is not None
    assert man["argv"] == list(COMMAND)
    # A secret's value is stored nowhere: not in the journal, not in the archive.
    blobs = [p.read_bytes() for p in (arc.root / "blobs").rglob("*") if p.is_file()]
    db = (user_home / ".local" / "share" / "shournal" / "journal.sqlite").read_bytes()
    for secret in (b"hunter2-token", b"pw-42"):
        assert all(secret not in b for b in blobs) and secret not in db
    # The ordinary record is unchanged: only writable reads.
    (cmd,) = commands(user_home, command_id=cid)
    assert python.encode() not in {e.path for e in cmd.reads}
    assert str(analysis / "data.csv").encode() in {e.path for e in cmd.reads}


def test_repeated_unchanged_record_adds_almost_nothing(install, user_home, analysis) -> None:
    arc = Archive(user_home / ".local" / "share" / "shournal" / "archive")
    assert _record(install, user_home, *COMMAND).returncode == 0
    first = arc.stored_bytes()
    for _ in range(2):
        assert _record(install, user_home, *COMMAND).returncode == 0
    assert arc.stored_bytes() == first
    man = _manifest(user_home, _last_id(user_home))
    assert man["archived_bytes_added"] == 0 and man["content_bytes"] > 0


def test_record_apparatus_counts_and_shows_what_it_did_not_archive(
    install, user_home, analysis
) -> None:
    from fixtures_shell import write_config

    write_config(user_home, '[apparatus]\nmax_file_size = "4KiB"\n', install)
    res = _record(install, user_home, *COMMAND)
    assert res.returncode == 0, res.stderr
    man = _manifest(user_home, _last_id(user_home))
    reads = {r[0]: r for r in man["reads"]}
    python = os.path.realpath("/usr/bin/python3")
    assert reads[python][5:] == [None, "too_large"]
    assert reads[str(analysis / "data.csv")][6] is None
    assert man["not_archived"]["too_large"] == sum(
        1 for r in man["reads"] if r[6] == "too_large") > 0
    assert "too large" in res.stderr, res.stderr
def test_diff_names_exactly_the_changed_input_and_output(install, user_home, analysis) -> None:
    outputs = ("--archive-outputs",)
    assert _record(install, user_home, *COMMAND, opts=outputs).returncode == 0
    first = _last_id(user_home)
    _as_user(install, user_home, analysis / "data.csv", DATA + "d,8\n")
    _as_user(install, user_home, analysis / "analysis.py",
             ANALYSIS.replace("* scale", "* scale * 1"))
    assert _record(install, user_home, *COMMAND, opts=outputs).returncode == 0
    second = _last_id(user_home)
    res = run_as_user(install, user_home, "diff", str(first), str(second),
                      "--output-format", "json")
    assert res.returncode == 1, res.stderr
    rep = json.loads(res.stdout)
    changed = {(f["side"], f["path"]) for f in rep["files"] if f["change"] == "changed"}
    assert changed == {
        ("read", str(analysis / "data.csv")),
        ("read", str(analysis / "analysis.py")),
        ("write", str(analysis / "results.txt")),
    }
    assert not [f for f in rep["files"] if f["change"] != "changed"]
    assert "command" not in rep["differs"] and "environment" not in rep["differs"]
    # Level 3: the script's unified diff.
    res = run_as_user(install, user_home, "diff", "-d", "3", str(first), str(second))
    assert res.returncode == 1, res.stderr
    assert "-total = sum(float(r[\"value\"]) for r in rows) * scale\n" in res.stdout
    assert "+total = sum(float(r[\"value\"]) for r in rows) * scale * 1\n" in res.stdout
    # ... and the output's (archived with --archive-outputs).
    assert "-rows=3 total=16.000\n+rows=4 total=32.000\n" in res.stdout
    # The same command against itself: no difference.
    res = run_as_user(install, user_home, "diff", str(first), str(first))
    assert res.returncode == 0, res.stdout + res.stderr
    # --wfile: the commands that made two files.
    res = run_as_user(install, user_home, "diff", "--wfile", "results.txt", "results.txt")
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_as_user(install, user_home, "diff", "1", "999")
    assert res.returncode == 2 and res.stderr.startswith("shournal: ")
    assert res.stderr.count("\n") == 1
def _snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    out = {}
    for p in sorted(root.rglob("*")):
        skip = (".local/share/shournal", "/run/", "/replay-out/")  # journal, markers, OUTDIR
        if p.is_file() and not any(s in str(p) for s in skip):
            st = p.stat()
            out[str(p)] = (st.st_mtime_ns, st.st_size, p.read_bytes())
    return out


def test_replay_reproduces_after_inputs_and_script_changed(install, user_home, analysis) -> None:
    assert _record(install, user_home, *COMMAND).returncode == 0
    cid = _last_id(user_home)
    # Everything changed on disk since.
    _as_user(install, user_home, analysis / "data.csv", "name,value\nz,100\n")
    (analysis / "config.ini").unlink()
    _as_user(install, user_home, analysis / "analysis.py", "print('something else')\n")
    (analysis / "results.txt").unlink()
    before = _snapshot(user_home)
    outdir = user_home / "replay-out"
    res = run_as_user(install, user_home, "replay", str(cid), "-o", str(outdir),
                      "--output-format", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    verdict = json.loads(res.stdout)
    assert verdict["outputs"] == [
        {"path": str(analysis / "results.txt"), "verdict": "identical"}]
    replayed = outdir / str(analysis).lstrip("/") / "results.txt"
    assert replayed.read_text() == "rows=3 total=16.000\n"
    assert _snapshot(user_home) == before  # the user's real files: untouched
    assert not (analysis / "results.txt").exists()
    assert not (analysis / "config.ini").exists()
    # No trace of the inputs' mount points among the outputs.
    assert sorted(p.name for p in replayed.parent.iterdir()) == ["results.txt"]


# The analysis with a helper program it runs from the user's bin directory
# (a program of the apparatus, as a tool installed in ~/.local/bin is).
HELPER = "#!/bin/sh\necho 10\n"
ANALYSIS_WITH_HELPER = ANALYSIS.replace(
    "total = ",
    "import subprocess\n"
    "offset = float(subprocess.run(['bin/offset'], capture_output=True, text=True,"
    " check=True).stdout)\n"
    "total = offset + ",
)


def test_replay_local_all_does_not_reproduce_after_a_helper_program_changed(
    install, user_home, analysis
) -> None:
    """Input, script and helper program all changed on disk: replay shows
    the archived ones (identical); --local-all takes the host's programs,
    so the changed helper gives another result (differs, status 1); the
    archived script and input still show.  Neither writes outside OUTDIR."""
    helper = analysis / "bin" / "offset"
    helper.parent.mkdir()
    _as_user(install, user_home, helper, HELPER)
    helper.chmod(0o755)
    _as_user(install, user_home, analysis / "analysis.py", ANALYSIS_WITH_HELPER)
    assert _record(install, user_home, *COMMAND).returncode == 0
    assert (analysis / "results.txt").read_text() == "rows=3 total=26.000\n"
    cid = _last_id(user_home)
    _as_user(install, user_home, analysis / "data.csv", "name,value\nz,100\n")
    _as_user(install, user_home, analysis / "analysis.py", "print('something else')\n")
    _as_user(install, user_home, helper, "#!/bin/sh\necho 1000\n")
    (analysis / "results.txt").unlink()
    before = _snapshot(user_home)
    out = user_home / "replay-out"
    res = run_as_user(install, user_home, "replay", str(cid), "-o", str(out / "archived"))
    assert res.returncode == 0, res.stdout + res.stderr
    mirror = str(analysis).lstrip("/")
    assert (out / "archived" / mirror / "results.txt").read_text() == "rows=3 total=26.000\n"
    res = run_as_user(install, user_home, "replay", str(cid), "--local-all", "-o",
                      str(out / "local"), "--output-format", "json")
    assert res.returncode == 1, res.stdout + res.stderr
    verdict = json.loads(res.stdout)
    assert [(o["path"], o["verdict"]) for o in verdict["outputs"]] == [
        (str(analysis / "results.txt"), "differs")]
    # the host's helper, the archived script and data
    assert (out / "local" / mirror / "results.txt").read_text() == "rows=3 total=1016.000\n"
    assert _snapshot(user_home) == before
    assert not (analysis / "results.txt").exists()


def test_replay_of_a_time_dependent_output_differs(install, user_home, analysis) -> None:
    script = "import time; open('stamp.txt', 'w').write(str(time.time_ns()))"
    assert _record(install, user_home, "python3", "-c", script).returncode == 0
    cid = _last_id(user_home)
    res = run_as_user(install, user_home, "replay", str(cid), "-o",
                      str(user_home / "out"))
    assert res.returncode == 1, res.stdout + res.stderr
    lines = [line.split()[:2] for line in res.stdout.splitlines()]
    assert ["differs", str(analysis / "stamp.txt")] in lines, res.stdout



def test_only_apparatus_option_turns_the_recorder_on(install, user_home, analysis) -> None:
    """An inherited SHOURNAL_APPARATUS (the listener's switch) does not
    make a plain `shournal run` a partial apparatus record."""
    cmd = cli_as_user(install, user_home, "run", "--", *COMMAND)
    i = cmd.index("env") + 2
    cmd[i:i] = ['SHOURNAL_APPARATUS={"argv": []}']
    res = subprocess.run(cmd, cwd=user_home / "work", capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert _manifest(user_home, _last_id(user_home)) is None


def test_rerun_with_a_new_input_on_the_archived_apparatus(install, user_home, analysis) -> None:
    assert _record(install, user_home, *COMMAND).returncode == 0
    cid = _last_id(user_home)
    _as_user(install, user_home, analysis / "new.csv", "name,value\nx,10\n")
    _as_user(install, user_home, analysis / "analysis.py", "raise SystemExit(3)\n")
    before = _snapshot(user_home)
    res = run_as_user(install, user_home, "rerun", str(cid), "--input", "data.csv=new.csv",
                      "-o", str(user_home / "replay-out"), "--output-format", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    rep = json.loads(res.stdout)
    assert rep["derivedFrom"] == cid
    assert rep["outputs"] == [{"path": str(analysis / "results.txt"), "verdict": "differs",
                               "what": "content"}]
    out = user_home / "replay-out" / str(analysis).lstrip("/") / "results.txt"
    assert out.read_text() == "rows=1 total=20.000\n"  # new input, archived script
    plan = res.stderr.splitlines()
    assert plan[0] == f"shournal: rerun derived from command {cid}: {' '.join(COMMAND)}"
    assert f"shournal:   input {analysis / 'data.csv'} shows {analysis / 'new.csv'}" in plan
    (programs,) = [line for line in plan if "programs and libraries" in line]
    assert programs.endswith(", 0 from the host")
    assert not programs.endswith(": 0 from the archive, 0 from the host")
    assert _snapshot(user_home) == before
    # (Only files the command read show in its working directory: new.csv
    # reaches the sandbox through --input alone.)
    res = run_as_user(install, user_home, "rerun", str(cid), "--local-all", "--command",
                      "python3 analysis.py data.csv config.ini > log.txt", "-o",
                      str(user_home / "o2"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "programs and libraries: 0 from the archive" in res.stderr
    o2 = user_home / "o2" / str(analysis).lstrip("/")
    assert (o2 / "results.txt").read_text() == "rows=3 total=16.000\n"
    assert (o2 / "log.txt").exists()
    assert "extra     " + str(analysis / "log.txt") in res.stdout
    res = run_as_user(install, user_home, "rerun", str(cid), "--input", "nope.csv=new.csv")
    assert res.returncode == 2 and res.stderr.startswith("shournal: ")
    assert res.stderr.count("\n") == 1 and "did not read" in res.stderr


def test_restore_serves_a_file_from_the_apparatus_archive(install, user_home, analysis) -> None:
    """data.csv is not a script (not in the journal's script archive) but
    the apparatus archived what the command read: `restore --file-id`
    serves that version; a read nobody archived is still 'not archived'."""
    assert _record(install, user_home, *COMMAND).returncode == 0
    (view,) = commands(user_home, command_id=_last_id(user_home))
    ids = {os.path.basename(os.fsdecode(e.path)): e.id for e in view.reads}
    _as_user(install, user_home, analysis / "data.csv", "changed since\n")
    res = run_as_user(install, user_home, "restore", "--file-id", str(ids["data.csv"]),
                      "-o", "restored.csv")
    assert res.returncode == 0, res.stderr
    assert (analysis / "restored.csv").read_text() == DATA
    # Without the apparatus: nothing to serve (status 1, one line).
    res = run_as_user(install, user_home, "run", "--", "cat", "data.csv")
    assert res.returncode == 0, res.stderr
    (plain,) = commands(user_home, command_id=_last_id(user_home))
    (read,) = [e for e in plain.reads if e.path.endswith(b"data.csv")]
    res = run_as_user(install, user_home, "restore", "--file-id", str(read.id), "-o", "x.csv")
    assert res.returncode == 1 and "not archived" in res.stderr and res.stderr.count("\n") == 1
    assert not (analysis / "x.csv").exists()
