"""bash's history file (``$HISTFILE``, by default ``~/.bash_history``).

With ``HISTTIMEFORMAT`` set, bash writes a ``#<seconds>`` line before every
entry; an entry of several lines (``shopt -s cmdhist lithist``) is then the
lines up to the next ``#<seconds>`` line, kept whole.  Without timestamps
each line is an entry (bash itself reads the file so), and lines before the
first timestamp of a file that has some are entries of their own.  Bytes
that are not UTF-8 are kept (:func:`shournal.importers.entries.text_of`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from shournal.importers import History, ImportFailed, home
from shournal.importers.entries import Entry, lines, looks_binary, to_records

KIND = "bash"

# bash's test for a timestamp line: '#' and a digit; the whole line digits.
_TIMESTAMP = re.compile(rb"#(\d{1,18})\s*")
_ZSH_EXTENDED = re.compile(rb": *-?\d+:\d+;")


def default_path() -> Path:
    histfile = os.environ.get("HISTFILE")
    return Path(histfile) if histfile else home() / ".bash_history"


def parse(data: bytes) -> list[Entry]:
    """The entries of a bash history file's bytes, oldest first."""
    if looks_binary(data):
        raise ImportFailed("not a bash history: binary data (a database?)")
    all_lines = lines(data)
    if all_lines and all(_ZSH_EXTENDED.match(line) for line in all_lines if line.strip()):
        raise ImportFailed("not a bash history: a zsh extended history (shournal import zsh)")
    entries: list[Entry] = []
    current: Entry | None = None  # the timed entry whose lines are being read
    pending_time: int | None = None
    for line in all_lines:
        stamp = _TIMESTAMP.fullmatch(line)
        if stamp is not None:
            if pending_time is not None:
                # two timestamps in a row: the first had an empty entry
                entries.append(Entry(b"", pending_time))
            pending_time = int(stamp.group(1))
            current = None
            continue
        if pending_time is not None:
            current = Entry(line, pending_time)
            entries.append(current)
            pending_time = None
        elif current is not None:
            current.text += b"\n" + line
        else:
            entries.append(Entry(line))
    return [e for e in entries if e.text.strip()]


def read(path: Path) -> History:
    data = path.read_bytes()
    return History(to_records(KIND, parse(data), path.stat().st_mtime_ns))
