"""Write a built :class:`~pipeline.report.build.Report`: every table, figure and metric file.

Files (under ``out``): ``cells.{csv,md}``, ``leaderboard.{md,tex,csv,html}``,
``leaderboard_full.csv``, ``comparison.csv``, ``ranks.csv``, ``pairs.csv`` (the comparison
across settings, :mod:`pipeline.report.ranks`), ``paper_tables.{md,csv}``, ``history.csv``,
``plots/*.{png,svg}``, ``one_over_k.csv``, ``metrics.json`` (flat: the DVC metrics) and
``summary.json`` (everything, nested: best cells, the control sentences, the paper claims).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.report import figures, one_over_k
from pipeline.report.board import csv_table
from pipeline.report.build import Report
from pipeline.report.html import to_html
from pipeline.report.latex import to_latex
from pipeline.report.markdown import cells_table, to_markdown


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_tables(report: Report, out: Path,
                 figures_png: list[tuple[str, bytes]] | None = None) -> list[Path]:
    """The leaderboard in every format and the per-cell, comparison and paper tables."""
    board = report.board
    paths = [write_text(out / "leaderboard.md", to_markdown(board)),
             write_text(out / "leaderboard.tex", to_latex(board)),
             write_text(out / "leaderboard.html", to_html(board, figures_png or [])),
             write_text(out / "cells.md", cells_table(report.cells, report.cells_columns)),
             write_text(out / "paper_tables.md", report.papers_md)]
    for name, frame in (("leaderboard.csv", csv_table(board)),
                        ("leaderboard_full.csv", report.full), ("cells.csv", report.cells),
                        ("comparison.csv", report.comparison), ("ranks.csv", report.ranks),
                        ("pairs.csv", report.pairs), ("paper_tables.csv", report.papers),
                        ("history.csv", report.history)):
        frame.to_csv(out / name, index=False)
        paths.append(out / name)
    return paths


def write(report: Report, out: Path, norms: Callable[[str], np.ndarray],
          finite_k: pd.DataFrame, grid: pd.DataFrame) -> list[Path]:
    """Every report file under ``out``; norms: cell id → its held-out embedding norms."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plots, pictures, paths = out / "plots", [], []
    for spec in report.figures:
        png, svg = figures.draw(spec, plots, norms)
        pictures.append((spec.caption, png.read_bytes()))
        paths += [png, svg]
    extra = {}
    if len(finite_k):
        extra["one_over_k"] = one_over_k.write(finite_k, grid, out, report.level)
        pictures.append(("|CE − R_k| against k (the O(1/k) law)",
                         (plots / "one_over_k.png").read_bytes()))
    else:  # a grid without contrastive cells: an empty table keeps the DVC outputs complete
        pd.DataFrame(columns=["encoder", *one_over_k.CSV_COLUMNS, "series"]).to_csv(
            out / "one_over_k.csv", index=False)
    paths += write_tables(report, out, pictures)
    summary = dataclasses.replace(report.summary, extra={**report.summary.extra, **extra})
    paths.append(write_text(out / "summary.json", json.dumps(summary.to_json(), indent=2,
                                                             sort_keys=True, default=str) + "\n"))
    paths.append(write_text(out / "metrics.json", json.dumps(summary.flat(), indent=2,
                                                             sort_keys=True) + "\n"))
    return paths
