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
    cis = summary_intervals(z, tests, 40, np.random.default_rng(1), 0.95)
    for ci in cis.values():
        assert ci.low <= ci.estimate <= ci.high
    ad = tests.ad
    half = sps.t.ppf(0.975, 31) * ad.std(ddof=1) / math.sqrt(32)
    assert (cis["ad_mean"].low, cis["ad_mean"].high) == pytest.approx((ad.mean() - half,
                                                                       ad.mean() + half))


LEVELS = (0.9, 0.95, 0.99)


def _widths(cis):
    return {k: ci.high - ci.low for k, ci in cis.items()}


def test_summary_intervals_follow_the_level():
    z = np.random.default_rng(0).normal(size=(500, 32))
    tests = column_tests(z)
    cis = {lv: summary_intervals(z, tests, 2000, np.random.default_rng(1), lv) for lv in LEVELS}
    width = {lv: _widths(c) for lv, c in cis.items()}
    for stat in width[0.95]:
        assert width[0.9][stat] < width[0.95][stat] < width[0.99][stat], stat
        assert all(cis[lv][stat].level == lv for lv in LEVELS)
    for lv in (0.9, 0.99):
        # t-intervals over the 32 coordinates: the widths scale exactly with t's quantile
        t_ratio = sps.t.ppf((1 + lv) / 2, 31) / sps.t.ppf(0.975, 31)
        for stat in ("ad_mean", "dp_p_mean"):
            assert width[lv][stat] / width[0.95][stat] == pytest.approx(t_ratio, rel=1e-12)
        # percentile bootstrap of a near-normal statistic: the normal quantiles' ratio, up to
        # the Monte Carlo error of a tail quantile from 2000 resamples (measured <= 4%)
        z_ratio = sps.norm.ppf((1 + lv) / 2) / sps.norm.ppf(0.975)
        assert width[lv]["cv"] / width[0.95]["cv"] == pytest.approx(z_ratio, rel=0.1)


def test_wilson_width_scales_with_the_normal_quantile():
    # half-width z·sqrt(p(1 − p)/n + z²/4n²)/(1 + z²/n): the ratio of z's up to O(z²/n) = 7e-6
    n = 1_000_000
    width = {lv: wilson_interval(300_000, n, lv).high - wilson_interval(300_000, n, lv).low
             for lv in LEVELS}
    for lv in (0.9, 0.99):
        z_ratio = sps.norm.ppf((1 + lv) / 2) / sps.norm.ppf(0.975)
        assert width[lv] / width[0.95] == pytest.approx(z_ratio, rel=2e-5)


def test_summary_intervals_need_a_level_in_0_1():
    z = np.random.default_rng(0).normal(size=(50, 4))
    with pytest.raises(ValueError, match=r"level = 95: confidence level must be in \(0, 1\)"):
        summary_intervals(z, column_tests(z), 10, np.random.default_rng(1), 95)
