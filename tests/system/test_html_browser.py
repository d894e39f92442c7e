"""The HTML report: the real page in a headless Chromium driven over the
Chrome DevTools Protocol (the Python side is tests/unit/test_html_report.py).

The browser tests need Debian's ``chromium`` (scripts/apt-deps.sh installs
it) and ``websocket-client``.  Without them they are skipped, except under CI
(env CI set), where a missing browser is a failure.  A screenshot and the
report itself are kept in $SHOURNAL_TEST_ARTIFACTS (default tests/artifacts).
"""

from __future__ import annotations

import base64
import json
import math
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from report_samples import NON_UTF8, SCRIPT, SESSION_A, SESSION_B, T0, XSS, fev, rec, view, wev

from shournal.data import FileEventView
from shournal.journal import Journal
from shournal.report.html import (
    render_html,
    write_html,
)

SESSION_C = b"\xcc" * 16


# -- the real page in headless Chromium --------------------------------------------


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import websocket  # noqa: F401
    except ImportError:
        path = None
    if path is None:
        reason = "chromium (apt) and websocket-client (PyPI) are needed for the browser test"
        if os.environ.get("CI"):
            pytest.fail(reason + " and CI is set")
        pytest.skip(reason)
    return path


class Page:
    """A minimal CDP client for one page target."""

    def __init__(self, ws_url: str) -> None:
        import websocket

        # Chromium refuses websocket clients that send an Origin header.
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _recv(self) -> dict[str, Any]:
        msg = json.loads(self.ws.recv())
        if "method" in msg:
            self.events.append(msg)
        return msg

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = self._recv()
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def wait_event(self, method: str) -> dict[str, Any]:
        seen = 0
        while True:
            for ev in self.events[seen:]:
                if ev["method"] == method:
                    return ev
            seen = len(self.events)
            self._recv()

    def js(self, expression: str) -> Any:
        res = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def frame(self) -> None:
        """Let pending requestAnimationFrame work run."""
        self.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")

    def mouse(self, kind: str, x: float, y: float, **kw: Any) -> None:
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, **kw)

    def click(self, x: float, y: float) -> None:
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, button="left", buttons=1, clickCount=1)
        self.mouse("mouseReleased", x, y, button="left", buttons=0, clickCount=1)

    def center(self, selector: str) -> tuple[float, float]:
        """Viewport coordinates of the element's centre, scrolled into view
        first as a user would."""
        box = self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'nearest', inline: 'nearest'});"
            " const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        return box[0], box[1]

    def problems(self) -> list[str]:
        """Uncaught exceptions, console.error/console.warn calls, and the
        browser's own errors (failed loads, CSP violations)."""
        out = []
        for ev in self.events:
            p = ev["params"]
            if ev["method"] == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails']}")
            elif ev["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "warning"):
                out.append(f"console.{p['type']}: {p['args']}")
            elif ev["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(f"log: {p['entry']}")
        return out

    def requests(self) -> list[str]:
        return [
            ev["params"]["request"]["url"]
            for ev in self.events
            if ev["method"] == "Network.requestWillBeSent"
        ]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Page]:
    exe = _chromium()
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    proc = subprocess.Popen(
        [
            exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-sync",
            "--disable-background-networking", "--disable-component-update",
            "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
            f"--user-data-dir={profile}", "--window-size=1400,1000", "about:blank",
        ],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "chromium.log", "wb"),  # noqa: SIM115
    )  # fmt: skip
    page = None
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (tmp_path / "chromium.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"chromium did not start (exit {proc.poll()}): {log}")
            time.sleep(0.05)
        port = int(port_file.read_text().split("\n")[0])
        # No proxy for the local DevTools endpoint, whatever the environment says.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://127.0.0.1:{port}/json/list", timeout=30) as resp:
            targets = json.load(resp)
        [target] = [t for t in targets if t["type"] == "page"]
        page = Page(target["webSocketDebuggerUrl"])
        for domain in ("Runtime", "Log", "Network", "Page"):
            page.call(f"{domain}.enable")
        page.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip
        yield page
    finally:
        if page is not None:
            page.ws.close()
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def artifacts_dir() -> Path:
    default = Path(__file__).resolve().parents[1] / "artifacts"
    path = Path(os.environ.get("SHOURNAL_TEST_ARTIFACTS") or default)
    path.mkdir(parents=True, exist_ok=True)
    return path


class StatEvent(FileEventView):
    """A FileEventView carrying the optional --stat status."""

    __slots__ = ("stat",)

    def __init__(self, *args: Any, stat: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stat = stat


def build_journal(store: Journal) -> None:
    # Session A: a background job spanning two later commands (stacked rows).
    store.add(rec("sleep 300 & wait", T0, 300, SESSION_A))
    store.add(rec("make -j4", T0 + timedelta(seconds=20), 40, SESSION_A,
                          writes=[wev(b"/home/u/project/build/app"),
                                  wev(b"/home/u/project/build/app.o", 99)],
                          reads=[wev(b"/home/u/project/build.sh", len(SCRIPT), SCRIPT),
                                 wev(b"/home/u/project/main.c", 5000)]))  # fmt: skip
    store.add(rec("./test.sh", T0 + timedelta(seconds=30), 100, SESSION_A,
                          return_value=1))  # fmt: skip
    # Session B: plain sequential commands.
    for i in range(4):
        store.add(rec(f"cp in{i} out{i}", T0 + timedelta(seconds=60 * i + 5), 3,
                              SESSION_B, working_dir="/data",
                              writes=[wev(f"/data/out{i}".encode())]))  # fmt: skip
    # Session C: hostile text and a path that is not UTF-8.
    store.add(rec(XSS, T0 + timedelta(seconds=90), 12, SESSION_C,
                          working_dir="/tmp/" + XSS, hostname='other"host',
                          writes=[wev(NON_UTF8), wev(b"/tmp/" + XSS.encode())]))  # fmt: skip
    # No session (shournal run from cron); its end never reported.
    store.add(rec("backup.sh", T0 + timedelta(seconds=200), 30, None,
                          return_value=2**31 - 1, incomplete=True))  # fmt: skip


def test_report_in_chromium(browser: Page, tmp_path: Path) -> None:
    from shournal.report.html import TOP_N

    with Journal.open(f"sqlite:///{tmp_path / 'journal.sqlite'}", create=True) as store:
        build_journal(store)
        commands = store.find()
        stats = store.stats(command_ids=[c.id for c in commands], top=TOP_N)
    assert len(commands) == 9
    # One written file carries a --stat status, as `query --stat` would attach it.
    make = next(c for c in commands if c.text == "make -j4")
    first = make.writes[0]
    make.writes[0] = StatEvent(**{name: getattr(first, name) for name in FileEventView.__slots__},
                               stat="M")  # fmt: skip
    report = tmp_path / "report.html"
    with open(report, "w") as fp:
        write_html(commands, fp, stats=stats, title="test report", generated_at=T0)
    shutil.copy(report, artifacts_dir() / "report.html")

    browser.call("Page.navigate", url=report.as_uri())
    browser.wait_event("Page.loadEventFired")
    assert browser.js("document.body.dataset.ready") == "1", browser.problems()
    browser.frame()

    # Offline: nothing but the file itself was loaded.
    assert all(u.startswith(("file:", "data:")) for u in browser.requests()), browser.requests()

    # One lane per session (A, B, C and "no session"); parallel commands stacked.
    assert browser.js("document.querySelectorAll('#timeline rect.lane-bg').length") == 4
    lanes = browser.js(
        "[...document.querySelectorAll('#timeline rect.cmd')].map(r => "
        "[+r.dataset.cmd, +r.dataset.lane, +r.dataset.row])"
    )
    by_text = {c.text: c.id for c in commands}
    placed = {cid: (lane, row) for cid, lane, row in lanes}
    assert placed[by_text["sleep 300 & wait"]] == (0, 0)
    assert placed[by_text["make -j4"]] == (0, 1)
    assert placed[by_text["./test.sh"]] == (0, 2)
    assert {placed[by_text[f"cp in{i} out{i}"]] for i in range(4)} == {(1, 0)}
    assert placed[by_text[XSS]] == (2, 0) and placed[by_text["backup.sh"]] == (3, 0)
    # Lanes do not overlap on screen, and each command is drawn inside its lane.
    geometry = browser.js(
        "(() => { const g = e => { const r = e.getBoundingClientRect();"
        " return [r.top, r.bottom]; };"
        " return { lanes: [...document.querySelectorAll('#timeline rect.lane-bg')].map(g),"
        " cmds: [...document.querySelectorAll('#timeline rect.cmd')].map(e => "
        "[+e.dataset.lane, ...g(e)]) }; })()"
    )
    tops = [top for top, _ in geometry["lanes"]]
    assert tops == sorted(tops)
    for (_, bottom), (next_top, _) in zip(geometry["lanes"], geometry["lanes"][1:], strict=False):
        assert bottom <= next_top + 0.5
    for lane, top, bottom in geometry["cmds"]:
        lane_top, lane_bottom = geometry["lanes"][lane]
        assert lane_top <= top and bottom <= lane_bottom

    # A real click on the "make" rectangle opens its details.
    selector = f'#timeline rect.cmd[data-cmd="{make.id}"]'
    x, y = browser.center(selector)
    hit = browser.js(f"document.elementFromPoint({x}, {y}).getAttribute('data-cmd')")
    assert hit == str(make.id)
    browser.click(x, y)
    details = browser.js("document.getElementById('details').innerText")
    assert "Command " + str(make.id) in details
    assert browser.js("document.querySelector('#details [data-field=cwd]').textContent") == (
        "/home/u/project"
    )
    assert "/home/u/project/build/app.o" in details
    assert "/home/u/project/main.c" in details
    assert "modified" in details  # the --stat status
    assert str(0xFEDCBA9876543210) in details  # the full 64-bit hash
    assert "echo building" in details  # archived script content
    assert browser.js(f"document.querySelector({json.dumps(selector)}).classList.contains('sel')")
    browser.call("Page.captureScreenshot", format="png")  # warm-up: fonts settled
    _screenshot(browser, artifacts_dir() / "html-report-details.png")

    # The hostile command: shown as text, never executed.
    hostile = f'#timeline rect.cmd[data-cmd="{by_text[XSS]}"]'
    browser.click(*browser.center(hostile))
    assert browser.js("document.querySelector('#details [data-field=text]').textContent") == XSS
    assert browser.js("document.querySelector('#details [data-field=cwd]').textContent") == (
        "/tmp/" + XSS
    )
    details = browser.js("document.getElementById('details').innerText")
    assert "/srv/data/r\\xe9sultat-\\xff.csv" in details
    assert 'other"host' in details
    assert browser.js("typeof window.__xss") == "undefined"
    assert browser.js("document.querySelectorAll('img').length") == 0
    assert browser.js("document.scripts.length") == 2

    # The list opens details as well.
    cp0 = by_text["cp in0 out0"]
    browser.click(*browser.center(f'#cmdlist tr[data-cmd="{cp0}"]'))
    assert browser.js("document.querySelector('#details [data-field=cwd]').textContent") == "/data"
    assert browser.js("document.querySelector('#details [data-field=rv]').textContent") == "0"
    browser.click(*browser.center(f'#cmdlist tr[data-cmd="{by_text["backup.sh"]}"]'))
    assert browser.js("document.querySelector('#details [data-field=rv]').textContent") == (
        "unknown (incomplete: no prompt reported its end: exec, exit or hangup)"
    )
    browser.click(*browser.center(f'#cmdlist tr[data-cmd="{cp0}"]'))

    # Wheel zooms around the pointer, dragging pans.
    def visible() -> tuple[float, float, float, float]:
        """Time range shown and the plot's pixel range (left, right)."""
        return tuple(browser.js(
            "(() => { const s = document.querySelector('#timeline svg');"
            " const c = s.getBoundingClientRect();"
            " return [+s.dataset.t0, +s.dataset.t1, c.left + +s.dataset.plotX, c.right]; })()"
        ))  # fmt: skip

    def time_at(x: float) -> float:
        t0, t1, left, right = visible()
        return t0 + (x - left) / (right - left) * (t1 - t0)

    t0, t1, left, right = visible()
    x, y = browser.center(selector)
    at = time_at(x)
    browser.mouse("mouseWheel", x, y, deltaX=0, deltaY=-600)
    browser.frame()
    z0, z1, _, _ = visible()
    assert (z1 - z0) == pytest.approx((t1 - t0) * math.exp(-0.9), rel=1e-6)
    # The time under the pointer stays (events carry whole pixels).
    assert time_at(x) == pytest.approx(at, abs=(t1 - t0) / (right - left))
    ms_per_px = (z1 - z0) / (right - left)
    browser.mouse("mouseMoved", x, y)
    browser.mouse("mousePressed", x, y, button="left", buttons=1, clickCount=1)
    browser.mouse("mouseMoved", x + 40, y, buttons=1)
    browser.mouse("mouseMoved", x + 120, y, buttons=1)
    browser.mouse("mouseReleased", x + 120, y, button="left", buttons=0, clickCount=1)
    browser.frame()
    p0, p1, _, _ = visible()
    assert p0 == pytest.approx(z0 - 120 * ms_per_px, abs=1)
    assert p1 - p0 == pytest.approx(z1 - z0, abs=1)
    # A drag is not a click: the details still show the command picked from the list.
    assert browser.js("document.querySelector('#details [data-field=cwd]').textContent") == "/data"
    browser.click(*browser.center("#zoom-fit"))
    browser.frame()
    assert visible()[:2] == pytest.approx((t0, t1), abs=1)

    # Statistics charts are there.
    charts = browser.js("[...document.querySelectorAll('#stats figure.chart svg')].length")
    assert charts == 5
    _screenshot(browser, artifacts_dir() / "html-report-full.png", full=True)
    assert browser.problems() == []


def _screenshot(page: Page, path: Path, full: bool = False) -> None:
    params: dict[str, Any] = {"format": "png"}
    if full:
        size = page.call("Page.getLayoutMetrics")["cssContentSize"]
        params["captureBeyondViewport"] = True
        params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                          "scale": 1}  # fmt: skip
    shot = page.call("Page.captureScreenshot", **params)
    path.write_bytes(base64.b64decode(shot["data"]))
    assert path.stat().st_size > 10_000


def test_filter_dims_timeline(browser: Page, tmp_path: Path) -> None:
    commands = [
        view(i, f"cmd{i}", session_uuid=bytes([i % 3]) * 16,
             writes=[fev(i, f"/p/{'match' if i % 2 else 'other'}/{i}".encode())], write_count=1)
        for i in range(1, 9)
    ]  # fmt: skip
    report = tmp_path / "r.html"
    report.write_text(render_html(commands, generated_at=T0))
    browser.call("Page.navigate", url=report.as_uri())
    browser.wait_event("Page.loadEventFired")
    assert browser.js("document.querySelectorAll('#timeline rect.lane-bg').length") == 3
    browser.click(*browser.center("#filter"))
    browser.call("Input.insertText", text="/match/")
    visible = browser.js("[...document.querySelectorAll('#cmdlist tbody tr')]"
                         ".filter(r => !r.hidden).map(r => +r.dataset.cmd)")  # fmt: skip
    assert visible == [1, 3, 5, 7]
    dimmed = browser.js("[...document.querySelectorAll('#timeline rect.cmd.dim')]"
                        ".map(r => +r.dataset.cmd).sort()")  # fmt: skip
    assert dimmed == [2, 4, 6, 8]
    assert browser.problems() == []


def test_thousand_commands_in_chromium(browser: Page, tmp_path: Path) -> None:
    commands = [
        view(
            i,
            f"make target{i}",
            session_uuid=bytes([i % 20]) * 16,
            start_time=T0 + timedelta(seconds=40 * i),
            end_time=T0 + timedelta(seconds=40 * i + 30 + (i % 7) * 20),
            return_value=i % 3,
            writes=[fev(i * 100 + j, f"/p/{i % 13}/obj{j}.o".encode()) for j in range(10)],
            reads=[fev(i * 100 + 50 + j, f"/p/{i % 13}/src{j}.c".encode()) for j in range(10)],
            write_count=10,
            read_count=12,
        )
        for i in range(1, 1001)
    ]
    report = tmp_path / "big.html"
    with open(report, "w") as fp:
        write_html(commands, fp, generated_at=T0)
    browser.call("Page.navigate", url=report.as_uri())
    browser.wait_event("Page.loadEventFired")
    assert browser.js("document.body.dataset.ready") == "1"
    assert browser.js("document.querySelectorAll('#timeline rect.lane-bg').length") == 20
    assert browser.js("document.querySelectorAll('#timeline rect.cmd').length") == 1000
    assert browser.js("document.querySelectorAll('#cmdlist tbody tr').length") == 1000
    browser.click(*browser.center('#cmdlist tr[data-cmd="500"]'))
    details = browser.js("document.getElementById('details').innerText")
    assert "make target500" in details and "/p/6/obj9.o" in details
    assert "and 2 more files" in details  # read_count 12, only 10 loaded
    assert browser.problems() == []


def test_csp_blocks_injected_code(browser: Page, tmp_path: Path) -> None:
    """Defence in depth: even markup that slipped past the escaping could not
    run, because the policy admits only our own script by its hash."""
    page = render_html([view(1, "true")], generated_at=T0)
    injected = page.replace(
        "<body>\n",
        '<body>\n<img src="x" onerror="window.__xss=1">'
        "<script>window.__xss=2</script>"
        '<script src="data:text/javascript,window.__xss=3"></script>\n',
        1,
    )
    report = tmp_path / "injected.html"
    report.write_text(injected)
    browser.call("Page.navigate", url=report.as_uri())
    browser.wait_event("Page.loadEventFired")
    assert browser.js("document.body.dataset.ready") == "1"  # our script still runs
    assert browser.js("typeof window.__xss") == "undefined"
    violations = [p for p in browser.problems() if "Content Security Policy" in p]
    assert len(violations) >= 2, browser.problems()


def test_browser_missing_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        _chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        _chromium()


def test_lanes_labels_notes_and_tags_in_chromium(browser: Page, tmp_path: Path) -> None:
    """Each session's lane says where and when its terminal started (host,
    first command's start and directory, from the whole journal through
    `shournal query -o`); a command's note and tags are shown, as text."""
    from typer.testing import CliRunner

    from shournal.cli import app
    from shournal.journal import Journal

    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    with Journal.open(url, create=True) as j:
        j.add(rec("cd data", T0, 1, SESSION_A, hostname="hpc-login2",
                              working_dir="/scratch/u/run7"))  # fmt: skip
        later = j.add(rec("make fig3", T0 + timedelta(hours=2), 3, SESSION_A,
                          hostname="hpc-login2"))  # fmt: skip
        j.add(rec("ls", T0 + timedelta(hours=3), 1, SESSION_B, hostname="laptop",
                              working_dir="/home/u/notes"))  # fmt: skip
        j.set_note(later, XSS + "\nthe command behind figure 3")
        j.add_tags(later, ["fig3", "paper2"])
    report = tmp_path / "report.html"
    res = CliRunner(env={"SHOURNAL_DB_URL": url, "XDG_CONFIG_HOME": str(tmp_path / "c")}).invoke(
        app, ["query", "--since", "2024-03-05T10:00", "--output-format", "html", "-o", str(report)]
    )
    assert res.exit_code == 0, res.stderr
    shutil.copy(report, artifacts_dir() / "report-lanes.html")
    browser.call("Page.navigate", url=report.as_uri())
    browser.wait_event("Page.loadEventFired")
    assert browser.js("document.body.dataset.ready") == "1"
    hosts = browser.js("[...document.querySelectorAll('#timeline [data-field=lane-host]')]"
                       ".map(t => t.textContent)")  # fmt: skip
    cwds = browser.js("[...document.querySelectorAll('#timeline [data-field=lane-cwd]')]"
                      ".map(t => t.textContent)")  # fmt: skip
    when = browser.js(
        "(ms => { const d = new Date(ms), p = n => String(n).padStart(2, '0');"
        " return p(d.getMonth() + 1) + '-' + p(d.getDate()) + ' ' + p(d.getHours()) + ':' +"
        f" p(d.getMinutes()); }})({T0.timestamp() * 1000})"
    )
    # session A's terminal started before the report's commands: its first command's
    assert hosts[0] == f"hpc-login2 {when}" and cwds[0] == "/scratch/u/run7  1 cmd"
    assert hosts[1].startswith("laptop ") and cwds[1] == "/home/u/notes  1 cmd"
    x, y = browser.center(f'#cmdlist tr[data-cmd="{later}"]')
    assert browser.js(f"document.querySelector('#cmdlist tr[data-cmd=\"{later}\"] .tags')"
                      ".textContent") == "#fig3 #paper2 "  # fmt: skip
    browser.click(x, y)
    assert browser.js("document.querySelector('#details [data-field=note]').textContent") == (
        XSS + "\nthe command behind figure 3"
    )
    assert browser.js("document.querySelector('#details [data-field=tags]').textContent") == (
        "fig3 paper2"
    )
    assert browser.js("window.__xss === undefined")
    assert browser.problems() == []
    assert all(u.startswith(("file:", "data:")) for u in browser.requests()), browser.requests()
