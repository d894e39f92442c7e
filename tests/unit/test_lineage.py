"""The lineage walk and ``status`` on journals written by the real store
writer (no root, no shell): the files on disk are real, the commands are
records as the listener would store them."""

from __future__ import annotations

import json
import os

import pytest
from fixtures_lineage import J, _two_chains

from shournal import Journal
from shournal.hashing import partial_xxh64_bytes
from shournal.provenance.graph import CommandTarget, DiskTarget, LineageError, build_lineage
from shournal.provenance.readers import JournalReader
from shournal.provenance.render import lineage_object, render_dot, render_human
from shournal.provenance.status import check_status, status_line
from shournal.store import Store

# whose the commands of fixtures_lineage are: the reader's own
ME = ("u", "h")


def edges(lin):
    return {
        (e.kind, e.command_id, os.path.basename(os.fsdecode(lin.files[e.file].path)))
        for e in lin.edges
    }


def test_cp_and_mv_chain_is_followed_by_content(j):
    raw, clean = b"b 2\na 1\n" * 50, b"a 1\nb 2\n" * 50
    dl = j.v("raw.txt", raw, 0)
    c_sort = j.cmd("sort raw.txt > clean.txt", 10, reads=[dl], writes=[j.v("clean.txt", clean, 10)])
    c_cp = j.cmd(
        "cp clean.txt copy.txt", 20, reads=[j.v("clean.txt", clean, 10)],
        writes=[j.v("copy.txt", clean, 20)],
    )  # fmt: skip
    # `mv copy.txt moved.txt`: a rename makes no file event; the mtime stays.
    j.disk("raw.txt", raw, 0)
    target = j.disk("moved.txt", clean, 20)
    lin = j.lineage(DiskTarget(str(target)))
    assert [c.id for c in lin.commands_by_start()] == [c_sort, c_cp]
    assert edges(lin) == {
        ("wrote", c_cp, "moved.txt"),
        ("read", c_cp, "clean.txt"),
        ("wrote", c_sort, "clean.txt"),
        ("read", c_sort, "raw.txt"),
    }
    (wrote,) = [e for e in lin.edges if e.kind == "wrote" and e.command_id == c_cp]
    assert wrote.written_path == os.fsencode(j.root / "copy.txt")
    leaves = [os.path.basename(os.fsdecode(f.path)) for f in lin.files.values() if f.leaf]
    assert leaves == ["raw.txt"]
    assert lin.depth == {c_cp: 1, c_sort: 2}


def test_latest_writer_that_finished_before_the_reader_started(j):
    data = b"same content\n" * 40
    # The read version's mtime (21) is within all three runs (+- 2 s).
    w1 = j.cmd("gen 1", 10, 20, writes=[j.v("a", data, 20)])
    w2 = j.cmd("gen 2", 19, 23, writes=[j.v("b", data, 23)])
    # Still running when the reader started: not a candidate for the writer.
    w3 = j.cmd("gen 3", 20, 40, writes=[j.v("c", data, 40)])
    out = b"result\n"
    reader = j.cmd("use", 30, 31, reads=[j.v("in", data, 21)], writes=[j.v("out", out, 31)])
    lin = j.lineage(DiskTarget(str(j.disk("out", out, 31))))
    (wrote,) = [e for e in lin.edges if e.kind == "wrote" and e.command_id != reader]
    # No write with the read version's mtime: of the commands running when
    # it was written, the latest that had finished (w2), the others counted.
    assert wrote.command_id == w2
    assert wrote.other_candidates == 2
    assert set(lin.commands) == {reader, w2}
    assert w1 not in lin.commands and w3 not in lin.commands


def test_the_mtime_match_is_preferred_over_a_later_writer(j):
    data = b"x" * 700
    w_exact = j.cmd("make it", 10, 11, writes=[j.v("a", data, 11)])
    j.cmd("copy -p elsewhere", 20, 21, writes=[j.v("b", data, 21)])
    lin = j.lineage(DiskTarget(str(j.disk("a", data, 11))))
    (wrote,) = [e for e in lin.edges if e.kind == "wrote"]
    assert (wrote.command_id, wrote.other_candidates) == (w_exact, 1)


