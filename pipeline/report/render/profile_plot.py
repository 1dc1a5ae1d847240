"""The performance-profile figure (Agarwal et al. 2021, Fig. 5): for each method, the fraction
of its (block × seed) runs whose normalised score exceeds τ, against τ, with its pointwise
stratified-bootstrap band shaded. Draws values computed elsewhere
(:func:`pipeline.stats.comparisons.profiles.performance_profiles`, shaped by
:func:`pipeline.report.grid.ranks.profile_table`); computes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from pipeline.report.render.canvas import Drawing, plt, save

PROFILE_COLUMNS = ("method", "tau", "fraction", "low", "high", "gap")


def performance_profile(table: pd.DataFrame, name: str = "method", title: str = "",
                        blocks: str = "block", colors: Mapping[str, str] | None = None) -> Drawing:
    """Draw ``table`` (columns ``name``, ``tau``, ``fraction``, ``low``, ``high``, ``gap``: one
    row per method and τ, methods in legend order; NaN bounds: no band). ``blocks`` names what
    a block is in the y label ("setting", "task"); ``colors``: method → colour (default: tab10
    in table order), to match a page's other figures."""
    fig, ax = plt.subplots(figsize=(7.0, 4.4))
    colours = plt.get_cmap("tab10")
    banded = False
    for k, (method, part) in enumerate(table.groupby(name, sort=False)):
        c = colors[str(method)] if colors and str(method) in colors else colours(k % 10)
        tau, frac = part.tau.to_numpy(float), part.fraction.to_numpy(float)
        lo, hi = part.low.to_numpy(float), part.high.to_numpy(float)
        gap = float(part.gap.iloc[0])
        label = f"{method} (gap {gap:.2f})" if np.isfinite(gap) else str(method)
        ax.plot(tau, frac, color=c, lw=1.8, label=label, drawstyle="steps-post")
        if np.isfinite(lo).any():
            ax.fill_between(tau, lo, hi, color=c, alpha=0.15, lw=0, step="post")
            banded = True
    ax.axvline(1.0, color="#57606a", lw=0.8, ls=":")
    xlabel = f"normalised score τ (per {blocks}: 0 = the worst method's mean, 1 = the best's)"
    ax.set(xlabel=xlabel, ylabel=f"fraction of ({blocks} × seed) runs > τ", ylim=(-0.02, 1.02))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="gap: optimality gap at γ = 1", title_fontsize=8,
              loc="best", framealpha=0.9)
    if title or banded:
        ax.set_title(title + ("\nbands: pointwise bootstrap over seeds" if banded else ""),
                     fontsize=9)
    return save(fig)
