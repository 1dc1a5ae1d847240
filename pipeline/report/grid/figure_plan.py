"""Which figures a report gets, as values: :func:`plan` turns the per-cell table into
:class:`FigureSpec` values (a table or the error-bar lines, and the drawing's options each) that
:func:`pipeline.report.render.figures.draw` draws. The number of figures and of lines per figure is
bounded whatever the grid size: a figure draws at most ``MAX_LINES`` series (the hue axes are
chosen so), and averages over the rest.

The error bars are computed here (:func:`metric_panels`, :func:`pass_rate_panels`): at each point
of a line, the mean over the cells there and its interval (:func:`pipeline.stats.seed_ci`,
``level``); the drawing code only draws them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from pipeline.grid import GRID_AXES, GridPoint
from pipeline.metrics import lookup
from pipeline.report.grid.tables import check_columns, ok_cells
from pipeline.stats import seed_ci

# the integer grid axes (sizes: k, n, d, B) but the seed, to put on a log x axis
CV_AXES = tuple(f.name for f in fields(GridPoint) if f.type in ("int", int) and f.name != "seed")


MAX_LINES = 8  # series per figure: more make an unreadable legend


@dataclass(frozen=True)
class Line:
    """One error-bar line: the cells of one hue group. ``points``: columns ``<x>, mean, lo, hi``,
    one row per value of x (ascending): the mean of the drawn column over the cells there and its
    ``level`` interval (:func:`pipeline.stats.seed_ci`, over those cells: seeds and every axis
    averaged over; NaN bounds at a single cell)."""

    key: tuple[Any, ...]  # the hue axes' values; () for one line over all cells
    points: pd.DataFrame = field(repr=False)


@dataclass(frozen=True)
class LineSet:
    """The lines of one column, one per hue group, drawn in one style; ``tag``: what tells them
    apart from the panel's other sets in the legend ("untrained", a representation; "" none)."""

    column: str
    tag: str
    lines: tuple[Line, ...]


@dataclass(frozen=True)
class Panel:
    """One panel of an error-bar figure; ``value``: its facet's value (None: no facet)."""

    value: Any
    sets: tuple[LineSet, ...]


