"""The inference the report's tables use, in one place (named results, no rendering).

- :func:`normal_quantile`: z such that a two-sided normal interval has coverage ``level``.
- :func:`paired`: a variant against the baseline over paired seeds (t-test and Wilcoxon).
- :func:`welch_tie`: whether a row's seeds differ from the best row's (Welch's t-test).

Every test here is over seeds: the unit of a verdict about a training procedure (SPEC §6).
:data:`MIN_SEEDS` is how many a verdict needs; with fewer, the report says *undecided*.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from pipeline.stats.uncertainty import check_level, seed_ci

MIN_SEEDS = 3  # seeds a verdict about training needs (per point of a trend, per side of a pair)


def normal_quantile(level: float) -> float:
    """Φ⁻¹((1 + level)/2): 1.959964 at level 0.95; ValueError unless level is in (0, 1)."""
    return float(sps.norm.ppf((1.0 + check_level(level)) / 2.0))


@dataclass(frozen=True)
class PairedResult:
    """Paired comparison of one metric: differences are variant − baseline."""

    n_pairs: int
    baseline_mean: float
    variant_mean: float
    diff_mean: float
    diff_lo: float
    diff_hi: float
    t_stat: float
    p_value: float
    wilcoxon_p: float
    significant: bool


def paired(variant: np.ndarray, baseline: np.ndarray, level: float = 0.95,
           alpha: float = 0.05) -> PairedResult:
    """Compare paired samples ``(n,)``; pairs with a NaN on either side are dropped.

    Tests need two pairs (NaN p-values otherwise); the Wilcoxon p is NaN when every difference is
    zero. ``significant`` is ``p_value < alpha`` (t-test).
    """
    v, b = np.asarray(variant, dtype=float), np.asarray(baseline, dtype=float)
    keep = ~(np.isnan(v) | np.isnan(b))
    v, b = v[keep], b[keep]
    ci = seed_ci(v - b, level)
    mean, lo, hi = ci.estimate, ci.low, ci.high
    t_stat = p = w_p = np.nan
    if v.size >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # zero-variance differences
            res = sps.ttest_rel(v, b)
            t_stat, p = float(res.statistic), float(res.pvalue)
            if np.any(v != b):
                w_p = float(sps.wilcoxon(v, b).pvalue)
    return PairedResult(int(v.size), float(np.mean(b)) if b.size else np.nan,
                        float(np.mean(v)) if v.size else np.nan, mean, lo, hi, t_stat, p, w_p,
                        bool(p < alpha))



@dataclass(frozen=True)
class WelchTie:
    """tied: the two samples do not differ by Welch's t-test (p >= alpha); p: its p-value
    (NaN where either side has fewer than 2 values: then ``tied`` is False, never a tie by
    default); equal_constant: both samples constant (p is NaN, tied when they are equal)."""

    tied: bool
    p: float
    equal_constant: bool


def welch_tie(x: np.ndarray, ref: np.ndarray, alpha: float) -> WelchTie:
    """Welch's two-sample t-test of per-seed values ``x`` against ``ref`` (the best row's)."""
    x, ref = np.asarray(x, dtype=float), np.asarray(ref, dtype=float)
    if len(x) < 2 or len(ref) < 2:
        return WelchTie(False, float("nan"), False)
    if np.ptp(x) == 0 and np.ptp(ref) == 0:
        return WelchTie(bool(x[0] == ref[0]), float("nan"), True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nearly constant seeds
        p = float(sps.ttest_ind(x, ref, equal_var=False).pvalue)
    return WelchTie(bool(p >= alpha), p, False)
