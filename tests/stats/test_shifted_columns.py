"""Columns far from zero: the moments are centred twice, so a shift costs no digits.

The reference for a shifted column x is SciPy on xc = x − x̄: for these columns every
difference x_i − x̄ is exact (Sterbenz), so xc is the same sample moved, not an approximation of
it, and A², K² and p must agree with SciPy's values on xc as closely as on any centred column.
SciPy on x itself is no reference here: it centres once and is off by up to 1e-3 (1e8 shift).
Before the correction pass this package was off by 2.6e-6 (A²) and 4.1e-5 (K²) at the 1e6
shift and by 2e-4 / 6e-3 at the 1e8 shift (N = 1000).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.stats as sps

from pipeline.stats import anderson_darling, column_tests, dagostino_pearson

# A² and K² are O(1) results of sums of N terms whose magnitudes total O(N²) (A²) or O(N) (the
# moments): reordering or a last-bit difference moves them by about N·eps relative, 1e-12 at
# N = 5000. Stated tolerances, with a margin of ~100 over what is measured (≤ 2e-11):
RTOL_SCIPY = 1e-9  # against SciPy on the centred column (SciPy's own rounding included)
RTOL_SHIFT = 1e-10  # the shifted column against the centred one, both through this package

SHIFTS = [(1e6, 1e-3), (1e8, 1e-3), (1e8, 1.0)]  # (shift, scale): shift + scale·N(0, 1)


def _centred(x: np.ndarray) -> np.ndarray:
    """x − mean(x) per column, checked to be an exact shift of x (the reference sample)."""
    mean = x.mean(axis=0)
    xc = x - mean
    assert np.array_equal(xc + mean, x), "the centred copy must be the same sample, moved"
    return xc


def _scipy_a2(x: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # scipy 1.17: method=None is deprecated
        return np.array([sps.anderson(x[:, j], "norm").statistic for j in range(x.shape[1])])


@pytest.mark.parametrize("n", [1000, 5000])
@pytest.mark.parametrize(("shift", "scale"), SHIFTS)
def test_shifted_float64_columns_match_scipy_on_the_centred_column(n, shift, scale, rng):
    x = shift + scale * rng.standard_normal((n, 4))
    xc = _centred(x)
    ref = sps.normaltest(xc, axis=0)
    np.testing.assert_allclose(anderson_darling(x), _scipy_a2(xc), rtol=RTOL_SCIPY, atol=0)
    stat, p = dagostino_pearson(x)
    np.testing.assert_allclose(stat, ref.statistic, rtol=RTOL_SCIPY, atol=0)
    np.testing.assert_allclose(p, ref.pvalue, rtol=RTOL_SCIPY, atol=0)


@pytest.mark.parametrize(("shift", "scale"), SHIFTS)
def test_shifting_a_column_leaves_a2_and_k2_unchanged(shift, scale, rng):
    base = rng.laplace(size=(2000, 5))  # skewed tails: the odd moments matter
    x = shift + scale * base
    xc = _centred(x)
    got, want = column_tests(x), column_tests(xc)
    np.testing.assert_allclose(got.ad, want.ad, rtol=RTOL_SHIFT, atol=0)
    np.testing.assert_allclose(got.dp_stat, want.dp_stat, rtol=RTOL_SHIFT, atol=0)
    np.testing.assert_allclose(got.dp_p, want.dp_p, rtol=RTOL_SHIFT, atol=0)


@pytest.mark.parametrize(("shift", "scale"), [(1e4, 0.1), (1e8, 1e3)])
def test_shifted_float32_columns_match_scipy_on_the_exact_float64_sample(shift, scale, rng):
    # float32 has 24 bits: shift/scale = 1e5 keeps ~100 distinct values per standard deviation.
    # The float64 copy of the float32 sample is exact, so SciPy sees the very same numbers.
    x32 = (shift + scale * rng.standard_normal((3000, 4))).astype(np.float32)
    xc = _centred(x32.astype(np.float64))
    res = column_tests(x32)
    np.testing.assert_allclose(res.ad, _scipy_a2(xc), rtol=RTOL_SCIPY, atol=0)
    ref = sps.normaltest(xc, axis=0)
    np.testing.assert_allclose(res.dp_stat, ref.statistic, rtol=RTOL_SCIPY, atol=0)
    np.testing.assert_allclose(anderson_darling(x32), anderson_darling(xc), rtol=RTOL_SHIFT, atol=0)
