"""Weighted kNN (Wu et al. 2018, DINO's eval_knn.py) against a loop written from its formula."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.probe import knn_predict, weighted_knn
from pipeline.stats.intervals import wilson_interval
from tests.oracles.probe_oracles import weighted_knn_loop

IDS = np.array([10, -3, 7, 42])  # arbitrary class ids


def _data(rng, n_bank=60, n_q=25, d=5):
    bank = rng.normal(size=(n_bank, d))
    queries = rng.normal(size=(n_q, d))
    return bank, IDS[rng.integers(0, 4, n_bank)], queries, IDS[rng.integers(0, 4, n_q)]


@pytest.mark.parametrize("temperature", [0.07, 0.5])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_predictions_match_the_loop(rng, temperature, dtype):
    bank, labels, queries, _ = _data(rng)
    ks = [1, 5, 17, 60]  # 60 = the bank size: every bank row votes
    got = knn_predict(bank, labels, queries, ks, temperature, dtype=dtype)
    # Discrete predictions compared exactly: random data has no near-tie at the float32 level
    # (a flip needs two similarities or two vote sums within ~1e-7 of each other).
    for k in ks:
        np.testing.assert_array_equal(got[k], weighted_knn_loop(bank, labels, queries, k,
                                                                temperature))


def test_accuracy_interval_and_fields(rng):
    bank, labels, queries, qlabels = _data(rng)
    res = weighted_knn(bank, labels, queries, qlabels, [3, 20], 0.1, level=0.9)
    assert set(res) == {3, 20}
    for k, r in res.items():
        pred = weighted_knn_loop(bank, labels, queries, k, 0.1)
        correct = int(np.sum(np.array(pred) == qlabels))
        assert r.accuracy == correct / 25
        assert r.ci == wilson_interval(correct, 25, 0.9)
        assert (r.k, r.temperature, r.n_bank, r.n_queries, r.n_classes) == (k, 0.1, 60, 25, 4)
    single = weighted_knn(bank, labels, queries, qlabels, 20, 0.1, level=0.9)
    assert single == {20: res[20]}


def test_equal_similarities_rank_by_bank_index_and_equal_votes_go_to_the_smallest_label():
    e1, e2 = [1.0, 0.0], [0.0, 1.0]
    # bank rows 0 and 1 are both at similarity 1/sqrt(2) from the query (exactly: same products)
    bank, labels, query = np.array([e1, e2]), np.array([5, 2]), np.array([[1.0, 1.0]])
    got = knn_predict(bank, labels, query, [1, 2], 0.07)
    assert got[1].tolist() == [5]  # the earlier bank row is the nearer
    assert got[2].tolist() == [2]  # one vote each, equal weights: the smaller label
    for k in (1, 2):
        assert got[k].tolist() == weighted_knn_loop(bank, labels, query, k, 0.07)


def test_ties_beyond_the_largest_k_take_the_earliest_rows():
    # five copies of e1 at similarity exactly 1: topk alone may return any three of them
    bank = np.array([[1.0, 0.0]] * 5 + [[0.0, 1.0]])
    labels = np.array([3, 1, 3, 1, 1, 0])
    query = np.array([[2.0, 0.0]])
    got = knn_predict(bank, labels, query, [1, 2, 3], 0.07)
    assert (got[1].tolist(), got[2].tolist(), got[3].tolist()) == ([3], [1], [3])
    for k in (1, 2, 3):
        assert got[k].tolist() == weighted_knn_loop(bank, labels, query, k, 0.07)


def test_blocks_and_tensor_inputs_agree(rng):
    bank, labels, queries, qlabels = _data(rng, n_q=40)
    ref = knn_predict(bank, labels, queries, [1, 7], 0.07)
    for block in (1, 3, 40, 1000):
        got = knn_predict(bank, labels, queries, [1, 7], 0.07, block=block)
        for k in ref:  # see test_predictions_match_the_loop on exact comparison
            np.testing.assert_array_equal(got[k], ref[k])
    tens = weighted_knn(torch.from_numpy(bank).float(), torch.from_numpy(labels),
                        torch.from_numpy(queries).float(), torch.from_numpy(qlabels), [1, 7], 0.07)
    assert tens == weighted_knn(bank, labels, queries, qlabels, [1, 7], 0.07)


def test_small_temperature_does_not_overflow():
    # exp(s / T) overflows float64 at T = 1e-3; the shifted weights exp((s − s_1)/T) do not
    # (all three weights inf: a three-way tie, won by label 0); the nearest row must win
    bank = np.array([[1.0, 0.0], [0.9, 0.1], [0.8, 0.3]])
    got = knn_predict(bank, np.array([1, 0, 0]), np.array([[1.0, 0.0]]), 3, 1e-3)
    assert got[3].tolist() == [1]


def test_separable_classes_are_recovered(rng):
    centres = 5.0 * np.eye(10, 32)
    yb, yq = rng.integers(0, 10, 2000), rng.integers(0, 10, 500)
    bank = centres[yb] + rng.normal(size=(2000, 32))
    queries = centres[yq] + rng.normal(size=(500, 32))
    res = weighted_knn(bank, yb, queries, yq, [20, 200], 0.07)
    assert res[20].accuracy >= 0.99 and res[200].accuracy >= 0.99


def test_shuffled_labels_give_chance_inside_the_interval(rng):
    yb, yq = rng.integers(0, 10, 3000), rng.integers(0, 10, 2000)
    bank, queries = rng.normal(size=(3000, 16)), rng.normal(size=(2000, 16))
    for r in weighted_knn(bank, yb, queries, yq, [20, 200], 0.07).values():
        assert r.ci.low <= 0.1 <= r.ci.high, r


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_equals_cpu(rng):
    bank, labels, queries, _ = _data(rng, n_bank=500, n_q=300, d=16)
    cpu = knn_predict(bank, labels, queries, [1, 20, 200], 0.07)
    gpu = knn_predict(torch.from_numpy(bank).cuda(), labels, torch.from_numpy(queries).cuda(),
                      [1, 20, 200], 0.07)
    for k in cpu:  # discrete predictions; other kernels may flip a near-tie: allow one
        assert np.sum(gpu[k] != cpu[k]) <= 1
