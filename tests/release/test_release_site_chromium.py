"""The offline site in headless Chromium over ``file://``: the index lists both releases and
their diff; a link leads to a release, then to its task page, where a header click sorts, the
filter box filters and a row's details open; the aggregate and loss pages render. Screenshots
go to tmp_path, or to docs/ with CBENCH_DOCS_SHOTS=1 (`make docs`): a test run changes no
tracked file."""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path

import pytest

from pipeline.config import ReportConfig, read_yaml
from pipeline.release.bundle import write_release
from pipeline.release.site import build_site, release_folders
from pipeline.report.grid.board import make_board
from pipeline.report.render.html import to_html
from tests.chromium import CHROMIUM, DevTools, click, open_page
from tests.release.workspace import cells_frame, write_workspace

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not on PATH (Debian: apt-get install "
                                                "chromium)"),
]
ROWS = "Array.from(document.querySelectorAll('#board tr.main')).filter(r => !r.closest('tbody')" \
       ".hidden).map(r => r.cells[1].textContent)"


def _workspace(path: Path, shift=None) -> Path:
    cells = cells_frame(shift)
    ws = write_workspace(path, cells)
    cfg = ReportConfig.model_validate(read_yaml(ROOT / "params.yaml")["report"]
                                      | {"columns": ["recall_at_1"]})
    board = make_board(cells, cfg)
    (ws / "reports" / "leaderboard.html").write_text(to_html(board), encoding="utf-8")
    return ws


@pytest.fixture
def site(tmp_path) -> Path:
    releases = tmp_path / "releases"
    write_release("v1", _workspace(tmp_path / "w1"), releases, "c1")
    write_release("v2", _workspace(tmp_path / "w2", {"dcl": 0.2}), releases, "c2")
    return build_site(release_folders([releases]), tmp_path / "site")


def _shot(chrome: DevTools, name: str, tmp_path: Path) -> None:
    folder = ROOT / "docs" if os.environ.get("CBENCH_DOCS_SHOTS") == "1" else tmp_path
    data = base64.b64decode(chrome.call("Page.captureScreenshot", format="png")["data"])
    (folder / name).write_bytes(data)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"


def _follow(chrome: DevTools, selector: str, ready: str) -> None:
    click(chrome, selector)
    chrome.wait_for(ready)


def test_walk_the_site(site, tmp_path):
    with tempfile.TemporaryDirectory() as profile:
        chrome = DevTools(profile)
        try:
            open_page(chrome, site, ready="document.title === 'contrastive-bench releases'")
            names = chrome.evaluate("Array.from(document.querySelectorAll('tbody tr td:first-child"
                                    "')).map(td => td.textContent)")
            assert names == ["v2", "v1"]  # newest first
            assert chrome.evaluate("document.body.textContent").count("v1 → v2: changes") == 1
            _shot(chrome, "site_index.png", tmp_path)

            _follow(chrome, "a[href='v2/index.html']", "document.title === 'Release v2'")
            _follow(chrome, "a[href^='task-']", "document.body && document.body.dataset.ready "
                                                "=== '1'")
            assert chrome.evaluate("location.href").endswith("/v2/task-laplace.html")
            order = chrome.evaluate(ROWS)
            assert order == ["dcl", "dcl", "weince", "weince", "infonce", "infonce"]  # dcl +0.2
            click(chrome, 'th[data-key="recall_at_1"] button')  # sorted desc: now ascending
            assert chrome.evaluate(ROWS) == order[::-1]
            chrome.evaluate("(() => { const f = document.getElementById('filter');"
                            " f.value = 'weince'; f.dispatchEvent(new Event('input')); })()")
            assert chrome.evaluate(ROWS) == ["weince", "weince"]
            hidden = "document.querySelector('#board tbody:not([hidden]) tr.detail').hidden"
            assert chrome.evaluate(hidden) is True
            click(chrome, "#board tbody:not([hidden]) button.more")
            assert chrome.evaluate(hidden) is False  # the row's details, on demand
            _shot(chrome, "site_task.png", tmp_path)

            _follow(chrome, "nav a", "document.title === 'Release v2'")  # back to the release
            _follow(chrome, "a[href='aggregate.html']", "document.title === 'v2: all losses'")
            assert chrome.evaluate("document.querySelectorAll('figure svg').length") == 1
            assert chrome.evaluate("document.querySelector('table').rows.length") == 4
            # navigate after the reply: history.back() inside the evaluation can close the
            # context before its reply comes ("Inspected target navigated or closed")
            chrome.evaluate("setTimeout(() => history.back(), 0)")
            chrome.wait_for("document.title === 'Release v2'")
            _follow(chrome, "a[href='loss-dcl.html']", "document.title === 'v2: loss dcl'")
            assert "6 cells; training time" in chrome.evaluate("document.body.textContent")
        finally:
            chrome.close()
