"""The common-random-number estimator of CE − R_k (pipeline.search.crn): against a loop from the
formula, the nested construction, unbiasedness against the plain estimator on a finite π where
CE − R_k is exact, its variance, the 1/k expansion, and honest standard errors with a shared
pool."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.search import (
    RESOLVED_Z,
    crn_gap_sweep,
    crn_table,
    k_sweep,
    nested_negatives,
    population_cross_entropy,
    prop1_window,
)
from tests.oracles.finite_k_oracles import crn_loop, exact_ce_risk_finite, exact_gap_finite


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _random_inputs(rng, n=7, p=3, m=11, d=4, k_max=9):
    return (rng.normal(size=(n, d)), rng.normal(size=(n, p, d)), rng.normal(size=(m, d)),
            nested_negatives(rng, n, m, k_max))


@pytest.mark.parametrize("tau", [0.05, 0.3, 1.0, 4.0])
def test_sweep_equals_loop(rng, tau):
    za, zp, pool, idx = _random_inputs(rng)
    ks = [1, 2, 5, 9]
    want = crn_loop(za, zp, pool, idx, ks, tau)
    for block in (1, 13, 1 << 22):  # one similarity per block, ragged blocks, one block
        got = crn_gap_sweep(za, zp, pool, idx, ks, tau, block_elems=block)
        np.testing.assert_allclose(got.per_anchor, want["gap"], rtol=0, atol=1e-11)
        np.testing.assert_allclose(got.gap, want["gap"].mean(0), rtol=0, atol=1e-11)
        np.testing.assert_allclose(got.risk, want["risk"].mean(0), rtol=0, atol=1e-11)
        assert got.ce == pytest.approx(want["ce"].mean(), abs=1e-11)
        assert got.ks == tuple(ks) and (got.n, got.positives, got.pool) == (7, 3, 11)
    # the control variate's mean is all that separates the gap from the plain CE − R_k
    cv = want["gap"] - (want["ce"][:, None] - want["risk"])
    np.testing.assert_allclose(got.gap - (got.ce - got.risk), cv.mean(0), rtol=0, atol=1e-11)


def test_small_tau_log_sum_exp_path(rng):
    """2·4/τ > 690: the pool moments go through log-sum-exp; the expansion is not computed."""
    za, zp, pool, idx = _random_inputs(rng)
    got = crn_gap_sweep(za, zp, pool, idx, [3, 9], 0.01)
    want = crn_loop(za, zp, pool, idx, [3, 9], 0.01)
    np.testing.assert_allclose(got.per_anchor, want["gap"], rtol=1e-9, atol=1e-9)
    assert np.isnan(got.coef).all() and np.isfinite(got.gap_se).all()


def test_negatives_of_k_are_a_prefix_of_one_draw(rng):
    za, zp, pool, idx = _random_inputs(rng, n=20, m=30, k_max=40)
    full = crn_gap_sweep(za, zp, pool, idx, [4, 16, 40], 0.5)
    alone = crn_gap_sweep(za, zp, pool, idx[:, :16], [16], 0.5)
    np.testing.assert_allclose(full.per_anchor[:, 1], alone.per_anchor[:, 0], rtol=0, atol=1e-12)
    # redrawing the negatives past k = 16 leaves k <= 16 as they were and changes k = 40
    other = idx.copy()
    other[:, 16:] = (other[:, 16:] + 1) % 30
    moved = crn_gap_sweep(za, zp, pool, other, [4, 16, 40], 0.5)
    np.testing.assert_allclose(moved.per_anchor[:, :2], full.per_anchor[:, :2], rtol=0, atol=1e-12)
    assert not np.allclose(moved.per_anchor[:, 2], full.per_anchor[:, 2])
    # the index draw itself: (n, k_max) pool indices in range
    assert idx.shape == (20, 40) and idx.min() >= 0 and idx.max() < 30


def _finite_pi(seed=3, m0=4, d=3, kappa=3.0):
    """π uniform on m0 unit vectors; positives p ~ q[z] ∝ exp(κ s(z, ·))."""
    g = np.random.default_rng(seed)
    emb = _unit(g.normal(size=(m0, d)))
    sim = emb @ emb.T
    q = np.exp(kappa * sim)
    return emb, sim, q / q.sum(1, keepdims=True)


def test_exact_finite_gap_is_ce_minus_risk():
    """The oracle's two routes agree: CE − R_k by the (1) form and by CE and R_k separately."""
    _, sim, q = _finite_pi()
    for k, tau in [(1, 1.0), (3, 0.5), (8, 2.0)]:
        ce, risk = exact_ce_risk_finite(sim, q, k, tau)
        assert exact_gap_finite(sim, q, k, tau) == pytest.approx(ce - risk, abs=1e-12)
        low, high = prop1_window(k, tau)
        assert low <= ce - risk <= high


