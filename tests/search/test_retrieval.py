"""Held-out risk, recall and the leave-one-out kNN vote against loops written from the
definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.search import (
    heldout_infonce_risk,
    loo_majority_knn_accuracy,
    positive_ranks,
    recall_at_k,
    selection_split,
    split_recall,
)


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


def _loo_majority_loop(z, labels, k):
    """Straight from the definition: for each point, the k most similar other points vote."""
    u = _unit(z)
    correct = 0
    for i in range(len(u)):
        sims = sorted(((float(u[i] @ u[j]), j) for j in range(len(u)) if j != i), reverse=True)
        votes = {}
        for _, j in sims[:k]:
            votes[int(labels[j])] = votes.get(int(labels[j]), 0) + 1
        best = max(votes.values())
        correct += min(c for c, v in votes.items() if v == best) == labels[i]  # ties: smallest
    return correct / len(u)


@pytest.mark.parametrize("k, block", [(1, 1024), (4, 7), (5, 13)])
def test_loo_majority_knn_matches_a_loop(k, block):
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, 60)
    z = rng.normal(size=(60, 4)) + 1.5 * np.eye(4)[labels]  # classes apart, but overlapping
    got = loo_majority_knn_accuracy(z, labels, k, block=block)
    assert got == _loo_majority_loop(z, labels, k)
    assert 0.0 < got < 1.0  # neither trivial end: the vote is what is tested


def test_loo_majority_knn_leaves_each_point_out():
    """With k = 1 a duplicate of each point is its own neighbour: a point that counted itself
    would be right every time; its duplicate's label decides instead."""
    z = np.repeat(np.eye(3), 2, axis=0)
    labels = np.array([0, 1, 1, 1, 2, 0])  # the pairs disagree in two of three
    assert loo_majority_knn_accuracy(z, labels, 1) == pytest.approx(2 / 6)


def test_loo_majority_knn_rejects_k_out_of_range():
    with pytest.raises(ValueError, match=r"k = 10: need 1 <= k <= N - 1 = 9"):
        loo_majority_knn_accuracy(np.eye(10), np.arange(10), 10)


@pytest.mark.parametrize("n", [2, 3, 500, 1001])
def test_the_selection_split_is_two_disjoint_halves_fixed_by_n(n):
    select, report = selection_split(n)
    assert select.size == n // 2 and report.size == n - n // 2
    assert not set(select) & set(report)
    assert sorted([*select, *report]) == list(range(n))
    again = selection_split(n)
    assert (again[0] == select).all() and (again[1] == report).all()


def test_the_selection_split_is_not_the_row_order():
    select, _ = selection_split(1000)
    assert not (select == np.arange(500)).all() and not (select % 2 == 0).all()


@pytest.mark.parametrize("n", [1, 0, 2.5, True])
def test_a_split_needs_two_anchors(n):
    with pytest.raises(ValueError, match="n = "):
        selection_split(n)


def test_the_halves_recalls_are_the_loops_on_each_half_and_average_to_the_whole():
    rng = np.random.default_rng(11)
    a = rng.normal(size=(81, 6))
    p = a + 1.0 * rng.normal(size=(81, 6))
    rank = positive_ranks(a, p, block=10)
    got = split_recall(rank, ks=(1, 5))
    au, pu = _unit(a), _unit(p)
    loop = np.array([sum(1 for j in range(81) if j != i and au[i] @ pu[j] >= au[i] @ pu[i])
                     for i in range(81)])
    assert (rank == loop).all()
    select, report = selection_split(81)
    whole = recall_at_k(a, p, ks=(1, 5))
    for k in (1, 5):
        assert got[f"recall_at_{k}_select"] == pytest.approx(np.mean(loop[select] < k))
        r = float(np.mean(loop[report] < k))
        assert got[f"recall_at_{k}_report"] == pytest.approx(r)
        assert got[f"recall_at_{k}_report_se"] == pytest.approx(math.sqrt(r * (1 - r) / 41))
        mixed = (40 * got[f"recall_at_{k}_select"] + 41 * r) / 81
        assert mixed == pytest.approx(whole[k])
