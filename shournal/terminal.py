"""Text on its way to a terminal: command lines, file names and archived
scripts may contain escape sequences or newlines, which must never reach
the terminal raw (the listing, the CLI's messages, the listener's
warnings)."""

from __future__ import annotations

_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c != 0x09}
# Bidirectional overrides and isolates reorder what a terminal shows
# ("Trojan Source"): a command line could display as another command.  The
# Unicode line and paragraph separators break a line in some terminals, so
# a name could forge one.  Both are shown as their code point.
_CONTROL.update({c: f"\\u{c:04x}" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                           *range(0x2066, 0x206A), 0x2028, 0x2029)})
_CONTROL_BUT_NEWLINE = {c: e for c, e in _CONTROL.items() if c != 0x0A}


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with every C0/C1 control but tab written as ``\\xNN``, and
    the bidirectional and line-separating format characters as ``\\uNNNN``;
    ``newlines`` keeps line breaks (a multi-line command is shown on its
    lines)."""
    return text.translate(_CONTROL_BUT_NEWLINE if newlines else _CONTROL)