def test_unbiased_against_plain_and_smaller_variance():
    """π uniform on 4 points, the pool = its support (so μ̂ = μ exactly): over 500 replicates of
    50 anchors the CRN estimate and the plain one (fresh negatives per k, CE and R_k estimated
    apart) both average to the exact CE − R_k, to within 4 standard errors of the mean, and the
    CRN variance is smaller. With the pool fixed, anchors are i.i.d. across replicates, so the
    replicates are drawn as one batch of 500·50 anchors and averaged in blocks of 50."""
    emb, sim, q = _finite_pi()
    ks, tau, reps, n, p = [2, 4, 16, 32], 1.0, 500, 50, 4
    exact = np.array([exact_gap_finite(sim, q, k, tau) for k in ks])
    g = np.random.default_rng(11)
    z = g.integers(0, 4, reps * n)
    pos = (g.random((reps * n, p))[:, :, None] > q.cumsum(1)[z][:, None, :]).sum(-1)
    crn = crn_gap_sweep(emb[z], emb[pos], emb, nested_negatives(g, reps * n, 4, 32), ks, tau)
    s_pos, s_pool = np.einsum("nd,npd->np", emb[z], emb[pos]), emb[z] @ emb.T
    ce = population_cross_entropy(s_pos, s_pool, tau).per_anchor
    risks = k_sweep(s_pos[:, 0], s_pool, ks, tau, g)
    plain = np.stack([ce - r.per_anchor for r in risks], axis=1)
    for per_anchor in (crn.per_anchor, plain):
        est = per_anchor.reshape(reps, n, len(ks)).mean(axis=1)
        z_scores = (est.mean(0) - exact) / (est.std(0, ddof=1) / math.sqrt(reps))
        assert np.all(np.abs(z_scores) < 4), z_scores
    var = [per_anchor.reshape(reps, n, len(ks)).mean(axis=1).var(0, ddof=1)
           for per_anchor in (crn.per_anchor, plain)]
    ratio = var[0] / var[1]
    assert ratio[0] < 0.8 and ratio[1] < 0.3 and np.all(ratio[2:] < 0.05), ratio


@pytest.mark.parametrize("tau", [1.0, 2.0])
def test_expansion_against_exact_enumeration(tau):
    """Anchors = the support once each, positives listed with their exact weights, pool = the
    support: the coefficients are exact, and k·(CE − R_k) minus its expansion to j terms falls
    like k^−j (ratios 2, 4, 8 per doubling of k), so c₁, c₂, c₃ are the right coefficients."""
    emb, sim, _ = _finite_pi(m0=4)
    nn = np.argsort(-sim, axis=1)[:, 1]
    pos = np.stack([np.arange(4), nn], 1)  # p = z or its nearest neighbour, 1/2 each
    q = np.zeros((4, 4))
    np.add.at(q, (np.repeat(np.arange(4), 2), pos.ravel()), 0.5)
    ks = np.array([8, 16, 32, 64])
    exact = np.array([exact_gap_finite(sim, q, int(k), tau) for k in ks])
    sweep = crn_gap_sweep(emb, emb[pos], emb, np.zeros((4, 1), dtype=np.int64), [1], tau)
    for terms, want in [(1, 2.0), (2, 4.0), (3, 8.0)]:
        err = ks * (exact - sweep.expansion(ks, terms))
        np.testing.assert_allclose(err[:-1] / err[1:], want, rtol=0.12)
    assert abs(ks[-1] * exact[-1] - sweep.coef[0]) < 0.02  # k·gap → c₁


@pytest.mark.slow
def test_standard_errors_account_for_the_shared_pool():
    """A pool of 10 points shared by 200 anchors: across 300 seeds the gap's spread matches the
    reported se (anchors + pool, to within 20%), while the anchors-only part falls well short."""
    emb, _, q = _finite_pi(seed=5, m0=50)
    ks, reps, n, m = [2, 8, 32], 300, 200, 10
    cq = q.cumsum(1)
    gaps, se, se_anchor, lead, lead_se = [], [], [], [], []
    for seed in range(reps):
        g = np.random.default_rng(1000 + seed)
        z = g.integers(0, 50, n)
        pos = (g.random((n, 2))[:, :, None] > cq[z][:, None, :]).sum(-1)
        pool = emb[g.integers(0, 50, m)]
        sw = crn_gap_sweep(emb[z], emb[pos], pool, nested_negatives(g, n, m, 32), ks, 1.0)
        gaps.append(sw.gap)
        se.append(sw.gap_se)
        se_anchor.append(np.sqrt(np.diag(sw.gap_cov - sw.gap_cov_pool)))
        value, cov = sw.leading()
        lead.append(value)
        lead_se.append(np.sqrt(np.diag(cov)))
    spread = np.std(gaps, axis=0, ddof=1)
    rms = np.sqrt(np.mean(np.square(se), axis=0))
    rms_anchor = np.sqrt(np.mean(np.square(se_anchor), axis=0))
    np.testing.assert_allclose(spread / rms, 1.0, atol=0.2)
    assert spread[-1] / rms_anchor[-1] > 1.4
    # gap − c₂/k² − c₃/k³: its se carries the coefficients' error and their correlation with the
    # gaps
    np.testing.assert_allclose(np.std(lead, axis=0, ddof=1)
                               / np.sqrt(np.mean(np.square(lead_se), axis=0)), 1.0, atol=0.2)
    # the covariance across k is real: nested draws make neighbouring k's gaps correlated
    assert np.corrcoef(np.array(gaps).T)[1, 2] > 0.5


