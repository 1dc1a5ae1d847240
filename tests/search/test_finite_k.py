"""Proposition 1 window, k-sweeps, the CE − R_k table and the log-log slope fit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.search import (
    SearchCE,
    ce_minus_risk_table,
    fit_loglog_slope,
    k_sweep,
    population_cross_entropy,
    population_risk,
    prop1_window,
)


def test_prop1_window_plain_math():
    for k, tau in [(1, 1.0), (7, 0.5), (1000, 0.1), (3, 5.0)]:
        low, high = prop1_window(k, tau)
        assert low == pytest.approx(-math.log(1 + math.exp(2 / tau) / k), rel=1e-12)
        assert high == pytest.approx((math.exp(2 / tau) - 1) ** 2 / (8 * k), rel=1e-12)
    low, high = prop1_window(10, 0.001)  # e^{2000}: the log-space form does not overflow
    assert low == pytest.approx(-(2000 - math.log(10)), rel=1e-12) and high == math.inf
    with pytest.raises(ValueError, match=r"k = 0: number of negatives"):
        prop1_window(0, 1.0)
    with pytest.raises(ValueError, match=r"tau = 0: temperature"):
        prop1_window(3, 0)


def test_k_sweep_fresh_draws_match_population_risk(rng):
    s_pos, pool = rng.uniform(-1, 1, size=50), rng.uniform(-1, 1, size=(50, 300))
    seed = np.random.default_rng(5)
    got = k_sweep(s_pos, pool, [1, 4, 16], 0.5, np.random.default_rng(5))
    for k, est in zip([1, 4, 16], got, strict=True):
        idx = seed.integers(0, 300, size=(50, k))
        want = population_risk(s_pos, np.take_along_axis(pool, idx, axis=1), 0.5)
        assert est.k == k and est.risk == want.risk and est.se == want.se
    # the same k twice gets different (fresh) negatives
    again = k_sweep(s_pos, pool, [8, 8], 0.5, rng)
    assert again[0].risk != again[1].risk


def test_k_sweep_without_replacement(rng):
    s_pos = np.zeros(20)
    pool = np.tile(np.arange(30.0) / 100.0, (20, 1))  # each column identifiable
    est = k_sweep(s_pos, pool, [30], 1.0, rng, replace=False)[0]
    want = population_risk(s_pos, pool, 1.0)  # all 30 distinct columns, order irrelevant
    np.testing.assert_allclose(est.per_anchor, want.per_anchor, atol=1e-13)
    with pytest.raises(ValueError, match=r"ks\[1\] = 31: without replacement"):
        k_sweep(s_pos, pool, [2, 31], 1.0, rng, replace=False)
    with pytest.raises(ValueError, match=r"ks\[0\] = 0: number of negatives"):
        k_sweep(s_pos, pool, [0], 1.0, rng)


def test_table_paired_and_unpaired(rng):
    ce_vals = rng.normal(1.0, 0.1, size=40)
    ce = SearchCE.from_values(ce_vals)
    risk = population_risk(rng.uniform(-1, 1, 40), rng.uniform(-1, 1, (40, 4)), 1.0)
    row = ce_minus_risk_table(ce, [risk], 1.0)[0]
    diff = ce_vals - risk.per_anchor
    assert row.paired and row.gap == pytest.approx(diff.mean(), abs=1e-14)
    assert row.gap_se == pytest.approx(diff.std(ddof=1) / math.sqrt(40), rel=1e-12)
    assert (row.window_low, row.window_high) == prop1_window(4, 1.0)
    other = SearchCE.from_values(ce_vals[:30])
    row = ce_minus_risk_table(other, [risk], 1.0)[0]
    assert not row.paired and row.gap_se == pytest.approx(math.hypot(other.se, risk.se))


def _channel_similarities(rng, w, x, a_c, count):
    """(N, count) cosine similarities between φ(x_i) and φ of fresh draws: positives if a_c > 0."""
    n, p = x.shape
    other = a_c * x[:, None, :] + math.sqrt(1 - a_c**2) * rng.normal(size=(n, count, p))
    za = x @ w.T
    zo = other @ w.T
    za /= np.linalg.norm(za, axis=-1, keepdims=True)
    zo /= np.linalg.norm(zo, axis=-1, keepdims=True)
    return np.einsum("nd,ncd->nc", za, zo)


@pytest.mark.slow
@pytest.mark.parametrize("tau", [0.5, 1.0, 2.0])
def test_risk_stays_in_prop1_window_gaussian_channel(tau):
    """Fixed linear encoder on a Gaussian channel: CE by a large Monte Carlo per anchor, R_k on
    the same anchors with fresh positives and negatives for every k; CE − R_k inside Proposition
    1's window for every k, to within 4 paired standard errors."""
    rng = np.random.default_rng(11)
    p, d, n = 4, 3, 3000
    w = rng.normal(size=(d, p))
    x = rng.normal(size=(n, p))
    ce = population_cross_entropy(
        _channel_similarities(rng, w, x, 0.8, 1500),
        _channel_similarities(rng, w, x, 0.0, 3000),
        tau,
    )
    risks = []
    for k in [1, 2, 4, 8, 16, 32, 64, 128]:
        s_pos = _channel_similarities(rng, w, x, 0.8, 1)[:, 0]
        risks.append(population_risk(s_pos, _channel_similarities(rng, w, x, 0.0, k), tau))
    rows = ce_minus_risk_table(ce, risks, tau)
    for row in rows:
        assert row.paired
        assert row.window_low - 4 * row.gap_se <= row.gap <= row.window_high + 4 * row.gap_se, row
    # and the gap does shrink: k = 128 is far closer to CE than k = 1
    assert abs(rows[-1].gap) < 0.1 * abs(rows[0].gap)


