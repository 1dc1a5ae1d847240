"""Confidence intervals: row bootstrap within one cell, t-interval across seeds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
    half = float(sps.t.ppf((1.0 + level) / 2.0, n - 1) * arr.std(ddof=1) / np.sqrt(n))
    return ConfidenceInterval(mean, mean - half, mean + half, level)
