"""The interactive search on both engines: the store-level search
(:class:`shournal.store.search.Searcher`) on SQLite and on the private
PostgreSQL server (fixtures_pg) answers the same questions the same way;
`shournal search` on a real pty over a PostgreSQL journal; and in a lab
store (tests/fixtures_lab.py) each user's search finds only the rows
row-level security lets him read."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pyte
import pytest
from fixtures_shell import REPO, wait_for
from synthetic import MINUTE, T0, record

from shournal.journal import Journal
from shournal.record import FileEvent
from shournal.search_query import Scope, parse_query
from shournal.store import Store

S1, S2 = b"\x01" * 16, b"\x02" * 16
COLS, ROWS = 200, 40
LEAVE_SCREEN = "\x1b[?1049l"


def _event(path: bytes, size: int = 10) -> FileEvent:
    return FileEvent(path=path, size=size, mtime_ns=T0, mode=0o100644, hash=size)


RECORDS = [
    record("git commit -m first", T0, session_uuid=S1),
    record("python3 train.py", T0 + MINUTE, session_uuid=S1,
           reads=[_event(b"/p/Params.yaml"), _event(b"/p/train.py")],
           writes=[_event(b"/p/results/model.bin")]),  # fmt: skip
    record("make -j4", T0 + 2 * MINUTE, session_uuid=S2, working_dir="/src/app",
           hostname="other", writes=[_event(b"/src/app/app.o")], return_value=2),  # fmt: skip
    record("git checkout main", T0 + 3 * MINUTE, session_uuid=S1, working_dir="/src/app/sub"),
    record("echo 50% done_now", T0 + 4 * MINUTE, session_uuid=S1),
    # file names: not UTF-8, non-ASCII, a backslash and LIKE's wildcards
    record("cp in out", T0 + 5 * MINUTE, session_uuid=S2,
           writes=[_event(b"/d/r\xe9sum\xe9.txt"), _event("/d/données_1%.csv".encode()),
                   _event(b"/d/back\\slash")]),  # fmt: skip
    record("m4 --arch kde.conf", T0 + 6 * MINUTE, session_uuid=S2),
    record("xargs echo tmp", T0 + 7 * MINUTE, session_uuid=S2),
    record("make install", T0 + 8 * MINUTE, session_uuid=S2),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    else:
        url = request.getfixturevalue("pg_fresh_url")
    with Store(url, create=True) as store:
        for r in RECORDS:
            store.add_command(r)
    yield url


def _texts(url: str, typed: str, mode: str = "substring", scope: Scope | None = None) -> list[str]:
    with Journal.searcher(url) as s:
        hits, done = s.search(parse_query(typed, mode), scope or Scope())
        assert done == 0
        return [h.text for h in hits]


def test_text_modes(url: str) -> None:
    assert _texts(url, "make") == ["make install", "make -j4"]
    assert _texts(url, "MAKE -") == ["make -j4"]  # ASCII letters in either case
    assert _texts(url, "make", "prefix") == ["make install", "make -j4"]
    assert _texts(url, "50%") == ["echo 50% done_now"]
    assert _texts(url, "o_") == []  # typed wildcards match only themselves
    assert _texts(url, "gt ck", "fuzzy") == ["git checkout main"]


def test_file_words(url: str) -> None:
    assert _texts(url, "r:params.YAML") == ["python3 train.py"]
    assert _texts(url, "w:model") == ["python3 train.py"]
    assert _texts(url, "w:/results/") == ["python3 train.py"]
    assert _texts(url, "w:results") == []  # a directory is no file name
    assert _texts(url, "r:model") == []
    assert _texts(url, "w:données_1%") == ["cp in out"]
    assert _texts(url, "w:DONNÉES") == []  # only ASCII letters fold, as on SQLite
    assert _texts(url, "w:données_1_") == []
    assert _texts(url, "w:k\\s") == ["cp in out"]
    assert _texts(url, "w:/d/back\\slash") == ["cp in out"]
    # a name that is no UTF-8 is found by what it spells
    assert _texts(url, "w:sum") == ["cp in out"]


def test_filters_and_details(url: str) -> None:
    assert _texts(url, "", scope=Scope("host", "other")) == ["make -j4"]
    assert _texts(url, "git", scope=Scope("session", S1)) == [
        "git checkout main", "git commit -m first"]  # fmt: skip
    assert _texts(url, "", scope=Scope("directory", "/src/app")) == ["make -j4"]
    assert _texts(url, "", scope=Scope("repository", "/src/app")) == [
        "git checkout main", "make -j4"]  # fmt: skip
    with Journal.searcher(url) as s:
        (hit,), _ = s.search(parse_query("python3"), Scope())
        assert hit.start_time.isoformat() == "2023-11-14T22:14:20+00:00"
        d = s.details(hit.id)
        assert d is not None
        assert [e.path for e in d.command.writes] == [b"/p/results/model.bin"]
        assert [t for _, t in d.before] == ["git commit -m first"]
        assert [t for _, t in d.after] == ["git checkout main", "echo 50% done_now"]


def test_fuzzy_matches_ranked_by_quality_then_recency(url: str) -> None:
    # "make" contiguous in the oldest line beats its letters scattered in a newer one
    assert _texts(url, "make", "fuzzy") == ["make install", "make -j4", "m4 --arch kde.conf"]
    # letters at word starts beat letters inside words; nearer beats farther
    assert _texts(url, "gcm", "fuzzy")[:3] == [
        "git commit -m first", "git checkout main", "xargs echo tmp"]  # fmt: skip


# -- shournal search on a pty over PostgreSQL ------------------------------------------------


class _Pty:
    """``shournal search`` on a pty, read through a terminal emulator."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = pexpect.spawn(argv[0], argv[1:], env=env, encoding="utf-8",
                                  dimensions=(ROWS, COLS), timeout=30)  # fmt: skip
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.Stream(self.screen)

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait(self, pattern: str, what: str, timeout: float = 60) -> str:
        def shown() -> bool:
            try:
                self.proc.expect(pexpect.TIMEOUT, timeout=0.05)
            except pexpect.EOF:
                pass
            self.stream.feed(self.proc.before or "")
            return re.search(pattern, self.text()) is not None

        try:
            wait_for(shown, what, timeout)
        except AssertionError:
            raise AssertionError(f"timed out waiting for {what}:\n{self.text()}") from None
        return self.text()


