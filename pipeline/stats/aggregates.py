"""Aggregates of methods over (block × seed) scores with stratified-bootstrap intervals (SPEC §6).

``scores``: ``(N, m, S)``, N blocks × m methods × S seeds, NaN where missing (see
:mod:`pipeline.stats.ranking`). A method's aggregates use the blocks where it has at least one
seed; the blocks it lacks are left out and counted (``blocks_missing``), never filled in.

- Mean and interquartile mean (IQM: the mean of the middle 50% of a method's (block × seed)
  scores, ``scipy.stats.trim_mean(x, 0.25)``; Agarwal et al. 2021, NeurIPS, "Deep RL at the edge
  of the statistical precipice", library rliable), of the scores as they are (not flipped).
- Probability of improvement P(A > B) = (1/N_AB) Σ_i P(X_iA > X_iB) over the N_AB blocks where
  both are present, each term the Mann–Whitney statistic over the two seed sets, ties ½.
- Intervals: the stratified bootstrap of rliable: each resample draws, within every block and for
  every method independently, as many seeds as the method has there, with replacement; blocks
  are kept. So the interval is over **seeds** (training variation) given the blocks; with one seed
  per cell there is no such variation and its bounds are NaN.
- Mean win rate (HELM, Liang et al. 2022): per block, the fraction of the other methods present
  there that the method's seed mean beats (a tie counts ½); then the mean over the blocks where
  the method and at least one other are present, each block weighing the same. Pooling every
  (block, other method) pair instead weighs a block by how many methods it has, and differs
  from HELM's when blocks are missing a method.
- Borda count (MTEB): Σ_i (m − r_ij) over the complete blocks (the blocks ``ranking`` uses).

Pure numpy/scipy; every draw from the ``rng`` passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from pipeline.stats.ranking import block_ranks, check_scores, seed_means
from pipeline.stats.uncertainty import ConfidenceInterval, check_level


def iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean along ``axis``: ``scipy.stats.trim_mean(x, 0.25, axis)``."""
    return np.asarray(sps.trim_mean(x, 0.25, axis=axis))