@dataclass(frozen=True)
class ErrorBars:
    """What an error-bar figure draws: its panels, and the hue axes that name the lines."""

    hue: tuple[str, ...]
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the report: what :func:`draw` needs, decided by :func:`plan`.

    name: the file stem under ``reports/plots``; kind: a key of ``DRAW``; data: the table it
    draws, or its :class:`ErrorBars`; options: keyword arguments of the drawing function.
    """

    name: str
    caption: str
    kind: str
    data: pd.DataFrame | ErrorBars = field(repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)


def _ci(values: np.ndarray, level: float) -> tuple[float, float, float]:
    x = np.asarray(values, dtype=float)
    ci = seed_ci(x[~np.isnan(x)], level)
    return ci.estimate, ci.low, ci.high


def _mean_ci(df: pd.DataFrame, x: str, y: str, level: float) -> pd.DataFrame:
    rows = [(xv, *_ci(part[y].to_numpy(float), level)) for xv, part in df.groupby(x)]
    return pd.DataFrame(rows, columns=[x, "mean", "lo", "hi"]).sort_values(x)


def error_lines(df: pd.DataFrame, x: str, y: str, hue: Sequence[str],
                level: float) -> tuple[Line, ...]:
    """One :class:`Line` of ``y`` against ``x`` per group of ``hue`` values (NaN ``y`` left out;
    a group without any value keeps an empty line)."""
    groups = df.groupby(list(hue), dropna=False) if hue else [((), df)]
    return tuple(Line(key if isinstance(key, tuple) else (key,),
                      _mean_ci(part.dropna(subset=[y]), x, y, level)) for key, part in groups)


def metric_panels(board: pd.DataFrame, axis: str = "n", metric: str = "cv",
                  hue: Sequence[str] = ("loss",), level: float = 0.95, control: bool = False,
                  facet: str | None = None) -> ErrorBars:
    """The lines of :func:`pipeline.report.render.figures.metric_vs`: ``metric`` against ``axis`` ∈
    ``CV_AXES`` over the ok cells, one line per ``hue`` value, averaged over the other axes;
    ``control``: also ``control_<metric>`` (the untrained encoder, tagged "untrained");
    ``facet``: one panel per value of that grid axis (instead of averaging over it)."""
    allowed = [a for a in CV_AXES if a in board]
    if axis not in allowed:
        raise ValueError(f"axis = {axis!r}: allowed: {', '.join(allowed) or '(none in board)'}")
    check_columns(board, [metric], "metric", numeric=True)
    check_columns(board, list(hue), "hue")
    if control:
        check_columns(board, [f"control_{metric}"], "control metric", numeric=True)
    cells = ok_cells(board)
    parts = [(None, cells)]
    if facet is not None:
        check_columns(board, [facet], "facet")
        parts = list(cells.groupby(facet))
    panels = []
    for value, part in parts:
        sets = [LineSet(metric, "", error_lines(part, axis, metric, list(hue), level))]
        if control:
            sets.append(LineSet(f"control_{metric}", "untrained",
                                error_lines(part, axis, f"control_{metric}", list(hue), level)))
        panels.append(Panel(value, tuple(sets)))
    return ErrorBars(tuple(hue), tuple(panels))


def pass_rate_panels(stats: pd.DataFrame, hue: Sequence[str] = ("loss",),
                     level: float = 0.95) -> ErrorBars:
    """The lines of :func:`pipeline.report.render.figures.pass_rate_vs_epoch`: two panels, AD and DP
    pass rates (%) against epoch; rows are (cell_id, epoch, representation) with
    ``ad_pass_frac``/``dp_pass_frac``; per representation one set of lines per hue value."""
    check_columns(stats, ["epoch", "ad_pass_frac", "dp_pass_frac"], "stats columns")
    hue = [h for h in hue if h in stats]
    reps = (list(stats.groupby("representation")) if "representation" in stats
            else [("", stats)])
    sets: dict[str, list[LineSet]] = {"ad": [], "dp": []}
    for rep, part in reps:
        pct = ok_cells(part).assign(ad=lambda d: 100 * d.ad_pass_frac,
                                    dp=lambda d: 100 * d.dp_pass_frac)
        for col, out in sets.items():
            out.append(LineSet(col, f"{rep}" if rep else "",
                               error_lines(pct, "epoch", col, hue, level)))
    return ErrorBars(tuple(hue), tuple(Panel(None, tuple(s)) for s in sets.values()))


def hue_axes(cells: pd.DataFrame, candidates: Sequence[str],
             limit: int = MAX_LINES) -> tuple[str, ...]:
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


def pareto_front(cost: np.ndarray, score: np.ndarray, higher: bool = True) -> np.ndarray:
    """Booleans: the points no other point dominates, where ``a`` dominates ``b`` when it
    costs no more, scores no worse and is strictly better in one of the two (lower ``cost``;
    higher ``score`` when ``higher``, else lower). Points with a NaN are on no front; equal
    points dominate neither each other. O(n log n): by cost, then best score first."""
    c, s = np.asarray(cost, dtype=float), np.asarray(score, dtype=float)
    if c.shape != s.shape or c.ndim != 1:
        raise ValueError(f"cost {c.shape} and score {s.shape}: need two 1-D arrays of one length")
    s = s if higher else -s
    front = np.zeros(len(c), dtype=bool)
    finite = np.flatnonzero(np.isfinite(c) & np.isfinite(s))
    order = finite[np.lexsort((-s[finite], c[finite]))]
    best = -np.inf  # the best score among strictly cheaper points
    i = 0
    while i < len(order):
        j = i
        while j < len(order) and c[order[j]] == c[order[i]]:
            j += 1
        top = s[order[i]]  # the best score at this cost
        if top > best:
            front[order[i:j][s[order[i:j]] == top]] = True
            best = top
        i = j
    return front


def cost_points(cells: pd.DataFrame, metric: str, cost: str = "train_seconds",
                keys: Sequence[str] | None = None) -> pd.DataFrame:
    """One point per setting (``keys``: None means the grid axes present but the seed) over its
    ok cells: ``<cost>`` and ``<metric>`` means over its seeds, ``cells`` counted, and ``front``:
    on the Pareto front of cheaper and better (the registry's direction of ``metric``;
    :func:`pareto_front`). Settings without both means are left out."""
    check_columns(cells, [metric, cost], "columns", numeric=True)
    keys = list(keys if keys is not None else [a for a in GRID_AXES if a in cells and a != "seed"])
    ok = ok_cells(cells).dropna(subset=[metric, cost])
    if not len(ok):
        return pd.DataFrame(columns=[*keys, cost, metric, "cells", "front"])
    grouped = ok.groupby(keys, dropna=False, sort=True) if keys else ok.groupby(lambda _: 0)
    table = grouped.agg(**{cost: (cost, "mean"), metric: (metric, "mean"),
                           "cells": (metric, "size")}).reset_index(drop=not keys)
    higher = lookup(metric).higher is not False  # a 'neither' metric: read higher as better
    table["front"] = pareto_front(table[cost].to_numpy(float), table[metric].to_numpy(float),
                                  higher)
    return table


def plan(cells: pd.DataFrame, stats: pd.DataFrame, bounds: pd.DataFrame, best: pd.DataFrame,
         primary: str | None, level: float) -> list[FigureSpec]:
    """The report's figures: CV against each varying size axis (untrained control dashed),
    the primary metric against k, AD/DP pass rates against epoch, the best setting of each
    variant, Theorem 1's terms, the primary metric against training time (the Pareto front of
    the settings marked), embedding norms. best: one aggregate row per variant (its best
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
            " (untrained dashed)" if control else ""), "metric_vs",
            metric_panels(ok, axis, "cv", hue, level, control, facet),
            {"axis": axis, "facet": facet}))
    if primary and primary in ok and "k" in ok and ok.k.nunique() > 1:
        specs.append(FigureSpec(f"{primary}_vs_k" if primary != "recall_at_1" else "recall_vs_k",
                                f"{lookup(primary).label} against k", "metric_vs",
                                metric_panels(ok, "k", primary, hue_axes(
                                    ok, ("loss", "arch", "tau", "embed_dim")), level),
                                {"axis": "k", "metric": primary}))
    if len(stats) and stats.epoch.nunique() > 1 and "loss" in cells:
        raw = stats[stats.representation == "raw"].merge(cells[["cell_id", "loss"]], on="cell_id")
        specs.append(FigureSpec("pass_rate_vs_epoch", "AD and DP pass rates against epoch",
                                "pass_rate_vs_epoch", pass_rate_panels(raw, level=level)))
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
    if primary and primary in ok and "train_seconds" in ok and (
            ok[[primary, "train_seconds"]].notna().all(axis=1).any()):
        points = cost_points(ok, primary)
        specs.append(FigureSpec("pareto_train_seconds", f"{lookup(primary).label} against "
                                "training time, one point per setting (means over seeds); "
                                "ringed: the Pareto front (no setting is both cheaper and "
                                "better)", "pareto", points,
                                {"metric": primary, "cost": "train_seconds"}))
    if len(ok) and "loss" in ok:
        top = ok.drop_duplicates("loss")  # cells come best first
        labels = [f"{r.loss} ({r.arch}, k={r.k}, τ={r.tau:g})" if {"arch", "k", "tau"} <= set(ok)
                  else str(r.loss) for r in top.itertuples()]
        specs.append(FigureSpec("norm_histograms", "Embedding norms of the best cell of each loss",
                                "norm_histograms", pd.DataFrame({"label": labels,
                                                                 "cell_id": list(top.cell_id)})))
    return specs


