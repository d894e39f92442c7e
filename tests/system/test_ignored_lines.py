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


def test_bash_keeps_the_users_histcontrol(install, user_home):
    """HISTCONTROL=ignoreboth stays ignoreboth (in the shell and what it
    exports); bash behaves as set: space-prefixed lines are neither in
    history nor journaled, a repeated line is journaled but kept out of
    history once."""
    sh = Shell("bash", install, user_home, rc_extra="export HISTCONTROL=ignoreboth")
    sh.run("echo a >> f")
    sh.run(" echo hidden >> f")
    sh.run("echo a >> f")
    sh.run("echo b >> f")
    out = sh.run('echo "[$HISTCONTROL]"; bash -c \'echo "<$HISTCONTROL>"\'')
    assert "[ignoreboth]" in out and "<ignoreboth>" in out, out
    hist = sh.run("HISTTIMEFORMAT= history")
    assert "hidden" not in hist and hist.count("echo a >> f") == 1, hist
    # assigned again during the session: still held, still the user's value
    sh.run("HISTCONTROL=ignorespace")
    sh.run(" echo hidden2 >> f")
    out = sh.run('echo "[$HISTCONTROL]"')
    assert "[ignorespace]" in out, out
    out = sh.run('SHOURNAL_DISABLE; echo "[$HISTCONTROL]"')
    assert "[ignorespace]" in out, out
    sh.exit()
    texts_ = texts(user_home)
    assert not any("hidden" in t for t in texts_), texts_
    assert texts_[:3] == ["echo a >> f", "echo a >> f", "echo b >> f"], texts_
    assert (user_home / "work" / "f").read_text() == "a\nhidden\na\nb\nhidden2\n"


def test_zsh_keeps_hist_ignore_space(install, user_home):
    sh = Shell("zsh", install, user_home, rc_extra="setopt HIST_IGNORE_SPACE")
    sh.run(" echo hidden > f")
    out = sh.run("[[ -o histignorespace ]] && echo still-set")
    assert "still-set" in out
    sh.exit()
    assert not any("hidden" in t for t in texts(user_home))
