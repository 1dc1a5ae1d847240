"""The HTML leaderboard in headless Chromium: the default grid's page fits 1366 px without
horizontal scrolling, has one row per setting sorted by the primary metric with the best value
highlighted; the URL hash sorts on load, a real header click (DevTools protocol over
--remote-debugging-pipe, stdlib only) reorders the rows, a row's details open on demand, and a
screenshot is saved (reports/leaderboard_screenshot.png when run from the repo root). A board of
2000 settings shows 100 rows a page: sort and filter apply to every row before the page is cut
(checked against the same orders computed here), a link's hash opens its page, and a row's
details are built from one JSON block when opened (its cell ids: those of the setting's cells)."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from pipeline.config import load
from pipeline.report.grid.board import make_board
from pipeline.report.render.html import to_html
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


LOSSES = ("infonce", "dcl", "weince", "nt_xent")


def large_cells(seeds: int = 5) -> pd.DataFrame:
    """2000 settings (4 losses × 10 k × 10 τ × 5 n) × ``seeds`` seeds, synthetic R@1 and CV."""
    import itertools

    import numpy as np

    rng = np.random.default_rng(11)
    grid = itertools.product(LOSSES, range(2, 12), range(1, 11), range(100, 600, 100),
                             range(seeds))
    return pd.DataFrame([{"loss": loss, "k": k, "tau": tau / 10, "n": n, "seed": s,
                          "cell_id": f"{loss}-{k}-{tau}-{n}-{s}", "status": "ok", "reason": "",
                          "recall_at_1": rng.uniform(0.2, 0.45), "cv": rng.uniform(0.05, 0.25)}
                         for loss, k, tau, n, s in grid])


@pytest.fixture(scope="module")
def large_page(tmp_path_factory) -> tuple[Path, pd.DataFrame, pd.DataFrame, str]:
    """The leaderboard of 2000 settings × 5 seeds, 100 rows a page (make_board: ~45 s here), and
    the same board with every row on one page and the details written in."""
    from pipeline.config import ReportConfig, read_yaml

    cells = large_cells()
    cfg = ReportConfig.model_validate(read_yaml(ROOT / "params.yaml")["report"]
                                      | {"columns": ["recall_at_1", "cv"]})
    b = make_board(cells, cfg)
    page = to_html(b)
    path = tmp_path_factory.mktemp("large") / "leaderboard.html"
    path.write_text(page, encoding="utf-8")
    return path, b.table, cells, to_html(b, rows_per_page=None, lazy_details=False)


SHOWN = ("Array.from(document.querySelectorAll('#board tbody')).filter(g => !g.hidden)"
         ".map(g => [g.rows[0].cells[0].getAttribute('data-v'), g.rows[0].cells[1].textContent])")


def _ranks(table: pd.DataFrame) -> list[list[str]]:
    """What SHOWN reads from the page for these rows of the board's table: [rank, loss]."""
    return [[repr(float(r)), loss] for r, loss in zip(table["rank"], table["loss"], strict=True)]


def _text(chrome: DevTools, element_id: str) -> str:
    return chrome.evaluate(f"document.getElementById({element_id!r}).textContent")


