"""The interactive search's matching (shournal.store.search): the query
syntax, the SQL of each mode, file words, filters, the windows a search
walks; and the screen's keys (shournal.cli._search_screen) driven through
prompt_toolkit's pipe input, on a real SQLite journal."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic import MINUTE, T0, record

from shournal.errors import StoreMissing, StoreUnavailable
from shournal.journal import Journal
from shournal.record import FileEvent
from shournal.search_query import Scope, SearchQuery, parse_query
from shournal.store import Store

# -- the query syntax -----------------------------------------------------------------


def test_substring_is_the_text_as_typed_anywhere() -> None:
    assert parse_query("git  commit ") == SearchQuery(text=("%git  commit%",))


def test_prefix_anchors_at_the_start() -> None:
    assert parse_query("make -j", "prefix") == SearchQuery(text=("make -j%",))


def test_fuzzy_is_each_word_s_letters_in_order() -> None:
    assert parse_query("gc MA", "fuzzy") == SearchQuery(
        text=("%g%c%", "%M%A%"), fuzzy=("gc", "ma")
    )


def test_like_wildcards_typed_are_literal() -> None:
    assert parse_query("50%_a\\b") == SearchQuery(text=("%50\\%\\_a\\\\b%",))
    assert parse_query("a_", "fuzzy").text == ("%a%\\_%",)


def test_file_words_anywhere_and_the_rest_is_text() -> None:
    q = parse_query("w:results python r:params.yaml run.py w:out/")
    assert q == SearchQuery(
        text=("%python run.py%",), written=("results", "out/"), read=("params.yaml",)
    )
    assert parse_query("w:x").text == ()


def test_a_bare_prefix_is_text_and_empty_is_empty() -> None:
    assert parse_query("w:") == SearchQuery(text=("%w:%",))
    assert parse_query("   ").empty
    assert not parse_query("r:a").empty


def test_unknown_mode() -> None:
    with pytest.raises(ValueError, match="unknown search mode"):
        parse_query("x", "regex")


# -- searching a journal ----------------------------------------------------------------


def _event(path: str, size: int = 10) -> FileEvent:
    return FileEvent(path=path.encode(), size=size, mtime_ns=T0, mode=0o100644, hash=size)


S1, S2 = b"\x01" * 16, b"\x02" * 16


@pytest.fixture
def journal(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    records = [
        record("git commit -m first", T0, session_uuid=S1),
        record("python3 train.py", T0 + MINUTE, session_uuid=S1,
               reads=[_event("/p/params.yaml"), _event("/p/train.py")],
               writes=[_event("/p/results/model.bin")]),  # fmt: skip
        record("make -j4", T0 + 2 * MINUTE, session_uuid=S2, working_dir="/src/app",
               hostname="other", writes=[_event("/src/app/app.o")], return_value=2),  # fmt: skip
        record("git checkout main", T0 + 3 * MINUTE, session_uuid=S1,
               working_dir="/src/app/sub"),  # fmt: skip
        record("echo 50% done_now", T0 + 4 * MINUTE, session_uuid=S1),
        record("cmake ..", T0 + 5 * MINUTE, session_uuid=S2, working_dir="/src/apps"),
    ]
    with Store(url, create=True) as store:
        for r in records:
            store.add_command(r)
    return url


def _texts(url: str, typed: str, mode: str = "substring", scope: Scope | None = None,
           **kw: object) -> list[str]:  # fmt: skip
    with Journal.searcher(url) as s:
        hits, _ = s.search(parse_query(typed, mode), scope or Scope(), **kw)  # type: ignore[arg-type]
        return [h.text for h in hits]


def test_newest_first_and_empty_lists_everything(journal: str) -> None:
    assert _texts(journal, "")[:2] == ["cmake ..", "echo 50% done_now"]
    assert len(_texts(journal, "")) == 6


def test_modes(journal: str) -> None:
    assert _texts(journal, "make") == ["cmake ..", "make -j4"]
    assert _texts(journal, "make", "prefix") == ["make -j4"]
    # (ranked: c and m of "git commit -m" are nearer to the g than in "git checkout main")
    assert _texts(journal, "gcm", "fuzzy") == ["git commit -m first", "git checkout main"]
    assert _texts(journal, "gcmf", "fuzzy") == ["git commit -m first"]
    assert _texts(journal, "gt ck", "fuzzy") == ["git checkout main"]
    # case-insensitive (ASCII)
    assert _texts(journal, "GIT C") == ["git checkout main", "git commit -m first"]
    # the LIKE wildcards as typed match only themselves
    assert _texts(journal, "50%") == ["echo 50% done_now"]
    assert _texts(journal, "o_") == []  # as a LIKE pattern "o_" would match "o 5"
    assert _texts(journal, "done_n") == ["echo 50% done_now"]


def test_fuzzy_ranks_contiguous_then_word_starts_then_newest(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rank.sqlite'}"
    texts = [
        "git commit -m old",  # every letter of "gcm" at a word start
        "make -j4",  # "make" contiguous
        "xargs echo tmp",  # "gcm" inside words (newer)
        "m4 --arch kde.conf",  # "make" scattered (newer)
        "git commit -m new",  # as good as the old one: newer first
    ]
    with Store(url, create=True) as store:
        for i, text in enumerate(texts):
            store.add_command(record(text, T0 + i * MINUTE))
    assert _texts(url, "make", "fuzzy") == ["make -j4", "m4 --arch kde.conf"]
    assert _texts(url, "gcm", "fuzzy") == [
        "git commit -m new", "git commit -m old", "xargs echo tmp"]  # fmt: skip
    # two words: each must match, the sums are ranked
    assert _texts(url, "mk kd", "fuzzy") == ["m4 --arch kde.conf"]
    assert _texts(url, "mk ke", "fuzzy") == ["make -j4", "m4 --arch kde.conf"]
    # the other modes stay newest first
    assert _texts(url, "m", "substring")[:2] == ["git commit -m new", "m4 --arch kde.conf"]


def test_match_score() -> None:
    from shournal.search_query import LINE_START, NO_MATCH, match_score

    def better(text: str, than: str, words: tuple[str, ...]) -> bool:
        return match_score(text, words) > match_score(than, words)

    assert better("make -j4", "m4 --arch kde.conf", ("make",))
    assert better("git commit -m x", "xargs echo tmp", ("gcm",))
    # the first letter tries each of its places: "ab" together at the end
    # beats the a of "cat" followed by a far b
    assert better("cat ab", "cat a b", ("ab",))
    # the first letter's best place, not its first ("cm" in "echo cmake")
    assert match_score("echo cmake", ("cm",)) == match_score("cmake", ("cm",)) - LINE_START
    # letters skipped cost: the compact match first
    assert better("git commit", "grep -rn x out/log/tmp/co --max", ("gtcm",))
    assert better("ab", "a-b", ("ab",)) and better("a-b", "a-xyz-b", ("ab",))
    # a word start is taken where it earns more than its longer gap costs
    assert better("gxc cg", "gxcxcg", ("gc",))
    assert match_score("abc", ("x",)) == NO_MATCH and match_score("abc", ()) == 0.0
    assert match_score("GIT COMMIT", ("gc",)) == match_score("git commit", ("gc",))


def test_screen_keeps_fuzzy_matches_ranked_as_they_come(journal: str) -> None:
    from shournal.cli._search_screen import SearchScreen
    from shournal.search_query import Hit

    with Journal.searcher(journal) as s:
        screen = SearchScreen(s, query="gcm", mode="fuzzy", cwd="/")
        screen.restart()
        assert [h.text for h in screen.hits] == ["git commit -m first", "git checkout main"]
        moment = screen.hits[0].start_time
        best = Hit(0, "gcm", 0, moment, moment, "/", "box", score=99.0)
        worst = Hit(1, "x", 0, moment, moment, "/", "box", score=-1.0)
        screen.selected = 1  # the user moved: the selected command stays selected
        screen._add([worst, best], ranked=True)
        assert [h.text for h in screen.hits] == [
            "gcm", "git commit -m first", "git checkout main", "x"]  # fmt: skip
        assert screen.hits[screen.selected].text == "git checkout main"


def test_files_written_and_read(journal: str) -> None:
    assert _texts(journal, "w:model") == ["python3 train.py"]
    assert _texts(journal, "w:.o") == ["make -j4"]
    assert _texts(journal, "r:params.yaml") == ["python3 train.py"]
    assert _texts(journal, "r:model") == []  # written, not read
    # with a "/": the whole path (the directory alone is no file name)
    assert _texts(journal, "w:results") == []
    assert _texts(journal, "w:/results/") == ["python3 train.py"]
    assert _texts(journal, "python w:model r:train") == ["python3 train.py"]
    assert _texts(journal, "make w:model") == []


def test_filters(journal: str) -> None:
    assert _texts(journal, "", scope=Scope("host", "other")) == ["make -j4"]
    assert _texts(journal, "", scope=Scope("session", S2)) == ["cmake ..", "make -j4"]
    assert _texts(journal, "", scope=Scope("directory", "/src/app")) == ["make -j4"]
    # the repository: its directory and below, not a sibling with its name as prefix
    assert _texts(journal, "", scope=Scope("repository", "/src/app")) == [
        "git checkout main",
        "make -j4",
    ]
    assert _texts(journal, "git", scope=Scope("session", b"\x09" * 16)) == []


def test_windows_find_the_same_as_one_scan(journal: str) -> None:
    """A search walked in windows of one command, a page of two at a time,
    finds every match once, newest first."""
    with Journal.searcher(journal) as s:
        q = parse_query("i")
        everything, done = s.search(q, Scope())
        assert done == 0
        found, below = [], None
        while below != 0:
            hits, below = s.search(q, Scope(), below=below, limit=2, window=1)
            assert len(hits) <= 2
            found += hits
        assert [h.id for h in found] == [h.id for h in everything]
        assert [h.id for h in found] == sorted((h.id for h in found), reverse=True)
        # a time limit stops early and says where to go on
        hits, below = s.search(q, Scope(), limit=100, seconds=0.0, window=1)
        assert len(hits) <= 1 and below > 0


def test_details_with_files_and_session_neighbours(journal: str) -> None:
    with Journal.searcher(journal) as s:
        (hit,), _ = s.search(parse_query("python3"), Scope())
        d = s.details(hit.id)
        assert d is not None
        assert [e.path for e in d.command.writes] == [b"/p/results/model.bin"]
        assert sorted(e.path for e in d.command.reads) == [b"/p/params.yaml", b"/p/train.py"]
        assert [t for _, t in d.before] == ["git commit -m first"]
        assert [t for _, t in d.after] == ["git checkout main", "echo 50% done_now"]
        assert s.details(10**9) is None


def test_no_journal_and_not_sqlite(tmp_path: Path) -> None:
    with pytest.raises(StoreMissing):
        Journal.searcher(f"sqlite:///{tmp_path / 'none.sqlite'}")
    # a server's journal is searched through the store, which says why not
    with pytest.raises(StoreUnavailable, match="postgresql://u@localhost:1/x"):
        Journal.searcher("postgresql://u@localhost:1/x")
    # a read that fails after opening (here: a table gone) is the journal's error
    good = tmp_path / "good.sqlite"
    with Store(f"sqlite:///{good}", create=True):
        pass
    searcher = Journal.searcher(f"sqlite:///{good}")
    with sqlite3.connect(good) as conn:
        conn.execute("DROP TABLE write_event")
    with searcher, pytest.raises(StoreUnavailable, match="cannot search the journal"):
        searcher.search(parse_query("w:x"), Scope())
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database" * 100)
    with pytest.raises(StoreUnavailable, match="cannot search"):
        Journal.searcher(f"sqlite:///{bad}")


# -- the screen's keys --------------------------------------------------------------------


def _screen_run(url: str, keys: str, **kw: object) -> tuple[str | None, object]:
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from shournal.cli._search_screen import SearchScreen

    with Journal.searcher(url) as s, create_pipe_input() as pipe:
        screen = SearchScreen(s, cwd="/src/app", **kw)  # type: ignore[arg-type]
        app = screen.build(input=pipe, output=DummyOutput())
        pipe.send_text(keys)
        result = app.run(pre_run=screen.restart)
        return result, screen


def test_enter_returns_the_selected_command(journal: str) -> None:
    result, _ = _screen_run(journal, "git\x1b[B\r")  # type, Down, Enter
    assert result == "git commit -m first"


def test_escape_and_ctrl_c_return_nothing(journal: str) -> None:
    assert _screen_run(journal, "git\x1b")[0] is None
    assert _screen_run(journal, "git\x03")[0] is None


def test_keys_cycle_mode_and_filter(journal: str) -> None:
    # ^S: fuzzy; ^R three times: host, session, directory (/src/app)
    s2 = "AgICAgICAgICAgICAgICAg=="  # S2 as printed
    result, screen = _screen_run(journal, "\x13mk\x12\x12\x12\r", session=s2)
    assert result == "make -j4"
    assert screen.mode == "fuzzy" and screen.scope_kind == "directory"  # type: ignore[attr-defined]


def test_a_filter_without_a_value_says_why(journal: str) -> None:
    # ^R twice: this session, with no SHOURNAL_SESSION_ID
    result, screen = _screen_run(journal, "\x12\x12\r\x03")  # Enter: no match to take
    assert result is None and "not recorded" in screen.note  # type: ignore[attr-defined]


def test_stat_and_lineage_keys(journal: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOURNAL_DB_URL", journal)
    # w:model selects the python command, ^T its --stat, ^O the lineage of
    # its written file, Esc closes that panel, Enter takes the command
    result, screen = _screen_run(journal, "w:model\x14\x0f\x1b\r")
    assert result == "python3 train.py"
    assert screen.statuses == {0: "N", 1: "N", 2: "N"}  # type: ignore[attr-defined]


def test_lineage_panel_text(journal: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from shournal.cli._search_screen import SearchScreen

    monkeypatch.setenv("SHOURNAL_DB_URL", journal)
    with Journal.searcher(journal) as s:
        screen = SearchScreen(s, query="w:model", cwd="/")
        screen.restart()
        screen.show_lineage()
        assert screen.panel is not None
        title, text = screen.panel
        assert title == "lineage of /p/results/model.bin"
        assert "$ python3 train.py" in text and "/p/params.yaml" in text
        screen.show_stat()
        assert screen.panel[0].startswith("--stat of #")
        assert "missing" in screen.panel[1]


def test_git_root(tmp_path: Path) -> None:
    from shournal.cli._search_view import git_root

    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "a" / "b").mkdir(parents=True)
    assert git_root(str(tmp_path / "repo" / "a" / "b")) == str(tmp_path / "repo")
    assert git_root(os.sep) in (None, os.sep)


# -- the command ------------------------------------------------------------------------


def _shournal(argv: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`shournal ARGV` with no controlling terminal (a new session)."""
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "shournal", *argv], capture_output=True,
                          text=True, env={**base, **env}, start_new_session=True)  # fmt: skip