def test_read_and_rewrite_reads_the_earlier_version(j):
    v1, v2 = b"hello\n" * 30, b"bye\n" * 30
    c_make = j.cmd("echo > f", 10, writes=[j.v("f", v1, 10)])
    c_sed = j.cmd(
        "sed -i s/hello/bye/ f", 20, 21, reads=[j.v("f", v1, 10)], writes=[j.v("f", v2, 21)]
    )
    lin = j.lineage(DiskTarget(str(j.disk("f", v2, 21))))
    assert edges(lin) == {("wrote", c_sed, "f"), ("read", c_sed, "f"), ("wrote", c_make, "f")}
    assert len(lin.files) == 2  # two versions of one path


def test_a_command_is_never_its_own_writer(j):
    # `sort -o f f` of an already sorted file that was touched at the end
    # of the run that wrote it (no write has its mtime: the run decides):
    # same content, new mtime; and a temporary file the command wrote and
    # read back.
    data = b"a\nb\n" * 100
    c_first = j.cmd("printf > f", 10, 14, writes=[j.v("f", data, 10)])
    c_sort = j.cmd(
        "sort -o f f", 20, 22,
        reads=[j.v("f", data, 15), j.v("tmp", b"t" * 9, 21)],
        writes=[j.v("tmp", b"t" * 9, 21), j.v("f", data, 22)],
    )  # fmt: skip
    lin = j.lineage(DiskTarget(str(j.disk("f", data, 22))))
    assert edges(lin) == {("wrote", c_sort, "f"), ("read", c_sort, "f"), ("wrote", c_first, "f")}
    assert all(os.path.basename(os.fsdecode(f.path)) != "tmp" for f in lin.files.values())


def test_depth_limits_the_walk(j):
    contents = [bytes([65 + i]) * (100 + i) for i in range(5)]
    ids = [j.cmd("gen 0", 0, writes=[j.v("f0", contents[0], 0)])]
    for i in range(1, 5):
        ids.append(
            j.cmd(
                f"step {i}", 10 * i,
                reads=[j.v(f"f{i - 1}", contents[i - 1], 10 * (i - 1))],
                writes=[j.v(f"f{i}", contents[i], 10 * i)],
            )
        )  # fmt: skip
    target = DiskTarget(str(j.disk("f4", contents[4], 40)))
    assert set(j.lineage(target).commands) == set(ids)
    lin = j.lineage(target, depth=2)
    assert set(lin.commands) == {ids[4], ids[3]}
    truncated = [os.path.basename(os.fsdecode(f.path)) for f in lin.files.values() if f.truncated]
    assert truncated == ["f2"] and not any(f.leaf for f in lin.files.values())
    with pytest.raises(LineageError):
        j.lineage(target, depth=0)


def test_shared_history_is_one_node_each_and_leaves_are_marked(j):
    # A diamond: two branches read the same version; both feed the target.
    base, left, right, top = b"base" * 30, b"left" * 30, b"right" * 30, b"top" * 30
    c_base = j.cmd("gen", 10, reads=[j.v("input", b"raw" * 40, 1)], writes=[j.v("base", base, 10)])
    c_l = j.cmd("l", 20, reads=[j.v("base", base, 10)], writes=[j.v("left", left, 20)])
    c_r = j.cmd("r", 21, reads=[j.v("base", base, 10)], writes=[j.v("right", right, 21)])
    c_top = j.cmd(
        "join", 30, reads=[j.v("left", left, 20), j.v("right", right, 21)],
        writes=[j.v("top", top, 30)],
    )  # fmt: skip
    lin = j.lineage(DiskTarget(str(j.disk("top", top, 30))))
    obj = lineage_object(lin)
    assert [c["id"] for c in obj["commands"]] == [c_base, c_l, c_r, c_top]
    paths = [f["path"] for f in obj["files"]]
    assert len(paths) == len(set(paths)) == 5
    assert len(obj["edges"]) == len({json.dumps(e, sort_keys=True) for e in obj["edges"]}) == 9
    assert [f["path"] for f in obj["files"] if f["leaf"]] == [str(j.root / "input")]
    assert obj["target"] == obj["targets"][0] and obj["files"][0]["target"]
    # the command objects are query's json objects
    assert set(obj["commands"][0]) >= {"id", "command", "workingDir", "fileReadEvents"}
    text = render_human(lin)
    assert text.count(f"command {c_base} (shown above)") == 1
    assert "[leaf: no recorded command wrote it]" in text
    dot = render_dot(lin)
    assert dot.startswith("digraph lineage {") and dot.count("->") == 9
    assert f"c{c_top} -> f1" in dot