def test_large_board_pages_sorts_and_filters_every_row(large_page):
    path, table, cells, _ = large_page
    assert len(table) == 2000 and len(cells) == 10_000
    by_k = sorted(range(len(table)), key=lambda j: table["k"].iloc[j])  # stable: rank order
    by_k_desc = sorted(by_k, key=lambda j: table["k"].iloc[j], reverse=True)  # ties: as before
    weince = [j for j in by_k_desc if table["loss"].iloc[j] == "weince"]
    with tempfile.TemporaryDirectory() as profile:
        chrome = DevTools(profile)
        try:
            open_page(chrome, path)
            assert chrome.evaluate("document.querySelectorAll('#board tr.main').length") == 2000
            assert chrome.evaluate(SHOWN) == _ranks(table.iloc[:100])  # page 1, best first
            assert _text(chrome, "count") == "100 of 2000 rows"
            assert _text(chrome, "page") == "page 1 of 20"
            assert chrome.evaluate("document.getElementById('prev').disabled") is True
            click(chrome, "#next")
            assert chrome.evaluate(SHOWN) == _ranks(table.iloc[100:200])
            assert _text(chrome, "page") == "page 2 of 20"
            assert chrome.evaluate("location.hash").endswith("&page=2")

            # a row's details on page 2: built from the JSON block on first open
            g = "document.querySelector('#board tbody:not([hidden])')"
            assert chrome.evaluate(f"{g}.rows[1].hidden") is True
            assert chrome.evaluate(f"{g}.rows[1].textContent") == ""
            click(chrome, "#board tbody:not([hidden]) button.more")
            assert chrome.evaluate(f"{g}.rows[1].hidden") is False
            row = table.iloc[100]
            ids = cells.loc[(cells[["loss", "k", "tau", "n"]] == row[["loss", "k", "tau", "n"]]
                             .to_numpy()).all(axis=1), "cell_id"]
            assert len(ids) == 5
            shown = chrome.evaluate(
                f"Array.from({g}.rows[1].querySelectorAll('dt')).map(d => [d.textContent,"
                " d.nextSibling.textContent])")
            assert set(dict(shown)["cell_ids"].split(",")) == set(ids)
            assert dict(shown)["seeds (ok / failed)"] == "5 / 0"

            # sort: every row is sorted, then cut into pages (back to page 1)
            click(chrome, 'th[data-key="k"] button')
            assert chrome.evaluate(SHOWN) == _ranks(table.iloc[by_k[:100]])
            assert _text(chrome, "page") == "page 1 of 20"
            click(chrome, 'th[data-key="k"] button')  # second click: descending
            assert chrome.evaluate(SHOWN) == _ranks(table.iloc[by_k_desc[:100]])

            # filter: over every row, in the sorted order, then paged
            chrome.evaluate("(() => { const f = document.getElementById('filter');"
                            " f.value = 'weince'; f.dispatchEvent(new Event('input')); })()")
            assert len(weince) == 500
            assert chrome.evaluate(SHOWN) == _ranks(table.iloc[weince[:100]])
            assert _text(chrome, "count") == "100 of 2000 rows (500 match)"
            assert _text(chrome, "page") == "page 1 of 5"
            for _ in range(4):
                click(chrome, "#next")
            assert chrome.evaluate(SHOWN) == _ranks(table.iloc[weince[400:]])
            assert chrome.evaluate("document.getElementById('next').disabled") is True
            assert chrome.evaluate("location.hash") == "#sort=k&dir=desc&filter=weince&page=5"
        finally:
            chrome.close()


def test_large_board_link_opens_its_page(large_page):
    """A view's URL hash (sort, filter, page) is read on load."""
    path, table, _, _ = large_page
    order = sorted(range(len(table)), key=lambda j: table["recall_at_1_mean"].iloc[j])
    dcl = [j for j in order if table["loss"].iloc[j] == "dcl"]
    with tempfile.TemporaryDirectory() as profile:
        chrome = DevTools(profile)
        try:
            target = chrome.call("Target.createTarget", url=path.as_uri()
                                 + "#sort=recall_at_1&dir=asc&filter=dcl&page=3")["targetId"]
            chrome.session = chrome.call("Target.attachToTarget", targetId=target,
                                         flatten=True)["sessionId"]
            chrome.wait_for("document.body && document.body.dataset.ready === '1'")
            assert chrome.evaluate(SHOWN) == _ranks(table.iloc[dcl[200:300]])
            assert _text(chrome, "page") == "page 3 of 5"
        finally:
            chrome.close()


def test_large_board_details_are_one_json_block(large_page):
    """The lazy page keeps every row in the HTML but no detail markup: one JSON block, less than
    half the bytes of the markup it replaces, holds every row's details."""

    path, table, _, eager = large_page
    page = path.read_text(encoding="utf-8")
    assert page.count('<tr class="main">') == eager.count('<tr class="main">') == len(table)
    assert '<dl class="details">' not in page and eager.count('<dl class="details">') == 2000
    assert page.count('<tbody class="row') - page.count(" hidden><tr") == 100  # one page shown
    blob = re.search(r'<script type="application/json" id="details">(.*?)</script>', page).group(1)
    markup = sum(len(d) for d in re.findall(r'<dl class="details">.*?</dl>', eager))
    assert len(json.loads(blob)["rows"]) == len(table) and len(blob) < markup / 2
    assert len(eager) - markup < len(page) < len(eager)