def test_search_without_a_terminal_is_one_line(journal: str, tmp_path: Path) -> None:
    r = _shournal(["search"], tmp_path, SHOURNAL_DB_URL=journal)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == "shournal: search needs a terminal (/dev/tty cannot be opened)\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mode", "regex"], "--mode: unknown value 'regex' (one of substring, fuzzy, prefix)"),
        (["--filter", "x"], "--filter: unknown value 'x' (one of all, host, session, "
                            "directory, repository)"),  # fmt: skip
    ],
)
def test_search_bad_option_values(argv: list[str], message: str, tmp_path: Path) -> None:
    r = _shournal(["search", *argv], tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"shournal: {message}\n")


@pytest.mark.parametrize(("shell", "line"), [("bash", "SHOURNAL_BIND_SEARCH '\\C-r'"),
                                             ("zsh", "SHOURNAL_BIND_SEARCH '^R'")])  # fmt: skip
def test_init_ctrl_r_adds_the_key_binding(shell: str, line: str, tmp_path: Path) -> None:
    from shournal import _paths

    r = _shournal(["init", shell, "--ctrl-r"], tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if not ln.startswith("#")]
    assert lines[1:] == ["SHOURNAL_ENABLE", line]
    # the function it calls is the shell file's
    assert "SHOURNAL_BIND_SEARCH()" in (_paths.shell_dir() / f"shournal.{shell}").read_text()
    plain = _shournal(["init", shell], tmp_path).stdout
    assert "SHOURNAL_BIND_SEARCH" not in plain



