"""What would settle a pair that the comparison does not separate (SPEC §7): power and a ROPE.

For methods a and b over the N blocks where both have seeds: d_i = (a's seed mean) − (b's) on
block i. The model: d_i = δ + u_i + ē_i, u_i ~ N(0, σ²_b) (how the difference moves from block
to block) and ē_i the mean of S seed differences, variance σ²_s/S (σ²_s: the variance of one
seed of a minus one seed of b, so σ²_s = σ²_a + σ²_b of the two methods' seed variances). Fitted
by moments: δ̂ = mean d_i; σ̂²_s = the mean over blocks of s²_ia + s²_ib (ddof 1; blocks where
both have 2 or more seeds); σ̂²_b = max(0, var(d_i) − mean_i(s²_ia/n_ia + s²_ib/n_ib)).

The test whose power is computed: the two-sided paired t-test of the d_i over blocks at level α
(one pair; no adjustment for the other pairs). Its statistic is noncentral t with N − 1 degrees
of freedom and noncentrality δ √N / √(σ²_b + σ²_s/S), so (closed form, checked against a
simulation in ``tests/stats/test_power.py``)

    power(N, S) = P(T > t_{1−α/2, N−1}) + P(T < −t_{1−α/2, N−1}).

:func:`seeds_to_separate` is the least S (per block and method) at the observed N with power ≥
the target (None when even S = ``max_seeds`` does not reach it: σ²_b alone is too large);
:func:`blocks_to_separate` the least N at the observed S. These plug the estimates in: the answer
is as uncertain as δ̂ is (a planning figure, not a promise).

ROPE (Benavoli et al. 2017, JMLR 18, "Time for a change", §4): a region [−ε, ε] of differences
too small to matter on the metric's scale. When the t-interval of δ over blocks at ``level``
lies inside it, the pair is *practically equivalent*: more compute would separate, at most, a
difference that does not matter, so none is asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from pipeline.stats.uncertainty import check_level, t_quantile

POWER = 0.8  # the target power of the compute asked for
MAX_SEEDS = 1000
MAX_BLOCKS = 100_000


@dataclass(frozen=True)
class PairFit:
    """The fitted model of one pair's block differences (see the module docstring).

    delta / delta_low / delta_high: δ̂ and its t-interval over blocks at ``level`` (NaN bounds
    with fewer than 2 blocks); sigma2_seed: σ̂²_s (NaN when no block has 2 seeds of both);
    sigma2_block: σ̂²_b (the whole variance of the d_i when σ̂²_s is NaN); var_d: the sample
    variance of the d_i; blocks: N; seeds: the mean seeds per (block, method) over both methods.
    """

    delta: float
    delta_low: float
    delta_high: float
    sigma2_seed: float
    sigma2_block: float
    var_d: float
    blocks: int
    seeds: float
    level: float


def fit_pair(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> PairFit:
    """Fit the model to two methods' ``(N, S)`` scores (NaN: missing); blocks where either has
    no seed are left out."""
    check_level(level)
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    na, nb = np.isfinite(a).sum(axis=1), np.isfinite(b).sum(axis=1)
    both = (na > 0) & (nb > 0)
    a, b, na, nb = a[both], b[both], na[both], nb[both]
    n = int(both.sum())
    nan = float("nan")
    if n == 0:
        return PairFit(nan, nan, nan, nan, nan, nan, 0, nan, level)
    d = np.nanmean(a, axis=1) - np.nanmean(b, axis=1)
    delta = float(d.mean())
    var_d = float(d.var(ddof=1)) if n > 1 else nan
    half = t_quantile(level, n - 1) * math.sqrt(var_d / n) if n > 1 else nan
    seeds = float((na.sum() + nb.sum()) / (2 * n))
    two = (na > 1) & (nb > 1)
    if not two.any():
        return PairFit(delta, delta - half, delta + half, nan, var_d, var_d, n, seeds, level)
    with np.errstate(invalid="ignore", divide="ignore"):
        sa = np.nanvar(a[two], axis=1, ddof=1)
        sb = np.nanvar(b[two], axis=1, ddof=1)
    sigma2_seed = float(np.mean(sa + sb))
    within = float(np.mean(sa / na[two] + sb / nb[two]))
    sigma2_block = max(0.0, var_d - within) if n > 1 else nan
    return PairFit(delta, delta - half, delta + half, sigma2_seed, sigma2_block, var_d, n, seeds,
                   level)


def power(delta: float, sigma2_seed: float, sigma2_block: float, blocks: int | np.ndarray,
          seeds: float | np.ndarray, alpha: float) -> np.ndarray:
    """The power of the two-sided paired t-test over ``blocks`` blocks with ``seeds`` seeds per
    block and method, at level ``alpha``, when the model's parameters are the ones given
    (vectorised over ``blocks`` and ``seeds``); NaN below 2 blocks."""
    n = np.asarray(blocks, dtype=np.float64)
    s = np.asarray(seeds, dtype=np.float64)
    var = sigma2_block + sigma2_seed / s
    with np.errstate(invalid="ignore", divide="ignore"):
        ncp = np.where(var > 0, delta * np.sqrt(n) / np.sqrt(var), np.sign(delta) * np.inf)
        df = n - 1
        crit = sps.t.ppf(1.0 - alpha / 2.0, df)
        out: np.ndarray = sps.nct.sf(crit, df, ncp) + sps.nct.cdf(-crit, df, ncp)
        # SciPy's noncentral t returns NaN far in its tails (many blocks, a large ncp): there
        # the t is normal to many digits
        normal = sps.norm.sf(crit - ncp) + sps.norm.cdf(-crit - ncp)
    out = np.where(np.isnan(out) & np.isfinite(ncp), normal, out)
    out = np.where(np.isinf(ncp), 1.0, out)
    return np.where(n >= 2, out, np.nan)


def _least(ok: np.ndarray, values: np.ndarray) -> int | None:
    hits = np.flatnonzero(ok)
    return int(values[hits[0]]) if hits.size else None


def seeds_to_separate(fit: PairFit, alpha: float, target: float = POWER,
                      max_seeds: int = MAX_SEEDS) -> int | None:
    """The least seeds per block and method (at the fitted blocks) whose power reaches
    ``target``; None when the fit has no seed variance, fewer than 2 blocks, δ̂ = 0, or not
    within ``max_seeds``."""
    if not (fit.blocks >= 2 and np.isfinite(fit.sigma2_seed) and np.isfinite(fit.delta)
            and fit.delta != 0):
        return None
    s = np.arange(1, max_seeds + 1)
    return _least(power(fit.delta, fit.sigma2_seed, fit.sigma2_block, fit.blocks, s, alpha)
                  >= target, s)


def blocks_to_separate(fit: PairFit, alpha: float, target: float = POWER,
                       max_blocks: int = MAX_BLOCKS) -> int | None:
    """The least blocks (at the fitted seeds per block) whose power reaches ``target``; None
    when δ̂ = 0, the fit has fewer than 2 blocks, or not within ``max_blocks``."""
    if not (fit.blocks >= 2 and np.isfinite(fit.var_d) and np.isfinite(fit.delta)
            and fit.delta != 0):
        return None
    seed2 = fit.sigma2_seed if np.isfinite(fit.sigma2_seed) else 0.0
    block2 = fit.sigma2_block
    lo, hi = 2, max_blocks
    if power(fit.delta, seed2, block2, hi, fit.seeds, alpha) < target:
        return None
    while lo < hi:  # power grows with the blocks: bisect for the least that reaches it
        mid = (lo + hi) // 2
        if power(fit.delta, seed2, block2, mid, fit.seeds, alpha) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class Settle:
    """What would settle one pair: its fit, whether it is practically equivalent (the interval
    of δ inside ±rope; False when rope is 0 or the interval is NaN), and the seeds per block or
    the blocks that a two-sided paired t-test at ``alpha`` needs for ``target`` power (None:
    see :func:`seeds_to_separate`, :func:`blocks_to_separate`; both None when practically
    equivalent)."""

    fit: PairFit
    rope: float
    practically_equivalent: bool
    seeds: int | None
    blocks: int | None
    alpha: float
    target: float


def settle(a: np.ndarray, b: np.ndarray, alpha: float, level: float, rope: float,
           target: float = POWER) -> Settle:
    """The fit of ``a`` against ``b`` (``(N, S)`` scores each) and what would settle it."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha = {alpha!r}: significance level must be in (0, 1)")
    if not (math.isfinite(rope) and rope >= 0.0):
        raise ValueError(f"rope = {rope!r}: the region of practical equivalence must be a "
                         "finite number >= 0")
    fit = fit_pair(a, b, level)
    inside = bool(rope > 0 and np.isfinite(fit.delta_low) and -rope <= fit.delta_low
                  and fit.delta_high <= rope)
    if inside:
        return Settle(fit, rope, True, None, None, alpha, target)
    return Settle(fit, rope, False, seeds_to_separate(fit, alpha, target),
                  blocks_to_separate(fit, alpha, target), alpha, target)
