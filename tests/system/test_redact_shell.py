"""Secrets typed on a real bash / zsh command line on a pty (a GitHub token
and a Stripe key), and in a script it runs, are redacted on the way into
the journal: the command and its files are kept, the secret is replaced by
[REDACTED:kind], every replacement is counted with the command, and no
secret is anywhere under the journal's directory; a user pattern of the
config applies too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fixtures_shell import Shell, as_owner_of, journal_url, recorded, write_config

from shournal.journal import Journal

pytestmark = [pytest.mark.shell, pytest.mark.root]

GH = "ghp_" + "Qq11Ww22Ee33Rr44Tt55Yy66Uu77Ii88Oo99"
STRIPE = "sk_live_" + "51HyZxWvUtSrQpOnMlKjIh"
ACME = "acme_73c2a9f0"
SECRETS = (GH, STRIPE, "Pw0rdInScript", ACME)


def _leaks(top: Path) -> list[str]:
    found = []
    for p in sorted(top.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            found += [f"{p}: {s}" for s in SECRETS if s.encode() in data]
    return found


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_secrets_on_the_command_line_are_redacted_and_counted(kind, install, user_home):
    write_config(user_home, '[redact]\npatterns = [{name = "acme", regex = "acme_[0-9a-f]{8}"}]\n',
                 install)
    work = user_home / "work"
    script = work / "deploy.sh"
    script.write_text("#!/bin/sh\nmysql -uroot -pPw0rdInScript shop < /dev/null 2>/dev/null\n"
                      "echo deployed > \"$1\"\n")
    os.chown(script, install.user.pw_uid, install.user.pw_gid)
    sh = Shell(kind, install, user_home)
    line = f"GH_TOKEN={GH} STRIPE_KEY={STRIPE} sh deploy.sh out.txt"
    sh.run(line)
    sh.run(f"echo {ACME} > acme.txt")
    sh.run("mkdir -p sub && echo plain > sub/p.txt")
    sh.exit()
    assert (work / "out.txt").read_text() == "deployed\n"

    cmds = [c for c in recorded(user_home) if not c.text.startswith("exit ")]
    assert [c.text for c in cmds] == [
        "GH_TOKEN=[REDACTED:github-token] STRIPE_KEY=[REDACTED:stripe-key] sh deploy.sh out.txt",
        "echo [REDACTED:acme] > acme.txt",
        "mkdir -p sub && echo plain > sub/p.txt",
    ]
    # the command and its files are kept: what it wrote, the script it read
    first = cmds[0]
    assert [e.path for e in first.writes] == [os.fsencode(work / "out.txt")]
    assert os.fsencode(script) in [e.path for e in first.reads]
    with as_owner_of(user_home), Journal.open(journal_url(user_home)) as j:
        archived = [j.archived(e.id) for e in first.reads if e.path == os.fsencode(script)]
        assert b"-p[REDACTED:password] shop" in archived[0].data
        assert j.redactions() == (2, {"github-token": 1, "stripe-key": 1, "password": 1,
                                      "acme": 1})
        assert j.stats(command_id=[first.id]).redactions == {
            "github-token": 1, "stripe-key": 1, "password": 1}
    assert _leaks(user_home / ".local" / "share" / "shournal") == []
