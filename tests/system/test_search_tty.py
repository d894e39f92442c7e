"""`shournal search` on Ctrl-R in a real bash and zsh on a pty, with real
key presses, over what the recorder stored of the same shell: the key
binding `shournal init SHELL --ctrl-r` prints, a query typed, a filter
cycled, a file's --stat and lineage, and Enter putting the command on the
prompt, which then runs and is recorded again.

What the screen shows is read through a terminal emulator (pyte) fed with
everything the pty printed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pexpect
import pyte
import pytest
from fixtures_shell import PROMPT, REPO, Shell, recorded, wait_for

from shournal.errors import StoreMissing

pytestmark = [pytest.mark.shell, pytest.mark.root]

COLS, ROWS = 400, 50  # the Shell fixture's pty
LEAVE_SCREEN = "\x1b[?1049l"  # the full screen ends: the terminal's own screen again


class Terminal:
    """What the pty of ``sh`` shows, as a terminal would."""

    def __init__(self, sh: Shell) -> None:
        self.sh = sh
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.Stream(self.screen)

    def pump(self) -> None:
        try:
            self.sh.proc.expect(pexpect.TIMEOUT, timeout=0.05)
        except pexpect.EOF:
            pass
        self.stream.feed(self.sh.proc.before or "")

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait(self, pattern: str, what: str, timeout: float = 30) -> str:
        """Wait until the screen shows ``pattern`` (a regex); the screen."""

        def shown() -> bool:
            self.pump()
            return re.search(pattern, self.text()) is not None

        try:
            wait_for(shown, what, timeout)
        except AssertionError:
            raise AssertionError(f"timed out waiting for {what}:\n{self.text()}") from None
        return self.text()


def _stored(home: Path) -> int:
    try:
        return len(recorded(home, create=False))
    except StoreMissing:
        return 0


def _bind_line(kind: str, sh_env: dict[str, str]) -> str:
    """The line `shournal init KIND --ctrl-r` adds for the key binding."""
    out = subprocess.run(
        [str(REPO / ".venv" / "bin" / "shournal"), "init", kind, "--ctrl-r"],
        capture_output=True, text=True, check=True, env=sh_env,
    ).stdout  # fmt: skip
    (line,) = [ln for ln in out.splitlines() if ln.startswith("SHOURNAL_BIND_SEARCH")]
    return line


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_ctrl_r_search_to_the_prompt(kind, install, user_home):
    bind = _bind_line(kind, install.env(user_home))
    sh = Shell(kind, install, user_home, rc_after=bind + "\n")
    try:
        sh.run("echo alpha > alpha.txt")
        sh.run("echo beta-results > results.csv")
        sh.run("mkdir -p sub && cd sub")
        sh.run("echo gamma-in-sub")
        sh.run("cd ..")
        wait_for(lambda: _stored(user_home) >= 5, "the commands stored", 60)
        term = Terminal(sh)
        # what is typed on the prompt is where the search starts
        sh.proc.send("echo bet")
        sh.proc.send("\x12")  # Ctrl-R
        term.wait(r"1 matches \| mode: substring \| filter: all", "the first screen")
        # (drawn before prompt_toolkit is loaded; then the whole screen)
        # the details pane is complete once its session neighbours are drawn
        screen = term.wait(r"(?s)(?=.*session:)(?=.*echo alpha > alpha\.txt)",
                           "the details pane with the command before it")
        assert "search> echo bet" in screen
        assert "echo beta-results > results.csv" in screen
        # the details pane: the file it wrote, its exit status, its session
        assert re.search(r">\s+\S*/work/results\.csv", screen), screen
        assert "exit 0" in screen and "session:" in screen
        assert "echo alpha > alpha.txt" in screen  # the command before it
        # ^T: --stat of its files: results.csv is as the command left it
        sh.proc.send("\x14")
        term.wait(r"> w U\s+up to date\s+\S*/work/results\.csv", "--stat of results.csv")
        # ^O: the lineage of the selected file (the version this command wrote)
        sh.proc.send("\x0f")
        screen = term.wait(r"lineage of \S*/work/results\.csv", "the lineage")
        assert "$ echo beta-results > results.csv" in screen
        sh.proc.send("\x1b")  # Esc closes the panel, not the search
        term.wait(r"session:", "the details again")
        # file search: w:NAME
        sh.proc.send("\x15w:alpha")  # ^U clears the line
        screen = term.wait(r"search> w:alpha\s", "w:alpha typed")
        term.wait(r"1 matches .*\n(.*\n)*.*echo alpha > alpha\.txt", "the writer of alpha.txt")
        # the filter modes: this directory leaves out what ran in sub/
        sh.proc.send("\x15gamma")
        term.wait(r"1 matches \| mode: substring \| filter: all", "gamma in all")
        for shown in ("this host", "this session", "this directory"):
            sh.proc.send("\x12")
            screen = term.wait(rf"filter: {shown} ", f"the filter {shown}")
        assert "no matching command" in term.wait(r"0 matches", "nothing in this directory")
        sh.proc.send("\x12")
        term.wait(r"filter: this git repository", "the git filter")
        sh.proc.send("\x12\x15echo beta")
        term.wait(r"search> echo beta\s(.*\n)*.*filter: all ", "back to all")
        term.wait(r"1 matches \| mode: substring", "beta found again")
        # Enter: the command on the prompt; the search screen is gone
        sh.proc.send("\r")
        sh.proc.expect_exact(LEAVE_SCREEN)
        sh.proc.expect_exact("echo beta-results > results.csv")
        # the line is on the prompt, not run: Enter runs it
        sh.proc.sendline("")
        sh.proc.expect(PROMPT)
        hist = sh.run("shournal history --session --no-pager")
        assert hist.count("echo beta-results > results.csv") == 2, hist
        # Esc leaves the prompt as it was (without what was typed in the search)
        sh.proc.send("echo keep")
        sh.proc.send("\x12")
        # typed at once, before the screen is up: read by the search, not lost
        sh.proc.send("s")
        term.wait(r"search> echo keeps", "the screen with the key typed ahead")
        sh.proc.send("\x1b")
        sh.proc.expect_exact(LEAVE_SCREEN)
        sh.proc.sendline(" me")
        sh.proc.expect("[\r\n]keep me\r\n")  # its output, not the echo of the line
        sh.proc.expect(PROMPT)
        sh.exit()
    except BaseException:
        sh.proc.terminate(force=True)
        raise


def test_the_search_loads_neither_typer_nor_sqlalchemy(tmp_path: Path) -> None:
    """Start-up is the first screen's budget: `shournal search` on a real
    pty imports neither the parser nor the ORM (Esc to leave)."""
    import os
    import pty
    import select
    import sys

    from synthetic import record

    from shournal.store import Store

    journal = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    with Store(journal, create=True) as store:
        store.add_command(record("echo one"))
    log = tmp_path / "imports.txt"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path),
           "TERM": "xterm", "SHOURNAL_DB_URL": journal}  # fmt: skip
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its terminal; the import log to a file
        out = os.open(log, os.O_WRONLY | os.O_CREAT, 0o600)
        os.dup2(out, 2)
        os.execve(sys.executable, [sys.executable, "-X", "importtime", "-m", "shournal",
                                   "search"], env)  # fmt: skip
    seen = b""
    try:
        while b"session:" not in seen:  # the whole screen, with the details pane
            assert select.select([fd], [], [], 30)[0], seen[-500:]
            seen += os.read(fd, 65536)
        os.write(fd, b"\x1b")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 1  # left without a command
    lines = log.read_text().splitlines()
    mods = {ln.rsplit("|", 1)[1].strip().split(".")[0] for ln in lines if "import time:" in ln}
    assert "prompt_toolkit" in mods
    assert not mods & {"sqlalchemy", "typer", "click", "pydantic", "rich"}, mods
