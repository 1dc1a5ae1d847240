"""Held-out risk and recall against loops written from the definitions."""

from __future__ import annotations

import math

import numpy as np

from pipeline.search import heldout_infonce_risk, recall_at_k


def _unit(z):
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def test_recall_matches_a_loop():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(50, 5))
    p = a + 0.8 * rng.normal(size=(50, 5))
    got = recall_at_k(a, p, ks=(1, 5), block=7)
    au, pu = _unit(a), _unit(p)
    hits = {1: 0, 5: 0}
    for i in range(50):
        sims = [float(au[i] @ pu[j]) for j in range(50)]
        better = sum(1 for j in range(50) if j != i and sims[j] >= sims[i])
        for k in hits:
            hits[k] += better < k
    assert got == {k: v / 50 for k, v in hits.items()}


def test_heldout_risk_matches_a_loop_with_the_same_draws():
    rng = np.random.default_rng(1)
    a, p = rng.normal(size=(30, 4)), rng.normal(size=(30, 4))
    k, tau = 6, 0.3
    got = heldout_infonce_risk(a, p, k, tau, np.random.default_rng(7))
    # replay the draws: uniform over the n−1 other samples
    draws = np.random.default_rng(7).integers(0, 29, size=(30, k))
    au, pu = _unit(a), _unit(p)
    losses = []
    for i in range(30):
        others = [j for j in range(30) if j != i]
        pos = au[i] @ pu[i]
        terms = [math.exp((au[i] @ pu[others[t]] - pos) / tau) for t in draws[i]]
        losses.append(math.log(1 + sum(terms)) - math.log(k))
    assert math.isclose(got.risk, float(np.mean(losses)), rel_tol=1e-12)
    assert math.isclose(got.se, float(np.std(losses, ddof=1) / math.sqrt(30)), rel_tol=1e-9)


def test_identical_embeddings_give_log_k_plus_one():
    z = np.ones((10, 3))
    r = heldout_infonce_risk(z, z, 4, 0.5, np.random.default_rng(0))
    assert math.isclose(r.risk, math.log(5) - math.log(4), rel_tol=1e-12)
