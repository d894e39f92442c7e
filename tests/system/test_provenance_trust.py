"""Exports and lineage a reviewer can trust (issue 27.1-6), on a messy
analysis typed into a real bash of the unprivileged test user (pty,
setuid helper, fanotify): a config edited between two runs of a step, a
heredoc with an indented body, a step in a REPL, an input copied outside
the journal, a run interrupted with Ctrl-C and a script edited after the
run.  Every workflow export is checked by `make -n` / `snakemake -n` and
run for real in a fresh copy holding only the leaf inputs."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from fixtures_shell import Shell, wait_for, write_config
from test_run import run_as_user

pytestmark = [pytest.mark.shell, pytest.mark.root]

CALC = """import json
import sys

cfg = json.load(open(sys.argv[1]))
rows = open(sys.argv[2]).read().splitlines()
print(f"lines={len(rows)} n={cfg['n']}")
"""

HEREDOC = """python3 - <<'EOF' > results/heredoc.txt
for i in range(3):
    if i != 1:
        print("row", i)
EOF"""

RUNS = [
    "printf '{\"n\": 1}\\n' > config.json",
    "mkdir -p results && python3 calc.py config.json data/in.csv > results/run1.txt",
    "printf '{\"n\": 2}\\n' > config.json",
    "python3 calc.py config.json data/in.csv > results/run2.txt",
]


def _runner(fmt: str, wf: Path, copy: Path, dry: bool) -> list[str]:
    if fmt == "make":
        return ["make", *(["-n"] if dry else []), "-C", str(copy), "-f", str(wf / "Makefile")]
    return ["snakemake", *(["-n"] if dry else []), "-s", str(wf / "Snakefile"),
            "-d", str(copy), "--cores", "1", "--quiet"]  # fmt: skip


def _run_export(fmt: str, wf: Path, copy: Path) -> None:
    """`-n`, then the real run: both must succeed."""
    for dry in (True, False):
        run = subprocess.run(_runner(fmt, wf, copy, dry), capture_output=True, text=True,
                             timeout=300)  # fmt: skip
        assert run.returncode == 0, (fmt, "dry" if dry else "run", run.stdout, run.stderr)


def test_exports_and_lineage_of_a_messy_analysis(install, user_home, tmp_path):
    if shutil.which("snakemake") is None:
        pytest.fail("snakemake is not installed (scripts/apt-deps.sh installs it)")
    work = user_home / "work"
    uid, gid = install.user.pw_uid, install.user.pw_gid
    (work / "data").mkdir(parents=True)
    (work / "data" / "in.csv").write_text("".join(f"{i},{i * i}\n" for i in range(7)))
    (work / "calc.py").write_text(CALC)
    # the "download" of data/in2.csv: an unrecorded cp, 40 s ago
    shutil.copy(work / "data" / "in.csv", work / "data" / "in2.csv")
    old = time.time() - 40
    os.utime(work / "data" / "in2.csv", (old, old))
    subprocess.run(["chown", "-R", f"{uid}:{gid}", str(work)], check=True)
    # calc.py is not archived (this config archives shell scripts only): the export must say
    # when the file on disk is not what ran
    write_config(user_home, '[script_archive]\ninclude_file_extensions = ["sh"]\n', install)

    sh = Shell("bash", install, user_home)
    for line in RUNS:
        sh.run(line)
    sh.run(HEREDOC)
    # the same content as data/in2.csv, written by a recorded command now
    sh.run("cat data/in.csv > data/copy.csv")
    sh.run("python3 calc.py config.json data/in2.csv > results/run3.txt")
    # a step typed into a REPL: no workflow can rerun it
    sh.proc.sendline("python3")
    sh.proc.expect(">>> ")
    sh.proc.sendline("open('results/repl.txt', 'w').write('typed\\n')")
    sh.proc.expect(">>> ")
    sh.proc.sendline("exit()")
    sh.proc.expect("__SHOURNAL_PROMPT__")
    # a run interrupted with Ctrl-C once it has written part of its output
    partial = work / "results" / "partial.txt"
    sh.proc.sendline(
        "python3 -c \"import time; f = open('results/partial.txt', 'w'); f.write('part\\n'); "
        'f.flush(); time.sleep(60)"'
    )
    wait_for(lambda: partial.exists() and partial.stat().st_size > 0, "the partial output")
    sh.proc.sendintr()
    sh.proc.expect("__SHOURNAL_PROMPT__")
    sh.exit()
    assert (work / "results" / "heredoc.txt").read_text() == "row 0\nrow 2\n"

    # -- 27.1 + 27.3: config.json in two versions, the heredoc ------------------
    targets = ["results/run1.txt", "results/run2.txt", "results/heredoc.txt"]
    for fmt in ("snakemake", "make"):
        wf = user_home / f"wf-{fmt}"
        res = run_as_user(install, user_home, "export", fmt, *targets, "-o", str(wf))
        assert res.returncode == 0, res.stderr
        assert "could not be expressed" not in res.stderr and "differs" not in res.stderr
        copy = tmp_path / f"copy-{fmt}"
        (copy / "data").mkdir(parents=True)
        shutil.copy2(work / "data" / "in.csv", copy / "data" / "in.csv")
        shutil.copy2(work / "calc.py", copy / "calc.py")
        _run_export(fmt, wf, copy)
        for name in targets:
            assert (copy / name).read_bytes() == (work / name).read_bytes(), (fmt, name)
        assert (copy / "results" / "run1.txt").read_text() == "lines=7 n=1\n"

    # -- 27.4: a workflow whose only step is inexpressible ------------------------
    for fmt, name in (("make", "Makefile"), ("snakemake", "Snakefile")):
        res = run_as_user(install, user_home, "export", fmt, "results/repl.txt",
                          "-o", str(user_home / f"repl-{fmt}"))  # fmt: skip
        assert res.returncode == 1, (res.stdout, res.stderr)
        assert res.stderr.startswith(f"shournal: no step of the lineage can be written as a {name}")
        assert "python3 is interactive" in res.stderr and res.stderr.count("\n") == 1
        assert not (user_home / f"repl-{fmt}" / name).exists()

    # -- 27.5: data/in2.csv was copied outside the journal before `cat` ran --------
    res = run_as_user(install, user_home, "lineage", "results/run3.txt")
    assert res.returncode == 0, res.stderr
    (line,) = [ln for ln in res.stdout.splitlines() if "in2.csv" in ln and "[leaf" in ln]
    assert "[leaf: written outside the journal; 1 recorded command(s)" in line, res.stdout
    assert "cat data/in.csv" not in res.stdout
    res = run_as_user(install, user_home, "query", "--wfile", "data/in2.csv")
    assert res.returncode == 1 and "cat data/in.csv" not in res.stdout, res.stdout
    res = run_as_user(install, user_home, "query", "--wfile", "data/copy.csv")
    assert res.returncode == 0 and "cat data/in.csv" in res.stdout, res.stdout
    wf = user_home / "wf-run3"
    res = run_as_user(install, user_home, "export", "make", "results/run3.txt", "-o", str(wf))
    assert res.returncode == 0, res.stderr
    assert "#   data/in2.csv" in (wf / "Makefile").read_text()
    assert "cat data/in.csv" not in (wf / "Makefile").read_text()

    # -- 27.6: the interrupted run ------------------------------------------------
    res = run_as_user(install, user_home, "status", "results/partial.txt")
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert res.stdout.startswith("results/partial.txt: failed: command "), res.stdout
    assert res.stdout.rstrip().endswith("exited with status 130 (interrupted)"), res.stdout

    # -- 27.2: calc.py edited after the runs ---------------------------------------
    text = (work / "calc.py").read_text().replace("lines=", "LINES=")
    subprocess.run(["runuser", "-u", install.user.pw_name, "--", "sh", "-c",
                    f"printf '%s' '{text}' > calc.py"], cwd=work, check=True)  # fmt: skip
    res = run_as_user(install, user_home, "status", "results/run2.txt")
    assert res.returncode == 1 and "stale: calc.py changed" in res.stdout, res.stdout
    res = run_as_user(install, user_home, "export", "snakemake", "results/run2.txt",
                      "-o", str(user_home / "wf-edited"))  # fmt: skip
    assert res.returncode == 0, res.stderr
    warned = [ln for ln in res.stderr.splitlines() if "calc.py differs" in ln]
    assert len(warned) == 1 and "cannot guarantee" in warned[0], res.stderr
    assert "# CHANGED since command" in (user_home / "wf-edited" / "Snakefile").read_text()
