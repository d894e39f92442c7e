"""The shell's history settings and the journal, in a real bash 5.2 and zsh
5.9 on a pty: lines the user keeps out of history (bash HISTCONTROL=
ignorespace and HISTIGNORE, zsh HIST_IGNORE_SPACE) are not journaled and
do not shift the text of other commands; zsh HISTORY_IGNORE only keeps lines
out of the history file, so they are journaled with their own text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fixtures_shell import Shell, recorded

pytestmark = [pytest.mark.shell, pytest.mark.root]


def journaled(home: Path) -> list[str]:
    """Texts of every journaled command, oldest first (`exit` and the
    history listings of these tests left out)."""
    skip = ("exit ", "HISTTIMEFORMAT= history", "fc -ln")
    return [c.text for c in recorded(home) if not c.text.startswith(skip)]


def history(sh: Shell) -> list[str]:
    """The shell's history list, as the user sees it (without `history` itself)."""
    out = sh.run("HISTTIMEFORMAT= history" if sh.kind == "bash" else "fc -ln 1")
    out = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out).replace("\r", "")
    lines = [ln.strip() for ln in out.split("\n")[1:] if ln.strip()]
    if sh.kind == "bash":
        lines = [ln.split(None, 1)[1] if " " in ln else "" for ln in lines]
    return [ln for ln in lines if "history" not in ln and not ln.startswith("fc -l")]


def check_kept(sh: Shell, home: Path, lines: list[str], kept: list[str]) -> None:
    """Run ``lines`` in ``sh``; the history, and after the shell's exit the
    journal, hold ``kept``."""
    for line in lines:
        sh.run(line)
    assert history(sh) == kept
    sh.exit()
    assert journaled(home) == kept


def test_bash_histignore_lines_are_neither_journaled_nor_in_history(install, user_home):
    sh = Shell("bash", install, user_home, rc_extra="HISTIGNORE='echo secret*:ls'")
    lines = ["echo one > f1", "echo secret > f2", "ls", "echo two > f3"]
    check_kept(sh, user_home, lines, ["echo one > f1", "echo two > f3"])
    saved = (user_home / ".bash_history").read_text()
    assert "secret" not in saved and "ls\n" not in saved, saved
    assert "echo two > f3" in saved


def test_bash_histignore_ampersand_is_the_previous_line(install, user_home):
    sh = Shell("bash", install, user_home, rc_extra="HISTIGNORE='&'")
    lines = ["echo a >> f", "echo a >> f", "echo b >> f", "echo a >> f"]
    check_kept(sh, user_home, lines, ["echo a >> f", "echo b >> f", "echo a >> f"])
    assert (user_home / "work" / "f").read_text() == "a\na\nb\na\n"


@pytest.mark.parametrize(
    ("rc", "lines", "kept"),
    [
        pytest.param(
            "shopt -s extglob\nHISTIGNORE='echo a\\:b*:echo[[:space:]]x*:@(true|false)'",
            ["echo first > f0", "echo a:b > f1", "echo x > f2", "true", "echo a > f3",
             "echo a:c > f4"],
            ["echo first > f0", "echo a > f3", "echo a:c > f4"],
            id="histignore-escaped-colon-brackets-and-extglob",
        ),
        pytest.param(
            "HISTIGNORE='@(true|false)'", ["true"], ["true"],
            id="histignore-without-extglob-is-literal",
        ),
        pytest.param(
            "HISTCONTROL=ignoreboth\nHISTIGNORE='echo x*'",
            ["echo a > f1", " echo hidden > f2", " echo x > f3", "echo x > f4", "echo b > f5"],
            ["echo a > f1", "echo b > f5"],
            id="ignorespace-and-histignore-together",
        ),
    ],
)
def test_bash_lines_kept_out_of_history(rc, lines, kept, install, user_home):
    check_kept(Shell("bash", install, user_home, rc_extra=rc), user_home, lines, kept)


def test_bash_histignore_changed_during_the_session(install, user_home):
    sh = Shell("bash", install, user_home)
    sh.run("echo one > f1")
    sh.run("HISTIGNORE='echo two*'")
    sh.run("echo two > f2")
    sh.run("HISTIGNORE+=':echo three*'")
    sh.run("echo three > f3")
    sh.run("echo two > f2b")
    sh.run("unset HISTIGNORE")
    sh.run("echo two > f4")
    expected = [
        "echo one > f1",
        "HISTIGNORE='echo two*'",
        "HISTIGNORE+=':echo three*'",
        "unset HISTIGNORE",
        "echo two > f4",
    ]
    assert history(sh) == expected
    sh.run("HISTIGNORE='echo five*'")
    out = sh.run("SHOURNAL_DISABLE; echo \"[$HISTIGNORE]\"")
    assert "[echo five*]" in out
    sh.exit()
    assert journaled(user_home) == [*expected, "HISTIGNORE='echo five*'"]


@pytest.mark.parametrize("control", ["ignoredups", "erasedups"])
def test_bash_histignore_with_ignoredups_or_erasedups(control, install, user_home):
    rc = f"HISTCONTROL={control}\nHISTIGNORE='echo x*'"
    sh = Shell("bash", install, user_home, rc_extra=rc)
    sh.run("echo a >> f")
    sh.run("echo x >> f")
    sh.run("echo a >> f")
    sh.run("echo b >> f")
    sh.run("echo a >> f")
    if control == "ignoredups":
        assert history(sh) == ["echo a >> f", "echo b >> f", "echo a >> f"]
    else:
        assert history(sh) == ["echo b >> f", "echo a >> f"]
    sh.exit()
    # a duplicate bash keeps out of history is still journaled, as before
    assert journaled(user_home) == ["echo a >> f", "echo a >> f", "echo b >> f", "echo a >> f"]


def test_zsh_hist_ignore_space_and_history_ignore(install, user_home):
    rc = "setopt HIST_IGNORE_SPACE\nHISTORY_IGNORE='echo secret*'"
    sh = Shell("zsh", install, user_home, rc_extra=rc)
    sh.run("echo a > f1")
    sh.run(" echo hidden > f2")
    sh.run("echo secret > f3")
    sh.run("echo b > f4")
    sh.exit()
    # zsh hands preexec the typed line: no text is shifted; space-prefixed
    # lines are dropped, HISTORY_IGNORE lines journaled (zsh keeps them in
    # the session's history too, only not in $HISTFILE)
    assert journaled(user_home) == ["echo a > f1", "echo secret > f3", "echo b > f4"]
    saved = (user_home / ".zsh_history").read_text()
    assert "secret" not in saved and "hidden" not in saved and "echo b > f4" in saved
