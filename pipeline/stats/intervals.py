"""Intervals of a cell's summary statistics (one cell: one fixed encoder).

- Thin-shell CV (a smooth statistic of the rows): percentile row bootstrap.
- AD Avg, DP Avg (means over coordinates): a t-interval over the d coordinates; AD pass %, DP
  pass % (fractions of coordinates): a Wilson score interval. These are *spreads over
  coordinates*, not confidence intervals: the coordinates are neither sampled nor independent, so
  the report labels them so, and no verdict about training rests on them (verdicts use seeds,
  SPEC §6). Row-resampling them is wrong too: a bootstrap sample repeats about 37% of
  its rows, and the ties inflate A² (on Gaussian data the "interval" of AD Avg then lies above
  the estimate itself).
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