def test_table_rows(rng):
    za, zp, pool, idx = _random_inputs(rng, n=40, m=60, k_max=32)
    sweep = crn_gap_sweep(za, zp, pool, idx, [2, 8, 32], 0.5)
    rows = crn_table(sweep, 0.5)
    assert [r.k for r in rows] == [2, 8, 32]
    for i, r in enumerate(rows):
        assert (r.window_low, r.window_high) == prop1_window(r.k, 0.5)
        assert r.k_gap == pytest.approx(r.k * r.gap) and r.k_gap_se == pytest.approx(r.k * r.gap_se)
        assert r.resolved == (abs(r.gap) >= RESOLVED_Z * r.gap_se) and r.paired
        assert r.gap_cov == pytest.approx(tuple(sweep.gap_cov[i]))
        assert r.gap_cov[i] == pytest.approx(r.gap_se**2)
        assert r.gap_expansion == pytest.approx(float(sweep.expansion(r.k)))
        assert 0 <= r.gap_se_pool <= r.gap_se
        c1, c2, c3 = sweep.coef
        assert r.gap_leading == pytest.approx(r.gap - c2 / r.k**2 - c3 / r.k**3)
    # the leading part's covariance is that of the linear combination g_k − c₂/k² − c₃/k³
    weights = np.zeros((3, 6))
    for i, k in enumerate(sweep.ks):
        weights[i, i], weights[i, 4], weights[i, 5] = 1.0, -(k**-2.0), -(k**-3.0)
    joint = np.block([[sweep.gap_cov, sweep.gap_coef_cov], [sweep.gap_coef_cov.T, sweep.coef_cov]])
    np.testing.assert_allclose(sweep.leading()[1], weights @ joint @ weights.T, rtol=1e-10,
                               atol=1e-16)
    np.testing.assert_allclose([r.gap_leading_cov for r in rows], sweep.leading()[1], rtol=1e-12)


def test_bad_inputs(rng):
    za, zp, pool, idx = _random_inputs(rng)
    with pytest.raises(ValueError, match=r"ks\[1\] = 10: must be an integer in \[1, 9\]"):
        crn_gap_sweep(za, zp, pool, idx, [2, 10], 1.0)
    with pytest.raises(ValueError, match=r"ks\[0\] = 2.0: must be an integer"):
        crn_gap_sweep(za, zp, pool, idx, [2.0], 1.0)
    with pytest.raises(ValueError, match=r"ks = \[2, 2\]: must be a non-empty list of distinct k"):
        crn_gap_sweep(za, zp, pool, idx, [2, 2], 1.0)
    bad = idx.copy()
    bad[3, 4] = 11
    with pytest.raises(ValueError, match=r"neg_index values in \[0, 11\]: must index the pool, "
                                         r"\[0, 10\]"):
        crn_gap_sweep(za, zp, pool, bad, [2], 1.0)
    with pytest.raises(ValueError, match=r"neg_index: shape \(7, 9\), dtype torch.float64"):
        crn_gap_sweep(za, zp, pool, idx.astype(float), [2], 1.0)
    with pytest.raises(ValueError, match=r"z_pos.shape = \(7, 4\): expected \(N, P, d\)"):
        crn_gap_sweep(za, zp[:, 0], pool, idx, [2], 1.0)
    with pytest.raises(ValueError, match=r"z_pool.shape\[1\] = 3: must equal"):
        crn_gap_sweep(za, zp, pool[:, :3], idx, [2], 1.0)
    with pytest.raises(ValueError, match=r"tau = 0.002: must be > 0.00282"):
        crn_gap_sweep(za, zp, pool, idx, [2], 0.002)
    with pytest.raises(ValueError, match=r"tau = -1: temperature"):
        crn_gap_sweep(za, zp, pool, idx, [2], -1)
    with pytest.raises(ValueError, match=r"z_anchor has 1 rows: at least 2 anchors"):
        crn_gap_sweep(za[:1], zp[:1], pool, idx[:1], [2], 1.0)
    with pytest.raises(ValueError, match=r"block_elems = 0: must be an integer >= 1"):
        crn_gap_sweep(za, zp, pool, idx, [2], 1.0, block_elems=0)
    with pytest.raises(ValueError, match=r"k_max = 0: must be an integer >= 1"):
        nested_negatives(rng, 3, 4, 0)
    with pytest.raises(ValueError, match=r"rng = 3: expected a numpy.random.Generator"):
        nested_negatives(3, 3, 4, 2)