def test_search_on_a_pty_over_postgresql(pg_fresh_url: str, tmp_path: Path) -> None:
    with Store(pg_fresh_url, create=True) as store:
        for r in RECORDS:
            store.add_command(r)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path),
           "TERM": "xterm", "LANG": "C.UTF-8", "SHOURNAL_DB_URL": pg_fresh_url}  # fmt: skip
    term = _Pty([str(REPO / ".venv" / "bin" / "shournal"), "search", "--query", "git"], env)
    try:
        term.wait(r"2 matches \| mode: substring \| filter: all", "the first screen")
        screen = term.wait(r"(?s)session:.*git commit -m first", "the details pane")
        assert "git checkout main" in screen
        term.proc.send("\x15r:params")  # ^U, then a read file's name
        screen = term.wait(r"1 matches \|", "the reader of Params.yaml")
        assert re.search(r">\s+/p/results/model\.bin", screen), screen  # its details
        term.proc.send("\x15\x13make")  # ^S: fuzzy
        screen = term.wait(r"3 matches \| mode: fuzzy", "the fuzzy matches")
        lines = screen.splitlines()[2:]  # below the search line and the status line
        assert "make install" in lines[0] and "m4 --arch" in lines[2], screen
        term.proc.send("\r")  # the best match, printed on stdout
        term.proc.expect_exact(LEAVE_SCREEN)
        term.proc.expect_exact("make install")
        term.proc.expect(pexpect.EOF)
    finally:
        term.proc.close(force=True)
    assert term.proc.exitstatus == 0


