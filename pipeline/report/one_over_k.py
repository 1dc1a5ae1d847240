"""The O(1/k) law (SPEC.md §3, Proposition 1): |CE − R_k| against k, its fitted slope, a plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from pipeline.search import fit_loglog_slope  # noqa: E402

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


def plot(rows: pd.DataFrame, path: Path) -> None:
    """|CE − R_k| against k on log-log axes, per encoder, with 1/k and 1/√k reference lines."""
    fig, ax = plt.subplots(figsize=(6, 4.2), dpi=120)
    for encoder, part in rows.groupby("encoder"):
        part = part.sort_values("k")
        label = "fixed (untrained) encoder" if encoder == "initial" else f"{encoder} encoder"
        ax.errorbar(part.k, part.gap.abs(), yerr=1.96 * part.gap_se, marker="o", capsize=3,
                    label=label)
    k = np.array(sorted(rows.k.unique()), dtype=float)
    anchor = rows[rows.k == k.min()].gap.abs().max()
    ax.plot(k, anchor * k.min() / k, "k--", lw=1, label="∝ 1/k")
    ax.plot(k, anchor * np.sqrt(k.min() / k), "k:", lw=1, label="∝ 1/√k")
    ax.set(xscale="log", yscale="log", xlabel="negatives k", ylabel="|CE − R(φ; k, τ)|",
           title="Finite-k gap of InfoNCE (Whiteley 2026, Prop. 1)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    fig.savefig(path.with_suffix(".svg"))
    plt.close(fig)


def write(finite_k: pd.DataFrame, grid: pd.DataFrame, reports: Path) -> dict[str, Any]:
    """``reports/one_over_k.csv``, ``reports/plots/one_over_k.png``; returns the metrics entry."""
    cell = first_cell(finite_k, grid)
    rows = finite_k[finite_k.cell_id == cell]
    rows[["encoder", *CSV_COLUMNS]].to_csv(reports / "one_over_k.csv", index=False)
    plot(rows, reports / "plots" / "one_over_k.png")
    return {"cell_id": cell, **fits(rows)}
