"""Write a built :class:`~pipeline.report.build.Report`: render every file once, then write.

Files (under ``out``): ``cells.{csv,md}``, ``leaderboard.{md,tex,csv,html}``,
``leaderboard_full.csv``, ``comparison.csv``, ``ranks.csv``, ``pairs.csv`` (the comparison
across settings, :mod:`pipeline.report.ranks`), ``paper_tables.{md,csv}``, ``history.csv``,
``plots/*.{png,svg}``, ``one_over_k.csv``, ``metrics.json`` (flat: the DVC metrics) and
``summary.json`` (everything, nested: best cells, the control sentences, the paper claims).

:func:`render` turns the report's values into the bytes of each file (each figure drawn once:
the bytes written under ``plots/`` are the bytes the HTML page embeds); :func:`write` writes
them. Nothing here computes a value of the report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.report import figures, one_over_k_plot, papers_md
from pipeline.report.board import csv_table
from pipeline.report.build import Report
from pipeline.report.html import to_html
from pipeline.report.latex import to_latex
from pipeline.report.markdown import cells_table, to_markdown

LAW_CAPTION = "|CE − R_k| against k (the O(1/k) law)"


def _csv(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode("utf-8")


def render(report: Report, norms: Mapping[str, np.ndarray]) -> dict[str, bytes]:
    """Every report file as (path under ``out``, bytes), in the order they are written; norms:
    cell id → its held-out embedding norms, for the cells :func:`figures.norm_cells` names."""
    files: dict[str, bytes] = {}
    pictures: list[tuple[str, bytes]] = []
    for spec in report.figures:
        drawing = figures.draw(spec, norms)
        files[f"plots/{spec.name}.png"], files[f"plots/{spec.name}.svg"] = (drawing.png,
                                                                            drawing.svg)
        pictures.append((spec.caption, drawing.png))
    law = report.one_over_k
    files["one_over_k.csv"] = _csv(law.table)
    if law.entry is not None:
        drawing = one_over_k_plot.plot(law)
        files["plots/one_over_k.png"], files["plots/one_over_k.svg"] = drawing.png, drawing.svg
        pictures.append((LAW_CAPTION, drawing.png))
    board = report.board
    for name, text in (("leaderboard.md", to_markdown(board)),
                       ("leaderboard.tex", to_latex(board)),
                       ("leaderboard.html", to_html(board, pictures)),
                       ("cells.md", cells_table(report.cells, report.cells_columns)),
                       ("paper_tables.md", papers_md.to_markdown(report.papers))):
        files[name] = text.encode("utf-8")
    for name, frame in (("leaderboard.csv", csv_table(board)),
                        ("leaderboard_full.csv", report.full), ("cells.csv", report.cells),
                        ("comparison.csv", report.comparison), ("ranks.csv", report.ranks),
                        ("pairs.csv", report.pairs), ("paper_tables.csv", report.papers.table),
                        ("history.csv", report.history)):
        files[name] = _csv(frame)
    summary = report.summary
    files["summary.json"] = (json.dumps(summary.to_json(), indent=2, sort_keys=True,
                                        default=str) + "\n").encode("utf-8")
    files["metrics.json"] = (json.dumps(summary.flat(), indent=2, sort_keys=True)
                             + "\n").encode("utf-8")
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
