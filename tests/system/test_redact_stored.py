"""`shournal redact` over a journal whose rows were stored unredacted (by an
older shournal, or before a pattern was added): command lines, archived
scripts (content-addressed: references and digests stay consistent) and
apparatus manifests, counted per command; --dry-run changes nothing; a
second run changes nothing; a bad config is status 4 and changes nothing.
On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures_cli import run_shournal as shournal
from sqlalchemy import select

from shournal import redact
from shournal.hashing import content_digest
from shournal.journal import Journal
from shournal.record import CommandRecord, FileEvent
from shournal.store import Store
from shournal.store import models as m
from shournal.store.archive import decode_manifest, encode_manifest

T0 = 1_700_000_000_000_000_000
GH = "ghp_" + "Zz09Yy18Xx27Ww36Vv45Uu54Tt63Ss72Rr81"
STRIPE = "sk_live_51HxAbCdEfGhIjKlMnOpQrSt"
SCRIPT = b"#!/bin/sh\nmysql -uroot -pTopSecret1 db < q.sql\n"
REDACTED_SCRIPT = b"#!/bin/sh\nmysql -uroot -p[REDACTED:password] db < q.sql\n"
OTHER = b"#!/bin/sh\nexport T=" + GH.encode() + b"\n"


def ev(path: bytes, content: bytes | None) -> FileEvent:
    return FileEvent(path, len(content or b""), T0, 0o100644, 7, content)


def rec(text: str, i: int, reads: list[FileEvent] | None = None,
        apparatus: bytes | None = None) -> CommandRecord:
    return CommandRecord(
        text=text, return_value=0, start_ns=T0 + i, end_ns=T0 + i + 1, working_dir="/w",
        username="u", hostname="h", session_uuid=b"\x01" * 16, hash_chunk_size=256,
        hash_max_reads=3, reads=reads or [], apparatus=apparatus,
    )  # fmt: skip


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'journal.sqlite'}"
    return request.getfixturevalue("pg_fresh_url")


@pytest.fixture
def old_journal(url: str) -> Iterator[dict[str, int]]:
    """Rows as an older shournal stored them: secrets in clear."""
    manifest = encode_manifest({
        "env": {"HOME": "/h", "DEPLOY_TOKEN": "tok-in-clear", "DB": "postgresql://a:pw@db/x"},
        "argv": ["deploy", f"--key={STRIPE}"], "redacted": {},
    })  # fmt: skip
    with Store(url) as s:
        ids = {
            "gh": s.add_command(rec(f"git push https://me:{GH}@github.com/x/y", 1)),
            "two": s.add_command(rec(f"curl -u a:b0b https://x; STRIPE={STRIPE} ./pay", 2)),
            "plain": s.add_command(rec("mkdir -p out && ssh -p 22 host", 3)),
            # two commands read the same script (one content row)
            "s1": s.add_command(rec("sh q.sh", 4, [ev(b"/w/q.sh", SCRIPT)])),
            "s2": s.add_command(rec("sh q.sh again", 5, [ev(b"/w/q.sh", SCRIPT)])),
            # the same script archived redacted later: a second content row
            # whose digest the redacted first one will have
            "s3": s.add_command(rec("sh q2.sh", 6, [ev(b"/w/q2.sh", REDACTED_SCRIPT)])),
            "s4": s.add_command(rec("sh t.sh", 7, [ev(b"/w/t.sh", OTHER)])),
            "app": s.add_command(rec("deploy", 8, apparatus=manifest)),
        }
    yield ids


def _state(url: str) -> dict[str, object]:
    with Store(url, create=False) as s, s.reading() as conn:
        texts = dict(conn.execute(select(m.Command.id, m.Command.text)).all())
        contents = {i: (bytes(d), bytes(g)) for i, d, g in conn.execute(
            select(m.Content.id, m.Content.data, m.Content.digest))}
        refs = {bytes(b): c for b, c in conn.execute(
            select(m.ReadFile.basename, m.ReadFile.content_id))}
        red = {(c, k): n for c, k, n in conn.execute(
            select(m.Redaction.command_id, m.Redaction.kind, m.Redaction.count))}
        man = dict(conn.execute(select(m.Apparatus.command_id, m.Apparatus.manifest)).all())
    return {"texts": texts, "contents": contents, "refs": refs, "red": red,
            "man": {k: bytes(v) for k, v in man.items()}}


def _redact(url: str, dry_run: bool):
    pats = redact.patterns_for(())
    with Journal.open(url) as j:
        return j.redact(pats, dry_run=dry_run)


def test_redact_applies_to_stored_rows_once(url: str, old_journal: dict[str, int]) -> None:
    ids = old_journal
    before = _state(url)
    dry = _redact(url, dry_run=True)
    assert _state(url) == before  # nothing changed
    assert (dry.commands.changed, dry.commands.counts) == (
        2, {"github-token": 1, "password": 1, "stripe-key": 1})
    assert (dry.scripts.changed, dry.scripts.counts) == (2, {"password": 1, "github-token": 1})
    assert (dry.environments.changed, dry.environments.counts) == (
        1, {"secret-name": 1, "url-password": 1, "stripe-key": 1})

    done = _redact(url, dry_run=False)
    assert (done.commands, done.scripts, done.environments) == (
        dry.commands, dry.scripts, dry.environments)
    after = _state(url)
    texts = after["texts"]
    assert texts[ids["gh"]] == "git push https://me:[REDACTED:github-token]@github.com/x/y"
    assert texts[ids["two"]] == ("curl -u a:[REDACTED:password] https://x; "
                                 "STRIPE=[REDACTED:stripe-key] ./pay")
    assert texts[ids["plain"]] == "mkdir -p out && ssh -p 22 host"
    # scripts: q.sh's content became q2.sh's (same digest): one row, both
    # files point at it, the old row is gone; t.sh's row rewritten in place
    contents, refs = after["contents"], after["refs"]
    assert refs[b"q.sh"] == refs[b"q2.sh"]
    assert contents[refs[b"q.sh"]] == (REDACTED_SCRIPT, content_digest(REDACTED_SCRIPT))
    assert before["refs"][b"t.sh"] == refs[b"t.sh"]
    data, digest = contents[refs[b"t.sh"]]
    assert data == b"#!/bin/sh\nexport T=[REDACTED:github-token]\n"
    assert digest == content_digest(data)
    assert len(contents) == len(before["contents"]) - 1
    assert all(GH.encode() not in d and b"TopSecret1" not in d for d, _ in contents.values())
    man = decode_manifest(after["man"][ids["app"]])
    assert man["env"] == {"HOME": "/h", "DEPLOY_TOKEN": "[REDACTED:secret-name]",
                          "DB": "postgresql://a:[REDACTED:url-password]@db/x"}
    assert man["argv"] == ["deploy", "--key=[REDACTED:stripe-key]"]
    assert man["redacted"] == {"secret-name": 1, "url-password": 1, "stripe-key": 1}
    # counted with each command (a script under the first that read it)
    assert after["red"] == {
        (ids["gh"], "github-token"): 1, (ids["two"], "password"): 1,
        (ids["two"], "stripe-key"): 1, (ids["s1"], "password"): 1,
        (ids["s4"], "github-token"): 1, (ids["app"], "secret-name"): 1,
        (ids["app"], "url-password"): 1, (ids["app"], "stripe-key"): 1,
    }
    with Journal.open(url) as j:
        assert j.redactions() == (5, {"github-token": 2, "password": 2, "stripe-key": 2,
                                      "secret-name": 1, "url-password": 1})
        assert j.stats().redactions == j.redactions()[1]
        assert j.stats(command_id=[ids["two"]]).redactions == {"password": 1, "stripe-key": 1}

    again = _redact(url, dry_run=False)
    assert again.total == 0 and again.commands.changed == again.scripts.changed == 0
    assert _state(url) == after
    # a deleted command's counts go with it
    with Journal.open(url) as j:
        j.delete(command_id=[ids["two"]])
        assert j.redactions() == (4, {"github-token": 2, "password": 1, "stripe-key": 1,
                                      "secret-name": 1, "url-password": 1})


def test_the_cli_dry_run_real_run_and_bad_config(url: str, old_journal: dict[str, int],
                                                 cli_env: dict[str, str], tmp_path: Path) -> None:
    env = {**cli_env, "SHOURNAL_DB_URL": url}
    before = _state(url)
    res = shournal(["redact", "--dry-run"], env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "command lines: 2 commands (github-token 1, password 1, stripe-key 1)",
        "archived scripts: 2 scripts (github-token 1, password 1)",
        "environments: 1 apparatus manifest (secret-name 1, stripe-key 1, url-password 1)",
        "would redact 8 secrets (dry run: nothing changed)",
    ]
    assert GH not in res.stdout and STRIPE not in res.stdout
    assert _state(url) == before

    config = Path(env["XDG_CONFIG_HOME"]) / "shournal" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[redact]\npatterns = [{name = "acme", regex = "acme_("}]\n')
    res = shournal(["redact"], env)
    assert res.returncode == 4, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "invalid regex" in res.stderr
    assert "Traceback" not in res.stderr
    assert _state(url) == before

    config.write_text('[redact]\npatterns = [{name = "acme", regex = "acme_[0-9]{4}"}]\n')
    with Store(url) as s:
        extra = s.add_command(rec("login acme_1234", 9))
    res = shournal(["redact"], env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == (
        "command lines: 3 commands (acme 1, github-token 1, password 1, stripe-key 1)")
    assert res.stdout.splitlines()[-1] == "redacted 9 secrets"
    assert _state(url)["texts"][extra] == "login [REDACTED:acme]"
    res = shournal(["redact"], env)
    assert res.returncode == 0 and res.stdout.splitlines()[-1] == "redacted 0 secrets"
    res = shournal(["stats"], env)
    assert "9 secrets redacted: github-token 2, password 2, stripe-key 2, acme 1," in res.stdout
    res = shournal(["doctor"], env)
    assert "9 secret(s) redacted in 6 command(s)" in res.stdout, res.stdout


def test_the_cli_without_a_journal(cli_env: dict[str, str]) -> None:
    res = shournal(["redact", "--dry-run"], cli_env)
    assert res.returncode == 1 and "nothing to redact" in res.stderr, res.stderr