def test_search_of_a_server_without_a_journal_is_one_line(pg_fresh_url: str,
                                                          tmp_path: Path) -> None:  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TERM": "xterm",
           "SHOURNAL_DB_URL": pg_fresh_url.replace("/t_", "/none_")}  # fmt: skip
    term = _Pty([str(REPO / ".venv" / "bin" / "shournal"), "search"], env)
    term.proc.expect(pexpect.EOF)
    term.proc.close()
    out = term.proc.before.strip()  # type: ignore[union-attr]
    assert out.startswith("shournal: ") and len(out.splitlines()) == 1, out
    assert "Traceback" not in out
    assert term.proc.exitstatus == 3


# -- a lab store: row-level security -------------------------------------------------------


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def _search_as(host: object, typed: str) -> subprocess.CompletedProcess[str]:
    """The texts and owners' ids the store-level search finds for
    ``typed``, run as the host's user on the host."""
    code = (
        "import sys\n"
        "from shournal.journal import Journal\n"
        "from shournal.search_query import Scope, parse_query\n"
        "with Journal.searcher() as s:\n"
        "    hits, done = s.search(parse_query(sys.argv[1]), Scope())\n"
        "    assert done == 0\n"
        "    print(' '.join(str(h.id) for h in hits))\n"
    )
    return host.run(str(REPO / ".venv" / "bin" / "python"), "-c", code, typed)  # type: ignore[attr-defined, no-any-return]


@pytest.mark.root
def test_lab_store_search_shows_only_rows_the_user_may_read(lab_clean: object) -> None:
    from fixtures_lab import SHARE_ROLE, Lab

    from shournal.store.lab import SHARE_TABLE

    lab: Lab = lab_clean  # type: ignore[assignment]
    a, b = lab.hosts
    for host in (a, b):  # `sh job.sh` recorded through the setuid helper
        script = host.home / "work" / "job.sh"
        script.write_text("echo made by $(id -un) > out.txt\n")
        os.chown(script, host.user.pw_uid, host.user.pw_gid)
        ok(host.shournal("run", "--", "sh", "job.sh"))
    ids = {h.name: {r[0] for r in lab.admin("SELECT id FROM command WHERE owner = %s",
                                            (h.name,))} for h in (a, b)}  # fmt: skip
    assert all(ids.values())

    def found(host: object) -> set[int]:
        return {int(i) for i in ok(_search_as(host, "job.sh")).split()}

    assert found(a) == ids[a.name]
    assert found(b) == ids[b.name]
    # bob shares with the lab: alice finds his commands too, bob still only his
    ok(b.psql(f"INSERT INTO {SHARE_TABLE} (role) VALUES ('{SHARE_ROLE}')"))
    assert found(a) == ids[a.name] | ids[b.name]
    assert found(b) == ids[b.name]
    # on a pty, as the user, over TCP: the screen counts what she may read
    env = a.env()
    argv = ["nsenter", f"--net=/var/run/netns/{a.netns}", "runuser", "-u", a.name, "--",
            "env", "-i", *[f"{k}={v}" for k, v in env.items()],
            str(a.install.cli), "search", "--query", "job.sh"]  # fmt: skip
    # the pty is root's: the user must be able to open it as /dev/tty
    term = _Pty(["sh", "-c", f'chown {a.name} "$(tty)" && cd / && exec "$@"', "sh", *argv],
                {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})  # fmt: skip
    try:
        n = len(ids[a.name] | ids[b.name])
        term.wait(rf"{n} matches \| mode: substring", "alice's and bob's shared commands")
        term.proc.send("\x1b")
        term.proc.expect(pexpect.EOF)
    finally:
        term.proc.close(force=True)
    assert term.proc.exitstatus == 1
