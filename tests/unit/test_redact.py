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
    ("postgresql://u:pw@h/db", f"postgresql://{MARKER}@h/db"),
    ("http://u:pw@proxy:3128", f"http://{MARKER}@proxy:3128"),
    ("https://alice:p@ss/w0rd@example.org/x?y=1", f"https://{MARKER}@example.org/x?y=1"),
    ("mysql://root:@localhost", f"mysql://{MARKER}@localhost"),
    ("a http://u:a@h1 and ftp://v:b@h2/f", f"a http://{MARKER}@h1 and ftp://{MARKER}@h2/f"),
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
    assert redact.is_redacted(f"postgresql://{MARKER}@h/db")
    assert not redact.is_redacted("postgresql://u@h/db")


def test_the_module_imports_nothing_of_shournal() -> None:
    """At the bottom of the package: the recorder and every exporter use it."""
    tree = ast.parse(Path(redact.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(n.split(".")[0] == "shournal" for n in names), names
