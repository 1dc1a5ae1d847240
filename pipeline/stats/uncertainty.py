"""Confidence intervals: row bootstrap within one cell, t-interval across seeds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class ConfidenceInterval:
    """A point estimate and a two-sided interval [low, high] at confidence `level`."""

    estimate: float
    low: float
    high: float
    level: float = 0.95


def check_level(level: float, name: str = "level") -> float:
    """``level`` as a float; ValueError naming ``name`` unless it is a number in (0, 1).

    The one check of a confidence level (intervals, the report's tables, the probes).
    """
    shown = float(level) if isinstance(level, np.floating) else level
    if isinstance(level, bool) or not isinstance(shown, int | float) or not 0.0 < shown < 1.0:
        raise ValueError(f"{name} = {shown!r}: confidence level must be in (0, 1)")
    return float(shown)


def bootstrap_ci(
    z: np.ndarray,
    statistic: Callable[[np.ndarray], float],
    n_boot: int,
    rng: np.random.Generator,
    level: float = 0.95,
) -> ConfidenceInterval:
    """Percentile bootstrap interval of statistic(z), resampling the rows of z with replacement.

    z: (N, ...) array; statistic maps such an array to a float. estimate = statistic(z); low and
    high are the (1 − level)/2 and (1 + level)/2 quantiles of n_boot resampled values
    (Efron & Tibshirani 1993, ch. 13). Non-finite resampled values are dropped.
    """
    check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot = {n_boot}: number of bootstrap resamples must be >= 1")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng = {rng!r}: expected a numpy.random.Generator")
    arr = np.asarray(z)
    n = arr.shape[0] if arr.ndim else 0
    if n < 1:
        raise ValueError(f"z.shape = {arr.shape}: need at least one row to resample")
    estimate = float(statistic(arr))
    values = np.array([float(statistic(arr[rng.integers(0, n, size=n)])) for _ in range(n_boot)])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return ConfidenceInterval(estimate, float("nan"), float("nan"), level)
    low, high = np.quantile(values, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return ConfidenceInterval(estimate, float(low), float(high), level)


@lru_cache(maxsize=1024)
def t_quantile(level: float, dof: int) -> float:
    """t_{(1+level)/2, dof}: the two-sided Student-t quantile of a ``level`` interval, cached
    (the report asks for the same few thousands of times; SciPy's ppf costs ~0.3 ms a call)."""
    return float(sps.t.ppf((1.0 + level) / 2.0, dof))


def seed_ci(values: np.ndarray | list[float], level: float = 0.95) -> ConfidenceInterval:
    """Mean ± t_{(1+level)/2, n−1} · s/√n over per-seed values (s with ddof = 1).

    values: 1-D, one value per seed. Fewer than 2 values: NaN bounds (estimate is the mean, NaN
    when empty). NaN values propagate; drop failed seeds before calling.
    """
    check_level(level)
    arr = np.asarray(values, dtype=np.float64).ravel()
    n = arr.size
    if n == 0:
        return ConfidenceInterval(float("nan"), float("nan"), float("nan"), level)
    mean = float(arr.mean())
    if n < 2:
        return ConfidenceInterval(mean, float("nan"), float("nan"), level)
    half = float(t_quantile(level, n - 1) * arr.std(ddof=1) / np.sqrt(n))
    return ConfidenceInterval(mean, mean - half, mean + half, level)


def hierarchical_bootstrap(groups: Sequence[np.ndarray | Sequence[float]], n_boot: int,
                           rng: np.random.Generator, level: float = 0.95,
                           chunk: int = 1 << 20) -> ConfidenceInterval:
    """Two-stage percentile bootstrap of the mean over groups of the groups' row means:
    resample the groups (seeds) with replacement, then the rows within each drawn group
    (held-out anchors, independently for each draw), and average (Saravanan et al. 2020,
    "Application of the hierarchical bootstrap to multi-level data in neuroscience").

    groups: one 1-D array of row values per seed. estimate: the mean of the group means. The
    resampled mean's variance is (B + W)/S for S groups, with B the variance (ddof 0) of the
    group means and W the mean over groups of (row variance, ddof 0)/rows: the between-seed
    variation with the within-cell measurement added. With one group it is a row bootstrap
    (the measurement of one trained encoder, not the variation between trainings).
    """
    check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot = {n_boot}: number of bootstrap resamples must be >= 1")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng = {rng!r}: expected a numpy.random.Generator")
    rows = [np.asarray(g, dtype=np.float64).ravel() for g in groups]
    if not rows or any(r.size == 0 for r in rows):
        sizes = [r.size for r in rows]
        raise ValueError(f"groups: sizes {sizes}: need at least one group, each with >= 1 row")
    if not all(np.isfinite(r).all() for r in rows):
        raise ValueError("groups: NaN or infinite row values; drop them before resampling")
    s = len(rows)
    estimate = float(np.mean([r.mean() for r in rows]))
    pick = rng.integers(0, s, size=(n_boot, s))  # stage 1: seeds
    drawn = np.empty((n_boot, s))
    for g, r in enumerate(rows):  # stage 2: rows, a fresh resample for every draw of group g
        where = np.nonzero(pick == g)
        means = np.empty(where[0].size)
        step = max(1, chunk // r.size)
        for start in range(0, means.size, step):
            m = min(step, means.size - start)
            means[start:start + m] = r[rng.integers(0, r.size, size=(m, r.size))].mean(axis=1)
        drawn[where] = means
    low, high = np.quantile(drawn.mean(axis=1), [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return ConfidenceInterval(estimate, float(low), float(high), level)
