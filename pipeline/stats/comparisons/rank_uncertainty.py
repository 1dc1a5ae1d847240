"""How sure a ranking is (SPEC §7): a bootstrap of each method's mean rank.

``scores``: ``(N, m, S)`` as in :mod:`pipeline.stats.comparisons.ranking`; like the ranking, it uses
the complete blocks (every method has a seed there). One replicate: draw the complete blocks with
replacement; within each drawn block, draw each method's seeds there with replacement (as many as
it has); take the seed means, rank them within the block (1 = best, ties averaged, as
:func:`pipeline.stats.comparisons.ranking.block_ranks`) and average the ranks over the drawn blocks.
So the interval covers both what the settings were and how the trainings fell (a second draw of a
block draws its seeds afresh).

- Rank interval: the percentile interval of a method's replicate mean ranks at ``level``; the
  estimate is the observed mean rank.
- P(rank = 1): the share of replicates in which the method has the lowest mean rank, a tie for
  the lowest split equally among the tied methods (so the m values sum to 1).

NaN everywhere without a complete block. Pure numpy/scipy; every draw from the ``rng`` passed in:
per chunk of replicates, first the blocks (``rng.integers``), then one uniform per (replicate,
block, method, seed) slot (``rng.random``), the seed drawn as ``floor(u · k)`` among the k seeds
the method has in that block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from pipeline.stats.comparisons.ranking import block_ranks, check_scores, seed_means
from pipeline.stats.uncertainty import check_level

CHUNK = 1 << 21  # (replicate × block × method × seed) slots drawn at once


@dataclass(frozen=True)
class RankUncertainty:
    """Per method (in the order given): the observed mean rank ``estimate``, its bootstrap
    percentile interval [``low``, ``high``] at ``level``, ``p_rank1`` = P(rank = 1); over
    ``blocks`` complete blocks and ``n_boot`` replicates."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_rank1: np.ndarray
    blocks: int
    n_boot: int
    level: float


def _compact(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's finite seeds moved to the front (order kept), and how many there are."""
    finite = np.isfinite(arr)
    order = np.argsort(~finite, axis=2, kind="stable")
    return np.take_along_axis(np.where(finite, arr, 0.0), order, axis=2), finite.sum(axis=2)


def replicate_mean_ranks(scores: np.ndarray, higher_is_better: bool, n_boot: int,
                         rng: np.random.Generator) -> np.ndarray:
    """``(n_boot, m)`` bootstrap replicates of the mean rank over the complete blocks of
    ``(N, m, S)`` scores (the module docstring says how one is drawn); ``(n_boot, m)`` of NaN
    without a complete block."""
    arr = np.asarray(scores, dtype=np.float64)
    complete = np.all(np.isfinite(seed_means(arr)), axis=1)
    n, m, s = int(complete.sum()), arr.shape[1], arr.shape[2]
    if n == 0:
        return np.full((n_boot, m), np.nan)
    values, counts = _compact(arr[complete])
    out = np.empty((n_boot, m))
    step = max(1, CHUNK // (n * m * s))
    for start in range(0, n_boot, step):
        c = min(step, n_boot - start)
        pick = rng.integers(0, n, size=(c, n))  # (c, n): the drawn blocks
        k = counts[pick]  # (c, n, m): seeds each method has in the drawn block
        u = rng.random((c, n, m, s))
        seed = np.minimum((u * k[..., None]).astype(np.intp), np.maximum(k[..., None] - 1, 0))
        drawn = np.take_along_axis(values[pick], seed, axis=3)  # (c, n, m, s)
        used = np.arange(s) < k[..., None]
        means = np.where(used, drawn, 0.0).sum(axis=3) / k
        signed = -means if higher_is_better else means
        out[start:start + c] = sps.rankdata(signed, axis=2, method="average").mean(axis=1)
    return out


def first_place_shares(mean_ranks: np.ndarray) -> np.ndarray:
    """``(m,)``: over the rows of ``(B, m)`` mean ranks, the share in which each column is
    lowest, a tie for the lowest split equally."""
    best = mean_ranks.min(axis=1, keepdims=True)
    first = mean_ranks == best
    shares: np.ndarray = (first / first.sum(axis=1, keepdims=True)).mean(axis=0)
    return shares


def rank_uncertainty(scores: np.ndarray, higher_is_better: bool, n_boot: int,
                     rng: np.random.Generator, level: float = 0.95) -> RankUncertainty:
    """The rank interval and P(rank = 1) of each method of ``(N, m, S)`` scores."""
    check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot = {n_boot}: number of bootstrap resamples must be >= 1")
    shape = np.shape(scores)
    arr = check_scores(scores, [str(j) for j in range(shape[1] if len(shape) > 1 else 0)])
    means = seed_means(arr)
    complete = np.all(np.isfinite(means), axis=1)
    m = arr.shape[1]
    if not complete.any():
        nan = np.full(m, np.nan)
        return RankUncertainty(nan, nan, nan, nan, 0, n_boot, level)
    estimate = block_ranks(means[complete], higher_is_better).mean(axis=0)
    reps = replicate_mean_ranks(arr, higher_is_better, n_boot, rng)
    low, high = np.quantile(reps, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], axis=0)
    return RankUncertainty(estimate, low, high, first_place_shares(reps), int(complete.sum()),
                           n_boot, level)
