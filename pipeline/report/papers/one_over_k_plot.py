"""The O(1/k) law's plot: draws an :class:`~pipeline.report.papers.one_over_k.OneOverK` (its sweep,
fits, band quantile and fit range); computes nothing.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from pipeline.report.papers.one_over_k import COLORS, LABELS, OneOverK  # noqa: E402
from pipeline.report.render.canvas import Drawing, save  # noqa: E402


def _band(ax: plt.Axes, part: pd.DataFrame, color: str, label: str, z: float) -> None:
    k, kg, kse = part.k.to_numpy(float), part.k_gap.to_numpy(float), part.k_gap_se.to_numpy(float)
    ax.fill_between(k, kg - z * kse, kg + z * kse, color=color, alpha=0.3, linewidth=0)
    ax.plot(k, kg, "o-", color=color, markersize=4, linewidth=1.2, label=label)


def plot(law: OneOverK) -> Drawing:
    """Left: k·(CE − R_k) with its band at ``level`` against Proposition 1's bounds times k.
    Right: the same, zoomed, against the 1/k expansion c₁ + c₂/k + c₃/k² (dashed) and its limit
    c₁ (dotted). The slope's fit range starts at the dotted vertical line."""
    rows, summary, level = law.rows, law.fits, law.level
    fig, (full, zoom) = plt.subplots(1, 2, figsize=(12, 5.6), layout="constrained")
    window = rows.sort_values("k").drop_duplicates("k")
    k = window.k.to_numpy(float)
    low, high = k * window.window_low.to_numpy(float), k * window.window_high.to_numpy(float)
    full.fill_between(k, low, high, color="0.93", label="Proposition 1's window × k")
    full.plot(k, low, "k--", linewidth=1, label=r"$-k\,\log(1 + e^{2/\tau}/k)$")
    full.plot(k, high, "k-.", linewidth=1, label=r"$(e^{2/\tau} - 1)^2/8$")
    for encoder, part in rows.groupby("encoder"):
        part = part.sort_values("k")
        name, color = LABELS.get(str(encoder), str(encoder)), COLORS.get(str(encoder), "tab:green")
        fit = summary[str(encoder)]
        slope = (f"{name}: slope {fit['slope']:.4f} [{fit['ci_low']:.4f}, {fit['ci_high']:.4f}]"
                 if fit["slope"] is not None else name)
        if fit.get("slope_expansion") is not None:
            slope += f"\n    the 1/k expansion predicts {fit['slope_expansion']:.4f}"
        else:
            slope += f"\n    expansion: {fit['regime']}"
        _band(full, part, color, slope, law.z)
        _band(zoom, part, color, f"{name}: k·(CE − R_k), {level:.0%} band", law.z)
        if fit.get("slope_expansion") is not None:
            zoom.plot(part.k, part.k * part.gap_expansion, "--", color=color, linewidth=1,
                      label=f"{name}: c₁ + c₂/k + c₃/k²")
            if fit.get("c1") is not None:
                zoom.axhline(fit["c1"], color=color, linestyle=":", linewidth=1,
                             label=f"{name}: c₁ = {fit['c1']:.4f} ± {fit.get('c1_se') or 0:.4f}")
    k_min = law.fit_k_min
    for ax in (full, zoom):
        ax.set_xscale("log", base=2)
        ax.set_xticks(k, [f"{v:g}" for v in k])
        ax.set_xlabel("negatives k")
        ax.set_ylabel("k · (CE − R_k)")
        ax.grid(alpha=0.3)
        if k_min is not None:
            ax.axvline(k_min, color="0.4", linestyle=":", linewidth=1)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1,
                  frameon=False)
    fit_text = f"slope fitted over k ≥ {k_min} (dotted line)" if k_min else "slope over every k"
    full.set_title(f"k·(CE − R_k) inside Proposition 1's bounds; {fit_text}", fontsize=9)
    zoom.set_title("zoom: measured against the 1/k expansion", fontsize=9)
    return save(fig)
