"""Secrets in the environment of a command recorded with its apparatus are
never stored, and never come out of an export, a bundle, a diff or a
replay: as the test user, through the setuid helper."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from fixtures_shell import Install, journal_url, wait_stored

from shournal.journal import Journal
from shournal.redact import MARKER, URL_PASSWORD, marker
from shournal.store import Store
from shournal.store.archive import decode_manifest

pytestmark = [pytest.mark.root]

URL = marker(URL_PASSWORD)
# name -> (value, what is stored)
SECRETS = {
    "MYSQL_PWD": ("pw-mysql-26", MARKER),
    "SSHPASS": ("pw-ssh-26", MARKER),
    "GPG_PASSPHRASE": ("pw-gpg-26", MARKER),
    "DB_PASSWD": ("pw-db-26", MARKER),
    "GITHUB_TOKEN": ("pw-token-26", MARKER),
    "DATABASE_URL": ("postgresql://u:pw-url-26@db.example/x", f"postgresql://u:{URL}@db.example/x"),
    "http_proxy": ("http://u:pw-proxy-26@proxy:3128", f"http://u:{URL}@proxy:3128"),
}
VALUES = [v for v, _ in SECRETS.values()]


def run_as_user(install: Install, home: Path, *argv: str, env: dict[str, str] | None = None,
                ) -> subprocess.CompletedProcess[str]:
    full = {**install.env(home), **(env or {})}
    return subprocess.run(
        ["runuser", "-u", install.user.pw_name, "--", "env", "-i",
         *[f"{k}={v}" for k, v in full.items()], str(install.cli), *argv],
        cwd=home / "work", capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def leaks(text: str) -> list[str]:
    return [v for v in VALUES if v in text]


def files_leak(top: Path) -> list[tuple[str, str]]:
    found = []
    for p in sorted(top.rglob("*")):
        if p.is_file():
            text = p.read_bytes().decode("utf-8", "replace")
            found += [(str(p), v) for v in leaks(text)]
    return found


def test_secrets_are_neither_stored_nor_exported(install, user_home):
    work = user_home / "work"
    for name, text in {"in.csv": "a,1\nb,2\n", "tool.sh": "sort \"$1\" > \"$2\"\n"}.items():
        (work / name).write_text(text)
        subprocess.run(["chown", f"{install.user.pw_uid}", str(work / name)], check=True)
    env = {name: value for name, (value, _) in SECRETS.items()}
    env.update(PWD=str(work), OLDPWD=str(user_home))  # look like secrets, are not
    for n in (1, 2):
        res = run_as_user(install, user_home, "run", "--apparatus", "--", "sh", "tool.sh",
                          "in.csv", f"out{n}.csv", env=env)
        assert res.returncode == 0, res.stderr
        assert "7 secrets redacted (5 by name, 2 URL passwords)" in res.stderr, res.stderr
        assert leaks(res.stdout + res.stderr) == []
    wait_stored(user_home)

    # stored: the manifest as it is in the journal, not as a reader gets it
    with Journal.open(journal_url(user_home), create=True) as journal:
        found = journal.find(command_text="sh tool.sh %")
        assert len(found) == 2
        ids = [str(c.id) for c in found]
        man = decode_manifest(journal.apparatus_manifest(found[0].id))
    for name, (_, stored) in SECRETS.items():
        assert man["env"][name] == stored, name
    assert man["env"]["PWD"] == str(work) and man["env"]["OLDPWD"] == str(user_home)
    assert man["redacted"] == {"secret-name": 5, "url-password": 2}
    assert files_leak(user_home / ".local" / "share" / "shournal") == []

    # every way out
    outputs: list[subprocess.CompletedProcess[str]] = []
    for argv in (
        ["export", "rocrate", "out1.csv", "-o", "crate"],
        ["export", "prov", "out1.csv", "-o", "prov"],
        ["export", "snakemake", "out1.csv", "-o", "snake"],
        ["describe", "tool", *ids, "-o", "tool-bundle"],
        ["describe", "benchmark", "--command-id", ids[0], "-o", "bench"],
        ["diff", "-d", "3", "--output-format", "json", *ids],
        ["diff", "-d", "3", *ids],
        ["replay", ids[0], "-o", "replay-out", "--output-format", "json"],
        ["rerun", ids[0], "--input", "in.csv=in.csv", "-o", "rerun-out"],
        ["query", "--history", "5", "--output-format", "json"],
    ):
        res = run_as_user(install, user_home, *argv)
        assert res.returncode in (0, 1), (argv, res.stderr)
        assert "Traceback" not in res.stderr, res.stderr
        outputs.append(res)
        assert leaks(res.stdout + res.stderr) == [], argv
    diff = json.loads(outputs[5].stdout)
    assert "environment" not in diff.get("differs", [])
    for d in ("crate", "prov", "snake", "tool-bundle", "bench", "replay-out", "rerun-out"):
        assert (work / d).exists(), d
        assert files_leak(work / d) == [], d
    # the rerun's own record: redacted again
    assert files_leak(user_home / ".local" / "share" / "shournal") == []


def test_an_older_journals_clear_secrets_are_redacted_when_read(install, user_home):
    """A manifest an older shournal stored with MYSQL_PWD in clear: diff and
    replay show it redacted."""
    work = user_home / "work"
    (work / "in.csv").write_text("a\n")
    subprocess.run(["chown", f"{install.user.pw_uid}", str(work / "in.csv")], check=True)
    for n in (1, 2):
        res = run_as_user(install, user_home, "run", "--apparatus", "--", "cp", "in.csv",
                          f"o{n}.csv", env={"X": str(n)})
        assert res.returncode == 0, res.stderr
    wait_stored(user_home)
    from shournal.store.archive import encode_manifest

    with Store(journal_url(user_home)) as store:
        found = Journal(store).find(command_text="cp in.csv %")
        with store.writing() as conn:
            for c in found:
                row = conn.exec_driver_sql(
                    "SELECT manifest FROM apparatus WHERE command_id = ?", (c.id,)).one()
                man = decode_manifest(row[0])
                man["env"]["MYSQL_PWD"] = f"old-clear-{c.id}"
                conn.exec_driver_sql("UPDATE apparatus SET manifest = ? WHERE command_id = ?",
                                     (encode_manifest(man), c.id))
    ids = [str(c.id) for c in found]
    res = run_as_user(install, user_home, "diff", "-d", "2", "--output-format", "json", *ids)
    assert res.returncode == 1, res.stderr
    assert "old-clear" not in res.stdout, res.stdout
    assert json.loads(res.stdout)["environment"]["changed"] == {"X": {"a": "1", "b": "2"}}
