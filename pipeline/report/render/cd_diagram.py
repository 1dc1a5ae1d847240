"""The critical-difference diagram (Demšar 2006, Fig. 1): the methods on the mean-rank axis (1, the
best, at the left), the Nemenyi CD as a scale bar above it, and a thick bar joining each maximal
group of methods that the tests do not separate. Draws values computed elsewhere
(:mod:`pipeline.report.grid.ranks`); computes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pipeline.report.render.canvas import Drawing, plt, save


def critical_difference(ranks: pd.DataFrame, cd: float, groups: Sequence[Sequence[str]],
                        name: str = "method", title: str = "") -> Drawing:
    """Draw ``ranks`` (columns ``name`` and ``mean_rank``, best first) with the CD ``cd`` and
    the bars of ``groups`` (tuples of names; single names draw no bar)."""
    names = [str(v) for v in ranks[name]]
    pos = dict(zip(names, ranks.mean_rank.to_numpy(float), strict=True))
    m = len(names)
    half = (m + 1) // 2
    lines = max(half, m - half)
    fig, ax = plt.subplots(figsize=(7.0, 1.6 + 0.32 * lines + 0.18 * len(groups)))
    lo, hi = 1, max(m, 2)
    ax.set_xlim(lo - 0.6, hi + 0.6)
    top = 0.0
    ax.hlines(top, lo, hi, color="black", lw=1)
    for t in range(lo, hi + 1):
        ax.vlines(t, top, top + 0.08, color="black", lw=1)
        ax.text(t, top + 0.13, str(t), ha="center", va="bottom", fontsize=9)
    if np.isfinite(cd):
        ax.hlines(top + 0.55, lo, lo + cd, color="black", lw=1.2)
        ax.vlines([lo, lo + cd], top + 0.5, top + 0.6, color="black", lw=1.2)
        ax.text(lo + cd / 2, top + 0.63, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=9)
    bars = [g for g in groups if len(g) > 1]
    bar_y = [-0.18 - 0.14 * i for i in range(len(bars))]
    for g, y in zip(bars, bar_y, strict=True):
        xs = [pos[n] for n in g]
        ax.hlines(y, min(xs) - 0.03, max(xs) + 0.03, color="#cf222e", lw=4, alpha=0.85)
    label_top = (bar_y[-1] if bar_y else 0.0) - 0.3
    for i, n in enumerate(names):
        left = i < half
        row = i if left else m - 1 - i
        y = label_top - 0.32 * row
        x_end = lo - 0.4 if left else hi + 0.4
        ax.vlines(pos[n], y, top, color="#57606a", lw=0.8)
        ax.hlines(y, min(pos[n], x_end), max(pos[n], x_end), color="#57606a", lw=0.8)
        ax.text(x_end + (-0.05 if left else 0.05), y, f"{n} ({pos[n]:.2f})",
                ha="right" if left else "left", va="center", fontsize=9)
    ax.set_ylim(label_top - 0.32 * (lines - 1) - 0.3, top + 0.95)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    fig.subplots_adjust(left=0.2, right=0.8, top=0.85 if title else 0.97, bottom=0.03)
    return save(fig)
