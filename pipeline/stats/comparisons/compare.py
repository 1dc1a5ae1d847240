"""One call for the comparison of methods across blocks (SPEC §6): ranks and their tests
(:mod:`pipeline.stats.comparisons.ranking`) with the aggregates and P(A > B)
(:mod:`pipeline.stats.comparisons.aggregates`) of the same ``(N, m, S)`` scores.

The same engine serves one grid (blocks = the settings of the other axes, methods = the losses)
and a suite (blocks = tasks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.stats.comparisons.aggregates import (
    Improvement,
    MethodAggregate,
    aggregate_methods,
    improvement,
)
from pipeline.stats.comparisons.ranking import PostHoc, Ranking, check_scores, rank_methods


@dataclass(frozen=True)
class Comparison:
    """Everything SPEC §6 computes from one score array.

    ranking: ranks, Friedman, Nemenyi, Wilcoxon–Holm, tiers; methods: one aggregate per method in
    the order of ``ranking.methods``; improvements: P(a > b) per pair (a before b); seeds: the
    most seeds any cell has (1: no interval over seeds can be told).
    """

    ranking: Ranking
    methods: tuple[MethodAggregate, ...]
    improvements: tuple[Improvement, ...]
    seeds: int
    level: float

    def improvement(self, a: str, b: str) -> Improvement:
        """P(a > b) (either order of the stored pair: P(b > a) = 1 − P(a > b))."""
        for imp in self.improvements:
            if (imp.a, imp.b) == (a, b):
                return imp
            if (imp.b, imp.a) == (a, b):
                p = imp.probability
                flipped = type(p)(1 - p.estimate, 1 - p.high, 1 - p.low, p.level)
                return Improvement(a, b, flipped, imp.blocks)
        raise KeyError(f"no pair ({a!r}, {b!r}) among methods {list(self.ranking.methods)}")


def compare(scores: np.ndarray, methods: tuple[str, ...] | list[str], higher_is_better: bool,
            rng: np.random.Generator, alpha: float = 0.05, level: float = 0.95,
            n_boot: int = 2000, posthoc: PostHoc = "nemenyi") -> Comparison:
    """The comparison of ``methods`` on ``(N, m, S)`` scores (NaN = missing).

    alpha: the tests' significance level; level: the bootstrap intervals' confidence level;
    n_boot: bootstrap resamples; rng: the only source of randomness (the bootstrap).
    """
    arr = check_scores(scores, tuple(methods))
    ranking = rank_methods(arr, methods, higher_is_better, alpha, posthoc)
    aggs = aggregate_methods(arr, methods, higher_is_better, n_boot, rng, level)
    imps = improvement(arr, methods, higher_is_better, n_boot, rng, level)
    seeds = int(np.isfinite(arr).sum(axis=2).max()) if arr.size else 0
    return Comparison(ranking, aggs, imps, seeds, level)
