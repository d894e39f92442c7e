"""terminal.printable: what a recorded text can never do to a terminal."""

from __future__ import annotations

import pytest

from shournal.terminal import printable


@pytest.mark.parametrize("char", ["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069",
                                  "\u200e", "\u200f", "\u061c", "\u2028", "\u2029"])
def test_bidi_and_line_separators_are_shown_as_code_points(char: str) -> None:
    # "rm -rf ~ #" + RLO ... displays reordered: the reader would see another command
    text = f"echo safe {char}~ fr- mr"
    out = printable(text)
    assert char not in out
    assert f"\\u{ord(char):04x}" in out
    assert printable(text, newlines=True) == out


def test_controls_escaped_and_ordinary_text_kept() -> None:
    assert printable("a\x1b[2Jb\x9bc\x7f") == "a\\x1b[2Jb\\x9bc\\x7f"
    assert printable("a\nb") == "a\\x0ab"
    assert printable("a\nb", newlines=True) == "a\nb"
    # positive control: ordinary non-ASCII text and tab pass unchanged
    assert printable("echo 你好\tß é → ✓") == "echo 你好\tß é → ✓"
