"""`shournal import` through the real CLI into a real journal (SQLite, and
the PostgreSQL fixture), from history files written by the real bash and
zsh, atuin's schema, the original shournal's published sample and a
hishtory export (tests/import_samples.py)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from fixtures_cli import run_shournal
from import_samples import ORIGINAL_V2_2, make_atuin_db, make_hishtory_export

BASH = shutil.which("bash")
ZSH = shutil.which("zsh")


def _shell(argv: list[str], script: bytes, home: Path, **env: str) -> None:
    """Run an interactive shell reading ``script``; it saves its history
    when it exits."""
    run_env = {"HOME": str(home), "PATH": os.environ["PATH"], "LANG": "C.UTF-8", **env}
    res = subprocess.run(argv, input=script, env=run_env, capture_output=True, timeout=60,
                         cwd=home)  # fmt: skip
    assert res.returncode == 0, res.stderr


def bash_history(home: Path, lines: bytes, *, histfile: Path) -> Path:
    assert BASH
    script = (b"shopt -s cmdhist lithist histappend\nHISTTIMEFORMAT='%F %T '\n" + lines +
              b"exit\n")  # fmt: skip
    _shell([BASH, "--norc", "-i"], script, home, HISTFILE=str(histfile), HISTSIZE="1000",
           HISTFILESIZE="1000")
    return histfile


def zsh_history(home: Path, lines: bytes, *, histfile: Path) -> Path:
    assert ZSH
    script = (b"setopt extended_history inc_append_history\n"
              b"HISTFILE=" + str(histfile).encode() + b"\nSAVEHIST=1000\nHISTSIZE=1000\n" +
              lines + b"exit\n")  # fmt: skip
    _shell([ZSH, "-f", "-i"], script, home)
    return histfile


def _all(env: dict[str, str]) -> list[dict]:
    res = run_shournal(["history", "--all", "--output-format", "jsonl"], env)
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def _journal(env: dict[str, str]) -> Path:
    return Path(env["SHOURNAL_DB_URL"].removeprefix("sqlite:///"))


TYPED = (b"echo one\nfor i in 1 2; do\n  echo $i\ndone\necho \xff\xfe raw\n"
         b"echo \xe4\xbd\xa0\xe5\xa5\xbd\n")
EXPECTED = ["echo one", "for i in 1 2; do\n  echo $i\ndone", "echo \\xff\\xfe raw", "echo 你好"]


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_bash_history_of_a_real_bash(tmp_path: Path, cli_env: dict[str, str]) -> None:
    hist = bash_history(tmp_path, TYPED, histfile=tmp_path / ".bash_history")
    assert hist.read_bytes().startswith(b"#")  # with timestamps
    res = run_shournal(["import", "bash", str(hist)], cli_env)
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"imported 7 commands, skipped 0 already stored, from {hist} (bash)\n"
    cmds = _all(cli_env)
    texts = [c["command"] for c in cmds]
    assert texts[2:6] == EXPECTED  # after `shopt ...` and `HISTTIMEFORMAT=...`
    assert {c["importedFrom"] for c in cmds} == {"bash"}
    assert all(c["returnValue"] is None and not c["fileWriteEvents"] for c in cmds)
    # found by a query too
    res = run_shournal(["query", "--command-text", "%你好%", "--output-format", "json"], cli_env)
    assert [c["command"] for c in json.loads(res.stdout)] == ["echo 你好"]

    # the same file again: nothing twice
    res = run_shournal(["import", "bash", str(hist)], cli_env)
    assert res.stdout.startswith("imported 0 commands, skipped 7 already stored")
    # a newer file that overlaps it (a second session appended its 4 lines):
    # only what is new
    bash_history(tmp_path, b"echo later\n", histfile=hist)
    res = run_shournal(["import", "bash"], {**cli_env, "HISTFILE": str(hist)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("imported 4 commands, skipped 7 already stored")
    assert [c["command"] for c in _all(cli_env)][-2:] == ["echo later", "exit"]


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_bash_history_without_timestamps(tmp_path: Path, cli_env: dict[str, str]) -> None:
    assert BASH
    hist = tmp_path / "plain"
    _shell([BASH, "--norc", "-i"], b"echo a\necho a\necho \xe4\xbd\xa0\nexit\n", tmp_path,
           HISTFILE=str(hist))
    assert not hist.read_bytes().startswith(b"#")
    res = run_shournal(["import", "bash", str(hist)], cli_env)
    assert res.stdout.startswith("imported 4 commands"), res.stderr
    assert [c["command"] for c in _all(cli_env)] == ["echo a", "echo a", "echo 你", "exit"]
    res = run_shournal(["import", "bash", str(hist)], cli_env)
    assert res.stdout.startswith("imported 0 commands, skipped 4")


@pytest.mark.skipif(ZSH is None, reason="zsh is not installed")
def test_zsh_history_of_a_real_zsh(tmp_path: Path, cli_env: dict[str, str]) -> None:
    hist = zsh_history(tmp_path, TYPED + b"echo a \\\n b\n", histfile=tmp_path / ".zsh_history")
    raw = hist.read_bytes()
    assert b"\x83" in raw  # zsh metafied the Chinese text
    res = run_shournal(["import", "zsh", str(hist)], {**cli_env, "HOME": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    cmds = _all(cli_env)
    texts = [c["command"] for c in cmds]
    assert texts[4:] == [*EXPECTED, "echo a \\\n b", "exit"]
    assert {c["importedFrom"] for c in cmds} == {"zsh"}
    res = run_shournal(["import", "zsh", str(hist)], cli_env)
    assert res.stdout.startswith(f"imported 0 commands, skipped {len(texts)} already stored")


def test_atuin(tmp_path: Path, cli_env: dict[str, str]) -> None:
    db = make_atuin_db(tmp_path / "history.db")
    env = {**cli_env, "XDG_DATA_HOME": str(tmp_path)}
    (tmp_path / "atuin").mkdir()
    shutil.move(db, tmp_path / "atuin" / "history.db")
    res = run_shournal(["import", "atuin"], env)  # the default path
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("imported 3 commands, skipped 0")
    cmds = _all(cli_env)
    assert [c["command"] for c in cmds] == ["make figures", "ls /nonexistent", "echo 你好"]
    assert cmds[1]["returnValue"] == 2 and cmds[0]["workingDir"] == "/home/ada/paper"
    res = run_shournal(["history", "--all", "--failed", "--format", "{command} {imported}"],
                       cli_env)
    assert res.stdout == "ls /nonexistent atuin\n"


def test_hishtory(tmp_path: Path, cli_env: dict[str, str]) -> None:
    res = run_shournal(["import", "hishtory"], cli_env)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "needs the PATH" in res.stderr
    export = make_hishtory_export(tmp_path / "h.jsonl")
    res = run_shournal(["import", "hishtory", "--dry-run", str(export)], cli_env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("would import 2 commands, skipped 0 already stored")
    assert not _journal(cli_env).exists()
    res = run_shournal(["import", "hishtory", str(export)], cli_env)
    assert res.returncode == 0, res.stderr
    assert [c["command"] for c in _all(cli_env)] == ["false", "python3 analyze.py data.csv"]
    res = run_shournal(["import", "hishtory", str(export), "--dry-run"], cli_env)
    assert res.stdout.startswith("would import 0 commands, skipped 2 already stored")


def _import_original(tmp_path: Path, env: dict[str, str]) -> None:
    sample = tmp_path / "original"
    shutil.copytree(ORIGINAL_V2_2, sample)
    res = run_shournal(["import", "shournal", str(sample / "database.db")], env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("imported 4 commands, skipped 0")
    res = run_shournal(["import", "shournal", str(sample / "database.db")], env)
    assert res.stdout.startswith("imported 0 commands, skipped 4")


def _check_original(tmp_path: Path, env: dict[str, str]) -> None:
    cmds = _all(env)
    assert {c["importedFrom"] for c in cmds} == {"shournal"}
    assert [[e["path"] for e in c["fileWriteEvents"]] for c in cmds] == [
        ["/home/tycho/one", "/home/tycho/two"], [], ["/tmp/three", "/tmp/four"], []
    ]
    reads = cmds[3]["fileReadEvents"]
    assert [(e["path"], e["isStoredToDisk"]) for e in reads] == [
        ("/home/tycho/storeme/script1.sh", True), ("/home/tycho/storeme/script2.sh", True)
    ]
    # its stored scripts come back
    out = tmp_path / "restored"
    out.mkdir()
    res = run_shournal(["restore", "--file-id", str(reads[1]["id"])], env, cwd=out)
    assert res.returncode == 0, res.stderr
    assert (out / "script2.sh").read_bytes() == b"s2\n"
    # lineage: a file with /tmp/three's content and mtime (read in the
    # zone of the import: the test's is UTC) was made by command 3
    three = tmp_path / "three"
    three.write_bytes(b"three\n")
    os.utime(three, (1611606471, 1611606471))
    res = run_shournal(["lineage", str(three)], env)
    assert res.returncode == 0, res.stderr
    assert "sh -c echo three > three; echo four > four" in res.stdout
    res = run_shournal(["query", "--wfile", str(three), "--output-format", "json"], env)
    assert [c["id"] for c in json.loads(res.stdout)] == [cmds[2]["id"]]


def test_original_shournal_sample(tmp_path: Path, cli_env: dict[str, str]) -> None:
    _import_original(tmp_path, cli_env)
    _check_original(tmp_path, cli_env)


def test_original_shournal_sample_on_postgresql(
    tmp_path: Path, cli_env: dict[str, str], pg_fresh_url: str
) -> None:
    env = {**cli_env, "SHOURNAL_DB_URL": pg_fresh_url}
    _import_original(tmp_path, env)
    _check_original(tmp_path, env)
    res = run_shournal(["import", "atuin", str(make_atuin_db(tmp_path / "h.db"))], env)
    assert res.stdout.startswith("imported 3 commands"), res.stderr
    res = run_shournal(["import", "atuin", str(tmp_path / "h.db")], env)
    assert res.stdout.startswith("imported 0 commands, skipped 3")


def _newer_original(tmp_path: Path) -> Path:
    sample = tmp_path / "newer"
    shutil.copytree(ORIGINAL_V2_2, sample)
    conn = sqlite3.connect(sample / "database.db")
    conn.execute("UPDATE version SET ver = '4.0'")
    conn.commit()
    conn.close()
    return sample / "database.db"


def _truncated_atuin(tmp_path: Path) -> Path:
    db = make_atuin_db(tmp_path / "full.db")
    cut = tmp_path / "cut.db"
    cut.write_bytes(db.read_bytes()[:8192])
    return cut


@pytest.mark.parametrize(
    ("fmt", "make", "reason"),
    [
        ("atuin", lambda p: make_hishtory_export(p / "h.jsonl"), "not a SQLite database"),
        ("zsh", lambda p: make_atuin_db(p / "h.db"), "not a zsh history: binary data"),
        ("atuin", _truncated_atuin, "damaged an atuin history database"),
        ("shournal", _newer_original, "scheme version 4.0 is newer"),
        ("bash", lambda p: p / "missing", "no such file"),
        ("hishtory", lambda p: (p / "h").write_bytes(b"ls\n") and p / "h", "not a JSON object"),
    ],
)
def test_bad_input_is_one_line_status_2_and_nothing_stored(
    tmp_path: Path, cli_env: dict[str, str], fmt: str, make, reason: str
) -> None:
    path = make(tmp_path)
    res = run_shournal(["import", fmt, str(path)], cli_env)
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr.startswith(f"shournal: {path}: ") and res.stderr.count("\n") == 1
    assert reason in res.stderr
    assert not _journal(cli_env).exists()  # not even created
    # nor added to an existing journal
    make_hishtory_export(tmp_path / "ok.jsonl")
    assert run_shournal(["import", "hishtory", str(tmp_path / "ok.jsonl")], cli_env).returncode == 0
    before = _all(cli_env)
    assert run_shournal(["import", fmt, str(path)], cli_env).returncode == 2
    assert _all(cli_env) == before
