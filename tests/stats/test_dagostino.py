import numpy as np
import pytest
import scipy.stats as sps

from pipeline.stats import dagostino_pearson

SHAPES = [(8, 1), (9, 3), (20, 5), (137, 4), (1000, 6), (5000, 3)]
DISTS = ["gauss", "laplace", "t2", "ties"]


def assert_matches(x, axis=0):
    stat, p = dagostino_pearson(x, axis=axis)
    ref = sps.normaltest(np.asarray(x, dtype=np.float64), axis=axis)
    np.testing.assert_allclose(stat, ref.statistic, rtol=1e-9, atol=0)
    np.testing.assert_allclose(p, ref.pvalue, rtol=1e-9, atol=0)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dist", DISTS)
def test_matches_scipy(shape, dist, rng, draw):
    assert_matches(draw(dist, shape, rng))


def test_axis1_and_3d(rng):
    assert_matches(rng.laplace(size=(4, 300)), axis=1)
    assert_matches(rng.standard_t(2, size=(40, 3, 2)), axis=0)
    assert_matches(rng.normal(size=(3, 40, 2)), axis=1)


def test_float32_promoted(rng):
    x = rng.standard_t(2, size=(2000, 5)).astype(np.float32)
    stat, p = dagostino_pearson(x)
    assert stat.dtype == np.float64 and p.dtype == np.float64
    assert_matches(x)


def test_symmetric_sample_keeps_scipys_zero_skew_rule():
    # skewness exactly 0: scipy substitutes y = 1 in the skew transform; we match it
    assert_matches(np.arange(1.0, 9.0)[:, None])


def test_below_eight_samples_nan_and_warning_like_scipy(rng):
    x = rng.normal(size=(7, 3))
    with pytest.warns(RuntimeWarning, match="needs at least 8 samples, got N = 7"):
        stat, p = dagostino_pearson(x)
    ref = sps.normaltest(x)  # scipy 1.17 warns only for 1-D input; we always warn
    assert np.all(np.isnan(stat)) and np.all(np.isnan(p))
    assert np.all(np.isnan(ref.statistic)) and np.all(np.isnan(ref.pvalue))
    with pytest.warns(RuntimeWarning):
        assert np.isnan(sps.normaltest(x[:, 0]).pvalue)


def test_constant_column_is_nan(rng):
    x = rng.normal(size=(30, 2))
    x[:, 0] = 3.0
    stat, p = dagostino_pearson(x)
    assert np.isnan(stat[0]) and np.isnan(p[0]) and np.isfinite(p[1])