def test_a_key_s_screen_is_drawn_before_its_search_goes_on() -> None:
    """prompt_toolkit puts a redraw off while callbacks are ready: a search
    that went on at once after a key delayed the key's screen (41-43 ms
    for a word matching nothing).  A searcher that never fills the page:
    the first thing after the key's search is the redraw."""
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from shournal.cli._search_screen import SearchScreen

    events: list[object] = []

    class Endless:
        def newest_id(self) -> int:
            return 10**9

        def search(self, query: SearchQuery, scope: Scope, *, below: int, limit: int,
                   seconds: float) -> tuple[list[object], int]:  # fmt: skip
            events.append(query.text)
            keyed = [i for i, e in enumerate(events) if e == ("%x%",)]
            if len(events) > 5000 or (keyed and "draw" in events[keyed[0]:]):
                pipe.send_text("\x1b")
            return [], below - 1

        def details(self, command_id: int) -> None:
            return None

    with create_pipe_input() as pipe:
        screen = SearchScreen(Endless(), cwd="/")  # type: ignore[arg-type]
        app = screen.build(input=pipe, output=DummyOutput())
        app.after_render += lambda _: events.append("draw")
        pipe.send_text("x")
        assert app.run(pre_run=screen.restart) is None
    first = events.index(("%x%",))
    assert events[first + 1] == "draw", events[first : first + 5]
    assert ("%x%",) in events[first + 2 :]  # and then the search goes on


