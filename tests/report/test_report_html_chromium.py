"""The HTML leaderboard in headless Chromium: the default grid's page fits 1366 px without
horizontal scrolling, has one row per setting sorted by the primary metric with the best value
highlighted; the URL hash sorts on load, a real header click (DevTools protocol over
--remote-debugging-pipe, stdlib only) reorders the rows, a row's details open on demand, and a
screenshot is saved (reports/leaderboard_screenshot.png when run from the repo root)."""

from __future__ import annotations

import base64
import re
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from pipeline.config import load
from pipeline.report.board import make_board
from pipeline.report.html import to_html
from tests.chromium import CHROMIUM, FLAGS, DevTools, click, open_page
from tests.report.synthetic import synthetic_cells

ROOT = Path(__file__).resolve().parents[2]

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


ORDER = ("Array.from(document.querySelectorAll('#board tr.main')).map(r => r.cells[1].textContent)")


def _screenshot_path(tmp_path: Path) -> Path:
    if Path.cwd().resolve() == ROOT:
        (ROOT / "reports").mkdir(exist_ok=True)
        return ROOT / "reports" / "leaderboard_screenshot.png"
    return tmp_path / "leaderboard_screenshot.png"


def test_click_sorts_and_opens_details(page):
    path, table = page
    with tempfile.TemporaryDirectory() as profile:
        chrome = DevTools(profile)
        try:
            open_page(chrome, path)
            assert chrome.evaluate(ORDER) == list(table.loss)
            click(chrome, 'th[data-key="recall_at_1"] button')  # sorted desc already: asc
            assert chrome.evaluate(ORDER) == ["gamma", "eps", "alpha", "delta", "beta"]
            assert chrome.evaluate("location.hash") == "#sort=recall_at_1&dir=asc"
            click(chrome, 'th[data-key="recall_at_1"] button')  # second click: descending
            assert chrome.evaluate(ORDER) == ["beta", "delta", "alpha", "eps", "gamma"]
            hidden = "document.querySelector('#board tbody').rows[1].hidden"
            assert chrome.evaluate(hidden) is True
            click(chrome, "#board tbody button.more")
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
            open_page(chrome, path)  # --window-size=1366,900
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