def test_a_file_no_command_wrote_is_a_leaf_target(j):
    target = j.disk("raw", b"downloaded" * 10, 3)
    lin = j.lineage(DiskTarget(str(target)))
    assert not lin.commands and lin.files[lin.targets[0]].leaf
    (status,) = check_status(JournalReader(Journal(j.store)), [str(target)])
    assert status_line(status).endswith(": unknown: written outside the journal")


def test_version_of_command(j):
    v1, v2 = b"one\n" * 20, b"two\n" * 20
    c1 = j.cmd("write one", 10, writes=[j.v("out", v1, 10)])
    c2 = j.cmd("write two", 20, writes=[j.v("out", v2, 20)])
    j.disk("out", v2, 20)
    lin = j.lineage(CommandTarget(str(j.root / "out"), c1))
    assert set(lin.commands) == {c1}
    with pytest.raises(LineageError):
        j.lineage(CommandTarget(str(j.root / "other"), c2))


def test_status_up_to_date_stale_missing(j):
    raw, params, mid, out = b"r" * 300, b"p" * 40, b"m" * 300, b"o" * 50
    c_a = j.cmd(
        "step1", 10, reads=[j.v("raw", raw, 1), j.v("params", params, 2)],
        writes=[j.v("mid", mid, 10)],
    )  # fmt: skip
    c_b = j.cmd("step2", 20, reads=[j.v("mid", mid, 10)], writes=[j.v("out", out, 20)])
    j.disk("raw", raw, 1)
    j.disk("params", params, 2)
    j.disk("mid", mid, 10)
    target = str(j.disk("out", out, 20))
    reader = JournalReader(Journal(j.store))
    (st,) = check_status(reader, [target])
    assert (st.state, status_line(st)) == ("up to date", f"{target}: up to date")
    # An intermediate that was moved away is not a problem by itself.
    (j.root / "mid").rename(j.root / "mid.bak")
    assert check_status(reader, [target])[0].state == "up to date"
    # Same size, new content, old mtime: only the hash tells.
    j.disk("params", b"q" * 40, 2)
    (st,) = check_status(reader, [target])
    assert st.state == "stale"
    line = status_line(st, ME)
    assert line.startswith(
        f"{target}: stale: {j.root / 'params'} changed after command {c_a} read it ("
    )
    # a colleague's command (a lab store) says whose it is
    assert status_line(st, ("bob", ME[1])).startswith(
        f"{target}: stale: {j.root / 'params'} changed after command {c_a} ({ME[0]}@{ME[1]}) "
        "read it ("
    )
    (j.root / "raw").unlink()
    (st,) = check_status(reader, [target])
    assert st.state == "missing" and [p.kind for p in st.problems] == ["missing", "stale"]
    assert status_line(st) == f"{target}: missing: {j.root / 'raw'} (and 1 more)"
    # A directory argument: every file under it that a recorded command wrote.
    # (mid.bak: the moved intermediate, found by content.)
    statuses = check_status(reader, [str(j.root)])
    assert [(s.path, s.state, s.commands) for s in statuses] == [
        (str(j.root / "mid.bak"), "missing", 1),
        (target, "missing", 2),
    ]
    writers = JournalReader(Journal(j.store)).writers_of(50, 0, [partial_xxh64_bytes(out)])
    assert [w.command_id for w in writers] == [c_b]


