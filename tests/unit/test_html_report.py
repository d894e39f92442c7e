"""The HTML report: escaping, layout and statistics in Python (the page in
a real browser is tests/system/test_html_browser.py)."""

from __future__ import annotations

import base64
import io
import json
import os
import re
from datetime import UTC, date, timedelta
from pathlib import Path
from typing import Any

from report_samples import NON_UTF8, SCRIPT, SESSION_A, SESSION_B, T0, XSS, fev, rec, view, wev

from shournal.journal import Journal
from shournal.report.html import (
    clean_text,
    commands_per_day,
    json_for_script,
    render_html,
    write_html,
)


def data_block(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="shournal-data">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def parse_tags(page: str) -> list[tuple[str, list[str]]]:
    """Every start tag as a browser's tokenizer sees it, with attribute names."""
    from html.parser import HTMLParser

    tags: list[tuple[str, list[str]]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            tags.append((tag, [name for name, _ in attrs]))

    Collect().feed(page)
    return tags


# -- pure Python ----------------------------------------------------------------


def test_json_for_script_cannot_close_the_element() -> None:
    value = {"t": XSS + "<!-- & \u2028 \udcff", "p": "a\\b"}
    text = json_for_script(value)
    assert text.isascii()
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == value


def test_clean_text_makes_undecodable_bytes_visible() -> None:
    assert clean_text(os.fsdecode(b"caf\xe9")) == "caf\\xe9"
    assert clean_text("plain \u00e9") == "plain \u00e9"
    assert clean_text("lone \ud800") == "lone \\ud800"


def test_page_escapes_user_data_everywhere() -> None:
    cmd = view(
        1, XSS, working_dir="/tmp/" + XSS, hostname='h"ost', username="<u>",
        writes=[fev(1, NON_UTF8), fev(2, b"/tmp/" + XSS.encode())],
        reads=[fev(3, b"/tmp/s.sh", content_id=1, content_preview=SCRIPT,
                   content_size=len(SCRIPT))],
        write_count=2, read_count=1,
    )  # fmt: skip
    page = render_html([cmd], title="report " + XSS, generated_at=T0)
    assert page.isascii()
    # Exactly our two script elements and no other markup from the data.
    assert page.count("<script") == 2
    assert page.lower().count("</script") == 2
    tags = parse_tags(page)
    assert "img" not in {tag for tag, _ in tags}
    assert not [(tag, a) for tag, attrs in tags for a in attrs if a.startswith("on")]
    data = data_block(page)
    [c] = data["commands"]
    assert c["text"] == XSS
    assert c["cwd"] == "/tmp/" + XSS
    assert [w["p"] for w in c["w"]] == ["/srv/data/r\\xe9sultat-\\xff.csv", "/tmp/" + XSS]
    # A uint64 hash travels as a decimal string (JavaScript numbers are doubles).
    assert c["w"][0]["h"] == str(2**64 - 1)
    assert data["contents"][c["r"][0]["c"]]["text"] == SCRIPT.decode()
    assert data["title"] == "report " + XSS
    # The CSP pins our own script and stylesheet by hash.
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert csp is not None and "default-src 'none'" in csp.group(1)
    assert "unsafe-inline" not in csp.group(1)


def test_page_has_no_external_resources() -> None:
    page = render_html([view(1, writes=[fev(1, b"/a")], write_count=1)], generated_at=T0)
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:|//)", page, re.I)
    assert "@import" not in page and "url(http" not in page
    assert "fonts.googleapis" not in page


def test_stacking_rows_and_lanes() -> None:
    long = view(1, "sleep 600 &", end_time=T0 + timedelta(minutes=30))
    inside1 = view(2, start_time=T0 + timedelta(minutes=2), end_time=T0 + timedelta(minutes=3))
    inside2 = view(3, start_time=T0 + timedelta(minutes=2, seconds=30),
                   end_time=T0 + timedelta(minutes=4))  # fmt: skip
    after = view(4, start_time=T0 + timedelta(minutes=5), end_time=T0 + timedelta(minutes=6))
    other = view(5, session_uuid=SESSION_B, start_time=T0 + timedelta(minutes=2))
    orphan = view(6, session_uuid=None)
    data = data_block(render_html([long, inside1, inside2, after, other, orphan]))
    rows = {c["id"]: (c["lane"], c["row"]) for c in data["commands"]}
    assert rows == {1: (0, 0), 2: (0, 1), 3: (0, 2), 4: (0, 1), 5: (1, 0), 6: (2, 0)}
    sessions = data["sessions"]
    assert [s["id"] for s in sessions] == [
        base64.b64encode(SESSION_A).decode(), base64.b64encode(SESSION_B).decode(), None,
    ]  # fmt: skip
    assert [s["rows"] for s in sessions] == [3, 1, 1]
    assert [s["n"] for s in sessions] == [4, 1, 1]


def test_commands_per_day() -> None:
    commands = [view(1), view(2), view(3, start_time=T0 + timedelta(days=2))]
    assert commands_per_day(commands, tz=UTC) == [
        (date(2024, 3, 5), 2), (date(2024, 3, 6), 0), (date(2024, 3, 7), 1),
    ]  # fmt: skip
    assert commands_per_day([]) == []


def test_charts_drawn_from_given_stats() -> None:
    from shournal.data import (
        CommandModifications,
        DirectoryActivity,
        JournalStats,
        SessionCommands,
        WorkingDirCommands,
    )

    commands = [view(1, "make", writes=[fev(1, b"/p/a")], write_count=1)]
    page = render_html(commands, generated_at=T0)
    assert 'id="chart-days"' in page and "Statistics were not computed" in page
    stats = JournalStats(
        commands=1,
        most_modifications=[CommandModifications(1, "make <all>", 3)],
        sessions_most_commands=[SessionCommands(SESSION_A, 1, T0, T0)],
        busiest_working_dirs=[WorkingDirCommands("/elsewhere/<b>", 42)],
        busiest_directories=[DirectoryActivity(b"/p/\xff/", 2, 1)],
    )
    page = render_html(commands, stats=stats, generated_at=T0)
    for chart in ("modifications", "sessions", "cwds", "dirs", "days"):
        assert f'id="chart-{chart}"' in page
    assert "#1 make &lt;all&gt;" in page and "3 files" in page
    assert base64.b64encode(SESSION_A).decode() in page
    assert "/elsewhere/&lt;b&gt;" in page and "42 commands" in page
    assert "/p/\\xff/" in page and "2 written, 1 read" in page


def test_long_spans_are_drawn_per_week() -> None:
    far = view(2, start_time=T0 + timedelta(days=400), end_time=T0 + timedelta(days=400))
    page = render_html([view(1), far], generated_at=T0)
    chart = page[page.index('id="chart-days"') :]
    chart = chart[: chart.index("</figure>")]
    assert chart.count("<rect") == 58  # 401 days span 58 weeks (Tuesday to Sunday)
    assert "week 2024-03-04: 1 command" in chart


def test_write_html_streams_to_a_text_file(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    with open(out, "w", encoding="ascii") as fp:  # pure ASCII: any encoding works
        write_html([view(1, "echo \u00e9t\u00e9")], fp, title="t\u00eftle")
    page = out.read_text("ascii")
    assert "<title>t&#239;tle</title>" in page
    assert data_block(page)["commands"][0]["text"] == "echo \u00e9t\u00e9"


def test_empty_report() -> None:
    buf = io.StringIO()
    write_html([], buf)
    data = data_block(buf.getvalue())
    assert data["commands"] == [] and data["sessions"] == []


def test_report_takes_the_statistics_the_cli_computes(tmp_path: Path) -> None:
    """The JournalStats of shournal.store.stats (what `shournal query` computes for
    the commands it found) is what the report draws."""
    with Journal.open(f"sqlite:///{tmp_path / 'journal.sqlite'}", create=True) as store:
        store.add(rec("make", T0, 10, SESSION_A, writes=[wev(b"/p/a"), wev(b"/p/b")]))
        store.add(rec("ls", T0 + timedelta(seconds=30), 1, SESSION_B))
        commands = store.find()
        stats = store.stats(command_ids=[c.id for c in commands])
    page = render_html(commands, stats=stats, generated_at=T0)
    assert "#1 make" in page and "2 files" in page
    assert base64.b64encode(SESSION_B).decode() in page
    assert "/p/" in page and "2 written, 0 read" in page
