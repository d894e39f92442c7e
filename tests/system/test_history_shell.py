"""`shournal history` in a real bash and zsh on a pty, over what the
recorder stored of the same shell: the daily view a user types."""

from __future__ import annotations

import re

import pytest
from fixtures_shell import Shell

pytestmark = [pytest.mark.shell, pytest.mark.root]


def _rows(out: str) -> list[str]:
    """The history lines in what the terminal showed (colours stripped)."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.replace("\r", ""))
    return [line for line in plain.splitlines() if re.match(r"^\s*\d+\s", line)]


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_history_of_this_shell_on_its_terminal(kind, install, user_home):
    sh = Shell(kind, install, user_home)
    try:
        sh.run("echo made > made.txt")
        sh.run("false")
        sh.run("mkdir -p sub && cd sub && echo x > x.txt && cd ..")
        out = sh.run("shournal history --session -n 3 --no-pager")
        rows = _rows(out)
        assert len(rows) == 3, out
        assert rows[0].rstrip().endswith("echo made > made.txt") and " w1 " in rows[0], rows
        assert re.search(r"\ds ago\s+\d+\.\d+s\s+0\s+w1\s+~/work\s", rows[0]), rows
        assert re.search(r"\s1\s+\S", rows[1]) and rows[1].rstrip().endswith("false"), rows
        # on a terminal the status is coloured: red for the failure
        assert "\x1b[31m1\x1b[0m" in out, out
        failed = _rows(sh.run("shournal history --session --failed --no-pager"))
        assert [r.rstrip().endswith("false") for r in failed] == [True], failed
        wrote = _rows(sh.run("shournal history --wrote made.txt"))
        assert len(wrote) == 1 and wrote[0].rstrip().endswith("echo made > made.txt"), wrote
        # bare `shournal` at a terminal is the history (short: no pager stays)
        bare = _rows(sh.run("shournal"))
        assert any(r.rstrip().endswith("echo made > made.txt") for r in bare), (bare, out)
        sh.exit()
    except BaseException:
        sh.proc.terminate(force=True)
        raise
