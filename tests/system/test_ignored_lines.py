"""Which lines a real bash 5.2 / zsh 5.9 on a pty does not journal, and
that nothing else is dropped with them: the built-in ignore rules skip a
line that is only shournal's (or mount's) own command, never a line that
runs anything else; the user's HISTCONTROL stays as the user set it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fixtures_shell import Shell, recorded

pytestmark = [pytest.mark.shell, pytest.mark.root]


def texts(home: Path) -> list[str]:
    return [c.text for c in recorded(home) if not c.text.startswith("exit ")]


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_a_line_starting_with_shournal_is_recorded_with_the_rest(kind, install, user_home):
    sh = Shell(kind, install, user_home)
    sh.run("shournal version")
    sh.run("shournal version; echo data > hidden.txt")
    sh.run("shournal version && echo more > also.txt")
    sh.run("echo after > after.txt")
    sh.exit()
    hidden = user_home / "work" / "hidden.txt"
    found = recorded(user_home, wfile=hidden)
    assert [c.text for c in found] == ["shournal version; echo data > hidden.txt"]
    assert [e.path for e in found[0].writes] == [os.fsencode(hidden)]
    assert texts(user_home) == [
        "shournal version; echo data > hidden.txt",
        "shournal version && echo more > also.txt",
        "echo after > after.txt",
    ]