def fewshot_panels(summary: pd.DataFrame, cells: pd.DataFrame, level: float = 0.95,
                   layer: str = "head") -> ErrorBars | None:
    """The lines of :func:`pipeline.report.render.figures.fewshot_vs_shots`: accuracy against shots
    per class, one panel per score (the linear probe, then the weighted kNN of the smallest k),
    one line per loss and the raw inputs' line (tagged "raw input"); None without few-shot rows.

    summary: ``data/probe_fewshot_summary.parquet`` (per cell, layer and shots, the mean over
    episodes ``<score>_mean``). At each shots value a line's point is the mean over the loss's
    ok cells (seeds and every other axis) of their episode means, with its t-interval over those
    cells (:func:`pipeline.stats.seed_ci`); the raw line's is over every cell's draws."""
    if summary.empty or "shots" not in summary or "loss" not in cells:
        return None
    part = summary[summary.layer == layer].merge(ok_cells(cells)[["cell_id", "loss"]],
                                                 on="cell_id")
    knn = sorted((c for c in part.columns if c.startswith("weighted_knn_")
                  and c.endswith("_mean")), key=lambda c: int(c.split("_")[2]))
    scores = [c for c in ("linear_probe_mean", *knn[:1]) if c in part and part[c].notna().any()]
    if part.empty or not scores:
        return None
    panels = tuple(Panel(c.removesuffix("_mean"), (
        LineSet(c, "", error_lines(part, "shots", c, ["loss"], level)),
        LineSet(f"raw_{c}", "raw input", error_lines(part, "shots", f"raw_{c}", [], level))))
        for c in scores)
    return ErrorBars(("loss",), panels)


def fewshot_specs(summary: pd.DataFrame, cells: pd.DataFrame, level: float) -> list[FigureSpec]:
    """The label-efficiency figure (``fewshot_vs_shots``) when the few-shot table has rows."""
    bars = fewshot_panels(summary, cells, level)
    if bars is None:
        return []
    return [FigureSpec("fewshot_vs_shots", "Label efficiency: accuracy against labelled examples "
                       "per class (mean over seeds of the means over episodes; raw inputs "
                       "dashed)", "fewshot_vs_shots", bars)]


def norm_cells(specs: Sequence[FigureSpec]) -> list[str]:
    """The cells whose embedding norms the figures draw (what the caller reads for :func:`draw`)."""
    return [str(c) for s in specs if s.kind == "norm_histograms"
            and isinstance(s.data, pd.DataFrame) for c in s.data.cell_id]
