"""The inference the report's tables use, in one place (named results, no rendering).

- :func:`normal_quantile`: z such that a two-sided normal interval has coverage ``level``.
- :func:`paired`: a variant against the baseline over paired seeds (t-test and Wilcoxon);
  :func:`paired_many`: the same for many pairs at once, in vectorised SciPy calls.
- :func:`welch_tie`: whether a row's seeds differ from the best row's (Welch's t-test).

Every test here is over seeds: the unit of a verdict about a training procedure (SPEC §6).
:data:`MIN_SEEDS` is how many a verdict needs; with fewer, the report says *undecided*.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as sps

from pipeline.stats.uncertainty import check_level, seed_ci

MIN_SEEDS = 3  # seeds a verdict about training needs (per point of a trend, per side of a pair)


@lru_cache(maxsize=256)
def normal_quantile(level: float) -> float:
    """Φ⁻¹((1 + level)/2): 1.959964 at level 0.95; ValueError unless level is in (0, 1).
    Cached: the report asks for the same level thousands of times (6500 calls at 1000 cells,
    SciPy's ppf ~0.2 ms a call)."""
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


def _dropped(variant: np.ndarray, baseline: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs without a NaN on either side."""
    v, b = np.asarray(variant, dtype=float), np.asarray(baseline, dtype=float)
    keep = ~(np.isnan(v) | np.isnan(b))
    return v[keep], b[keep]


def paired(variant: np.ndarray, baseline: np.ndarray, level: float = 0.95,
           alpha: float = 0.05) -> PairedResult:
    """Compare paired samples ``(n,)``; pairs with a NaN on either side are dropped.

    Tests need two pairs (NaN p-values otherwise); the Wilcoxon p is NaN when every difference is
    zero. ``significant`` is ``p_value < alpha`` (t-test).
    """
    v, b = _dropped(variant, baseline)
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


_EXACT_MAX = 50  # SciPy's Wilcoxon is exact up to this many pairs without zeros or ties
_PERMUTED_MAX = 13  # with zeros or ties, a permutation test over all 2**n signs up to this many


def _wilcoxon_path(d: np.ndarray) -> str:
    """The test SciPy's ``wilcoxon`` (``method='auto'``) runs on differences ``d``: ``exact``
    (2 to 50, none zero, no two of the same size), ``permutation`` (zeros or ties, at most 13:
    every sign pattern, so deterministic), or ``other`` (anything else: tested on its own). A
    stack of rows of one path and length gets the same p-values as each row alone
    (``tests/stats/test_inference.py``)."""
    if d.size < 2 or not np.all(np.isfinite(d)) or not np.any(d != 0):
        return "other"
    size = np.sort(np.abs(d))
    if size[0] > 0 and np.all(size[1:] != size[:-1]):
        return "exact" if d.size <= _EXACT_MAX else "other"
    return "permutation" if d.size <= _PERMUTED_MAX else "other"


def _permutation_p(diff: np.ndarray) -> np.ndarray:
    """SciPy's Wilcoxon p-value of each row of ``diff`` (rows of the ``permutation`` path), one
    SciPy call per distinct signed-rank pattern: the test reads only the signs of the
    differences and the ranks of their sizes (ties averaged, zeros kept), so a row and its
    pattern ``sign(d) · rank(|d|)``, sorted, get the same p-value; at 5 seeds a few dozen
    patterns stand for thousands of rows."""
    patterns = np.sort(np.sign(diff) * sps.rankdata(np.abs(diff), axis=1), axis=1)
    found: dict[bytes, float] = {}
    out = np.empty(len(diff))
    for j, pattern in enumerate(patterns):
        key = pattern.tobytes()
        if key not in found:
            found[key] = float(sps.wilcoxon(pattern).pvalue)
        out[j] = found[key]
    return out


def paired_many(pairs: Sequence[tuple[np.ndarray, np.ndarray]], level: float = 0.95,
                alpha: float = 0.05) -> list[PairedResult]:
    """:func:`paired` of each (variant, baseline) in ``pairs``, in order, with the same results:
    pairs of one length and one Wilcoxon path (:func:`_wilcoxon_path`) share one ``ttest_rel``
    call and one ``wilcoxon`` call (``axis=1``; rows of the permutation path, one call per
    signed-rank pattern: :func:`_permutation_p`); the rest are tested one by one. A leaderboard
    compares thousands of settings × metrics, and SciPy's cost per call (~7 ms for both
    tests) was most of the report's time."""
    check_level(level)
    out: list[PairedResult | None] = [None] * len(pairs)
    kept = [_dropped(v, b) for v, b in pairs]
    stacks: dict[tuple[str, int], list[int]] = {}
    for i, (v, b) in enumerate(kept):
        path = _wilcoxon_path(v - b)
        if path == "other":
            out[i] = paired(v, b, level, alpha)
        else:
            stacks.setdefault((path, v.size), []).append(i)
    for (path, n), rows in stacks.items():
        var, base = np.stack([kept[i][0] for i in rows]), np.stack([kept[i][1] for i in rows])
        diff = var - base
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # zero-variance differences
            t = sps.ttest_rel(var, base, axis=1)
        w_p = (sps.wilcoxon(var, base, axis=1, method="exact").pvalue if path == "exact"
               else _permutation_p(diff))
        for j, i in enumerate(rows):
            ci, p = seed_ci(diff[j], level), float(t.pvalue[j])
            out[i] = PairedResult(n, float(base[j].mean()), float(var[j].mean()), ci.estimate,
                                  ci.low, ci.high, float(t.statistic[j]), p, float(w_p[j]),
                                  bool(p < alpha))
    return [r for r in out if r is not None]


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
