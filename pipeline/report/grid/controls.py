"""Trained against untrained: is a distribution diagnostic the loss's doing, or the CLT's?

A random linear map of many independent coordinates is already close to Gaussian (central limit
theorem), and the norm spread of Gaussian coordinates is about 1/√(2d) whatever the loss. So each
cell's diagnostics are shown beside those of the same encoder at initialisation (epoch 0, same
seed, same held-out data), with the difference and an interval for it. A diagnostic is marked
"not changed by training" when that interval covers zero.

Interval of a difference: each side's interval at the level ``report.level`` (the stats stage
builds them at that level: bootstrap for CV, over coordinates for AD/DP, see
``pipeline.stats.intervals``) is turned into a standard error, se ≈ (high − low)/(2·z) with
z = Φ⁻¹((1 + level)/2), and trained − control ± z·√(se_t² + se_c²) — a normal approximation
treating the two as independent. The level passed here must be the one the intervals were built
at; every sentence states it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from pipeline.grid import GRID_AXES, SUPERVISED
from pipeline.metrics import METRICS
from pipeline.stats.comparisons.inference import normal_quantile

# the distribution statistics measured on the untrained encoder too, by the stats stage
# (registry: the control_ and null_ families; the probe's control_ columns come from its stage)
CONTROL_STATS = tuple(m.name for m in METRICS.values() if {"control_", "null_"} <= m.families)


def difference_interval(est_t: float, lo_t: float, hi_t: float, est_c: float, lo_c: float,
                        hi_c: float, level: float = 0.95) -> tuple[float, float, float]:
    """(difference, low, high) of trained − control from the two intervals, both at ``level``
    (normal approximation); the result is at ``level`` too."""
    z = normal_quantile(level)
    se = math.hypot((hi_t - lo_t) / (2 * z), (hi_c - lo_c) / (2 * z))
    diff = est_t - est_c
    return diff, diff - z * se, diff + z * se


def control_columns(trained: pd.DataFrame, control: pd.DataFrame,
                    level: float = 0.95) -> pd.DataFrame:
    """Per cell: ``control_<s>`` and ``delta_<s>``, each with ``_lo``/``_hi``, and ``changed_<s>``.

    trained, control: stats rows (one per cell_id) of the raw representation with ``<s>``,
    ``<s>_lo``, ``<s>_hi`` columns. ``changed_<s>`` is True when the interval excludes zero,
    False when it covers zero ("not changed by training"), NaN when it is unknown.
    """
    merged = trained.merge(control, on="cell_id", suffixes=("", "_control"))
    out = pd.DataFrame({"cell_id": merged.cell_id})
    for s in CONTROL_STATS:
        if s not in merged or f"{s}_control" not in merged:
            continue
        out[f"control_{s}"] = merged[f"{s}_control"].to_numpy()
        if f"{s}_lo" not in merged:
            continue
        out[f"control_{s}_lo"] = merged[f"{s}_lo_control"].to_numpy()
        out[f"control_{s}_hi"] = merged[f"{s}_hi_control"].to_numpy()
        rows = [difference_interval(r[s], r[f"{s}_lo"], r[f"{s}_hi"], r[f"{s}_control"],
                                    r[f"{s}_lo_control"], r[f"{s}_hi_control"], level)
                for _, r in merged.iterrows()]
        diff = np.array(rows, dtype=float).reshape(-1, 3)
        out[f"delta_{s}"], out[f"delta_{s}_lo"], out[f"delta_{s}_hi"] = diff.T
        known = np.isfinite(diff).all(axis=1)
        changed = (diff[:, 1] > 0) | (diff[:, 2] < 0)
        out[f"changed_{s}"] = pd.array(np.where(known, changed, False), dtype="boolean")
        out.loc[~known, f"changed_{s}"] = pd.NA
    return out


# A supervised cell shares its initial weights and training rows with the contrastive cells that
# agree on every axis a supervised cell has (arch, n, embed_dim, batch_size, seed):
# pipeline.train seeds both from these alone.
SUPERVISED_KEYS = tuple(a for a in GRID_AXES if a not in SUPERVISED and a != "objective")


def sibling_columns(board: pd.DataFrame, names: Mapping[str, str]) -> pd.DataFrame:
    """``board`` with, on each contrastive cell, the columns ``names`` (column → new name) of
    the ok supervised cell that shares its encoder, initial weights and training rows (equal
    on ``SUPERVISED_KEYS``); NaN on the other cells. Unchanged when the grid has no supervised
    cell or ``names`` is empty. The one join of a cell with its supervised sibling."""
    if not names or "objective" not in board or not (board.objective == "supervised").any():
        return board
    keys = [k for k in SUPERVISED_KEYS if k in board]
    sup = board[(board.objective == "supervised") & (board.status == "ok")]
    part = sup[[*keys, *names]].rename(columns=dict(names)).drop_duplicates(subset=keys)
    out = board.merge(part, on=keys, how="left")
    out.loc[out.objective != "contrastive", list(names.values())] = np.nan
    return out


def supervised_columns(board: pd.DataFrame) -> pd.DataFrame:
    """``board`` with ``supervised_<s>`` on each contrastive cell: the statistics of the
    supervised cell (cross-entropy on labels) that shares its encoder, initial weights and
    training rows — a third control where labels exist. Unchanged when the grid has none."""
    return sibling_columns(board, {s: f"supervised_{s}" for s in CONTROL_STATS if s in board})


def control_summary(board: pd.DataFrame, level: float = 0.95) -> list[str]:
    """Sentences for the report: per diagnostic, in how many cells training changed it (the
    ``level`` interval of trained − untrained excludes 0)."""
    lines = []
    for s in CONTROL_STATS:
        col = f"changed_{s}"
        if col not in board:
            continue
        known = board[col].dropna()
        if len(known):
            lines.append(f"{s}: changed by training in {int(known.astype(bool).sum())} of "
                         f"{len(known)} cells ({level:.0%} interval of trained − untrained "
                         f"excludes 0); not changed in {int((~known.astype(bool)).sum())}.")
    return lines
