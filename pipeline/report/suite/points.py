"""What the suite's figures draw, as values: per task, one point per setting against its training
time (the Pareto figure), and the label-efficiency lines of the chosen settings (the few-shot
figure). Values in, tables out; :mod:`pipeline.report.suite.render` draws them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline.report.grid.figure_plan import cost_points
from pipeline.report.suite.values import COST, TaskChoice

FEWSHOT_COLUMNS = ("loss", "score", "shots", "mean", "lo", "hi", "seeds", "episodes")
LAYER = "head"  # the few-shot representation drawn (the encoder's output, as the report's figure)


def pareto_points(cells: pd.DataFrame, metric: str, axes: Sequence[str]) -> pd.DataFrame:
    """One point per (loss, setting of ``axes``) over its ok cells: the means over seeds of
    ``metric`` and of the training seconds, and ``front`` (on the Pareto front of cheaper and
    better; :func:`pipeline.report.grid.figure_plan.cost_points`). Empty when the cells lack either
    column."""
    keys = ["loss", *axes]
    if not all(c in cells and pd.api.types.is_numeric_dtype(cells[c]) for c in (metric, COST)):
        return pd.DataFrame(columns=[*keys, COST, metric, "cells", "front"])
    return cost_points(cells, metric, COST, keys)


def fewshot_score(summary: pd.DataFrame) -> str | None:
    """The few-shot score drawn: the linear probe, else the weighted kNN of the smallest k; None
    without one."""
    knn = sorted((c.removesuffix("_mean") for c in summary.columns
                  if c.startswith("weighted_knn_") and c.endswith("_mean")),
                 key=lambda c: int(c.split("_")[2]))
    for c in ("linear_probe", *knn):
        if f"{c}_mean" in summary and summary[f"{c}_mean"].notna().any():
            return c
    return None


def fewshot_lines(summary: pd.DataFrame, choices: Mapping[str, TaskChoice]) -> pd.DataFrame:
    """Accuracy against shots per loss, at its chosen setting (:data:`FEWSHOT_COLUMNS`).

    summary: one task's ``probe_fewshot_summary`` (per cell, layer and shots: the mean over
    episodes ``<score>_mean`` and its t-interval over episodes ``_lo``/``_hi``). A point: the
    mean over the setting's seeds of their episode means; lo / hi: the mean over those seeds of
    each seed's interval over episodes (the spread of the draws of labelled rows for one trained
    encoder, not an interval over seeds); episodes: the fewest any seed has. Empty without
    few-shot rows of the chosen cells.
    """
    empty = pd.DataFrame(columns=list(FEWSHOT_COLUMNS))
    if summary.empty or not {"cell_id", "shots"} <= set(summary.columns):
        return empty
    part = summary[summary["layer"] == LAYER] if "layer" in summary else summary
    score = fewshot_score(part)
    if score is None:
        return empty
    rows = []
    for loss, choice in choices.items():
        mine = part[part["cell_id"].astype(str).isin(choice.cell_ids)]
        for shots, at in mine.groupby("shots", sort=True):
            x = at[f"{score}_mean"].dropna()
            if not len(x):
                continue
            rows.append({"loss": loss, "score": score, "shots": shots, "mean": float(x.mean()),
                         "lo": _mean_of(at, f"{score}_lo"), "hi": _mean_of(at, f"{score}_hi"),
                         "seeds": int(len(x)),
                         "episodes": int(at["episodes"].min()) if "episodes" in at else 0})
    return pd.DataFrame(rows, columns=list(FEWSHOT_COLUMNS)) if rows else empty


def _mean_of(part: pd.DataFrame, column: str) -> float:
    if column not in part:
        return float("nan")
    x = part[column].to_numpy(float)
    return float(x.mean()) if np.isfinite(x).all() and x.size else float("nan")

