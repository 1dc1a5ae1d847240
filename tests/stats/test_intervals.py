"""Summary intervals against SciPy's Wilson interval and hand arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from pipeline.stats import column_tests
from pipeline.stats.intervals import summary_intervals, wilson_interval


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 16), (15, 16), (61, 64)])
def test_wilson_matches_scipy(k, n):
    ref = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    got = wilson_interval(k, n)
    assert (got.low, got.high) == pytest.approx((ref.low, ref.high), rel=1e-12, abs=1e-15)
    assert got.estimate == k / n


def test_summary_intervals_contain_estimates_and_use_coordinates():
    z = np.random.default_rng(0).normal(size=(500, 32))
    tests = column_tests(z)
    cis = summary_intervals(z, tests, 40, np.random.default_rng(1))
    for ci in cis.values():
        assert ci.low <= ci.estimate <= ci.high
    ad = tests.ad
    half = sps.t.ppf(0.975, 31) * ad.std(ddof=1) / math.sqrt(32)
    assert (cis["ad_mean"].low, cis["ad_mean"].high) == pytest.approx((ad.mean() - half, ad.mean() + half))