def _gaps(rng, ks, power, rel_noise=0.03):
    truth = 2.5 / ks**power
    se = rel_noise * truth
    return truth + se * rng.normal(size=ks.size), se


@pytest.mark.parametrize("power", [1.0, 0.5])
def test_slope_recovers_power(rng, power):
    ks = 2.0 ** np.arange(1, 12)
    gap, se = _gaps(rng, ks, power)
    fit = fit_loglog_slope(ks, gap, se)
    assert fit.ci_low <= -power <= fit.ci_high
    assert fit.slope == pytest.approx(-power, abs=0.03)
    assert fit.intercept == pytest.approx(math.log(2.5), abs=0.1)
    assert fit.n_points == 11 and fit.n_dropped == 0
    unweighted = fit_loglog_slope(ks, -gap)  # the sign of the gap does not matter
    assert unweighted.ci_low <= -power <= unweighted.ci_high


def test_slope_ols_matches_scipy_and_drops(rng):
    from scipy import stats as sps

    ks = np.array([1.0, 2, 4, 8, 16, 32, 64])
    gap = 1.0 / ks * np.exp(0.1 * rng.normal(size=7))
    gap_bad = np.concatenate([gap, [0.0, np.nan, np.inf]])
    fit = fit_loglog_slope(np.concatenate([ks, [128, 256, 512]]), gap_bad, level=0.9)
    ref = sps.linregress(np.log(ks), np.log(gap))
    assert fit.slope == pytest.approx(ref.slope, rel=1e-12)
    assert fit.slope_se == pytest.approx(ref.stderr, rel=1e-10)
    half = sps.t.ppf(0.95, 5) * ref.stderr
    assert (fit.ci_low, fit.ci_high) == pytest.approx((ref.slope - half, ref.slope + half))
    assert fit.n_points == 7 and fit.n_dropped == 3 and fit.level == 0.9


def test_slope_degenerate_inputs():
    two = fit_loglog_slope([1, 10], [1.0, 0.1])
    assert two.slope == pytest.approx(-1.0) and math.isnan(two.ci_low) and two.n_points == 2
    assert math.isnan(fit_loglog_slope([1, 2], [0.0, 1.0]).slope)
    with pytest.raises(ValueError, match=r"k = \[0.0, 2.0\]: every k must be > 0"):
        fit_loglog_slope([0, 2], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"level = 1.5"):
        fit_loglog_slope([1, 2], [1.0, 1.0], level=1.5)


def test_slope_with_known_errors():
    # two points, se of log|gap| = 0.05 and 0.2: closed form, normal interval
    fit = fit_loglog_slope([8, 128], [0.2, 0.1], [0.01, 0.02], level=0.95, se_known=True)
    assert fit.slope == pytest.approx(-math.log(2) / math.log(16))
    assert fit.slope_se == pytest.approx(math.hypot(0.05, 0.2) / math.log(16))
    half = 1.959963984540054 * fit.slope_se
    assert (fit.ci_low, fit.ci_high) == pytest.approx((fit.slope - half, fit.slope + half))
    # as relative weights only, two points give no interval
    assert math.isnan(fit_loglog_slope([8, 128], [0.2, 0.1], [0.01, 0.02]).ci_low)
    # scatter far beyond the stated errors: the residual variance takes over
    scattered = fit_loglog_slope([8, 16, 32, 64], [0.2, 0.1, 0.2, 0.1], [1e-6] * 4, se_known=True)
    assert scattered.ci_low < 0 < scattered.ci_high


