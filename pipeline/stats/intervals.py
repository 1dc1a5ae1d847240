"""Intervals of a cell's summary statistics (one cell: one fixed encoder).

- Thin-shell CV (a smooth statistic of the rows): percentile row bootstrap.
- AD Avg, DP Avg (means over coordinates): a t-interval over the d coordinates; AD pass %, DP
  pass % (fractions of coordinates): a Wilson score interval. These are *spreads over
  coordinates*, not confidence intervals: the coordinates are neither sampled nor independent, so
  the report labels them so, and no verdict about training rests on them (verdicts use seeds,
  SPEC §6). Row-resampling them is wrong too: a bootstrap sample repeats about 37% of
  its rows, and the ties inflate A² (on Gaussian data the "interval" of AD Avg then lies above
  the estimate itself).
- A bounded metric's interval over seeds (:func:`bounded_seed_ci`; a recall, an accuracy: a
  fraction in [0, 1]): the Student-t interval of :func:`seed_ci` computed on the logit scale and
  mapped back, so it stays inside the range; where a seed sits on a bound (logit ±∞) the plain
  t-interval cut to the range (the true value lies in the range, so the cut never removes it:
  the coverage is the t-interval's).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from pipeline.stats.column_tests import ColumnTests
from pipeline.stats.thin_shell import thin_shell_cv
from pipeline.stats.uncertainty import ConfidenceInterval, bootstrap_ci, check_level, seed_ci


def wilson_interval(successes: int, total: int, level: float = 0.95) -> ConfidenceInterval:
    """Wilson score interval of a binomial proportion (Wilson 1927); NaN bounds when total = 0."""
    check_level(level)
    if total <= 0:
        return ConfidenceInterval(float("nan"), float("nan"), float("nan"), level)
    p = successes / total
    zq = float(sps.norm.ppf((1.0 + level) / 2.0))
    denom = 1.0 + zq * zq / total
    centre = (p + zq * zq / (2 * total)) / denom
    half = zq * math.sqrt(p * (1 - p) / total + zq * zq / (4 * total * total)) / denom
    return ConfidenceInterval(p, centre - half, centre + half, level)


def summary_intervals(z: np.ndarray, tests: ColumnTests, n_boot: int, rng: np.random.Generator,
                      level: float) -> dict[str, ConfidenceInterval]:
    """Intervals of cv, ad_mean, ad_pass_frac, dp_p_mean, dp_pass_frac for one representation.

    z: ``(N, d)`` embeddings in that representation; tests: its per-coordinate results; level:
    the confidence level of every interval (the stats stage passes ``report.level``; no default,
    so no caller gets 95% by omission).
    """
    check_level(level)
    d = tests.ad.size
    return {
        "cv": bootstrap_ci(z, thin_shell_cv, n_boot, rng, level),
        "ad_mean": seed_ci(tests.ad, level),
        "dp_p_mean": seed_ci(tests.dp_p, level),
        "ad_pass_frac": wilson_interval(int(np.sum(tests.ad_pass)), d, level),
        "dp_pass_frac": wilson_interval(int(np.sum(tests.dp_pass)), d, level),
    }


def bounded_seed_ci(values: np.ndarray | list[float], level: float = 0.95, low: float = 0.0,
                    high: float = 1.0) -> ConfidenceInterval:
    """The interval over seeds of a metric bounded to [``low``, ``high``], always inside it.

    estimate: the mean of the values (as :func:`seed_ci`). When every value lies strictly inside
    the range: the t-interval (t_{(1+level)/2, n−1}, ddof 1) of logit((v − low)/(high − low)),
    mapped back, widened to hold the estimate if the transform left it out; else (a value on a
    bound): :func:`seed_ci` cut to [low, high]. Fewer than 2 values: NaN bounds. A value outside
    the range (the metric is not bounded there after all): :func:`seed_ci` as it is. ValueError
    when the range is empty.
    """
    check_level(level)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"range [{low!r}, {high!r}]: expected finite low < high")
    arr = np.asarray(values, dtype=np.float64).ravel()
    plain = seed_ci(arr, level)
    if arr.size < 2 or not np.isfinite(plain.low) or np.any((arr < low) | (arr > high)):
        return plain
    p = (arr - low) / (high - low)
    if np.any((p <= 0.0) | (p >= 1.0)):
        return ConfidenceInterval(plain.estimate, max(plain.low, low), min(plain.high, high),
                                  level)
    z = seed_ci(np.log(p) - np.log1p(-p), level)
    lo, hi = (low + (high - low) / (1.0 + math.exp(-v)) for v in (z.low, z.high))
    return ConfidenceInterval(plain.estimate, min(lo, plain.estimate), max(hi, plain.estimate),
                              level)