def test_status_accepts_a_version_the_lineage_wrote_later(j):
    v1, v2, out = b"hello\n" * 30, b"bye\n" * 30, b"result" * 9
    j.cmd("make f", 10, writes=[j.v("f", v1, 10)])
    j.cmd("sed -i f", 20, reads=[j.v("f", v1, 10)], writes=[j.v("f", v2, 20)])
    j.cmd("use f", 30, reads=[j.v("f", v2, 20)], writes=[j.v("out", out, 30)])
    j.disk("f", v2, 20)
    (st,) = check_status(JournalReader(Journal(j.store)), [str(j.disk("out", out, 30))])
    assert st.state == "up to date", st.problems


def test_cli_exit_statuses_and_one_line_errors(cli_env, tmp_path):
    from fixtures_cli import run_shournal

    missing = run_shournal(["lineage", str(tmp_path / "nope")], cli_env)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.startswith("shournal: cannot open") and missing.stderr.count("\n") == 1
    target = tmp_path / "t"
    target.write_bytes(b"data" * 10)
    none = run_shournal(["lineage", str(target)], cli_env)
    assert none.returncode == 1
    assert none.stderr == "shournal: no journal yet: nothing has been recorded\n"
    assert run_shournal(["lineage", "--depth", "0", str(target)], cli_env).returncode == 2
    # a journal with one command that wrote the target
    with Store(cli_env["SHOURNAL_DB_URL"]) as store:
        jj = J(store, tmp_path)
        cid = jj.cmd("gen > t", 10, reads=[jj.v("seed", b"s" * 20, 1)],
                     writes=[jj.v("t", b"data" * 10, 10)])  # fmt: skip
    jj.disk("t", b"data" * 10, 10)
    res = run_shournal(["lineage", str(target), "--output-format", "json"], cli_env)
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    assert [c["id"] for c in obj["commands"]] == [cid]
    assert {e["type"] for e in obj["edges"]} == {"read", "wrote"}
    status = run_shournal(["status", str(target), "--output-format", "json"], cli_env)
    assert status.returncode == 1  # the seed is gone
    (st,) = json.loads(status.stdout)
    assert (st["status"], st["problems"][0]["path"]) == ("missing", str(tmp_path / "seed"))
    jj.disk("seed", b"s" * 20, 1)
    status = run_shournal(["status", str(target)], cli_env)
    assert (status.returncode, status.stdout) == (0, f"{target}: up to date\n")
    export = run_shournal(["export", "make", str(target), "-o", str(tmp_path / "wf")], cli_env)
    assert export.returncode == 0, export.stderr
    assert "rule(s)" in export.stderr and (tmp_path / "wf" / "Makefile").exists()
    again = run_shournal(["export", "make", str(target), "-o", str(tmp_path / "wf")], cli_env)
    assert again.returncode == 2 and again.stderr.startswith("shournal: ")


def _count_statements(store: Store) -> list[str]:
    from sqlalchemy import event

    seen: list[str] = []
    event.listen(store.engine, "before_cursor_execute",
                 lambda conn, cur, stmt, *a: seen.append(stmt))  # fmt: skip
    return seen


def test_a_lineage_level_loads_its_commands_in_one_batch(j):
    """A command that read 30 files, each written by its own command: the
    30 writers are loaded together, not with a handful of statements each."""
    inputs = []
    for i in range(30):
        data = f"part {i}\n".encode() * 20
        j.cmd(f"gen {i}", 10 + i, reads=[j.v(f"seed{i}", b"s%d" % i * 10, 1)],
              writes=[j.v(f"p{i}", data, 10 + i)])  # fmt: skip
        inputs.append(j.v(f"p{i}", data, 10 + i))
    out = b"merged" * 30
    j.cmd("cat p* > all", 100, reads=inputs, writes=[j.v("all", out, 100)])
    target = j.disk("all", out, 100)
    reader = j.reader()
    reader.hash_settings()
    seen = _count_statements(j.store)
    lin = build_lineage(reader, [DiskTarget(str(target))])
    assert len(lin.commands) == 31
    # 61 contents looked up in one statement per level (the target, the
    # 30 parts, the 30 seeds), and the commands of each of the two levels
    # in a few statements.
    lookups = [s for s in seen if "write_event.id" in s and "hash_setting" in s]
    assert len(lookups) == 3
    loads = [s for s in seen if s.lstrip().startswith("SELECT") and s not in lookups]
    assert len(loads) <= 2 * 2, loads


