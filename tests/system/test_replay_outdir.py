"""Where replay, rerun and restore write, as the unprivileged test user
(root would write anywhere): an unwritable, missing or wrong-type place is
one `shournal:` line and status 2, never a traceback, nothing made; replay
without -o says where it ran and removes that directory unless --keep."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from fixtures_shell import as_owner_of, journal_url
from test_confined import PAYLOAD, _forge
from test_run import cli_as_user, run_as_user

from shournal.journal import Journal

pytestmark = [pytest.mark.root]


@pytest.fixture
def recorded(user_home: Path) -> tuple[int, int]:
    """(a command recorded with its apparatus, the id of its archived read
    file) -- forged through the store's writer, as a recorder stores it."""

    work = user_home / "work"
    cid = _forge(user_home, str(work), str(work / "in.txt"))
    with as_owner_of(user_home), Journal.open(journal_url(user_home), create=True) as store:
        file_id = store.find(command_id=cid)[0].reads[0].id
    return cid, file_id


def _places(home: Path) -> dict[str, tuple[str, str]]:
    """name -> (path, what the one line says)."""
    a_file = home / "work" / "a-file"
    a_file.write_text("x")
    readonly = home / "readonly"  # empty, root's: the user may look, not write
    readonly.mkdir(exist_ok=True)
    return {
        "readonly-dir": (str(readonly), "Permission denied"),
        "unwritable": ("/root/shournal-out", "Permission denied"),
        "unwritable-proc": ("/proc/shournal-out", ""),
        "below-a-file": (f"{a_file}/out", "Not a directory"),
        "a-file": (str(a_file), ""),
    }


def _one_line(res: subprocess.CompletedProcess[str], needle: str) -> None:
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.startswith("shournal: ") and res.stderr.count("\n") == 1, res.stderr
    assert "Traceback" not in res.stderr and needle in res.stderr, res.stderr


@pytest.mark.parametrize("verb", ["replay", "rerun"])
def test_replay_and_rerun_into_a_place_they_cannot_use(install, user_home, recorded,
                                                       verb) -> None:
    cid, _ = recorded
    for name, (path, needle) in _places(user_home).items():
        before = sorted(p.name for p in (user_home / "work").iterdir())
        res = run_as_user(install, user_home, verb, str(cid), "-o", path)
        _one_line(res, needle)
        assert sorted(p.name for p in (user_home / "work").iterdir()) == before, name
    # A missing OUTDIR is made, with its parents (positive control).
    out = user_home / "missing" / "deeper" / "out"
    res = run_as_user(install, user_home, verb, str(cid), "-o", str(out))
    assert res.returncode in (0, 1), res.stderr
    assert (out / str(user_home / "work" / "in.txt").lstrip("/")).read_bytes() == PAYLOAD


def test_restore_output_into_a_place_it_cannot_use(install, user_home, recorded) -> None:
    _, file_id = recorded
    places = _places(user_home)
    del places["a-file"]  # an existing file: "exists (use --force)", tested in test_restore
    places["missing"] = (str(user_home / "missing" / "x.sh"), "No such file or directory")
    places["unwritable-dir"] = ("/root", "/root")
    for name, (path, needle) in places.items():
        res = run_as_user(install, user_home, "restore", "--file-id", str(file_id),
                          "--output", path)
        _one_line(res, needle)
        assert not (user_home / "missing").exists(), name
    res = run_as_user(install, user_home, "restore", "--file-id", str(file_id),
                      "--output", str(user_home / "work" / "copy"))
    assert res.returncode == 0, res.stderr  # positive control
    assert (user_home / "work" / "copy").read_bytes() == PAYLOAD


def _replay_in(install, home: Path, tmpdir: Path, *args: str):
    cmd = cli_as_user(install, home, "replay", *args)
    i = cmd.index("env") + 2  # after `env -i`
    cmd[i:i] = [f"TMPDIR={tmpdir}"]
    return subprocess.run(cmd, cwd=home / "work", capture_output=True, text=True, timeout=120)


def test_replay_without_o_says_where_and_removes_it_unless_keep(install, user_home,
                                                                recorded) -> None:
    cid, _ = recorded
    tmpdir = user_home / "tmp"
    tmpdir.mkdir()
    subprocess.run(["chown", f"{install.user.pw_uid}", str(tmpdir)], check=True)
    res = _replay_in(install, user_home, tmpdir, str(cid))
    assert res.returncode in (0, 1), res.stderr
    m = re.search(r"outputs were in (\S+), removed \(--keep or -o OUTDIR keeps them\)",
                  res.stdout)
    assert m and Path(m[1]).parent == tmpdir, res.stdout
    assert list(tmpdir.iterdir()) == []
    res = _replay_in(install, user_home, tmpdir, str(cid), "--keep")
    assert res.returncode in (0, 1), res.stderr
    (kept,) = tmpdir.iterdir()
    assert f"outputs in {kept}\n" in res.stdout, res.stdout
    assert (kept / str(user_home / "work" / "in.txt").lstrip("/")).read_bytes() == PAYLOAD
    # The archived inputs the sandbox showed are the archive's: not left behind.
    assert not (kept / ".shournal" / "inputs").exists()
    assert (kept / ".shournal" / "stdout").exists()
