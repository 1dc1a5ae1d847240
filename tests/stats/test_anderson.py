import warnings

import numpy as np
import pytest
import scipy.stats as sps

from pipeline.stats import ad_critical_5pct, ad_pass, anderson_darling
from tests.oracles.stats_oracles import anderson_darling_loop

EPS = float(np.finfo(np.float64).eps)
SHAPES = [(8, 1), (9, 3), (20, 5), (137, 4), (1000, 6), (5000, 3)]
DISTS = ["gauss", "laplace", "t2", "ties"]


def scipy_anderson(col: np.ndarray):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # scipy 1.17: method=None is deprecated
        return sps.anderson(np.asarray(col, dtype=np.float64), "norm")


def scipy_a2(x: np.ndarray) -> np.ndarray:
    return np.array([scipy_anderson(x[:, j]).statistic for j in range(x.shape[1])])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dist", DISTS)
def test_matches_scipy(shape, dist, rng, draw):
    x = draw(dist, shape, rng)
    np.testing.assert_allclose(anderson_darling(x), scipy_a2(x), rtol=1e-9, atol=0)


def test_axis1_matches_scipy(rng):
    x = rng.laplace(size=(4, 300))
    np.testing.assert_allclose(anderson_darling(x, axis=1), scipy_a2(x.T), rtol=1e-9, atol=0)
    # bit for bit on purpose: both calls see the same C-contiguous (4, 300) rows in one block,
    # so the same operations run in the same order in this process
    np.testing.assert_array_equal(anderson_darling(x, axis=-1), anderson_darling(x.T, axis=0))


def test_1d_and_3d(rng):
    x = rng.normal(size=(50, 2, 3))
    out = anderson_darling(x, axis=0)
    assert out.shape == (2, 3)
    assert anderson_darling(x[:, 1, 2]).shape == ()
    np.testing.assert_allclose(out[1, 2], scipy_anderson(x[:, 1, 2]).statistic, rtol=1e-9)


def test_float32_promoted(rng):
    x = rng.standard_t(2, size=(2000, 5)).astype(np.float32)
    a2 = anderson_darling(x)
    assert a2.dtype == np.float64
    np.testing.assert_allclose(a2, scipy_a2(x.astype(np.float64)), rtol=1e-9, atol=0)


def test_many_columns_span_blocks(rng, monkeypatch):
    import pipeline.stats._columns as columns

    x = rng.normal(size=(300, 37))
    whole = anderson_darling(x)
    monkeypatch.setattr(columns, "BLOCK_BYTES", 8 * 300 * 5)  # 5 columns per block
    # Not bit for bit: the A² sum is a BLAS matrix-vector product whose kernel (MKL: CPU make,
    # thread count, block shape, row alignment) may add in another order. A² is O(1) from N
    # terms totalling O(N) per unit: a reordering moves it by ~N·eps (measured <= 3.3 N·eps
    # across MKL's code paths; 1.7e-13 relative on an AMD EPYC at N = 300).
    np.testing.assert_allclose(anderson_darling(x), whole, rtol=0, atol=100 * 300 * EPS)
    np.testing.assert_allclose(whole, scipy_a2(x), rtol=1e-9)


@pytest.mark.parametrize("dist", DISTS)
def test_matches_formula_loop(dist, rng, draw):
    x = draw(dist, (60, 3), rng)
    ref = [anderson_darling_loop(x[:, j]) for j in range(3)]
    np.testing.assert_allclose(anderson_darling(x), ref, rtol=1e-9)


def test_constant_and_nan_columns_give_nan(rng):
    x = rng.normal(size=(30, 3))
    x[:, 1] = 2.0
    x[4, 2] = np.nan
    a2 = anderson_darling(x)
    assert np.isfinite(a2[0]) and np.isnan(a2[1]) and np.isnan(a2[2])


@pytest.mark.parametrize("n", [2, 5, 8, 20, 100, 10_000])
def test_critical_value_and_pass_rule_match_scipy(n, rng):
    assert ad_critical_5pct(n) == scipy_anderson(rng.normal(size=n)).critical_values[2]
    a2 = np.array([0.1, ad_critical_5pct(n), 5.0, np.nan])
    np.testing.assert_array_equal(ad_pass(a2, n), [True, False, False, False])


def test_critical_value_formula():
    n = 137
    assert ad_critical_5pct(n) == pytest.approx(0.752 / (1 + 0.75 / n + 2.25 / n**2), abs=5e-4)


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"axis = 2: must be in \[-2, 1\]"):
        anderson_darling(np.zeros((5, 3)), axis=2)
    with pytest.raises(ValueError, match=r"x.dtype = <U1: expected a real numeric array"):
        anderson_darling(np.array(["a", "b"]))
    with pytest.raises(ValueError, match=r"n = 0: sample size must be >= 1"):
        ad_critical_5pct(0)


def test_far_tail_beyond_erfc_range_matches_scipy(rng):
    # |w| > 36 after standardising: the erfc route underflows and log_ndtr takes over
    x = rng.normal(size=(5000, 2))
    x[17, 0], x[99, 0] = 1e4, -3e4
    x[5, 1] = -1e5
    a2 = anderson_darling(x)
    assert np.all(np.isfinite(a2))
    np.testing.assert_allclose(a2, scipy_a2(x), rtol=1e-9, atol=0)


@pytest.mark.slow
def test_large_n_matches_scipy(rng):
    x = np.concatenate([rng.normal(size=(100_000, 2)), rng.standard_t(3, size=(100_000, 2))], 1)
    np.testing.assert_allclose(anderson_darling(x), scipy_a2(x), rtol=1e-9, atol=0)
