"""Secrets never stored, never exported: the one set of rules.

Every place shournal keeps or writes out text that may carry a credential
goes through this module: the command line and the archived scripts on
their way into the journal (shournal.capture), the environment recorded
with the apparatus and what is derived from it (diff, replay, rerun,
describe, the provenance exports), and ``shournal redact`` over what is
stored already.  A secret is replaced by a visible marker naming its kind,
``[REDACTED:github-token]`` (:func:`marker`); the text around it is kept.
Every replacement is counted by kind.

Kinds (:data:`BUILTIN_SPECS` holds their patterns; the user's own are added from
the config, ``[redact] patterns``):

* :data:`SECRET_NAME` -- the whole value of an environment variable whose
  name looks like a credential's (``[apparatus] secret_env_names``; never
  ``PWD``, ``OLDPWD`` or the names in :data:`NEVER_SECRET`);
* :data:`URL_PASSWORD` -- the password of ``scheme://user:password@host``
  (user and host kept);
* tokens and keys recognisable by their form: :data:`AWS_ACCESS_KEY`,
  :data:`AWS_SECRET_KEY`, :data:`GITHUB_TOKEN`, :data:`GITLAB_TOKEN`,
  :data:`SLACK_TOKEN`, :data:`STRIPE_KEY`, :data:`NPM_TOKEN`,
  :data:`PRIVATE_KEY` (the body of a PEM block), :data:`JWT`;
* :data:`PASSWORD` -- the value of ``password=``/``passwd=``/``passphrase=``
  (``PGPASSWORD=…``, ``--password=…`` too), of ``--password VALUE``, of
  ``-pSECRET`` for the MySQL/MariaDB clients only (:data:`MYSQL_CLIENTS`:
  elsewhere ``-p`` means a port, parents, ...), of ``sshpass -p`` and of
  ``curl -u user:SECRET``.

Patterns are compiled once; each carries the lower-case substrings one of
which must occur for it to be tried at all, so a line without any (most
lines) costs a ``lower()`` and a few substring tests.  Applying the rules
again to their own output changes and counts nothing (a match whose secret
is a marker already is left alone).

At the bottom of the package: the standard library only, nothing of
shournal, so that the recorder and every exporter can use it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

_PREFIX = "[REDACTED"


def marker(kind: str) -> str:
    """What replaces a secret of ``kind``: ``[REDACTED:kind]``."""
    return f"{_PREFIX}:{kind}]"


SECRET_NAME = "secret-name"
URL_PASSWORD = "url-password"
AWS_ACCESS_KEY = "aws-access-key"
AWS_SECRET_KEY = "aws-secret-key"
GITHUB_TOKEN = "github-token"
GITLAB_TOKEN = "gitlab-token"
SLACK_TOKEN = "slack-token"
STRIPE_KEY = "stripe-key"
NPM_TOKEN = "npm-token"
PRIVATE_KEY = "private-key"
JWT = "jwt"
PASSWORD = "password"
KINDS = (
    SECRET_NAME, URL_PASSWORD, AWS_ACCESS_KEY, AWS_SECRET_KEY, GITHUB_TOKEN, GITLAB_TOKEN,
    SLACK_TOKEN, STRIPE_KEY, NPM_TOKEN, PRIVATE_KEY, JWT, PASSWORD,
)  # fmt: skip

# The whole value of a secret-named environment variable.
MARKER = marker(SECRET_NAME)
# What earlier versions wrote in place of a value (still understood, left
# as they are).
OLD_MARKERS = ("<redacted by shournal>", "[REDACTED]")

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

# The programs whose `-pSECRET` (no blank) is a password.  Everywhere else
# -p is something else (mkdir -p, ssh -p 22, cp -p, install -p), and even
# these read `-p VALUE` (with a blank) as "prompt; VALUE is the database".
MYSQL_CLIENTS = (
    "mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck",
    "mysqlpump", "mysqlslap", "mysqlbinlog", "mysqlsh", "mariadb", "mariadb-dump",
    "mariadb-admin", "mariadb-import", "mariadb-show", "mariadb-check", "mariadb-slap",
    "mariadb-binlog",
)  # fmt: skip

# A user pattern's name becomes the marker's kind.
KIND_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")


class Spec:
    """A built-in pattern before it is compiled (compiling all of them
    costs ~3 ms: done on first use, not when the config is imported).
    (Plain classes, not dataclasses: those cost ~1 ms each to define, on
    every start of the listener and the CLI.)"""

    __slots__ = ("empty_ok", "kind", "regex", "triggers")

    def __init__(self, kind: str, regex: str, triggers: tuple[str, ...] = (),
                 empty_ok: bool = False) -> None:
        self.kind = kind
        self.regex = regex
        self.triggers = triggers
        self.empty_ok = empty_ok


class Pattern:
    """One rule: ``regex``'s group ``secret`` (without it: the whole match)
    is replaced by ``marker(kind)``.  ``triggers``: lower-case substrings
    one of which the text must hold for the regex to be tried (empty: it
    is always tried).  ``empty_ok``: an empty secret is replaced too (a
    URL's ``user:@``: a password field, even if empty)."""

    __slots__ = ("empty_ok", "kind", "regex", "triggers")

    def __init__(self, kind: str, regex: re.Pattern[str], triggers: tuple[str, ...] = (),
                 empty_ok: bool = False) -> None:
        self.kind = kind
        self.regex = regex
        self.triggers = triggers
        self.empty_ok = empty_ok


def _p(kind: str, regex: str, *triggers: str, empty_ok: bool = False) -> Spec:
    return Spec(kind, regex, triggers, empty_ok)


# A value after `=` or a blank: quoted, or a word up to a shell or URL
# separator.  Not a $variable (no secret in it) nor a marker.
_VALUE = r"""(?P<secret>"(?!\$)[^"\n]+"|'[^'\n]+'|(?![$\[])[^\s'"&;|<>()]+)"""
# An option's value attached or after a blank: quoted, or up to a blank
# or a shell separator.
_WORD = r"""(?P<secret>"(?!\$)[^"\n]+"|'[^'\n]+'|(?![$\[])[^\s;&|]+)"""
# The arguments of one simple command, up to the option (not crossing
# ; & | or a line end).
_ARGS = r"(?=\s)[^;&|\n]*?\s"

# In this order: the multi-line block first, the tokens known by their
# form before the generic password rules (so `password=ghp_…` says
# github-token).
BUILTIN_SPECS: tuple[Spec, ...] = (
    _p(PRIVATE_KEY,
       r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?P<secret>[\s\S]+?)"
       r"(?=-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
       "private key"),
    _p(AWS_ACCESS_KEY,
       r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])",
       "akia", "asia", "abia", "acca", "a3t"),
    _p(AWS_SECRET_KEY,
       r"(?i:aws_secret_access_key|aws-secret-access-key)\s*[=:]?\s*['\"]?"
       r"(?P<secret>(?![$\[])[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
       "aws_secret_access_key", "aws-secret-access-key"),
    _p(GITHUB_TOKEN,
       r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255})"
       r"(?![A-Za-z0-9_])",
       "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    _p(GITLAB_TOKEN, r"(?<![A-Za-z0-9_-])gl(?:pat|dt|rt|ptt|soat|ft|imt|cbt)-[A-Za-z0-9_-]{20,}",
       "glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "glft-", "glimt-", "glcbt-"),
    _p(SLACK_TOKEN, r"(?<![A-Za-z0-9_-])xox[abposre]-[A-Za-z0-9-]{10,}", "xox"),
    _p(SLACK_TOKEN,
       r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/-]+)",
       "hooks.slack.com"),
    _p(STRIPE_KEY, r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}",
       "sk_live_", "sk_test_", "rk_live_", "rk_test_"),
    _p(STRIPE_KEY, r"(?<![A-Za-z0-9_])whsec_[A-Za-z0-9]{20,}", "whsec_"),
    _p(NPM_TOKEN, r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", "npm_"),
    _p(NPM_TOKEN, r":_authToken=" + _VALUE, "_authtoken"),
    _p(JWT, r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", "eyj"),
    # scheme://user:password@ -- the password may hold anything but white
    # space (an unescaped "@" or "/" too): up to the last "@" of the word,
    # rather too much hidden than a piece of a password shown.
    _p(URL_PASSWORD, r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:(?P<secret>\S*)@", "://",
       empty_ok=True),
    _p(PASSWORD, r"(?i:pass(?:word|wd|phrase))=" + _VALUE, "pass"),
    _p(PASSWORD, r"(?<![\w-])--[\w-]*?(?i:pass(?:word|wd|phrase))[ \t]+(?!-)" + _VALUE, "pass"),
    _p(PASSWORD,
       r"(?<![\w.-])(?:" + "|".join(re.escape(c) for c in MYSQL_CLIENTS) + r")"
       + _ARGS + r"-p" + _WORD,
       "mysql", "mariadb"),
    _p(PASSWORD, r"(?<![\w.-])sshpass" + _ARGS + r"-p[ \t]*(?!-)" + _WORD,
       "sshpass"),
    _p(PASSWORD,
       r"(?<![\w.-])curl" + _ARGS + r"(?:-u[ \t]*|--user[ \t=]+)['\"]?[^\s:'\"@]+:"
       r"(?P<secret>(?![$\[])[^\s'\"@;&|]+)",
       "curl"),
)  # fmt: skip


# The pre-check: every trigger of the built-in patterns, looked for once
# per text (substring tests: cheaper than one regex alternation of them,
# which Python's engine tries position by position).
_TRIGGERS = tuple(sorted({t for p in BUILTIN_SPECS for t in p.triggers}))


class PatternError(ValueError):
    """A user pattern that cannot be used (the message says why)."""


def compile_user(name: str, regex: str) -> Pattern:
    """The user's pattern ``name`` (the kind in its marker) from ``regex``.

    :raises PatternError: a name that is no kind, a regex that does not
        compile or matches the empty string."""
    if not KIND_NAME.fullmatch(name):
        raise PatternError(
            f"invalid pattern name {name!r} (lower-case letters, digits, '-', '_', '.'; "
            "at most 40)"
        )
    if name == SECRET_NAME:
        raise PatternError(f"pattern name {name!r} is reserved")
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise PatternError(f"pattern {name!r}: invalid regex: {exc}") from None
    if compiled.fullmatch("") is not None:
        raise PatternError(f"pattern {name!r}: the regex matches the empty text")
    return Pattern(name, compiled)


@functools.cache
def builtin() -> tuple[Pattern, ...]:
    """The built-in patterns (:data:`BUILTIN_SPECS`), compiled once."""
    return tuple(Pattern(p.kind, re.compile(p.regex), p.triggers, p.empty_ok)
                 for p in BUILTIN_SPECS)


@functools.lru_cache(maxsize=8)
def patterns_for(user: tuple[tuple[str, str], ...] = ()) -> tuple[Pattern, ...]:
    """The built-in patterns and the user's ``(name, regex)`` patterns
    after them, compiled once per set."""
    return builtin() + tuple(compile_user(n, r) for n, r in user)


def _add(counts: dict[str, int], more: Mapping[str, int]) -> None:
    for kind, n in more.items():
        counts[kind] = counts.get(kind, 0) + n


def redact_text(
    text: str, patterns: Iterable[Pattern] | None = None
) -> tuple[str, dict[str, int]]:
    """``text`` with the secrets inside it replaced by their markers, and
    how many of each kind (``patterns``: default the built-in ones)."""
    if patterns is None:
        patterns = builtin()
    counts: dict[str, int] = {}
    lower = text.lower()
    present = {t for t in _TRIGGERS if t in lower}
    for pat in patterns:
        if pat.triggers and present.isdisjoint(pat.triggers):
            continue
        found = 0

        def replace(m: re.Match[str], pat: Pattern = pat) -> str:
            nonlocal found
            whole = m.group(0)
            if "secret" in pat.regex.groupindex:
                start, end = m.span("secret")
                if start < 0:
                    return whole
            else:
                start, end = m.span()
            secret = m.string[start:end]
            if (not secret and not pat.empty_ok) or _PREFIX in secret or secret in OLD_MARKERS:
                return whole
            found += 1
            base = m.start()
            return whole[: start - base] + marker(pat.kind) + whole[end - base :]

        text = pat.regex.sub(replace, text)
        if found:
            counts[pat.kind] = counts.get(pat.kind, 0) + found
    return text, counts


def redact_bytes(
    data: bytes, patterns: Iterable[Pattern] | None = None
) -> tuple[bytes, dict[str, int]]:
    """:func:`redact_text` of a file's bytes: what is not UTF-8 passes
    unchanged (surrogate escapes), so only secrets change."""
    text = data.decode("utf-8", "surrogateescape")
    out, counts = redact_text(text, patterns)
    return (out.encode("utf-8", "surrogateescape") if counts else data), counts


def is_secret_name(name: str, patterns: Iterable[str] = DEFAULT_SECRET_NAMES) -> bool:
    upper = name.upper()
    if upper in NEVER_SECRET:
        return False
    return any(fnmatchcase(upper, p.upper()) for p in patterns)


def redact_env(
    env: Mapping[str, str],
    names: Iterable[str] = DEFAULT_SECRET_NAMES,
    patterns: Iterable[Pattern] | None = None,
) -> tuple[dict[str, str], dict[str, int]]:
    """``env`` with every secret replaced (the secrets never leave this
    function), and how many were redacted by kind: the whole value of a
    secret-looking name (``names``), the secrets ``patterns`` find in the
    others.  A value redacted before stays as it is: applying this again
    changes nothing."""
    names = tuple(names)
    patterns = builtin() if patterns is None else tuple(patterns)
    out: dict[str, str] = {}
    counts: dict[str, int] = {}
    for name, value in env.items():
        if not isinstance(value, str):
            value = str(value)
        if is_secret_name(name, names):
            if value != MARKER and value not in OLD_MARKERS:
                counts[SECRET_NAME] = counts.get(SECRET_NAME, 0) + 1
                value = MARKER
            out[name] = value
            continue
        value, found = redact_text(value, patterns)
        _add(counts, found)
        out[name] = value
    return out, counts


def is_redacted(value: str) -> bool:
    """Whether shournal hid (part of) ``value``."""
    return _PREFIX in value or value in OLD_MARKERS


def add_counts(counts: dict[str, int], more: Mapping[str, int]) -> dict[str, int]:
    """``counts`` with ``more`` added (in place; returned)."""
    _add(counts, more)
    return counts


def describe_counts(counts: Mapping[str, int]) -> str:
    """``3 secrets redacted (2 by name, 1 URL password)``; '' for none."""
    total = sum(counts.values())
    if not total:
        return ""
    parts = []
    if counts.get(SECRET_NAME):
        parts.append(f"{counts[SECRET_NAME]} by name")
    if counts.get(URL_PASSWORD):
        n = counts[URL_PASSWORD]
        parts.append(f"{n} URL password{'s' if n != 1 else ''}")
    parts += [f"{n} {k}" for k, n in sorted(counts.items())
              if n and k not in (SECRET_NAME, URL_PASSWORD)]
    return f"{total} secret{'s' if total != 1 else ''} redacted ({', '.join(parts)})"
