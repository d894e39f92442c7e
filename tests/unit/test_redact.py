"""The rules of shournal.redact: which environment values are secrets,
and the password of a URL inside any value."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from shournal import redact
from shournal.config import ApparatusConfig
from shournal.redact import MARKER, SECRET_NAME, URL_PASSWORD, redact_env, redact_text

DEFAULT = ApparatusConfig().secret_env_names
URL = redact.marker(URL_PASSWORD)


def test_the_config_default_is_the_modules() -> None:
    assert DEFAULT == redact.DEFAULT_SECRET_NAMES


@pytest.mark.parametrize("name", [
    "MYSQL_PWD", "SSHPASS", "GPG_PASSPHRASE", "DB_PASSWD", "PGPASSWORD", "db_password",
    "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "API_KEY", "OPENAI_API_KEY", "NPM_AUTH",
    "AUTHORIZATION", "BASIC_AUTH_HEADER", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CREDENTIAL",
    "SESSION_COOKIE", "COOKIE", "MY_APIKEY", "SSH_PRIVATE_KEY", "REDIS_PASS",
])  # fmt: skip
def test_credential_names_are_redacted(name: str) -> None:
    env = {name: "s3cr3t", "HOME": "/home/u"}
    out, counts = redact_env(env, DEFAULT)
    assert out == {name: MARKER, "HOME": "/home/u"}
    assert counts == {SECRET_NAME: 1}
    assert "s3cr3t" not in repr(out)


@pytest.mark.parametrize("name", [
    "PWD", "OLDPWD", "PATH", "HOME", "LANG", "SHELL", "USER", "TERM", "KEYBOARD",
    "SSH_AUTH_SOCK", "XAUTHORITY", "GIT_AUTHOR_NAME", "LD_LIBRARY_PATH",
])  # fmt: skip
def test_ordinary_names_are_kept(name: str) -> None:
    env = {name: "/home/u/proj"}
    assert redact_env(env, DEFAULT) == (env, {})


@pytest.mark.parametrize(("value", "want"), [
    ("postgresql://u:pw@h/db", f"postgresql://u:{URL}@h/db"),
    ("http://u:pw@proxy:3128", f"http://u:{URL}@proxy:3128"),
    ("https://alice:p@ss/w0rd@example.org/x?y=1", f"https://alice:{URL}@example.org/x?y=1"),
    ("mysql://root:@localhost", f"mysql://root:{URL}@localhost"),
    ("a http://u:a@h1 and ftp://v:b@h2/f", f"a http://u:{URL}@h1 and ftp://v:{URL}@h2/f"),
])  # fmt: skip
def test_the_password_of_a_url_is_redacted_the_rest_kept(value: str, want: str) -> None:
    out, counts = redact_env({"DATABASE_URL": value}, DEFAULT)
    assert out == {"DATABASE_URL": want}
    assert counts == {URL_PASSWORD: value.count("://")}


@pytest.mark.parametrize("value", [
    "https://example.org/a:b@c", "ssh://git@github.com/me/repo.git", "http://proxy:3128",
    "user@host:/path", "/usr/bin:/bin", "mailto:someone@example.org", "no url at all",
])  # fmt: skip
def test_values_without_a_url_password_are_kept(value: str) -> None:
    assert redact_text(value) == (value, {})


def test_redacting_twice_changes_and_counts_nothing() -> None:
    env = {"MYSQL_PWD": "x", "DATABASE_URL": "postgresql://u:pw@h/db", "PWD": "/tmp"}
    once, counts = redact_env(env)
    assert counts == {SECRET_NAME: 1, URL_PASSWORD: 1}
    assert redact_env(once) == (once, {})
    assert redact.describe_counts(counts) == "2 secrets redacted (1 by name, 1 URL password)"
    assert redact.describe_counts({}) == ""


def test_old_and_partial_markers_are_recognised() -> None:
    assert redact.is_redacted("<redacted by shournal>")
    assert redact.is_redacted(f"postgresql://u:{URL}@h/db")
    assert redact.is_redacted("[REDACTED]")
    assert not redact.is_redacted("postgresql://u@h/db")


def test_the_module_imports_nothing_of_shournal() -> None:
    """At the bottom of the package: the recorder and every exporter use it."""
    tree = ast.parse(Path(redact.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(n.split(".")[0] == "shournal" for n in names), names


# ---- secrets in command lines and scripts -----------------------------------

GH = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # 36 after the prefix
JWT_ = ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")
PEM = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n"
       "-----END OPENSSH PRIVATE KEY-----")


def M(kind: str) -> str:
    return redact.marker(kind)


@pytest.mark.parametrize(("line", "want", "kind"), [
    ("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
     f"export AWS_ACCESS_KEY_ID={M('aws-access-key')}", "aws-access-key"),
    ("aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     f"aws configure set aws_secret_access_key {M('aws-secret-key')}", "aws-secret-key"),
    (f"gh auth login --with-token {GH}", f"gh auth login --with-token {M('github-token')}",
     "github-token"),
    (f"git clone https://x:{GH}@github.com/a/b", f"git clone https://x:{M('github-token')}@github.com/a/b",
     "github-token"),
    ("curl -H 'PRIVATE-TOKEN: glpat-abcdefghij1234567890' https://gitlab.com/api",
     f"curl -H 'PRIVATE-TOKEN: {M('gitlab-token')}' https://gitlab.com/api", "gitlab-token"),
    ("SLACK=xoxb-1234567890-abcdefghij ./notify", f"SLACK={M('slack-token')} ./notify",
     "slack-token"),
    ("curl https://hooks.slack.com/services/T000/B000/XXXXXXXX -d x",
     f"curl https://hooks.slack.com/services/{M('slack-token')} -d x", "slack-token"),
    ("stripe charges list --api-key sk_live_4eC39HqLyjWDarjtT1zdp7dc",
     f"stripe charges list --api-key {M('stripe-key')}", "stripe-key"),
    ("echo rk_test_51H8abcdefghijklmnop > k", f"echo {M('stripe-key')} > k", "stripe-key"),
    ("npm config set //registry.npmjs.org/:_authToken=abc123-def",
     f"npm config set //registry.npmjs.org/:_authToken={M('npm-token')}", "npm-token"),
    ("NPM_TOKEN=npm_abcdefghijklmnopqrstuvwxyz0123456789 npm publish",
     f"NPM_TOKEN={M('npm-token')} npm publish", "npm-token"),
    (f"printf '{PEM}' > id", "printf '-----BEGIN OPENSSH PRIVATE KEY-----"
     f"{M('private-key')}-----END OPENSSH PRIVATE KEY-----' > id", "private-key"),
    (f"curl -H 'Authorization: Bearer {JWT_}' https://api",
     f"curl -H 'Authorization: Bearer {M('jwt')}' https://api", "jwt"),
    ("PGPASSWORD=s3cret psql -h db", f"PGPASSWORD={M('password')} psql -h db", "password"),
    ("wget --password=abc http://x/f", f"wget --password={M('password')} http://x/f", "password"),
    ("tool --db-password 'a b' --user u", f"tool --db-password {M('password')} --user u",
     "password"),
    ("curl 'https://x/login?user=u&password=pw&x=1'",
     f"curl 'https://x/login?user=u&password={M('password')}&x=1'", "password"),
    ("mysql -uroot -phunter2 mydb", f"mysql -uroot -p{M('password')} mydb", "password"),
    ("/usr/bin/mysqldump -u r -p'x y' db > d.sql",
     f"/usr/bin/mysqldump -u r -p{M('password')} db > d.sql", "password"),
    ("mariadb-dump -pS3cr3t db", f"mariadb-dump -p{M('password')} db", "password"),
    ("sshpass -p pw ssh host", f"sshpass -p {M('password')} ssh host", "password"),
    ("curl -u alice:pw https://x", f"curl -u alice:{M('password')} https://x", "password"),
    ("psql postgresql://app:pw@db/x", f"psql postgresql://app:{URL}@db/x", "url-password"),
])  # fmt: skip
def test_each_kind_is_redacted_the_rest_kept(line: str, want: str, kind: str) -> None:
    out, counts = redact_text(line)
    assert (out, counts) == (want, {kind: 1})
    assert redact_text(out) == (out, {})  # idempotent


@pytest.mark.parametrize("line", [
    "mkdir -p x/y", "ssh -p 22 host", "scp -P 22 f h:", "cp -p a b", "install -p -m 644 a b",
    "mysql -p mydb", "mysql --port 3306 -P 3306", "mysql -p$PW db", "ls | grep -p x; mysql",
    "git checkout 3f786850e387550fdab836ed7e6dc881de23001b", "git show 3f78685",
    "cd /data/123e4567-e89b-12d3-a456-426614174000", "docker run -u 1000:1000 img",
    "echo password=$PW", 'login --password "$PW"', "tool --password-file /run/s",
    "docker login --password-stdin", "mysql --password", "passwd", "git log --author=ghp",
    "ssh git@github.com", "curl https://example.org/a:b@c", "echo sk_live_ short",
    "AKIA", "echo eyJhbGciOi", "grep -r PRIVATE KEY .",
])  # fmt: skip
def test_ordinary_lines_are_kept(line: str) -> None:
    assert redact_text(line) == (line, {})


def test_several_secrets_of_a_line_are_counted_by_kind() -> None:
    line = f"GH={GH} STRIPE=sk_test_4eC39HqLyjWDarjtT1zdp7dc; mysql -pX"
    out, counts = redact_text(line)
    assert counts == {"github-token": 1, "stripe-key": 1, "password": 1}
    assert GH not in out and "sk_test" not in out and "-pX" not in out
    assert out.startswith(f"GH={M('github-token')} STRIPE={M('stripe-key')};")


def test_a_marker_stays_unchanged_and_uncounted() -> None:
    for text in (f"password={M('password')}", "password=[REDACTED]",
                 f"u://a:{M('github-token')}@h", f"mysql -p{M('password')}"):
        assert redact_text(text) == (text, {})


def test_bytes_keep_what_is_not_utf8() -> None:
    data = b"#!/bin/sh\n\xff\xfe mysql -pSECRET db\n" + PEM.encode() + b"\n"
    out, counts = redact.redact_bytes(data)
    assert counts == {"password": 1, "private-key": 1}
    assert out.startswith(b"#!/bin/sh\n\xff\xfe mysql -p[REDACTED:password] db\n")
    assert b"SECRET" not in out and b"b3Blb" not in out
    assert redact.redact_bytes(out) == (out, {})
    assert redact.redact_bytes(b"\xff plain") == (b"\xff plain", {})


def test_user_patterns_after_the_builtins() -> None:
    pats = redact.patterns_for((("acme-key", r"acme_[0-9a-f]{8}"),
                                ("ticket", r"ticket=(?P<secret>\d+)")))
    out, counts = redact_text("use acme_deadbeef ticket=42 ticket=x", pats)
    assert out == f"use {M('acme-key')} ticket={M('ticket')} ticket=x"
    assert counts == {"acme-key": 1, "ticket": 1}
    assert redact.patterns_for((("acme-key", r"acme_[0-9a-f]{8}"),
                                ("ticket", r"ticket=(?P<secret>\d+)"))) is pats


@pytest.mark.parametrize(("name", "regex", "message"), [
    ("x", "(", "invalid regex"), ("x", "a*", "matches the empty text"),
    ("Bad Name", "a", "invalid pattern name"), ("secret-name", "a", "reserved"),
])  # fmt: skip
def test_bad_user_patterns_are_refused(name: str, regex: str, message: str) -> None:
    with pytest.raises(redact.PatternError, match=message):
        redact.compile_user(name, regex)


def test_environment_values_get_the_text_patterns_too() -> None:
    out, counts = redact_env({"HOME": "/h", "NOTE": f"key {GH}", "GH_TOKEN": GH})
    assert out == {"HOME": "/h", "NOTE": f"key {M('github-token')}", "GH_TOKEN": MARKER}
    assert counts == {"github-token": 1, SECRET_NAME: 1}
    assert redact.describe_counts(counts) == "2 secrets redacted (1 by name, 1 github-token)"


def test_the_capture_gate_ignores_then_redacts() -> None:
    """listener.admit: the one gate of a command line on its way in (the
    ignore rules see the line as typed)."""
    from shournal.capture.listener import admit
    from shournal.config import parse_config

    cfg = parse_config('[ignore_commands]\ncommands = ["secret-tool*"]\n'
                       '[redact]\npatterns = [{name = "acme", regex = "acme_[0-9]{4}"}]\n')
    assert admit(cfg, f"secret-tool --token {GH}") is None
    assert admit(cfg, f"x acme_1234 {GH}") == (
        f"x {M('acme')} {M('github-token')}", {"acme": 1, "github-token": 1})
    assert admit(cfg, "mkdir -p x") == ("mkdir -p x", {})


def test_a_spooled_record_keeps_its_redactions() -> None:
    from shournal.capture import spool
    from shournal.record import CommandRecord

    rec = CommandRecord("t", 0, 1, 2, "/", "u", "h", None, None, None,
                        redactions={"github-token": 2})
    assert spool._decode(spool._encode(rec)).redactions == {"github-token": 2}
