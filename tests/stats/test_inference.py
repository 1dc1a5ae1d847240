"""pipeline.stats.comparisons.inference: the normal quantile, the paired test and Welch ties,
against SciPy and closed forms."""

from __future__ import annotations

import math
from dataclasses import astuple

import numpy as np
import pytest
from scipy import stats as sps

from pipeline.stats.comparisons.inference import normal_quantile, paired, paired_many, welch_tie
from pipeline.stats.uncertainty import seed_ci


def test_normal_quantile_closed_forms():
    assert normal_quantile(0.95) == pytest.approx(1.959963984540054, rel=1e-12)
    # Φ(z) − Φ(−z) = erf(z/√2) = level
    for level in (0.5, 0.9, 0.99):
        assert math.erf(normal_quantile(level) / math.sqrt(2)) == pytest.approx(level, rel=1e-12)
    with pytest.raises(ValueError, match="level = 1.5"):
        normal_quantile(1.5)


def test_paired_matches_scipy():
    rng = np.random.default_rng(0)
    b = rng.normal(size=8)
    v = b + 0.5 + rng.normal(scale=0.3, size=8)
    res = paired(v, b, 0.95, 0.05)
    assert res.p_value == pytest.approx(sps.ttest_rel(v, b).pvalue, rel=1e-12)
    assert res.wilcoxon_p == pytest.approx(sps.wilcoxon(v, b).pvalue, rel=1e-12)
    assert res.significant and res.n_pairs == 8


def _pair_cases() -> list[tuple[np.ndarray, np.ndarray]]:
    """Every path of paired(): exact Wilcoxon rows of several lengths, zeros and ties (the
    permutation test, and the normal approximation above 13 pairs), constant and all-zero
    differences, NaNs dropped, one pair, none, more than 50 pairs, infinities."""
    rng = np.random.default_rng(7)
    cases = []
    for n in (2, 3, 5, 5, 5, 8, 20, 51):
        b = rng.normal(size=n)
        cases.append((b + rng.normal(0.2, 1.0, n), b))
    for n in (3, 6, 6, 6, 13, 14):  # zeros and ties: permutation tests up to 13 pairs
        b = rng.normal(size=n)
        cases.append((b + rng.integers(-2, 3, size=n) * 0.5, b))
    b = rng.normal(size=6)
    cases += [(b + np.array([0.0, 1, 2, 3, 4, 5]), b),          # a zero difference
              (b + np.array([1.0, -1, 2, 3, 4, 5]), b),         # tied |differences|
              (b + 0.5, b),                                     # constant differences
              (b.copy(), b),                                    # every difference zero
              (np.array([1.0, np.nan, 3, 4.5, 2]), np.array([0.5, 1, np.nan, 4, 1.2])),
              (np.array([1.0]), np.array([0.3])), (np.array([]), np.array([])),
              (np.array([1.0, np.inf, 2]), np.array([0.0, 1, 1.5]))]
    return cases


def test_paired_many_is_paired_of_each():
    """The vectorised path gives paired()'s results (equal up to rounding), in order."""
    cases = _pair_cases()
    with np.errstate(all="ignore"):
        got = paired_many(cases, 0.9, 0.05)
        want = [paired(v, b, 0.9, 0.05) for v, b in cases]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.n_pairs == w.n_pairs and g.significant == w.significant
        np.testing.assert_allclose(astuple(g)[1:-1], astuple(w)[1:-1], rtol=1e-10,
                                   equal_nan=True)


def test_paired_many_against_scipy_one_by_one():
    """Each exact row's p-values are SciPy's on that row alone; its interval is seed_ci's."""
    rng = np.random.default_rng(3)
    cases = [(b + rng.normal(0.3, 1.0, 5), b) for b in rng.normal(size=(40, 5))]
    for (v, b), r in zip(cases, paired_many(cases), strict=True):
        assert r.p_value == pytest.approx(sps.ttest_rel(v, b).pvalue, rel=1e-10)
        assert r.wilcoxon_p == pytest.approx(sps.wilcoxon(v, b).pvalue, rel=1e-10)
        ci = seed_ci(v - b, 0.95)
        assert (r.diff_lo, r.diff_hi) == pytest.approx((ci.low, ci.high), rel=1e-10)


def test_welch_tie_matches_scipy_and_needs_two_seeds():
    rng = np.random.default_rng(1)
    x, ref = rng.normal(0.0, 1.0, 5), rng.normal(0.3, 1.0, 6)
    p = sps.ttest_ind(x, ref, equal_var=False).pvalue
    tie = welch_tie(x, ref, 0.05)
    assert tie.p == pytest.approx(p, rel=1e-12) and tie.tied == (p >= 0.05)
    assert not welch_tie(x[:1], ref, 0.05).tied  # one seed: never a tie
    assert welch_tie(np.ones(3), np.ones(2), 0.05).tied
