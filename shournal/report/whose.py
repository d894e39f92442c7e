"""Whose a command is, as the human outputs say it.

A journal can hold commands the reader did not type: a lab store's shared
commands of colleagues (docs/lab.md), and the reader's own commands from
other hosts.  Where a command is not the reader's own here (another user,
or another host), the outputs name ``user@host``; the JSON outputs always
carry both fields."""

from __future__ import annotations

import functools
import os


@functools.cache
def reader() -> tuple[str, str]:
    """(user, host) of whoever reads: the login name of this process's
    uid, as the recorder stores it, and this machine's name."""
    import pwd

    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        user = str(os.getuid())
    return user, os.uname().nodename


def not_own(username: str, hostname: str, me: tuple[str, str] | None = None) -> str | None:
    """``user@host`` (printable) of a command that is not the reader's own
    here (``me``: (user, host), default :func:`reader`); None for one that is."""
    from shournal.terminal import printable

    if (username, hostname) == (me or reader()):
        return None
    return f"{printable(username)}@{printable(hostname)}"