def _fan_in_statements(j, n: int) -> list[str]:
    """The statements of a lineage of a file made from ``n`` parts (one
    of them empty: the hashless lookup), each part from its own seed."""
    inputs = []
    for i in range(n):
        data = b"" if i == 0 else f"part {n}.{i}\n".encode() * 20
        j.cmd(f"gen {n}.{i}", 10 + i, reads=[j.v(f"seed{n}.{i}", b"s%d.%d" % (n, i) * 10, 1)],
              writes=[j.v(f"p{n}.{i}", data, 10 + i)])  # fmt: skip
        inputs.append(j.v(f"p{n}.{i}", data, 10 + i))
    out = b"merged %d" % n * 30
    j.cmd(f"cat p{n}.* > all{n}", 100, reads=inputs, writes=[j.v(f"all{n}", out, 100)])
    target = j.disk(f"all{n}", out, 100)
    reader = j.reader()
    reader.hash_settings()
    seen = _count_statements(j.store)
    lin = build_lineage(reader, [DiskTarget(str(target))])
    assert len(lin.commands) == n + 1
    assert len([f for f in lin.files.values() if f.leaf]) == n
    return [s for s in seen if s.lstrip().upper().startswith(("SELECT", "WITH"))]


def test_a_lineage_level_costs_the_same_statements_whatever_its_files(j):
    """A level of 3 read files and one of 40 cost the same statements:
    every content of a level is looked up in one statement, every command
    of it loaded in one batch (3 levels: the target, the parts, the
    seeds)."""
    few = _fan_in_statements(j, 3)
    many = _fan_in_statements(j, 40)
    assert len(many) == len(few), (len(few), len(many))
    assert len(many) <= 3 + 2 * 2, many


def test_the_content_lookup_and_the_command_load_use_indexes(j):
    """Every step of the walk is an index lookup: no full scan of the
    command, event or file tables in SQLite's plans."""
    data = b"q" * 100
    j.cmd("e", 5, writes=[j.v("empty", b"", 5)])
    j.cmd("p", 6, writes=[j.v("part", b"p" * 20, 6)])
    reads = [j.v("in", b"i" * 10, 1), j.v("empty", b"", 5), j.v("part", b"p" * 20, 6)]
    cid = j.cmd("w", 10, reads=reads, writes=[j.v("out", data, 10)])
    j.disk("out", data, 10)
    statements: list[tuple[str, object]] = []
    from sqlalchemy import event

    event.listen(j.store.engine, "before_cursor_execute",
                 lambda conn, cur, stmt, params, *a: statements.append((stmt, params)))  # fmt: skip
    lin = j.lineage(DiskTarget(str(j.root / "out")))
    assert cid in lin.commands and statements
    big = {"command", "write_event", "read_event", "read_file"}
    with j.store.engine.connect() as conn:
        for stmt, params in statements:
            if not stmt.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {stmt}", params).all()
            scans = [r[-1] for r in plan if r[-1].startswith("SCAN ")
                     and r[-1].split()[1] in big]  # fmt: skip
            assert not scans, (stmt, plan)


def _made_from_parts(j, n: int) -> os.PathLike[str]:
    """A file on disk made by one command from ``n`` parts (one of them
    empty: the hashless lookup), each written by a command of its own."""
    inputs = []
    for i in range(n):
        data = b"" if i == 0 else b"part %d\n" % i * 20
        j.cmd(f"gen {i}", 10 + i, writes=[j.v(f"p{i}", data, 10 + i)])
        inputs.append(j.v(f"p{i}", data, 10 + i))
    j.cmd("cat p* > all", 200, reads=inputs, writes=[j.v("all", b"all" * 30, 200)])
    return j.disk("all", b"all" * 30, 200)


