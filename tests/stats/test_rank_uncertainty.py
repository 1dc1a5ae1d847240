"""The rank interval and P(rank = 1) (pipeline.stats.comparisons.rank_uncertainty): against a plain
loop on the same draws, its exact cases, and its coverage of a generating model's mean rank."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.stats.comparisons.rank_uncertainty import (
    first_place_shares,
    rank_uncertainty,
    replicate_mean_ranks,
)


def loop_replicates(scores: np.ndarray, higher: bool, n_boot: int,
                    rng: np.random.Generator) -> np.ndarray:
    """The replicates written as loops: the same draws (blocks, then one uniform per slot), a
    seed mean per (block, method), ranks by counting, ties averaged."""
    complete = [i for i in range(scores.shape[0])
                if all(np.isfinite(scores[i, j]).any() for j in range(scores.shape[1]))]
    n, m, s = len(complete), scores.shape[1], scores.shape[2]
    pick = rng.integers(0, n, size=(n_boot, n))
    u = rng.random((n_boot, n, m, s))
    out = np.zeros((n_boot, m))
    for b in range(n_boot):
        for t in range(n):
            block = scores[complete[pick[b, t]]]
            means = []
            for j in range(m):
                seeds = [v for v in block[j] if np.isfinite(v)]
                drawn = [seeds[int(u[b, t, j, q] * len(seeds))] for q in range(len(seeds))]
                means.append(sum(drawn) / len(drawn))
            for j in range(m):
                better = sum((x > means[j]) if higher else (x < means[j]) for x in means)
                ties = sum(x == means[j] for x in means) - 1
                out[b, j] += 1 + better + ties / 2  # half-integers: the sums are exact
    return out / n


def loop_first_place(reps: np.ndarray) -> np.ndarray:
    shares = np.zeros(reps.shape[1])
    for row in reps:
        best = [j for j in range(row.size) if row[j] == row.min()]
        for j in best:
            shares[j] += 1 / len(best) / reps.shape[0]
    return shares


@pytest.mark.parametrize("higher", [True, False])
def test_replicates_match_a_loop_on_the_same_draws(higher):
    rng = np.random.default_rng(3)
    x = np.round(rng.normal(size=(6, 4, 3)), 1)  # rounded: ties within blocks occur
    x[0, 1, 1:] = np.nan  # one seed here
    x[2, 3, 2] = np.nan
    x[4, 0] = np.nan  # an incomplete block: left out, as the ranking does
    fast = replicate_mean_ranks(x, higher, 300, np.random.default_rng(11))
    slow = loop_replicates(x, higher, 300, np.random.default_rng(11))
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)
    np.testing.assert_allclose(first_place_shares(fast), loop_first_place(slow), atol=1e-12)


def test_chunks_do_not_change_the_draws(monkeypatch):
    x = np.random.default_rng(1).normal(size=(5, 3, 2))
    whole = replicate_mean_ranks(x, True, 50, np.random.default_rng(2))
    from pipeline.stats.comparisons import rank_uncertainty as ru
    monkeypatch.setattr(ru, "CHUNK", 5 * 3 * 2 * 7)  # 7 replicates a chunk
    parts = ru.replicate_mean_ranks(x, True, 50, np.random.default_rng(2))
    assert parts.shape == whole.shape and np.isfinite(parts).all()
    np.testing.assert_allclose(parts.sum(axis=1), 50 * [3 * 4 / 2])  # ranks sum to m(m+1)/2


def test_exact_cases():
    # one method best in every block and every seed: rank 1 always, P(rank 1) = 1
    base = np.random.default_rng(0).normal(size=(8, 3, 4))
    base[:, 0] += 100.0
    r = rank_uncertainty(base, True, 200, np.random.default_rng(1), 0.9)
    assert r.low[0] == r.high[0] == r.estimate[0] == 1.0
    np.testing.assert_allclose(r.p_rank1, [1.0, 0.0, 0.0])
    # lower is better flips it to last
    r = rank_uncertainty(base, False, 200, np.random.default_rng(1), 0.9)
    assert r.low[0] == r.high[0] == 3.0 and r.p_rank1[0] == 0.0
    # two identical methods with one seed tie everywhere: the first place is split
    same = np.repeat(np.random.default_rng(4).normal(size=(5, 1, 1)), 2, axis=1)
    r = rank_uncertainty(same, True, 100, np.random.default_rng(0))
    np.testing.assert_allclose(r.p_rank1, [0.5, 0.5])
    np.testing.assert_allclose([r.low, r.high], 1.5)
    # no complete block: NaN; the estimate is the ranking's mean rank
    gone = base.copy()
    gone[:, 2, :] = np.nan
    assert np.isnan(rank_uncertainty(gone, True, 10, np.random.default_rng(0)).low).all()


def test_estimate_is_the_rankings_mean_rank_and_shares_sum_to_one():
    from pipeline.stats.comparisons.ranking import rank_methods

    x = np.random.default_rng(9).normal(size=(10, 5, 3))
    r = rank_uncertainty(x, True, 400, np.random.default_rng(0), 0.95)
    np.testing.assert_allclose(r.estimate, rank_methods(x, list("abcde"), True).mean_rank)
    assert r.p_rank1.sum() == pytest.approx(1.0)
    assert (r.low <= r.estimate + 1e-12).all() and (r.estimate <= r.high + 1e-12).all()


def test_bad_arguments():
    x = np.zeros((3, 2, 2))
    with pytest.raises(ValueError, match="n_boot = 0"):
        rank_uncertainty(x, True, 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="level = 1.5"):
        rank_uncertainty(x, True, 10, np.random.default_rng(0), 1.5)


def _population_mean_rank(mu: np.ndarray, tau: float, sigma: float, seeds: int) -> np.ndarray:
    """E[rank] of each method in a new block of the generating model, by a large simulation."""
    rng = np.random.default_rng(2024)
    blocks = 200_000
    means = (mu + tau * rng.normal(size=(blocks, mu.size))
             + sigma * rng.normal(size=(blocks, mu.size, seeds)).mean(axis=2))
    ranks = (means[:, :, None] < means[:, None, :]).sum(axis=2) + 1  # no ties: continuous
    out: np.ndarray = ranks.mean(axis=0)
    return out


def test_the_interval_covers_the_population_mean_rank_about_as_often_as_its_level():
    """Blocks: x_ijs = μ_j + block interaction τ·z_ij + seed noise σ·e_ijs (the common block
    effect does not change ranks); the population mean rank is E[r_ij] over new blocks with S
    seeds. 300 replications of N = 20 blocks, 3 seeds, 400 resamples at level 0.9: each method's
    coverage is a binomial share of 300 (sd 0.017 at 0.9), the pooled one of 900 correlated ones.
    The interval is a little wide by design (seeds redrawn inside a redrawn block add their noise
    to block means that have it already): 0.92 pooled here (0.91, 0.93, 0.94 per method). Asked:
    pooled within [0.84, 0.96], each method within [0.80, 0.98] (beyond 3 sd of 0.9 and 0.92)."""
    mu, tau, sigma, seeds, n, level = np.array([0.0, 0.3, 0.5]), 0.5, 0.4, 3, 20, 0.9
    truth = _population_mean_rank(mu, tau, sigma, seeds)
    rng = np.random.default_rng(7)
    reps = 300
    covered = np.zeros(mu.size)
    for _ in range(reps):
        x = (mu[None, :, None] + tau * rng.normal(size=(n, mu.size, 1))
             + sigma * rng.normal(size=(n, mu.size, seeds)) + rng.normal(size=(n, 1, 1)))
        r = rank_uncertainty(x, True, 400, rng, level)
        covered += (r.low <= truth) & (truth <= r.high)
    coverage = covered / reps
    assert 0.84 <= coverage.mean() <= 0.96, coverage
    assert ((0.80 <= coverage) & (coverage <= 0.98)).all(), coverage
