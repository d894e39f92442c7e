"""`shournal import`: the histories people already have, as command records.

One small module per format turns a file into
:class:`shournal.record.CommandRecord`\\ s (standard library only);
the journal stores them through the recorder's writer
(:meth:`shournal.Journal.import_records`).  Each record carries the kind it
came from (``imported_from``) and a stable identity (``import_key``, see
:mod:`shournal.importers.identity`), so a second import of the same or an
overlapping file stores nothing twice.

A file that is not of the format, is damaged or of a newer version raises
:class:`ImportFailed` (one line) before anything is stored.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from shournal.record import CommandRecord
from shournal.redact import Pattern

# The formats, each the module of its parser (shournal.importers.<module>).
FORMATS: dict[str, str] = {
    "bash": "bash",
    "zsh": "zsh",
    "atuin": "atuin",
    "shournal": "original",
    "hishtory": "hishtory",
}


@dataclass(slots=True)
class History:
    """What a history file holds: its entries as records (oldest first,
    each with ``imported_from`` and ``import_key``), and what the import
    should tell the user (one line each: e.g. an archived script that is
    missing beside the original shournal's database)."""

    records: list[CommandRecord]
    notes: list[str] = field(default_factory=list)


class ImportFailed(Exception):
    """The file cannot be imported: missing, unreadable, of another format,
    damaged, or of a newer version.  The message is one line."""


def default_path(fmt: str) -> Path | None:
    """Where ``fmt`` keeps its history by default; None: no default (the
    path must be given)."""
    return _module(fmt).default_path()


def read_history(fmt: str, path: Path) -> History:
    """Every entry of the history file ``path`` of format ``fmt``.

    :raises ImportFailed: see the class.
    """
    module = _module(fmt)
    try:
        history: History = module.read(path)
    except ImportFailed as e:
        if str(e).startswith(f"{path}:"):
            raise
        raise ImportFailed(f"{path}: {e}") from None
    except FileNotFoundError:
        raise ImportFailed(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ImportFailed(f"{path}: is a directory") from None
    except OSError as e:
        raise ImportFailed(f"{path}: {e.strerror or e}") from None
    return history


def _module(fmt: str) -> ModuleType:
    try:
        name = FORMATS[fmt]
    except KeyError:
        raise ImportFailed(
            f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})"
        ) from None
    return importlib.import_module(f"shournal.importers.{name}")


def home() -> Path:
    return Path(os.path.expanduser("~"))


def redacted(records: list[CommandRecord], patterns: tuple[Pattern, ...]) -> list[CommandRecord]:
    """``records`` with the secrets in their text and archived scripts
    replaced by markers and counted, as the recorder does on the way in
    (:mod:`shournal.redact`); the import keys stay those of the source."""
    from dataclasses import replace

    from shournal.redact import add_counts, redact_bytes, redact_text

    out = []
    for rec in records:
        text, counts = redact_text(rec.text, patterns)
        reads = []
        for ev in rec.reads:
            if ev.content is not None:
                content, more = redact_bytes(ev.content, patterns)
                if more:
                    ev = replace(ev, content=content)
                    add_counts(counts, more)
            reads.append(ev)
        if counts:
            # (added to what the source counted: a moved journal's commands)
            total = dict(rec.redactions)
            add_counts(total, counts)
            rec = replace(rec, text=text, reads=reads, redactions=total)
        out.append(rec)
    return out