def _interval(estimate: float, draws: np.ndarray, level: float) -> ConfidenceInterval:
    lo, hi = np.quantile(draws, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return ConfidenceInterval(float(estimate), float(lo), float(hi), level)


def _resample(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``(n_boot, k)`` draws with replacement from the k values of one (block, method)."""
    return values[rng.integers(0, values.size, size=(n_boot, values.size))]


@dataclass(frozen=True)
class MethodAggregate:
    """One method's aggregates.

    blocks: blocks where it has a seed; blocks_missing: N − blocks; scores: its (block × seed)
    values used; mean / iqm: over those values, intervals by the stratified bootstrap over seeds
    (NaN bounds when no block has 2 seeds); win_rate: HELM's mean win rate; borda: MTEB's count
    over the ``borda_blocks`` complete blocks.
    """

    method: str
    blocks: int
    blocks_missing: int
    scores: int
    mean: ConfidenceInterval
    iqm: ConfidenceInterval
    win_rate: float
    borda: float
    borda_blocks: int


@dataclass(frozen=True)
class Improvement:
    """P(a > b) over the ``blocks`` blocks where both are present, its stratified-bootstrap
    interval over seeds (NaN bounds when no block has 2 seeds of either)."""

    a: str
    b: str
    probability: ConfidenceInterval
    blocks: int


def _cells(arr: np.ndarray, j: int) -> list[np.ndarray]:
    """The finite seed values of method j in each block where it has any."""
    out = []
    for i in range(arr.shape[0]):
        v = arr[i, j][np.isfinite(arr[i, j])]
        if v.size:
            out.append(v)
    return out


def win_rates(means: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """``(m,)`` HELM mean win rate of ``(N, m)`` seed means (NaN: missing; ties ½): per block,
    the fraction of the other methods present that a method beats, averaged over the blocks
    where it and another method are present (NaN where there is none)."""
    signed = np.where(np.isfinite(means), means if higher_is_better else -means, np.nan)
    present = np.isfinite(signed)
    a, b = signed[:, :, None], signed[:, None, :]
    with np.errstate(invalid="ignore"):
        beats = (a > b) + 0.5 * (a == b)  # (N, m, m): method j against method k in block i
    pair = present[:, :, None] & present[:, None, :]
    pair &= ~np.eye(signed.shape[1], dtype=bool)[None]
    others = pair.sum(axis=2)  # (N, m): other methods present beside j in block i
    wins = np.where(pair, beats, 0.0).sum(axis=2)
    counted = others > 0
    per_block = np.where(counted, wins / np.maximum(others, 1), 0.0)
    blocks = counted.sum(axis=0)
    return np.where(blocks > 0, per_block.sum(axis=0) / np.maximum(blocks, 1), np.nan)


def aggregate_methods(scores: np.ndarray, methods: tuple[str, ...] | list[str],
                      higher_is_better: bool, n_boot: int, rng: np.random.Generator,
                      level: float = 0.95) -> tuple[MethodAggregate, ...]:
    """Per method: mean and IQM with stratified-bootstrap intervals, win rate, Borda count."""
    check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot = {n_boot}: number of bootstrap resamples must be >= 1")
    methods = tuple(methods)
    arr = check_scores(scores, methods)
    means = seed_means(arr)
    complete = np.all(np.isfinite(means), axis=1)
    m = len(methods)
    borda = (m - block_ranks(means[complete], higher_is_better)).sum(axis=0) if complete.any() \
        else np.zeros(m)
    wins = win_rates(means, higher_is_better)
    out = []
    for j, name in enumerate(methods):
        cells = _cells(arr, j)
        nan = ConfidenceInterval(float("nan"), float("nan"), float("nan"), level)
        if not cells:
            out.append(MethodAggregate(name, 0, arr.shape[0], 0, nan, nan, float("nan"),
                                       float(borda[j]), int(complete.sum())))
            continue
        flat = np.concatenate(cells)
        if max(c.size for c in cells) < 2:  # no seed variation to resample
            mean = ConfidenceInterval(float(flat.mean()), float("nan"), float("nan"), level)
            mid = ConfidenceInterval(float(iqm(flat)), float("nan"), float("nan"), level)
        else:
            draws = np.concatenate([_resample(c, n_boot, rng) for c in cells], axis=1)
            mean = _interval(flat.mean(), draws.mean(axis=1), level)
            mid = _interval(float(iqm(flat)), iqm(draws, axis=1), level)
        out.append(MethodAggregate(name, len(cells), arr.shape[0] - len(cells), int(flat.size),
                                   mean, mid, float(wins[j]), float(borda[j]),
                                   int(complete.sum())))
    return tuple(out)


def mann_whitney_probability(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) + ½ P(X = Y) over all pairs of the last axes' values: x ``(..., p)``, y
    ``(..., q)`` → ``(...)``; the Mann–Whitney U of x against y divided by p·q."""
    gt = (x[..., :, None] > y[..., None, :]).mean(axis=(-2, -1))
    eq = (x[..., :, None] == y[..., None, :]).mean(axis=(-2, -1))
    probability: np.ndarray = gt + 0.5 * eq
    return probability


def improvement(scores: np.ndarray, methods: tuple[str, ...] | list[str], higher_is_better: bool,
                n_boot: int, rng: np.random.Generator,
                level: float = 0.95) -> tuple[Improvement, ...]:
    """P(A > B) for every pair (a before b in ``methods``), stratified-bootstrap intervals."""
    check_level(level)
    methods = tuple(methods)
    arr = check_scores(scores, methods)
    signed = arr if higher_is_better else -arr
    m = len(methods)
    out = []
    for a in range(m):
        for b in range(a + 1, m):
            terms, boots, varied = [], [], False
            for i in range(arr.shape[0]):
                x = signed[i, a][np.isfinite(signed[i, a])]
                y = signed[i, b][np.isfinite(signed[i, b])]
                if not (x.size and y.size):
                    continue
                terms.append(float(mann_whitney_probability(x, y)))
                varied |= x.size > 1 or y.size > 1
                boots.append(mann_whitney_probability(_resample(x, n_boot, rng),
                                                      _resample(y, n_boot, rng)))
            if not terms:
                ci = ConfidenceInterval(float("nan"), float("nan"), float("nan"), level)
            elif not varied:
                ci = ConfidenceInterval(float(np.mean(terms)), float("nan"), float("nan"), level)
            else:
                ci = _interval(float(np.mean(terms)), np.mean(boots, axis=0), level)
            out.append(Improvement(methods[a], methods[b], ci, len(terms)))
    return tuple(out)
