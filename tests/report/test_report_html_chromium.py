"""The HTML leaderboard in headless Chromium: the default grid's page fits 1366 px without
horizontal scrolling, has one row per setting sorted by the primary metric with the best value
highlighted; the URL hash sorts on load, a real header click (DevTools protocol over
--remote-debugging-pipe, stdlib only) reorders the rows, a row's details open on demand, and a
screenshot is saved (reports/leaderboard_screenshot.png when run from the repo root)."""

from __future__ import annotations

import base64
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from pipeline.config import load
from pipeline.report.board import make_board
from pipeline.report.html import to_html
from tests.report.synthetic import synthetic_cells

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1366,900"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not on PATH (Debian: apt-get install "
                                                "chromium)"),
]


@pytest.fixture
def page(tmp_path, report_cfg) -> tuple[Path, pd.DataFrame]:
    """Five variants whose recall order differs from their (alphabetical) order."""
    recall = {"alpha": 0.30, "beta": 0.55, "gamma": 0.10, "delta": 0.42, "eps": 0.20}
    board = pd.DataFrame([{"loss": v, "seed": s, "cell_id": f"{v}{s}", "status": "ok",
                           "recall_at_1": r + 0.01 * s} for v, r in recall.items() for s in (0, 1)])
    b = make_board(board, report_cfg(columns=["recall_at_1"]))
    path = tmp_path / "leaderboard.html"
    path.write_text(to_html(b), encoding="utf-8")
    return path, b.table


@pytest.fixture
def default_page(tmp_path) -> tuple[Path, pd.DataFrame]:
    """The default grid's leaderboard (36 settings, every headline column) with a figure."""
    params = load(ROOT / "params.yaml")
    b = make_board(synthetic_cells(params), params.report, params.data.name)
    png = (ROOT / "docs" / "norm_histograms.png").read_bytes()
    path = tmp_path / "leaderboard.html"
    path.write_text(to_html(b, [("embedding norms", png)]), encoding="utf-8")
    return path, b.table


def _body_order(dom: str) -> list[str]:
    return re.findall(r'<tr class="main"><td[^>]*>[^<]*</td><td[^>]*>([^<]*)</td>', dom)


def _run(args: list[str], profile: str, timeout: float = 60) -> str:
    proc = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_dump_dom_renders_and_hash_sorts(page, tmp_path):
    path, table = page
    url = path.as_uri()
    dom = _run(["--dump-dom", url], str(tmp_path / "p1"))
    assert 'data-ready="1"' in dom  # the script ran
    assert _body_order(dom) == list(table.loss)  # all rows, best recall first
    assert list(table.loss) == ["beta", "delta", "alpha", "eps", "gamma"]
    dom = _run(["--dump-dom", url + "#sort=recall_at_1&dir=asc"], str(tmp_path / "p2"))
    assert _body_order(dom) == ["gamma", "eps", "alpha", "delta", "beta"]
    assert 'aria-sort="ascending"' in dom
    dom = _run(["--dump-dom", url + "#filter=ta"], str(tmp_path / "p3"))
    assert "2 of 5 rows" in dom  # beta, delta


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe (fds 3 and 4:
    NUL-terminated JSON messages), enough to open a page, click and take a screenshot."""

    def __init__(self, profile: str):
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        # bash (dash takes one-digit fds only) moves the pipe ends to fds 3 and 4 after
        # subprocess has closed the other descriptors.
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', CHROMIUM,
             *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            pass_fds=(to_chrome_r, from_chrome_w), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf, self._id, self.session = b"", 0, None

    def call(self, method: str, timeout: float = 30, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" not in self._buf:
                if not select.select([self._r], [], [], max(deadline - time.monotonic(), 0))[0]:
                    raise TimeoutError(f"no answer from chromium to {method}")
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe during {method}")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
        raise TimeoutError(method)

    def evaluate(self, expression: str):
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(expression)
            time.sleep(0.05)

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._w)
        os.close(self._r)


ORDER = ("Array.from(document.querySelectorAll('#board tr.main')).map(r => r.cells[1].textContent)")


def _click(chrome: DevTools, selector: str) -> None:
    box = chrome.evaluate(f"(() => {{ const r = document.querySelector({selector!r})"
                          ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2];"
                          " })()")
    for kind in ("mousePressed", "mouseReleased"):
        chrome.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left",
                    clickCount=1)


def _screenshot_path(tmp_path: Path) -> Path:
    if Path.cwd().resolve() == ROOT:
        (ROOT / "reports").mkdir(exist_ok=True)
        return ROOT / "reports" / "leaderboard_screenshot.png"
    return tmp_path / "leaderboard_screenshot.png"


def _open(chrome: DevTools, path: Path) -> None:
    target = chrome.call("Target.createTarget", url=path.as_uri())["targetId"]
    chrome.session = chrome.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
    chrome.wait_for("document.body && document.body.dataset.ready === '1'")


def test_click_sorts_and_opens_details(page):
    path, table = page
    with tempfile.TemporaryDirectory() as profile:
        chrome = DevTools(profile)
        try:
            _open(chrome, path)
            assert chrome.evaluate(ORDER) == list(table.loss)
            _click(chrome, 'th[data-key="recall_at_1"] button')  # sorted desc already: asc
            assert chrome.evaluate(ORDER) == ["gamma", "eps", "alpha", "delta", "beta"]
            assert chrome.evaluate("location.hash") == "#sort=recall_at_1&dir=asc"
            _click(chrome, 'th[data-key="recall_at_1"] button')  # second click: descending
            assert chrome.evaluate(ORDER) == ["beta", "delta", "alpha", "eps", "gamma"]
            hidden = "document.querySelector('#board tbody').rows[1].hidden"
            assert chrome.evaluate(hidden) is True
            _click(chrome, "#board tbody button.more")
            assert chrome.evaluate(hidden) is False  # the first row's details, on demand
            assert "cell_ids" in chrome.evaluate(
                "document.querySelector('#board tbody').rows[1].textContent")
        finally:
            chrome.close()


def test_default_grid_fits_1366_and_highlights_the_best(default_page, tmp_path):
    path, table = default_page
    with tempfile.TemporaryDirectory() as profile:
        chrome = DevTools(profile)
        try:
            _open(chrome, path)  # --window-size=1366,900
            width = chrome.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert width[1] == 1366 and width[0] <= width[1], width  # no horizontal scroll
            assert chrome.evaluate("document.querySelectorAll('#board tr.main').length") \
                == len(table) == 36
            best = chrome.evaluate(
                "(() => { const c = document.querySelector('td.best'); const i = c.cellIndex;"
                " const col = document.querySelector('#board thead tr').cells[i]"
                ".getAttribute('data-key'); return [col, c.getAttribute('data-v'),"
                " getComputedStyle(c).backgroundColor, getComputedStyle(c).fontWeight]; })()")
            assert best[0] == "recall_at_1"
            assert float(best[1]) == pytest.approx(table.recall_at_1_mean.max())
            assert best[2] not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)") and int(best[3]) >= 700
            first = chrome.evaluate("document.querySelector('#board tr.main').cells[0].textContent")
            assert first.startswith("1")  # sorted by the primary metric, best first
            assert chrome.evaluate("document.images.length") == 1
            assert chrome.evaluate("document.images[0].naturalWidth") > 100  # the figure loads
            shot = chrome.call("Page.captureScreenshot", format="png")["data"]
        finally:
            chrome.close()
    out = _screenshot_path(tmp_path)
    out.write_bytes(base64.b64decode(shot))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 2000
