"""The rank-interval figure, the CD diagram's companion: each method's mean rank (1, the best, at
the left) with its bootstrap interval as a bar, best first from the top, and P(rank = 1) at the
right. Draws the ``ranks.csv`` values computed elsewhere
(:mod:`pipeline.stats.comparisons.rank_uncertainty` via :mod:`pipeline.report.grid.ranks`); computes
nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.report.render.canvas import Drawing, plt, save


def rank_intervals(ranks: pd.DataFrame, name: str = "method", level: float = 0.95,
                   title: str = "") -> Drawing:
    """Draw ``ranks`` (columns ``name``, ``mean_rank``, ``rank_lo``, ``rank_hi``, ``p_rank1``,
    best first): a row per method, its mean rank as a dot and its ``level`` interval as a bar."""
    names = [str(v) for v in ranks[name]]
    m = len(names)
    est = ranks.mean_rank.to_numpy(float)
    lo, hi = ranks.rank_lo.to_numpy(float), ranks.rank_hi.to_numpy(float)
    p1 = ranks.p_rank1.to_numpy(float)
    fig, ax = plt.subplots(figsize=(7.0, 1.1 + 0.42 * m))
    y = np.arange(m)[::-1]
    ok = np.isfinite(lo) & np.isfinite(hi)
    ax.hlines(y[ok], lo[ok], hi[ok], color="#0969da", lw=5, alpha=0.45,
              label=f"{round(level * 100):g}% bootstrap interval")
    ax.plot(est, y, "o", color="#0969da", ms=6, label="mean rank")
    ax.set_yticks(y, names)
    ax.set_xlim(0.8, max(m, 2) + 0.2)
    ax.set_xticks(range(1, max(m, 2) + 1))
    ax.set_ylim(-0.7, m - 0.3)
    ax.set_xlabel("mean rank (1 = best)")
    ax.grid(axis="x", color="#d0d7de", lw=0.6)
    right = ax.secondary_yaxis("right")
    right.set_yticks(y, [f"{v:.2f}" if np.isfinite(v) else "–" for v in p1])
    right.set_ylabel("P(rank 1)")
    ax.legend(loc="lower right", fontsize=8, frameon=False, bbox_to_anchor=(1.0, 1.0), ncol=2)
    if title:
        ax.set_title(title, fontsize=10, loc="left", pad=18)
    fig.tight_layout()
    return save(fig)