def test_slope_fit_range():
    ks = np.array([2.0, 4, 8, 16, 32, 64])
    gap = np.array([0.9, 0.4, 0.2, np.nan, 0.05, 0.025])
    fit = fit_loglog_slope(ks, gap, k_min=8, k_max=32)
    sub = fit_loglog_slope([8, 32], [0.2, 0.05])
    assert fit.slope == pytest.approx(sub.slope) and fit.n_points == 2
    assert fit.n_dropped == 1  # the NaN at k = 16 is inside the range; k = 2, 4, 64 are not
    assert (fit.k_min, fit.k_max, fit.method) == (8, 32, "ols")
    assert fit_loglog_slope(ks, gap, k_min=64).n_points == 1
    for kwargs, msg in [({"k_min": 0}, r"k_min = 0: the fit range's ends must be numbers > 0"),
                        ({"k_max": -1.0}, r"k_max = -1.0: the fit range's ends"),
                        ({"k_min": 8, "k_max": 4}, r"k_max = 4: must be >= k_min = 8")]:
        with pytest.raises(ValueError, match=msg):
            fit_loglog_slope(ks, gap, **kwargs)


def test_slope_sandwich_with_diagonal_covariance_is_the_known_se_fit(rng):
    ks = 2.0 ** np.arange(1, 9)
    se = 0.02 / ks
    gap = 1.5 / ks * (1 + 0.01 * rng.normal(size=ks.size))
    known = fit_loglog_slope(ks, gap, se, se_known=True)
    sandwich = fit_loglog_slope(ks, gap, gap_cov=np.diag(se**2))
    assert sandwich.slope == pytest.approx(known.slope, rel=1e-12)
    w = (gap / se) ** 2
    x = np.log(ks)
    want_se = 1.0 / math.sqrt(np.sum(w * (x - np.sum(w * x) / np.sum(w)) ** 2))
    assert sandwich.slope_se == pytest.approx(want_se, rel=1e-10)
    half = 1.959963984540054 * want_se
    assert (sandwich.ci_low, sandwich.ci_high) == pytest.approx((sandwich.slope - half,
                                                                 sandwich.slope + half))
    assert sandwich.method == "wls_sandwich" and 0 < sandwich.lack_of_fit_p <= 1


def _correlated(ks, rho, rel):
    """A covariance of gaps 1.5/k with relative se ``rel`` and correlation rho^|i−j|."""
    sd = rel * 1.5 / ks
    idx = np.arange(ks.size)
    return np.outer(sd, sd) * rho ** np.abs(idx[:, None] - idx[None, :])


def test_slope_sandwich_matches_monte_carlo_under_correlation(rng):
    """Strongly correlated gaps (as the nested draws give): the sandwich se is the spread of
    the fitted slope over draws, and the lack-of-fit p-value is uniform under a true power law."""
    ks = 2.0 ** np.arange(3, 10)
    cov = _correlated(ks, 0.8, 0.01)
    chol = np.linalg.cholesky(cov)
    fits = [fit_loglog_slope(ks, 1.5 / ks + chol @ rng.normal(size=ks.size), gap_cov=cov)
            for _ in range(2000)]
    slopes = np.array([f.slope for f in fits])
    assert slopes.mean() == pytest.approx(-1.0, abs=0.002)
    assert slopes.std() == pytest.approx(np.mean([f.slope_se for f in fits]), rel=0.08)
    covered = np.mean([f.ci_low <= -1.0 <= f.ci_high for f in fits])
    assert 0.93 <= covered <= 0.97
    p = np.array([f.lack_of_fit_p for f in fits])
    assert 0.03 <= np.mean(p < 0.05) <= 0.07 and 0.45 <= p.mean() <= 0.55
    # a curved law (1.5/k − 3/k², c₂/c₁ < 0 as in the profile) with the same tiny noise is a bad
    # straight line, flatter than −1
    curved = fit_loglog_slope(ks, 1.5 / ks - 3.0 / ks**2, gap_cov=cov)
    assert curved.lack_of_fit_p < 1e-6 and curved.slope > -1.0


def test_slope_covariance_bad_inputs():
    with pytest.raises(ValueError, match=r"gap_cov.shape = \(2, 2\): expected \(3, 3\)"):
        fit_loglog_slope([1, 2, 4], [1.0, 0.5, 0.25], gap_cov=np.eye(2))
    with pytest.raises(ValueError, match=r"gap_cov: must be a symmetric covariance matrix"):
        fit_loglog_slope([1, 2], [1.0, 0.5], gap_cov=[[1.0, 0.5], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"gap_se and gap_cov: pass one of them"):
        fit_loglog_slope([1, 2], [1.0, 0.5], [0.1, 0.1], gap_cov=np.eye(2))
