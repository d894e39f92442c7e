"""zsh's history file (``$HISTFILE``, commonly ``~/.zsh_history``).

Lines of ``EXTENDED_HISTORY`` are ``: <start>:<duration>;<command>``
(seconds); other lines are bare commands.  zsh writes a newline inside an
entry as a backslash before it, so a line ending in a backslash continues
on the next one (that backslash removed, the newline kept).  zsh also
*metafies* the bytes it stores: a 0x83 byte means the next byte XOR 0x20
(so ``echo 你好`` comes back as typed).  Bytes that are not UTF-8 after that
are kept (:func:`shournal.importers.entries.text_of`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from shournal.importers import History, ImportFailed, home
from shournal.importers.entries import Entry, lines, looks_binary, to_records

KIND = "zsh"

META = 0x83
_EXTENDED = re.compile(rb": *(-?\d+):(-?\d+);")
_BASH_TIMESTAMP = re.compile(rb"#\d{1,18}\s*")


def default_path() -> Path:
    """$HISTFILE when it names a zsh history (zsh does not export it, a
    user may), else the first of the usual names that exists (zsh itself
    has no default; oh-my-zsh uses ~/.zsh_history, zsh-newuser-install
    ~/.histfile), else ~/.zsh_history."""
    histfile = os.environ.get("HISTFILE")
    if histfile and ("zsh" in os.path.basename(histfile) or "zhist" in histfile):
        return Path(histfile)
    usual = [home() / name for name in (".zsh_history", ".zhistory", ".histfile")]
    return next((p for p in usual if p.exists()), usual[0])


def unmetafy(raw: bytes) -> bytes:
    """zsh's stored bytes -> the bytes typed."""
    if META not in raw:
        return raw
    out = bytearray()
    it = iter(raw)
    for b in it:
        if b == META:
            nxt = next(it, None)
            if nxt is None:
                break  # a cut-off escape at the end: nothing to decode
            out.append(nxt ^ 0x20)
        else:
            out.append(b)
    return bytes(out)


def parse(data: bytes) -> list[Entry]:
    """The entries of a zsh history file's bytes, oldest first."""
    if looks_binary(data):
        raise ImportFailed("not a zsh history: binary data (a database?)")
    all_lines = lines(data)
    stamps = sum(1 for line in all_lines if _BASH_TIMESTAMP.fullmatch(line))
    if stamps and not any(_EXTENDED.match(line) for line in all_lines):
        raise ImportFailed("not a zsh history: a bash history with timestamps "
                           "(shournal import bash)")
    entries: list[Entry] = []
    pending = b""
    for line in all_lines:
        line = unmetafy(line)
        if line.endswith(b"\\"):
            pending += line[:-1] + b"\n"
            continue
        entries.append(_entry(pending + line))
        pending = b""
    if pending:
        entries.append(_entry(pending.rstrip(b"\n")))
    return [e for e in entries if e.text.strip()]


def _entry(raw: bytes) -> Entry:
    m = _EXTENDED.match(raw)
    if m is None:
        return Entry(raw)
    return Entry(raw[m.end():], int(m.group(1)), int(m.group(2)))


def read(path: Path) -> History:
    data = path.read_bytes()
    return History(to_records(KIND, parse(data), path.stat().st_mtime_ns))
