"""Benchmark: the report's per-cell files at 10 000 cells and the HTML leaderboard at 2000 rows.

    python bench/html_scale.py [--sizes 200 2000] [--repeats 3] [--cells 1000 10000]

(1) The HTML leaderboard of profiles/grid-1000.yaml (200 settings × 5 seeds) and
profiles/grid-10000.yaml (2000 settings × 5 seeds), on the tests' synthetic per-cell tables
(``tests.report.synthetic.synthetic_cells``: every headline metric, the controls, provenance),
written two ways by :func:`pipeline.report.render.html.to_html`: ``one page`` (``rows_per_page=None,
lazy_details=False``: every row shown, every row's details written in as HTML, as the page was
before paging) and ``paged`` (the defaults: 100 rows a page, details as one JSON block). Per page:
its bytes, the seconds to build the board (``make_board``, the same for both) and to write the
page, then in headless Chromium (tests/chromium.py; a fresh browser and profile per open):
navigation start to the load event's end (ms, ``performance.getEntriesByType('navigation')``;
the page's script runs before it), the DOM's nodes and the JS heap used after load
(DevTools ``Performance.getMetrics``), and the ms of one header click that sorts every row and of
one filter keystroke (``performance.now()`` around ``click()`` / the ``input`` event, a layout
forced after). Medians of ``--repeats`` opens; ratios paged / one page from the same run.
(2) ``data/grid.json`` and ``cells.csv`` at ``--cells`` cells: grid.json's rows built by the train
stage's own :func:`pipeline.runtime.grid_run.manifest_row`, written by
:func:`pipeline.runtime.store.files.atomic_write_json` (as stages/train.py does: once, at the end)
and read by :func:`pipeline.runtime.context.read_grid`; cells.csv written as
:mod:`pipeline.report.render.publish` does (``_csv``) from the synthetic per-cell table and read by
``pandas.read_csv``; bytes and seconds (medians of ``--repeats``), and the ratio of the largest
size to the smallest against the ratio of cells (linear: equal). The grid's expansion
(``pipeline.config.expand``) is timed with them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.config import Params, expand, load  # noqa: E402
from pipeline.report.grid.board import Board, make_board  # noqa: E402
from pipeline.report.render.html import to_html  # noqa: E402
from pipeline.report.render.publish import _csv  # noqa: E402
from pipeline.runtime import context  # noqa: E402
from pipeline.runtime.grid_run import Entry, manifest_row  # noqa: E402
from pipeline.runtime.store import files  # noqa: E402
from tests.chromium import CHROMIUM, DevTools, open_page  # noqa: E402
from tests.report.synthetic import synthetic_cells  # noqa: E402

PROFILES = {200: "grid-1000.yaml", 2000: "grid-10000.yaml"}  # settings → profile (5 seeds)
VARIANTS: dict[str, dict[str, Any]] = {"one page": {"rows_per_page": None,
                                                    "lazy_details": False},
                                       "paged": {}}
SORT = ("(() => { const t = performance.now(); "
        "document.querySelector('th[data-key=\"k\"] button').click(); "
        "document.body.offsetHeight; return performance.now() - t; })()")
FILTER = ("(() => { const t = performance.now(); const f = document.getElementById('filter'); "
          "f.value = 'weince'; f.dispatchEvent(new Event('input')); "
          "document.body.offsetHeight; return performance.now() - t; })()")
LOAD = ("(() => { const n = performance.getEntriesByType('navigation')[0]; "
        "return [n.loadEventEnd - n.startTime, n.domContentLoadedEventEnd - n.startTime]; })()")


def params_of(name: str) -> Params:
    return load(ROOT / "params.yaml", ROOT / "profiles" / name)


def timed(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """The seconds ``fn(*args)`` took, and what it returned."""
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def open_once(path: Path) -> dict[str, float]:
    """One open of ``path`` in a fresh headless Chromium: load ms, DOM nodes, JS heap MB, sort
    and filter ms."""
    with tempfile.TemporaryDirectory() as profile:
        chrome = DevTools(profile)
        try:
            open_page(chrome, path)
            chrome.wait_for("performance.getEntriesByType('navigation')[0].loadEventEnd > 0")
            load_ms, dom_ms = chrome.evaluate(LOAD)
            chrome.call("Performance.enable")
            metrics = {m["name"]: m["value"]
                       for m in chrome.call("Performance.getMetrics")["metrics"]}
            sort_ms = chrome.evaluate(SORT)
            filter_ms = chrome.evaluate(FILTER)
        finally:
            chrome.close()
    return {"load_ms": load_ms, "dcl_ms": dom_ms, "nodes": metrics.get("Nodes", float("nan")),
            "heap_mb": metrics.get("JSHeapUsedSize", float("nan")) / 2**20,
            "sort_ms": sort_ms, "filter_ms": filter_ms}


def html_scale(sizes: list[int], repeats: int, out: Path) -> None:
    print("(1) HTML leaderboard: medians of", repeats, "opens in headless Chromium")
    head = (f"{'settings':>8} {'page':<9} {'bytes':>10} {'board s':>8} {'write s':>8} "
            f"{'load ms':>8} {'DOM ms':>7} {'nodes':>7} {'heap MB':>8} {'sort ms':>8} "
            f"{'filter ms':>9}")
    print(head)
    for size in sizes:
        params = params_of(PROFILES[size])
        cells = synthetic_cells(params)
        board_s, board = timed(make_board, cells, params.report, params.data.name)
        assert len(board.table) == size, (len(board.table), size)
        got: dict[str, dict[str, float]] = {}
        for name, kw in VARIANTS.items():
            got[name] = page_row(board, size, name, kw, board_s, repeats, out)
        print(f"{size:>8} {'ratio':<9} " + " ".join(
            f"{got['paged'][k] / got['one page'][k]:>{w}.3f}" if got["one page"][k] else
            f"{'-':>{w}}" for k, w in (("bytes", 10), ("board_s", 8), ("write_s", 8),
                                       ("load_ms", 8), ("dcl_ms", 7), ("nodes", 7),
                                       ("heap_mb", 8), ("sort_ms", 8), ("filter_ms", 9))))


def page_row(board: Board, size: int, name: str, kw: dict[str, Any], board_s: float,
             repeats: int, out: Path) -> dict[str, float]:
    write_s, page = timed(partial(to_html, board, **kw))
    path = out / f"leaderboard_{size}_{name.replace(' ', '_')}.html"
    path.write_text(page, encoding="utf-8")
    opens = [open_once(path) for _ in range(repeats)]
    med = {k: statistics.median(o[k] for o in opens) for k in opens[0]}
    row = {"bytes": float(path.stat().st_size), "board_s": board_s, "write_s": write_s, **med}
    print(f"{size:>8} {name:<9} {int(row['bytes']):>10} {board_s:>8.2f} {write_s:>8.2f} "
          f"{row['load_ms']:>8.0f} {row['dcl_ms']:>7.0f} {int(row['nodes']):>7} "
          f"{row['heap_mb']:>8.1f} {row['sort_ms']:>8.1f} {row['filter_ms']:>9.1f}", flush=True)
    return row


def manifest_rows(params: Params) -> tuple[float, list[dict[str, Any]]]:
    """The seconds to expand the grid, and data/grid.json's rows for every cell, done."""
    expand_s, cells = timed(lambda: expand(params))
    version = "c0ffee123456-5dbad1bc8590"
    record = {"code_fingerprint": {"digest": "c0ffee123456"}, "embeddings_sha256": "ab" * 32}
    rows = [manifest_row(Entry(c, version, Path("/store/cells") / c.training_id / version,
                               "done", record, used_version=version), "ok", "", record)
            for c in cells]
    return expand_s, rows


