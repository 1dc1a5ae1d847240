"""References for pipeline.report.grid.figure_plan's Pareto front: the definition, pair by pair.

O(n²) and plain Python: a point is on the front when no other point dominates it, ``a``
dominating ``b`` when it costs no more, scores no worse, and is strictly better in one.
"""

from __future__ import annotations

import math


def pareto_front_brute(cost, score, higher: bool = True) -> list[bool]:
    """For each point: no other point dominates it (NaN points are on no front)."""
    pts = [(float(c), float(s) if higher else -float(s)) for c, s in zip(cost, score, strict=True)]
    out = []
    for i, (ci, si) in enumerate(pts):
        if math.isnan(ci) or math.isnan(si):
            out.append(False)
            continue
        dominated = any(
            j != i and not (math.isnan(cj) or math.isnan(sj))
            and cj <= ci and sj >= si and (cj < ci or sj > si)
            for j, (cj, sj) in enumerate(pts))
        out.append(not dominated)
    return out
