"""Loop-from-the-formula reference for pipeline.probe's weighted kNN (SPEC §5; Wu et al. 2018).

Plain Python floats and the math module; shares no code with the package. Small inputs only.
"""

from __future__ import annotations

import math


def _unit(v) -> list[float]:
    v = [float(t) for t in v]
    norm = math.sqrt(math.fsum(t * t for t in v))
    return [t / norm for t in v] if norm > 0 else v


def weighted_knn_loop(bank, bank_labels, queries, k: int, temperature: float) -> list[int]:
    """Predicted label per query: the k most cosine-similar bank rows (similarity descending, then
    bank index ascending) vote for their labels with weight exp(s / T); the largest summed weight
    wins, equal sums go to the smallest label."""
    rows = [_unit(b) for b in bank]
    preds = []
    for q in queries:
        u = _unit(q)
        sims = [(math.fsum(a * b for a, b in zip(u, r, strict=True)), j)
                for j, r in enumerate(rows)]
        sims.sort(key=lambda sj: (-sj[0], sj[1]))
        votes: dict[int, list[float]] = {}
        for s, j in sims[:k]:
            votes.setdefault(int(bank_labels[j]), []).append(math.exp(s / temperature))
        totals = {label: math.fsum(ws) for label, ws in votes.items()}
        best = max(totals.values())
        preds.append(min(label for label, total in totals.items() if total == best))
    return preds
