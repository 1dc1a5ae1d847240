"""Loop-from-the-definition references for pipeline.stats.comparisons.profiles (Agarwal et al. 2021,
§4).

Plain Python lists and loops over one (blocks × methods × seeds) nested list, NaN as missing;
no code shared with the package.
"""

from __future__ import annotations

import math


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def normalise_loop(scores, higher_is_better: bool, baseline: int | None = None) -> list:
    """Per block: seed means of the methods present (flipped when lower is better); min–max
    (or baseline-to-best when ``baseline`` is a method index) of every seed; a block without a
    scale (fewer than 2 methods, all means equal, baseline absent or best) becomes all NaN."""
    out = []
    for block in scores:
        sign = 1.0 if higher_is_better else -1.0
        runs = [[sign * float(v) for v in seeds if not math.isnan(float(v))] for seeds in block]
        means = {j: _mean(r) for j, r in enumerate(runs) if r}
        nan_block = [[math.nan] * len(seeds) for seeds in block]
        if len(means) < 2:
            out.append(nan_block)
            continue
        best = max(means.values())
        low = min(means.values()) if baseline is None else means.get(baseline, math.nan)
        if math.isnan(low) or not best > low:
            out.append(nan_block)
            continue
        out.append([[(sign * float(v) - low) / (best - low) if not math.isnan(float(v))
                     else math.nan for v in seeds] for seeds in block])
    return out


def profile_loop(normalised, method: int, tau: list[float]) -> list[float]:
    """τ ↦ (number of the method's runs with a normalised score > τ) / (number of its runs)."""
    runs = [v for block in normalised for v in block[method] if not math.isnan(v)]
    return [sum(1 for v in runs if v > t) / len(runs) for t in tau]


def optimality_gap_loop(normalised, method: int, gamma: float = 1.0) -> float:
    """(1/n) Σ_runs max(0, γ − x)."""
    runs = [v for block in normalised for v in block[method] if not math.isnan(v)]
    return math.fsum(max(0.0, gamma - v) for v in runs) / len(runs)