def write_csv(path: Path, table: pd.DataFrame) -> None:
    path.write_bytes(_csv(table))


def files_scale(counts: list[int], repeats: int, out: Path) -> None:
    print(f"\n(2) data/grid.json and cells.csv: medians of {repeats}")
    print(f"{'cells':>6} {'expand s':>8} {'grid.json B':>12} {'write s':>8} {'read s':>7} "
          f"{'cells.csv B':>12} {'write s':>8} {'read s':>7}")
    got = {}
    for n in counts:
        name = PROFILES[{1000: 200, 10_000: 2000}[n]]
        params = params_of(name)
        expand_s, rows = manifest_rows(params)
        assert len(rows) == n, (len(rows), n)
        table = synthetic_cells(params)
        work = out / f"ws{n}"
        (work / context.DATA).mkdir(parents=True, exist_ok=True)
        here = os.getcwd()
        os.chdir(work)
        try:
            gw = statistics.median(timed(files.atomic_write_json, context.GRID,
                                         {"cells": rows})[0] for _ in range(repeats))
            gr = statistics.median(timed(context.read_grid)[0] for _ in range(repeats))
            assert len(context.read_grid()) == n
            gbytes = context.GRID.stat().st_size
        finally:
            os.chdir(here)
        csv_path = work / "cells.csv"
        cw = statistics.median(timed(write_csv, csv_path, table)[0] for _ in range(repeats))
        cr = statistics.median(timed(pd.read_csv, csv_path)[0] for _ in range(repeats))
        cbytes = csv_path.stat().st_size
        got[n] = (expand_s, gbytes, gw, gr, cbytes, cw, cr)
        print(f"{n:>6} {expand_s:>8.2f} {gbytes:>12} {gw:>8.3f} {gr:>7.3f} {cbytes:>12} "
              f"{cw:>8.3f} {cr:>7.3f}", flush=True)
    lo, hi = min(got), max(got)
    print(f"{'ratio':>6} " + " ".join(
        f"{got[hi][i] / got[lo][i]:>{w}.2f}"
        for i, w in enumerate((8, 12, 8, 7, 12, 8, 7))) + f"   (cells: {hi / lo:.0f}x)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 2000],
                    choices=sorted(PROFILES), help="settings of the HTML pages")
    ap.add_argument("--cells", type=int, nargs="+", default=[1000, 10_000],
                    choices=[1000, 10_000], help="cells of grid.json and cells.csv")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, help="keep the pages and files here")
    args = ap.parse_args(argv)
    if CHROMIUM is None:
        print("chromium not on PATH (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        files_scale(args.cells, args.repeats, out)
        print()
        html_scale(args.sizes, args.repeats, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
