"""The contrastive − supervised gap over training: Betser et al.'s comparison at every epoch the
stats stage analysed (``stats.epochs`` and the last epoch), so a reader sees whether the gap
grows or shrinks as the encoders train.

Both objectives start from the same initial weights (a seed fixes them), so at epoch 0 the gap
is zero by construction. At each (layer, epoch) and for each statistic in :data:`GAP_STATS`, the
gap is paired by seed: each seed's contrastive value minus its supervised value (the mean over
that seed's cells of each objective, where other grid axes vary), then the mean over seeds and
its Student-t interval with S − 1 degrees of freedom (:func:`pipeline.stats.uncertainty.seed_ci`),
on the raw (unnormalised) held-out embeddings, as Table 1 measures them. Values only:
:mod:`pipeline.report.papers.markdown` writes the table, :mod:`pipeline.report.render.figures`
the figure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.stats.uncertainty import seed_ci

GAP_STATS = ("cv", "ad_mean")  # the two statistics the image verdict rests on
COLUMNS = ("layer", "epoch", "stat", "seeds", "contrastive", "supervised", "difference",
           "difference_lo", "difference_hi")


def gap_by_epoch(stats: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """One row per (layer, epoch, statistic) in :data:`COLUMNS` order, sorted; empty without
    both objectives or without per-epoch rows. ``stats``: the stats stage's table (one row per
    cell, epoch, layer and representation, with ``objective`` and ``seed``)."""
    need = {"objective", "seed", "epoch", "representation"}
    if not need <= set(stats) or not {"contrastive", "supervised"} <= set(stats.objective):
        return pd.DataFrame(columns=list(COLUMNS))
    rows = stats[stats.representation == "raw"]
    if "status" in rows:
        rows = rows[rows.status == "ok"]
    if "layer" not in rows:
        rows = rows.assign(layer="head")
    out = []
    for (layer, epoch), part in rows.groupby(["layer", "epoch"], sort=True):
        for stat in (s for s in GAP_STATS if s in part):
            per_seed = part.groupby(["seed", "objective"])[stat].mean().unstack("objective")
            if not {"contrastive", "supervised"} <= set(per_seed):
                continue
            paired = per_seed[["contrastive", "supervised"]].dropna()
            diff = (paired.contrastive - paired.supervised).to_numpy(float)
            ci = seed_ci(diff, level) if len(diff) else None
            out.append({"layer": layer, "epoch": int(epoch), "stat": stat, "seeds": len(diff),
                        "contrastive": float(paired.contrastive.mean()) if len(diff) else np.nan,
                        "supervised": float(paired.supervised.mean()) if len(diff) else np.nan,
                        "difference": ci.estimate if ci else np.nan,
                        "difference_lo": ci.low if ci else np.nan,
                        "difference_hi": ci.high if ci else np.nan})
    return pd.DataFrame(out, columns=list(COLUMNS))