@pytest.mark.parametrize("typed, scope", [
    ("git", Scope()),
    ("w:model", Scope()),
    ("r:params.yaml", Scope()),
    ("w:/results/", Scope()),
    ("r:/p/train", Scope()),
    ("", Scope("host", "other")),
    ("x", Scope("session", S2)),
    ("x", Scope("directory", "/src/app")),
    ("x", Scope("repository", "/src/app")),
])  # fmt: skip
def test_every_window_reads_an_id_range_by_index(journal: str, typed: str, scope: Scope) -> None:
    """A window costs what it holds, not the journal: the command table is
    searched by its id range (or an index with it), each file word by the
    command's events (EXPLAIN QUERY PLAN), never scanned."""
    from shournal.store.connection import SqliteReads
    from shournal.store.search import step_sql

    path = journal.removeprefix("sqlite:///")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        sql, params = step_sql(SqliteReads(conn, path), parse_query(typed), scope)
        window = {**params, "below": 10, "low": 0, "limit": 5}
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", window)]
    (command,) = [p for p in plan if p.startswith(("SEARCH c ", "SCAN c"))]
    by_range = r"SEARCH c USING (INTEGER PRIMARY KEY|INDEX \w+) \(.*rowid>\? AND rowid<\?\)"
    assert re.fullmatch(by_range, command), plan
    for events in ("we", "re"):
        assert not any(p.startswith(f"SCAN {events}") for p in plan), plan
    if "w:" in typed:
        assert any(p.startswith("SEARCH we ") and "(command_id=?)" in p for p in plan), plan
    if "r:" in typed:
        assert any(p.startswith("SEARCH re ") and "(command_id=?)" in p for p in plan), plan
