"""Secrets never stored, never exported: the one set of rules.

Every place shournal keeps or writes out text that may carry a credential
(the environment recorded with the apparatus, and what is derived from it:
diff, replay, rerun, describe, the provenance exports) goes through this
module, and a value it changed says so with :data:`MARKER`.  Kinds of
redaction, each counted apart:

* :data:`SECRET_NAME` -- the whole value of an environment variable whose
  name looks like a credential's (``[apparatus] secret_env_names``; never
  ``PWD``, ``OLDPWD`` or the two paths in :data:`NEVER_SECRET`);
* :data:`URL_PASSWORD` -- the ``user:password@`` of a URL inside any value
  (``postgresql://[REDACTED]@host/db``), the rest kept.

At the bottom of the package: the standard library only, nothing of
shournal, so that the recorder and every exporter can use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

MARKER = "[REDACTED]"
# What earlier versions wrote in place of a value (still understood).
OLD_MARKERS = ("<redacted by shournal>",)

SECRET_NAME = "secret_name"
URL_PASSWORD = "url_password"
KINDS = (SECRET_NAME, URL_PASSWORD)

# fnmatch patterns, matched against the upper-cased name: what people name
# their passwords (MYSQL_PWD, SSHPASS, DB_PASSWD, GPG_PASSPHRASE), tokens,
# keys, credentials and cookies.
DEFAULT_SECRET_NAMES = (
    "*TOKEN*", "*SECRET*", "*PASS*", "*PWD*", "*CREDENTIAL*", "*AUTH*", "*COOKIE*",
    "*_KEY", "*APIKEY*", "*PRIVATE_KEY*",
)  # fmt: skip
# Names the patterns match that hold no secret: the working directories
# (*PWD*), the paths of the ssh agent's socket and the X cookie's file, and
# git's author (*AUTH*).
NEVER_SECRET = frozenset({
    "PWD", "OLDPWD", "SSH_AUTH_SOCK", "XAUTHORITY",
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
})  # fmt: skip

# scheme://user:password@ -- the password may hold anything but white
# space (an unescaped "@" or "/" too): up to the last "@" of the word,
# rather too much hidden than a piece of a password shown.
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^\s/:@]*:\S*@")


def is_secret_name(name: str, patterns: Iterable[str] = DEFAULT_SECRET_NAMES) -> bool:
    upper = name.upper()
    if upper in NEVER_SECRET:
        return False
    return any(fnmatchcase(upper, p.upper()) for p in patterns)


def redact_text(text: str) -> tuple[str, dict[str, int]]:
    """``text`` with the credentials inside it replaced by :data:`MARKER`,
    and how many of each kind."""
    out, n = _URL_USERINFO.subn(lambda m: f"{m.group(1)}{MARKER}@", text)
    return out, ({URL_PASSWORD: n} if n else {})


def redact_env(
    env: Mapping[str, str], patterns: Iterable[str] = DEFAULT_SECRET_NAMES
) -> tuple[dict[str, str], dict[str, int]]:
    """``env`` with every secret replaced (the secrets never leave this
    function), and how many values were redacted by kind.  A value
    redacted before stays as it is: applying this again changes nothing."""
    patterns = tuple(patterns)
    out: dict[str, str] = {}
    counts: dict[str, int] = {}
    for name, value in env.items():
        if not isinstance(value, str):
            value = str(value)
        if is_secret_name(name, patterns):
            if value != MARKER:
                counts[SECRET_NAME] = counts.get(SECRET_NAME, 0) + 1
            out[name] = MARKER
            continue
        value, found = redact_text(value)
        for kind, n in found.items():
            counts[kind] = counts.get(kind, 0) + n
        out[name] = value
    return out, counts


def is_redacted(value: str) -> bool:
    """Whether shournal hid (part of) ``value``."""
    return MARKER in value or value in OLD_MARKERS


def describe_counts(counts: Mapping[str, int]) -> str:
    """``3 environment values redacted (2 by name, 1 URL password)``; ''
    for none."""
    total = sum(counts.values())
    if not total:
        return ""
    parts = []
    if counts.get(SECRET_NAME):
        parts.append(f"{counts[SECRET_NAME]} by name")
    if counts.get(URL_PASSWORD):
        n = counts[URL_PASSWORD]
        parts.append(f"{n} URL password{'s' if n != 1 else ''}")
    return f"{total} secret{'s' if total != 1 else ''} redacted ({', '.join(parts)})"
