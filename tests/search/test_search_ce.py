"""CE_m, population CE and population risk against loops, the dense formula and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pipeline.search import (
    idealised_search_kernel,
    log_softmax_search_kernel,
    population_cross_entropy,
    population_risk,
    similarity_search_cross_entropy,
    softmax_search_kernel,
)
from tests.oracles.search_oracles import ce_m_dense, ce_m_loop, population_ce_loop, risk_loop


def _inputs(rng, n=13, m=17, d=5):
    return rng.normal(size=(n, d)), rng.normal(size=(m, d)), 3.0 * rng.normal(size=(n, m))


@pytest.mark.parametrize("tau", [0.1, 0.5, 2.0])
def test_ce_m_equals_double_loop(rng, tau):
    z, pool, lr = _inputs(rng)
    got = similarity_search_cross_entropy(z, pool, lr, tau, block=4)
    want = ce_m_loop(z, pool, lr, tau)
    np.testing.assert_allclose(got.per_anchor, want, rtol=0, atol=1e-12)
    assert got.ce == pytest.approx(math.fsum(want) / len(want), abs=1e-12)
    assert got.se == pytest.approx(float(np.std(want, ddof=1) / math.sqrt(len(want))), rel=1e-9)
    assert got.n == len(want)


@pytest.mark.parametrize("block", [1, 3, 7, 16, 64, 2048])
@pytest.mark.parametrize("tau", [0.2, 0.002])  # 0.002: e^{-2/τ} underflows, the shifted path
def test_blocked_equals_dense(rng, block, tau):
    z, pool, lr = _inputs(rng, n=70, m=53, d=9)
    got = similarity_search_cross_entropy(z, pool, lr, tau, block=block)
    np.testing.assert_allclose(got.per_anchor, ce_m_dense(z, pool, lr, tau), rtol=0, atol=1e-10)


@pytest.mark.parametrize("offset", [-900.0, -600.0, 0.0, 600.0, 900.0])
def test_extreme_log_ratios_take_the_shifted_path(rng, offset):
    """exp(log r) under- or overflows: the row-max shift must give the same CE_m."""
    z, pool, lr = _inputs(rng, n=20, m=30)
    lr[:, 10:] += offset  # tiles far apart in scale
    got = similarity_search_cross_entropy(z, pool, lr, 0.5, block=8)
    np.testing.assert_allclose(got.per_anchor, ce_m_dense(z, pool, lr, 0.5), rtol=0, atol=1e-10)


def test_ratio_callables_match_array(rng):
    z, pool, lr = _inputs(rng, n=40, m=33)
    want = similarity_search_cross_entropy(z, pool, lr, 0.3, block=6).per_anchor
    two = similarity_search_cross_entropy(z, pool, lambda r, c: lr[r, c], 0.3, block=6)
    one = similarity_search_cross_entropy(z, pool, lambda r: lr[r], 0.3, block=6)
    torch_in = similarity_search_cross_entropy(
        torch.tensor(z), torch.tensor(pool), torch.tensor(lr), 0.3, block=6
    )
    for got in (two, one, torch_in):
        np.testing.assert_allclose(got.per_anchor, want, rtol=0, atol=1e-13)


@pytest.mark.parametrize("workers", [2, 3])
def test_row_blocks_on_threads_match_one_thread(rng, workers):
    z, pool, lr = _inputs(rng, n=61, m=37)
    want = ce_m_loop(z, pool, lr, 0.3)
    threads = torch.get_num_threads()
    for log_ratio in (lr, lambda r, c: lr[r, c], lambda r: lr[r]):  # one-arg: a cache per thread
        got = similarity_search_cross_entropy(z, pool, log_ratio, 0.3, block=6, workers=workers)
        np.testing.assert_allclose(got.per_anchor, want, rtol=0, atol=1e-12)
    assert torch.get_num_threads() == threads  # intra-op threads restored
    with pytest.raises(ValueError, match="workers = 0: must be >= 1"):
        similarity_search_cross_entropy(z, pool, lr, 0.3, workers=0)


@pytest.mark.parametrize("tau", [0.5, 0.01])  # 0.01: the shifted path in float32
def test_float32_close_to_float64(rng, tau):
    z, pool, lr = _inputs(rng, n=30, m=40)
    a = similarity_search_cross_entropy(z, pool, lr, tau, block=8)
    b = similarity_search_cross_entropy(z, pool, lr, tau, block=8, dtype=torch.float32)
    np.testing.assert_allclose(b.per_anchor, a.per_anchor, atol=2e-5 / tau)


def test_scale_invariance_and_extreme_ratio(rng):
    z, pool, lr = _inputs(rng)
    base = similarity_search_cross_entropy(z, pool, lr, 0.5, block=5).per_anchor
    # Embeddings are normalised inside; weights are ratios, so a constant shift of log r is free,
    # even one that would overflow exp.
    got = similarity_search_cross_entropy(7 * z, 0.1 * pool, lr + 800.0, 0.5, block=5).per_anchor
    np.testing.assert_allclose(got, base, atol=1e-12)


def test_constant_ratio_closed_form(rng):
    """Uniform weights: CE_m = −(1/τ) mean s + log mean exp(s/τ) ≥ 0 (Jensen), = 0 iff s
    constant."""
    z, pool, _ = _inputs(rng)
    got = similarity_search_cross_entropy(z, pool, np.zeros((13, 17)), 0.5, block=4)
    assert np.all(got.per_anchor >= -1e-12)
    same = similarity_search_cross_entropy(np.ones((3, 4)), np.ones((5, 4)), np.zeros((3, 5)), 0.7)
    np.testing.assert_allclose(same.per_anchor, 0.0, atol=1e-12)


def test_zero_weight_tiles_are_skipped(rng):
    z, pool, lr = _inputs(rng, n=6, m=12)
    lr[:, :8] = -np.inf  # first tiles carry no weight at all
    got = similarity_search_cross_entropy(z, pool, lr, 0.5, block=4).per_anchor
    np.testing.assert_allclose(got, ce_m_dense(z, pool, lr, 0.5), atol=1e-12)
    lr[2] = -np.inf
    with pytest.raises(
        ValueError, match=r"log_ratio row 2: the weights w = r\(z, ξ\) are all zero"
    ):
        similarity_search_cross_entropy(z, pool, lr, 0.5, block=4)


def test_ce_m_errors(rng):
    z, pool, lr = _inputs(rng)
    with pytest.raises(ValueError, match=r"tau = -1: temperature must be"):
        similarity_search_cross_entropy(z, pool, lr, -1)
    with pytest.raises(ValueError, match=r"block = 0: block size"):
        similarity_search_cross_entropy(z, pool, lr, 0.5, block=0)
    with pytest.raises(ValueError, match=r"log_ratio.shape = \(13, 16\): expected \(N, m\)"):
        similarity_search_cross_entropy(z, pool, lr[:, :16], 0.5)
    with pytest.raises(ValueError, match=r"pool.shape\[1\] = 4"):
        similarity_search_cross_entropy(z, pool[:, :4], lr, 0.5)
    z[3] = 0.0
    with pytest.raises(ValueError, match=r"z\[3\] has norm 0.0"):
        similarity_search_cross_entropy(z, pool, lr, 0.5)
    with pytest.raises(ValueError, match=r"log_ratio tile shape"):
        similarity_search_cross_entropy(pool, pool, lambda r, c: np.zeros((2, 2)), 0.5)


def test_kernels_rows_sum_to_one_and_match_formula(rng):
    z, pool, lr = _inputs(rng)
    q = softmax_search_kernel(z, pool, 0.3, rows=slice(2, 6))
    np.testing.assert_allclose(q.sum(axis=1), 1.0, atol=1e-12)
    a = z[2:6] / np.linalg.norm(z[2:6], axis=1, keepdims=True)
    p = pool / np.linalg.norm(pool, axis=1, keepdims=True)
    e = np.exp(a @ p.T / 0.3)
    np.testing.assert_allclose(q, e / e.sum(axis=1, keepdims=True), atol=1e-12)
    np.testing.assert_allclose(log_softmax_search_kernel(z, pool, 0.3)[2:6], np.log(q), atol=1e-12)
    mh = idealised_search_kernel(lr)
    w = np.exp(lr)
    np.testing.assert_allclose(mh, w / w.sum(axis=1, keepdims=True), atol=1e-12)


@pytest.mark.parametrize("m1", [1, 4])
def test_population_ce_equals_loop(rng, m1):
    s_pos = rng.uniform(-1, 1, size=(9, m1))
    s_neg = rng.uniform(-1, 1, size=(9, 25))
    got = population_cross_entropy(s_pos if m1 > 1 else s_pos[:, 0], s_neg, 0.2)
    np.testing.assert_allclose(got.per_anchor, population_ce_loop(s_pos, s_neg, 0.2), atol=1e-12)


def test_population_risk_equals_loop(rng):
    s_pos, s_neg = rng.uniform(-1, 1, size=11), rng.uniform(-1, 1, size=(11, 6))
    got = population_risk(s_pos, s_neg, 0.1)
    np.testing.assert_allclose(got.per_anchor, risk_loop(s_pos, s_neg, 0.1), atol=1e-12)
    assert got.k == 6 and got.n == 11


@pytest.mark.parametrize("k", [1, 5, 100])
def test_closed_forms(k):
    s = np.full(8, 0.3)
    risk = population_risk(s, np.full((8, k), 0.3), 0.5)
    assert risk.risk == pytest.approx(math.log(k + 1) - math.log(k), abs=1e-14)
    ce = population_cross_entropy(np.full((8, 3), 0.3), np.full((8, 50), 0.3), 0.5)
    assert ce.ce == pytest.approx(0.0, abs=1e-14)


def test_population_errors(rng):
    with pytest.raises(ValueError, match=r"s_neg.shape\[0\] = 4: must equal s_pos.shape\[0\] = 3"):
        population_cross_entropy(np.zeros(3), np.zeros((4, 2)), 0.5)
    with pytest.raises(ValueError, match=r"s_pos.shape = \(3, 2\)"):
        population_risk(np.zeros((3, 2)), np.zeros((3, 2)), 0.5)
