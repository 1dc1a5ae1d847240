"""Which figures a report gets, as values: :func:`plan` turns the per-cell table into
:class:`FigureSpec` values (a table and the drawing's options each) that
:func:`pipeline.report.figures.draw` draws. The number of figures and of lines per figure is
bounded whatever the grid size: a figure draws at most ``MAX_LINES`` series (the hue axes are
chosen so), and averages over the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import pandas as pd

from pipeline.grid import GridPoint
from pipeline.metrics import lookup
from pipeline.report.tables import ok_cells

# the integer grid axes (sizes: k, n, d, B) but the seed, to put on a log x axis
CV_AXES = tuple(f.name for f in fields(GridPoint) if f.type in ("int", int) and f.name != "seed")


MAX_LINES = 8  # series per figure: more make an unreadable legend


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the report: what :func:`draw` needs, decided by :func:`plan`.

    name: the file stem under ``reports/plots``; kind: a key of ``DRAW``; data: the table it
    draws; options: keyword arguments of the drawing function.
    """

    name: str
    caption: str
    kind: str
    data: pd.DataFrame = field(repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)


def hue_axes(cells: pd.DataFrame, candidates: Sequence[str], limit: int = MAX_LINES) -> tuple[str, ...]:
    """The candidate axes that vary, taken in order while their value combinations stay within
    ``limit`` lines (the first varying one always, so a figure tells its variants apart)."""
    chosen: list[str] = []
    lines = 1
    for axis in candidates:
        n = cells[axis].nunique() if axis in cells else 1
        if n > 1 and (not chosen or lines * n <= limit):
            chosen.append(axis)
            lines *= n
    return tuple(chosen)


def plan(cells: pd.DataFrame, stats: pd.DataFrame, bounds: pd.DataFrame, best: pd.DataFrame,
         primary: str | None, level: float) -> list[FigureSpec]:
    """The report's figures: CV against each varying size axis (untrained control dashed),
    the primary metric against k, AD/DP pass rates against epoch, the best setting of each
    variant, Theorem 1's terms, embedding norms. best: one aggregate row per variant (its best
    setting); primary: the ranking metric (None: no ranking figures)."""
    ok = ok_cells(cells)
    specs = []
    betser = {"embed_dim": "batch_size", "batch_size": "embed_dim"}  # CV against one, per the other
    control = "control_cv" in ok  # dashed twins of every line: half as many hue values
    for axis in (a for a in CV_AXES if a in ok and ok[a].nunique() > 1 and "cv" in ok):
        hue = hue_axes(ok, ("loss", betser.get(axis, "")) if axis in betser else ("loss",),
                       MAX_LINES // 2 if control else MAX_LINES)
        facet = "tau" if "tau" in ok and 1 < ok.tau.nunique() <= 4 else None
        specs.append(FigureSpec(f"cv_vs_{axis}", f"CV against {axis}" + (
            " (untrained dashed)" if control else ""), "metric_vs", ok,
            {"axis": axis, "hue": hue, "facet": facet, "control": control, "level": level}))
    if primary and primary in ok and "k" in ok and ok.k.nunique() > 1:
        specs.append(FigureSpec(f"{primary}_vs_k" if primary != "recall_at_1" else "recall_vs_k",
                                f"{lookup(primary).label} against k", "metric_vs", ok,
                                {"axis": "k", "metric": primary, "level": level,
                                 "hue": hue_axes(ok, ("loss", "arch", "tau", "embed_dim"))}))
    if len(stats) and stats.epoch.nunique() > 1 and "loss" in cells:
        raw = stats[stats.representation == "raw"].merge(cells[["cell_id", "loss"]], on="cell_id")
        specs.append(FigureSpec("pass_rate_vs_epoch", "AD and DP pass rates against epoch",
                                "pass_rate_vs_epoch", raw, {"level": level}))
    if primary and len(best) and f"{primary}_mean" in best:
        specs.append(FigureSpec(f"variant_{primary}", f"{lookup(primary).label}: the best "
                                "setting of each variant", "variant_comparison", best,
                                {"metric": primary}))
    if "bound_status" in bounds:
        usable = bounds[bounds.bound_status.astype(str).str.startswith(("ok", "partial"))]
        terms = usable.drop(columns=["k", "tau"], errors="ignore").merge(
            cells[["cell_id", "loss", "arch", "k", "tau"]], on="cell_id")
        if len(terms):
            specs.append(FigureSpec("bound_terms", "Theorem 1: the bound's terms (first 12 "
                                    "cells)", "bound_terms", terms.head(12).rename(
                                        columns={"total": "bound", "measured_gap": "gap"}),
                                    {"label_cols": ["loss", "arch", "k", "tau"]}))
    if len(ok) and "loss" in ok:
        top = ok.drop_duplicates("loss")  # cells come best first
        labels = [f"{r.loss} ({r.arch}, k={r.k}, τ={r.tau:g})" if {"arch", "k", "tau"} <= set(ok)
                  else str(r.loss) for r in top.itertuples()]
        specs.append(FigureSpec("norm_histograms", "Embedding norms of the best cell of each loss",
                                "norm_histograms", pd.DataFrame({"label": labels,
                                                                 "cell_id": list(top.cell_id)})))
    return specs


def norm_cells(specs: Sequence[FigureSpec]) -> list[str]:
    """The cells whose embedding norms the figures draw (what the caller reads for :func:`draw`)."""
    return [str(c) for s in specs if s.kind == "norm_histograms" for c in s.data.cell_id]
