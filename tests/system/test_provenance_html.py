"""``shournal export``: rules from journals written by the real store writer
(no root, no shell); the Makefile and Snakefile are run by the real GNU
make and Snakemake in a copy that holds only the leaf inputs."""

from __future__ import annotations

from pathlib import Path

from fixtures_lineage import J
from test_html_browser import Page, browser  # noqa: F401  (the fixture)

from shournal.provenance.graph import DiskTarget


def test_html_lineage_in_chromium(j: J, tmp_path: Path, browser: Page) -> None:  # noqa: F811
    """The page works offline under its CSP: a click on a command shows it."""
    from shournal.provenance.render import render_html

    raw, mid = b"<script>alert(1)</script>\n" * 4, b"m" * 50
    j.cmd("gen </script> raw", 5, writes=[j.v("raw", raw, 5)])
    c_mid = j.cmd("sort raw > mid", 10, reads=[j.v("raw", raw, 5)], writes=[j.v("mid", mid, 10)])
    target = j.disk("mid", mid, 10)
    page = tmp_path / "lineage.html"
    page.write_text(render_html(j.lineage(DiskTarget(str(target)))))
    assert page.read_text().isascii() and "<script>alert" not in page.read_text()
    browser.call("Page.navigate", url=page.as_uri())
    browser.wait_event("Page.loadEventFired")
    assert browser.js("document.querySelectorAll('#graph .node').length") == 4
    x, y = browser.center(f'#graph .node.cmd[data-id="{c_mid}"]')
    browser.click(x, y)
    assert browser.js("document.querySelector('#details pre').textContent") == "sort raw > mid"
    x, y = browser.center('#graph .node.file.target')
    browser.click(x, y)
    assert browser.js("document.querySelector('#details pre').textContent") == str(target)
    assert browser.problems() == []
    assert all(u.startswith(("file:", "data:")) for u in browser.requests()), browser.requests()


def test_html_report_shows_the_lineage_of_a_selected_file(
    j: J, tmp_path: Path, browser: Page  # noqa: F811
) -> None:
    """In the query report: a click on a file's "lineage" shows the
    commands of the report that made that version, newest first, marks
    them in the timeline and the list, and links back to each command."""
    from fixtures_lineage import _two_chains

    from shournal.journal import Journal
    from shournal.report.html import write_html

    target, ids = _two_chains(j)
    # a later rewrite of mid with other content: not in out's lineage
    j.cmd("echo x > mid", 40, writes=[j.v("mid", b"x\n", 40)])
    report = tmp_path / "report.html"
    with open(report, "w") as fp:
        write_html(Journal(j.store).find(), fp, title="lineage")
    browser.call("Page.navigate", url=report.as_uri())
    browser.wait_event("Page.loadEventFired")
    x, y = browser.center(f'#cmdlist tr[data-cmd="{ids["fin"]}"]')
    browser.click(x, y)
    # the version of out that `tac` wrote
    x, y = browser.center('#details .files[data-kind="written"] button.lin-btn')
    browser.click(x, y)
    tree = "#details ul.lineage-tree"
    shown = browser.js(f"[...document.querySelectorAll('{tree} li.lin-cmd')]"
                       ".map(e => +e.dataset.cmd)")  # fmt: skip
    assert shown == [ids["fin"], ids["sort"], ids["gen"]]
    leaves = browser.js(f"[...document.querySelectorAll('{tree} li.lin-file.leaf > .path')]"
                        ".map(e => e.textContent)")  # fmt: skip
    assert leaves == [str(j.root / "seed")]
    marked = browser.js("[...document.querySelectorAll('#cmdlist tr.lin')]"
                        ".map(e => +e.dataset.cmd)")  # fmt: skip
    assert sorted(marked) == sorted(shown)
    assert browser.js("document.querySelectorAll('#timeline rect.cmd.lin').length") == 3
    # the read version of mid in tac's details: sort made it, not the later echo
    browser.click(*browser.center(f'#cmdlist tr[data-cmd="{ids["fin"]}"]'))
    assert browser.js("document.querySelectorAll('#cmdlist tr.lin').length") == 0
    browser.click(*browser.center('#details .files[data-kind="read"] button.lin-btn'))
    assert browser.js(f"[...document.querySelectorAll('{tree} li.lin-cmd')]"
                      ".map(e => +e.dataset.cmd)") == [ids["sort"], ids["gen"]]  # fmt: skip
    # a command of the lineage links to its details
    browser.click(*browser.center(f'{tree} li.lin-cmd[data-cmd="{ids["gen"]}"] > a'))
    assert browser.js("document.querySelector('#details [data-field=text]').textContent") \
        == "gen > raw"  # fmt: skip
    assert browser.problems() == []
