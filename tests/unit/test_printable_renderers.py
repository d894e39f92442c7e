"""Every human renderer of recorded text (diff, diff --lineage, replay,
rerun's plan, recombine's pairs and summary) passes a hostile file name,
environment value and command line through terminal.printable: no control
byte reaches the terminal but the renderer's own newlines, and a newline in
a name cannot forge a line."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from shournal.reproduce.experiment import Experiment
from shournal.store.archive import Archive

EVIL = "x\x1b]0;pwned\x07\x1b[2J\r\x9b31m\x00\x7f\nFAKE LINE"


def assert_printable(out: str) -> None:
    bad = sorted({c for c in out if (ord(c) < 0x20 and c not in "\n\t")
                  or 0x7F <= ord(c) < 0xA0})
    assert bad == [], (bad, out)
    assert "\nFAKE LINE" not in out, out
    assert "\\x1b]0;pwned" in out, out  # the hostile text is shown, escaped


def _exp(cid: int, text: str, env: dict[str, str], path: str, digest: str) -> Experiment:
    start = datetime(2026, 1, 1)
    command = SimpleNamespace(
        id=cid, text=text, working_dir=f"/w/{EVIL}{cid}", return_value=cid,
        hostname=f"h{EVIL}{cid}", username="u", derived_from=None, start_time=start,
        end_time=start + timedelta(seconds=1), dropped_reads=0, lost_events=0,
        reads=[], writes=[])
    entry = [path, cid, 0, 0o100644, None, digest, None]
    manifest = {"env": env, "reads": [entry], "writes": [[f"{path}.{cid}", 1, 0, 0o100644,
                                                         None, None, None]]}
    return Experiment(command, manifest)  # type: ignore[arg-type]


def test_diff_at_every_level(tmp_path: Path) -> None:
    from shournal.reproduce.diff import compare, render_human

    archive = Archive(tmp_path)
    da, _ = archive.put(f"line {EVIL}\n".encode())
    db, _ = archive.put(f"other {EVIL}\n".encode())
    path = f"/data/{EVIL}.txt"
    a = _exp(1, f"run {EVIL} a", {"V": EVIL, "GONE": EVIL, f"K{EVIL}": "1"}, path, da)
    b = _exp(2, f"run {EVIL} b", {"V": EVIL + "2", "NEW": EVIL}, path, db)
    for level in (1, 2, 3):
        out = render_human(compare(a, b, level, archive))
        assert_printable(out)
    assert "env ~V" in out and "env +NEW" in out and "env -GONE" in out


def test_diff_lineage() -> None:
    from shournal.reproduce.lineage_diff import render_human

    cmd = {"id": 3, "command": f"cmd {EVIL}"}
    step = {"depth": 1, "a": cmd, "b": cmd,
            "own": [{"what": "program", "a": EVIL, "b": "p"},
                    {"what": "parameters", "a": [EVIL], "b": ["q"]},
                    {"what": "input", "path": EVIL, "change": "read by a only"},
                    {"what": "maker", "detail": EVIL},
                    {"what": "script", "path": EVIL, "a": {"size": 1}, "b": {"size": 2}}],
            "upstream": []}
    later = {"depth": 0, "a": cmd, "b": None, "own": [], "upstream": [{"path": EVIL}]}
    rep = {"differs": True, "first_divergence": [step], "steps": [step, later]}
    assert_printable(render_human(rep, f"f{EVIL}", "g"))
    assert_printable(render_human({"differs": False}, f"f{EVIL}", "g"))


def test_replay() -> None:
    from shournal.reproduce.replay import render_human

    rep = {"outputs": [{"path": EVIL, "verdict": "extra"},
                       {"path": EVIL, "verdict": "differs", "what": "content"}],
           "exit_status": {"recorded": 0, "replayed": 1}, "from_archive": 1,
           "outdir": f"/tmp/{EVIL}", "not_archived": {EVIL: 1}, "from_host": [EVIL],
           "not_shown": [EVIL], "unset_secrets": [EVIL], "kept": False}
    assert_printable(render_human(rep))


def test_rerun_plan() -> None:
    from shournal.cli.reproduce import rerun_plan_lines

    changes = SimpleNamespace(inputs={EVIL: EVIL}, env={EVIL: EVIL})
    lines = rerun_plan_lines(4, f"old {EVIL}", f"new {EVIL}", changes, "sandboxed")
    assert_printable("\n".join(lines))


def test_recombine_pairs_and_summary(tmp_path: Path) -> None:
    from shournal.rereso.recombine import (
        NO_MATCH,
        RUNS,
        BenchFile,
        Bundle,
        Pair,
        Plan,
        Run,
        parse_command,
        render,
    )

    tool = Bundle(tmp_path / f"tool{EVIL}", {})
    bench = Bundle(tmp_path / f"bench{EVIL}", {})
    cmd1 = parse_command(1, {"name": f"cmd {EVIL} [input.txt]"})
    cmd2 = parse_command(2, {"name": f"c {EVIL}"})
    pairs = [Pair(bench, cmd1, RUNS, None), Pair(bench, cmd2, NO_MATCH, f"why {EVIL}")]
    files = {bench.name: [BenchFile(f"b{EVIL}", None, "b", problem=f"b{EVIL} is missing")]}
    the_plan = Plan(tool, [bench], tmp_path / f"out{EVIL}", [cmd1, cmd2], pairs, files)
    runs = [Run(bench.name, f"set{EVIL}/b", 1, f"cmd {EVIL}", ("cmd", EVIL), 0,
                (str(tmp_path / f"out{EVIL}" / f"o{EVIL}"),), "log")]
    for pair in pairs:
        assert_printable(pair.describe())
    for line in the_plan.lines():
        assert_printable(line)
    assert_printable(render(the_plan, runs, "human"))
