"""Text on its way to a terminal: command lines, file names and archived
scripts may contain escape sequences or newlines, which must never reach
the terminal raw (the listing, the CLI's messages, the listener's
warnings)."""

from __future__ import annotations

_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c != 0x09}
_CONTROL_BUT_NEWLINE = {c: e for c, e in _CONTROL.items() if c != 0x0A}


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with every C0/C1 control but tab written as ``\\xNN``;
    ``newlines`` keeps line breaks (a multi-line command is shown on its
    lines)."""
    return text.translate(_CONTROL_BUT_NEWLINE if newlines else _CONTROL)
