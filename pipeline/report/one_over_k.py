"""The O(1/k) law (SPEC.md §3, Proposition 1): |CE − R_k| against k, its fitted slope, a plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.report.figures import gap_vs_k
from pipeline.search import fit_loglog_slope

CSV_COLUMNS = ["k", "risk", "ce", "gap", "gap_se"]


def first_cell(finite_k: pd.DataFrame, grid: pd.DataFrame) -> str:
    """The cell the law is reported for: the first contrastive cell of the grid that has a sweep."""
    ordered = [c for c in grid.cell_id if c in set(finite_k.cell_id)]
    return ordered[0]


def fits(rows: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Slope of log|gap| on log k with its 95% interval, per encoder (trained, initial)."""
    out = {}
    for encoder, part in rows.groupby("encoder"):
        fit = fit_loglog_slope(part.k.to_numpy(), np.abs(part.gap.to_numpy()), part.gap_se.to_numpy())
        out[str(encoder)] = {"slope": round(fit.slope, 4), "ci_low": round(fit.ci_low, 4),
                             "ci_high": round(fit.ci_high, 4), "n_points": fit.n_points}
    return out


def write(finite_k: pd.DataFrame, grid: pd.DataFrame, reports: Path) -> dict[str, Any]:
    """``reports/one_over_k.csv``, ``reports/plots/one_over_k.png``; returns the metrics entry."""
    cell = first_cell(finite_k, grid)
    rows = finite_k[finite_k.cell_id == cell]
    rows[["encoder", *CSV_COLUMNS]].to_csv(reports / "one_over_k.csv", index=False)
    gap_vs_k(rows.assign(encoder=rows.encoder.replace({"initial": "fixed (untrained)"})),
             reports / "plots" / "one_over_k", hue=("encoder",))
    return {"cell_id": cell, **fits(rows)}