def test_a_level_of_many_files_is_looked_up_through_the_index(j):
    """The contents of a level of 100 read files, looked up in one
    statement, are each an index lookup: SQLite's planner would rather
    scan the write events for so many keys unless told the join's order."""
    n = 100
    target = _made_from_parts(j, n)
    statements: list[tuple[str, object]] = []
    from sqlalchemy import event

    event.listen(j.store.engine, "before_cursor_execute",
                 lambda conn, cur, stmt, params, *a: statements.append((stmt, params)))  # fmt: skip
    lin = j.lineage(DiskTarget(str(target)))
    assert len(lin.commands) == n + 1
    lookups = [(s, p) for s, p in statements if "write_event.id" in s and "hash_setting" in s]
    assert len(lookups) == 2  # the target; its 100 inputs
    with j.store.engine.connect() as conn:
        for stmt, params in lookups:
            plan = [r[-1] for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {stmt}", params)]
            assert not [p for p in plan if p.startswith("SCAN write_event")], plan
            assert any(p.startswith("SEARCH write_event USING INDEX") for p in plan), plan


def test_a_big_level_is_prefetched_in_parallel_and_found_the_same(j, monkeypatch, tmp_path):
    """On a SQLite file, a level of 100 contents is first looked up in
    parallel, each part on a connection of its own (warming the page
    cache), then in the transaction: the same lineage as without the
    prefetch, and as with a prefetch that fails."""
    import sqlite3
    import threading

    from shournal.store import connection

    n = 100
    target = _made_from_parts(j, n)
    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"

    def walk() -> object:
        with Journal.open(url) as journal:
            lin = build_lineage(JournalReader(journal), [DiskTarget(str(target))])
        assert len(lin.commands) == n + 1
        return lineage_object(lin)

    real = connection.connect_read_only
    helpers: list[str] = []

    def counted(path: str, **kw: object) -> sqlite3.Connection:
        if threading.current_thread() is not threading.main_thread():
            helpers.append(path)
        return real(path, **kw)

    monkeypatch.setattr(connection, "connect_read_only", counted)
    prefetched = walk()
    assert len(helpers) == 4  # the level of 100: 4 parts
    monkeypatch.setattr(connection.SqliteReads, "prefetching", connection.Reads.prefetching)
    assert walk() == prefetched
    monkeypatch.undo()

    def failing(path: str, **kw: object) -> sqlite3.Connection:
        if threading.current_thread() is not threading.main_thread():
            raise sqlite3.OperationalError("unable to open database file")
        return real(path, **kw)

    monkeypatch.setattr(connection, "connect_read_only", failing)
    assert walk() == prefetched


def test_lineage_of_is_a_criterion_combined_with_the_others(j):
    """The lineage is walked above the door (shournal.provenance) and handed
    to the journal as command ids; the door refuses an unresolved one."""
    from shournal.criteria import parse_criteria
    from shournal.data import QueryError
    from shournal.provenance import resolve_lineage

    target, ids = _two_chains(j)
    journal = Journal(j.store)

    def crit(**kw):
        return resolve_lineage(journal, parse_criteria(**kw))

    lineage = [ids["gen"], ids["sort"], ids["fin"]]
    assert [c.id for c in journal.find(crit(lineage_of=str(target)))] == lineage
    assert [c.id for c in journal.find(crit(lineage_of=target, command_text="%sort%"))] == [
        ids["sort"]]
    both = crit(lineage_of=[str(target)], command_id=[ids["fin"], ids["other"]])
    assert [c.id for c in journal.find(both)] == [ids["fin"]]
    assert journal.stats(crit(lineage_of=str(target))).commands == 3
    assert [c.id for c in journal.plan_delete(crit(lineage_of=str(target))).commands] == lineage
    # a file no recorded command wrote: an empty lineage, nothing matches
    assert journal.find(crit(lineage_of=str(j.disk("seed", b"s" * 10, 1)))) == []
    for call in (journal.find, journal.stats, journal.plan_delete):
        with pytest.raises(QueryError, match="resolve_lineage"):
            call(lineage_of=str(target))


def test_query_lineage_of_in_every_output_format(cli_env, tmp_path):
    from fixtures_cli import run_shournal

    with Store(cli_env["SHOURNAL_DB_URL"]) as store:
        target, ids = _two_chains(J(store, tmp_path))
    lineage = [ids["gen"], ids["sort"], ids["fin"]]
    res = run_shournal(["query", "--lineage-of", str(target), "--output-format", "json"], cli_env)
    assert res.returncode == 0, res.stderr
    assert [c["id"] for c in json.loads(res.stdout)] == lineage
    res = run_shournal(["query", "--lineage-of", str(target), "--exit-code", "0",
                        "--command-text", "%sort%", "--output-format", "shournal-json"],
                       cli_env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    found = [json.loads(line.partition(":")[2])["id"] for line in res.stdout.splitlines()
             if line.startswith("COMMAND:")]  # fmt: skip
    assert found == [ids["sort"]]
    html = tmp_path / "r.html"
    res = run_shournal(["query", "--lineage-of", str(target), "--output-format", "html",
                        "-o", str(html)], cli_env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "tac mid &gt; out" in html.read_text() or "tac mid > out" in html.read_text()
    missing = run_shournal(["query", "--lineage-of", str(tmp_path / "nope")], cli_env)
    assert missing.returncode == 2 and missing.stderr.startswith("shournal: ")
    assert missing.stderr.count("\n") == 1


def test_stats_and_delete_take_lineage_of_as_query_does(cli_env, tmp_path):
    """--lineage-of is one of the shared criteria: stats counts the
    lineage, delete --dry-run lists exactly its commands, delete removes
    them and keeps the unrelated reader of the same input."""
    from fixtures_cli import run_shournal

    with Store(cli_env["SHOURNAL_DB_URL"]) as store:
        target, ids = _two_chains(J(store, tmp_path))
    lineage = [ids["gen"], ids["sort"], ids["fin"]]
    res = run_shournal(["stats", "--lineage-of", str(target), "--output-format", "json"],
                       cli_env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["commands"] == len(lineage)
    res = run_shournal(["stats", "--lineage-of", str(target), "--cwd", "/nonexistent"], cli_env)
    assert res.returncode == 1, res.stderr

    res = run_shournal(["delete", "--lineage-of", str(target), "--dry-run"], cli_env)
    assert res.returncode == 0, res.stderr
    listed = [int(line.split()[1]) for line in res.stdout.splitlines()
              if line.startswith("cmd-id ")]  # fmt: skip
    assert listed == lineage
    assert "Would delete 3 commands" in res.stdout
    res = run_shournal(["delete", "--lineage-of", str(target), "--command-text", "%sort%",
                        "--dry-run"], cli_env)  # fmt: skip
    assert [int(line.split()[1]) for line in res.stdout.splitlines()
            if line.startswith("cmd-id ")] == [ids["sort"]]  # fmt: skip
    # a file that cannot be read: one line, status 2, nothing deleted
    missing = run_shournal(["delete", "--lineage-of", str(tmp_path / "nope"), "--yes"], cli_env)
    assert missing.returncode == 2 and missing.stderr.startswith("shournal: ")
    assert missing.stderr.count("\n") == 1

    res = run_shournal(["delete", "--lineage-of", str(target), "--yes"], cli_env)
    assert res.returncode == 0, res.stderr
    with Store(cli_env["SHOURNAL_DB_URL"]) as store:
        left = [c.id for c in Journal(store).find(command_id=">0")]
    assert left == [ids["other"]]


def test_a_command_is_never_the_writer_of_a_version_made_before_it_ran(j):
    """Issue 27.5: data/in2.csv is an unrecorded `cp` of a download (mtime
    60); command 50-like wrote the same content 40 s later elsewhere.  It
    cannot have written this version: the file is a leaf written outside
    the journal, for lineage, status, export and query alike."""
    from shournal.provenance.export import export_workflow

    data, out = b"id,v\n1,2\n" * 20, b"total 2\n" * 5
    late = j.cmd("python3 fetch.py > data/other.csv", 100, 101,
                 writes=[j.v("data/other.csv", data, 101)])  # fmt: skip
    earlier = j.cmd("gen > data/x.csv", 5, 6, writes=[j.v("data/x.csv", data, 6)])
    use = j.cmd("python3 sum.py data/in2.csv > out", 120, 121,
                reads=[j.v("data/in2.csv", data, 60)], writes=[j.v("out", out, 121)])  # fmt: skip
    j.disk("data/in2.csv", data, 60)
    target = j.disk("out", out, 121)
    lin = j.lineage(DiskTarget(str(target)))
    assert set(lin.commands) == {use}, (late, earlier)
    (in2,) = [f for f in lin.files.values() if f.path.endswith(b"in2.csv")]
    assert in2.leaf and in2.content_writers == 2 and lin.writer(in2.id) is None
    human = render_human(lin)
    assert "written outside the journal; 2 recorded command(s) wrote this content" in human
    assert lineage_object(lin)["files"][1]["otherWriters"] == 2
    # the lineage walk's lookup of the file on disk: also no writer
    alone = j.lineage(DiskTarget(str(j.root / "data" / "in2.csv")))
    assert alone.files[alone.targets[0]].leaf
    (st,) = check_status(j.reader(), [str(j.root / "data" / "in2.csv")])
    assert st.state == "unknown"
    result = export_workflow(lin, j.reader(), "make", str(j.root.parent / "wf"))
    assert [[c.id for c in r.commands] for r in result.rules] == [[use]]
    assert result.leaf_inputs == ["data/in2.csv"]
    # query --wfile: the same rule
    journal = Journal(j.store)
    assert journal.find(wfile=str(j.root / "data" / "in2.csv")) == []
    assert [c.id for c in journal.find(wfile=str(target))] == [use]
    # a write the journal saw with that very mtime (a move keeps it) is
    # the writer whenever the command ran (tar, cp -p set old mtimes)
    tar = j.cmd("tar xf d.tar", 200, 201, writes=[j.v("data/t.csv", data, 60)])
    assert [c.id for c in journal.find(wfile=str(j.root / "data" / "in2.csv"))] == [tar]


def test_status_names_an_interrupted_or_failed_step(j):
    """Issue 27.6: a file written by a command interrupted with Ctrl-C (exit
    status 130) is not up to date, nor one a failed step of its lineage
    made."""
    part, out = b"partial\n" * 9, b"o" * 30
    c_int = j.cmd("python3 long.py > part.txt", 10, 12, writes=[j.v("part.txt", part, 11)],
                  return_value=130)  # fmt: skip
    target = str(j.disk("part.txt", part, 11))
    (st,) = check_status(j.reader(), [target])
    assert st.state == "failed"
    assert status_line(st, ME) == (
        f"{target}: failed: command {c_int}, which wrote {target}, exited with status 130 "
        "(interrupted)"
    )
    c_use = j.cmd("wc -l part.txt > out", 20, reads=[j.v("part.txt", part, 11)],
                  writes=[j.v("out", out, 20)])  # fmt: skip
    (st,) = check_status(j.reader(), [str(j.disk("out", out, 20))])
    assert (st.state, st.problems[0].command_id, st.problems[0].exit_status) == (
        "failed", c_int, 130)  # fmt: skip
    assert c_use in {c for c in j.lineage(DiskTarget(str(j.root / "out"))).commands}
    # a missing input comes first; the failure is counted
    j.cmd("gen > seed2", 30, reads=[j.v("seedfile", b"s" * 20, 1)],
          writes=[j.v("seed2", b"t" * 20, 30)], return_value=1)  # fmt: skip
    (st,) = check_status(j.reader(), [str(j.disk("seed2", b"t" * 20, 30))])
    assert [p.kind for p in st.problems] == ["missing", "failed"]
