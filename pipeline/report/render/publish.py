"""Write a built :class:`~pipeline.report.grid.build.Report`: render every file once, then write.

Files (under ``out``): ``cells.{csv,md}``, ``leaderboard.{md,tex,csv,html}``,
``leaderboard_full.csv``, ``comparison.csv``, ``ranks.csv``, ``pairs.csv`` (the comparison
across settings, :mod:`pipeline.report.grid.ranks`), ``paper_tables.{md,csv}``, ``history.csv``,
``plots/*.{png,svg}``, ``one_over_k.csv``, ``metrics.json`` (flat: the headline numbers, the
DVC metrics), ``metrics_detail.json`` (flat: every other number) and ``summary.json``
(everything, nested: best cells, the control sentences, the paper claims).

:func:`render` turns the report's values into the bytes of each file (each figure drawn once:
the bytes written under ``plots/`` are the bytes the HTML page embeds); :func:`write` writes
them. Nothing here computes a value of the report.

The figures are most of the rendering (at 1000 cells ten figures, about 2.5 s of Matplotlib),
and each is drawn on its own: on Linux with two or more cores :func:`render` draws them in
forked worker processes (:func:`figure_pool`) while this process renders the tables and text,
and puts their bytes in the same order: the same files as drawing them here.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.report.grid.board import csv_table
from pipeline.report.grid.build import Report
from pipeline.report.papers import markdown as papers_md
from pipeline.report.papers import one_over_k_plot
from pipeline.report.render import figures
from pipeline.report.render.html import to_html
from pipeline.report.render.latex import to_latex
from pipeline.report.render.markdown import cells_table, to_markdown

LAW_CAPTION = "|CE − R_k| against k (the O(1/k) law)"


def _csv(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode("utf-8")


def figure_pool(figures_to_draw: int) -> ProcessPoolExecutor | None:
    """Worker processes for :func:`render`'s figures: one per usable core, at most one per
    figure; None (draw them here) with fewer than two of either, or off Linux (the workers are
    forked: they start with this process's imports, where a fresh interpreter would spend
    seconds importing Matplotlib; ``fork`` is the safe default only on Linux)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    workers = min(cores, figures_to_draw)
    if workers < 2 or not sys.platform.startswith("linux"):
        return None
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))


class _Here:
    """Runs a submitted call at once in this process (no pool: the result is there already)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        done: Future[Any] = Future()
        done.set_result(fn(*args))
        return done


def _draw(spec: figures.FigureSpec, norms: Mapping[str, np.ndarray]) -> figures.Drawing:
    return figures.draw(spec, norms)  # looked up when called: in a worker, its module's


def render(report: Report, norms: Mapping[str, np.ndarray]) -> dict[str, bytes]:
    """Every report file as (path under ``out``, bytes), in the order they are written; norms:
    cell id → its held-out embedding norms, for the cells :func:`figures.norm_cells` names."""
    law = report.one_over_k
    pool = figure_pool(len(report.figures) + (law.entry is not None))
    with pool if pool is not None else nullcontext():  # leaving it waits for every figure
        runner: Executor | _Here = pool if pool is not None else _Here()
        drawn = [(spec, runner.submit(_draw, spec, norms)) for spec in report.figures]
        law_drawn = (runner.submit(one_over_k_plot.plot, law) if law.entry is not None
                     else None)
        board = report.board
        text = {"leaderboard.md": to_markdown(board), "leaderboard.tex": to_latex(board)}
        tables = {name: _csv(frame) for name, frame in (
            ("leaderboard.csv", csv_table(board)), ("leaderboard_full.csv", report.full),
            ("cells.csv", report.cells), ("comparison.csv", report.comparison),
            ("ranks.csv", report.ranks), ("pairs.csv", report.pairs),
            ("paper_tables.csv", report.papers.table), ("history.csv", report.history))}
        more_text = {"cells.md": cells_table(report.cells, report.cells_columns),
                     "paper_tables.md": papers_md.to_markdown(report.papers)}
    files: dict[str, bytes] = {}
    pictures: list[tuple[str, bytes]] = []
    for spec, future in drawn:
        drawing = future.result()
        files[f"plots/{spec.name}.png"], files[f"plots/{spec.name}.svg"] = (drawing.png,
                                                                            drawing.svg)
        pictures.append((spec.caption, drawing.png))
    files["one_over_k.csv"] = _csv(law.table)
    if law_drawn is not None:
        drawing = law_drawn.result()
        files["plots/one_over_k.png"], files["plots/one_over_k.svg"] = drawing.png, drawing.svg
        pictures.append((LAW_CAPTION, drawing.png))
    text["leaderboard.html"] = to_html(board, pictures)
    for name, content in {**text, **more_text}.items():
        files[name] = content.encode("utf-8")
    files.update(tables)
    summary = report.summary
    files["summary.json"] = (json.dumps(summary.to_json(), indent=2, sort_keys=True,
                                        default=str) + "\n").encode("utf-8")
    for name, numbers in zip(("metrics.json", "metrics_detail.json"), summary.dvc_metrics(),
                             strict=True):
        files[name] = (json.dumps(numbers, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return files


def write_files(files: Mapping[str, bytes], out: Path) -> list[Path]:
    """Each (relative path, bytes) under ``out`` (parents created); returns the paths."""
    paths = []
    for name, data in files.items():
        path = Path(out) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(path)
    return paths


def write(report: Report, out: Path, norms: Mapping[str, np.ndarray]) -> list[Path]:
    """Every report file under ``out`` (:func:`render`, then :func:`write_files`)."""
    return write_files(render(report, norms), out)
