"""IQM, stratified-bootstrap intervals, P(A > B), win rate and Borda
(pipeline.stats.comparisons.aggregates) against SciPy (trim_mean, bootstrap, mannwhitneyu), loops
from the formulas and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from pipeline.stats.comparisons.aggregates import aggregate_methods, improvement, iqm, win_rates
from pipeline.stats.comparisons.compare import compare
from pipeline.stats.comparisons.ranking import block_ranks, rank_methods


def test_iqm_is_the_mean_of_the_middle_half():
    x = np.random.default_rng(0).normal(size=40)
    assert float(iqm(x)) == pytest.approx(np.sort(x)[10:30].mean(), rel=1e-12)


def test_mean_interval_matches_scipy_bootstrap_on_one_block():
    """One block: the stratified bootstrap is the ordinary percentile bootstrap of the seeds."""
    seeds = np.random.default_rng(1).normal(size=12)
    scores = np.stack([seeds, seeds + 1.0])[None]  # (1 block, 2 methods, 12 seeds)
    agg = aggregate_methods(scores, ["a", "b"], True, 20000, np.random.default_rng(2))
    ref = sps.bootstrap((seeds,), np.mean, n_resamples=20000, method="percentile",
                        rng=np.random.default_rng(3)).confidence_interval
    assert agg[0].mean.low == pytest.approx(ref.low, abs=0.03)
    assert agg[0].mean.high == pytest.approx(ref.high, abs=0.03)
    assert agg[0].mean.estimate == pytest.approx(seeds.mean())


def test_bootstrap_resamples_seeds_within_blocks():
    """Two blocks far apart with a narrow spread inside each: resampling within blocks keeps
    one half of the values in each block, so the interval of the mean is narrow; resampling the
    pooled values (ignoring the blocks) would make it wide."""
    rng = np.random.default_rng(4)
    x = np.stack([rng.normal(0, 0.01, 5), rng.normal(10, 0.01, 5)])  # (2 blocks, 5 seeds)
    scores = np.stack([x, x], axis=1)
    agg = aggregate_methods(scores, ["a", "b"], True, 4000, np.random.default_rng(5))
    assert agg[0].mean.high - agg[0].mean.low < 0.05
    pooled = sps.bootstrap((x.ravel(),), np.mean, n_resamples=4000, method="percentile",
                           rng=np.random.default_rng(6)).confidence_interval
    assert pooled.high - pooled.low > 2.0


def test_iqm_interval_holds_the_estimate_and_is_reproducible():
    x = np.random.default_rng(7).normal(size=(6, 3, 4))
    a = aggregate_methods(x, list("abc"), True, 500, np.random.default_rng(8))
    b = aggregate_methods(x, list("abc"), True, 500, np.random.default_rng(8))
    assert a == b
    for agg in a:
        assert agg.iqm.low <= agg.iqm.estimate <= agg.iqm.high


def test_probability_of_improvement_is_mann_whitney_per_block():
    rng = np.random.default_rng(9)
    x = np.round(rng.normal(size=(5, 2, 4)), 1)  # ties included
    imp = improvement(x, ["a", "b"], True, 200, np.random.default_rng(0))[0]
    per_block = [sps.mannwhitneyu(x[i, 0], x[i, 1]).statistic / 16 for i in range(5)]
    assert imp.probability.estimate == pytest.approx(np.mean(per_block), rel=1e-12)
    assert imp.blocks == 5
    flipped = improvement(-x, ["a", "b"], False, 200, np.random.default_rng(0))[0]
    assert flipped.probability.estimate == pytest.approx(imp.probability.estimate)


def test_probability_pair_is_complementary_and_interval_is_over_seeds():
    x = np.random.default_rng(10).normal(size=(4, 2, 3)) + np.array([0.5, 0.0])[None, :, None]
    c = compare(x, ["a", "b"], True, np.random.default_rng(1), n_boot=500)
    ab, ba = c.improvement("a", "b"), c.improvement("b", "a")
    assert ab.probability.estimate + ba.probability.estimate == pytest.approx(1.0)
    assert ab.probability.low == pytest.approx(1 - ba.probability.high)
    one_seed = compare(x[:, :, :1], ["a", "b"], True, np.random.default_rng(1), n_boot=50)
    assert np.isnan(one_seed.improvement("a", "b").probability.low)  # no seed variation
    assert one_seed.seeds == 1


def test_win_rate_and_borda_against_loops_and_mean_rank():
    """Complete blocks: win rate = (m − R̄)/(m − 1) (ties ½), Borda = Σ_i (m − r_ij)."""
    x = np.round(np.random.default_rng(11).normal(size=(9, 4)), 1)
    m = 4
    r = block_ranks(x, True)
    wins = win_rates(x, True)
    np.testing.assert_allclose(wins, (m - r.mean(axis=0)) / (m - 1), rtol=1e-12)
    loop = np.zeros(m)
    for j in range(m):
        for i in range(9):
            for k in range(m):
                if k != j:
                    loop[j] += (x[i, j] > x[i, k]) + 0.5 * (x[i, j] == x[i, k])
    np.testing.assert_allclose(wins, loop / (9 * (m - 1)), rtol=1e-12)
    agg = aggregate_methods(x, list("abcd"), True, 10, np.random.default_rng(0))
    np.testing.assert_allclose([a.borda for a in agg], (m - r).sum(axis=0), rtol=1e-12)


def test_win_rate_is_helms_mean_over_blocks_when_blocks_are_missing():
    """HELM (Liang et al. 2022): per block, the share of the other methods present that a
    method beats; then the mean over blocks, each block the same weight. Written as a loop
    from that definition, and a hand-computed case where pooling the pairs differs."""
    rng = np.random.default_rng(5)
    x = np.round(rng.normal(size=(7, 5)), 1)
    x[rng.random(x.shape) < 0.3] = np.nan
    x[6] = np.nan
    x[6, 2] = 1.0  # a block with one method: no other method to beat there
    loop = np.full(5, np.nan)
    for j in range(5):
        shares = []
        for i in range(7):
            others = [k for k in range(5) if k != j and np.isfinite(x[i, k])]
            if np.isfinite(x[i, j]) and others:
                shares.append(np.mean([(x[i, j] > x[i, k]) + 0.5 * (x[i, j] == x[i, k])
                                       for k in others]))
        if shares:
            loop[j] = np.mean(shares)
    np.testing.assert_allclose(win_rates(x, True), loop, rtol=1e-12)
    np.testing.assert_allclose(win_rates(-x, False), loop, rtol=1e-12)
    # block 0: a beats b and c; block 1: a loses to b, c absent. HELM: (1 + 0) / 2 = 0.5;
    # pooled pairs: 2 wins of 3 = 0.667
    small = np.array([[3.0, 2.0, 1.0], [1.0, 2.0, np.nan]])
    assert win_rates(small, True)[0] == pytest.approx(0.5)
    assert win_rates(small, True)[2] == pytest.approx(0.0)
    assert np.isnan(win_rates(np.array([[1.0, np.nan]]), True)).all()


def test_missing_blocks_are_left_out_and_counted():
    x = np.random.default_rng(12).normal(size=(5, 3, 2))
    x[1, 0, :] = np.nan  # a has nothing on block 1
    x[3, 0, 1] = np.nan  # and one seed fewer on block 3
    agg = aggregate_methods(x, list("abc"), True, 100, np.random.default_rng(0))
    assert (agg[0].blocks, agg[0].blocks_missing, agg[0].scores) == (4, 1, 7)
    assert (agg[1].blocks, agg[1].blocks_missing, agg[1].scores) == (5, 0, 10)
    assert agg[0].mean.estimate == pytest.approx(np.nanmean(x[:, 0]))
    assert agg[0].borda_blocks == 4
    imp = improvement(x, list("abc"), True, 100, np.random.default_rng(0))
    assert [i.blocks for i in imp] == [4, 4, 5]
    ranking = rank_methods(x, list("abc"), True)
    assert ranking.blocks_complete == 4


def test_one_seed_has_no_interval():
    x = np.random.default_rng(13).normal(size=(6, 3))
    agg = aggregate_methods(x, list("abc"), True, 100, np.random.default_rng(0))
    assert all(np.isnan(a.iqm.low) and np.isfinite(a.iqm.estimate) for a in agg)


def test_the_registry_drives_the_aggregates_and_ranks_csv():
    """One entry of the registry is one aggregate: its columns reach MethodAggregate.values and
    ranks.csv in the registry's order, and an extra entry (a median) needs nothing else."""
    from pipeline.report.grid.ranks import RANKS_COLUMNS
    from pipeline.stats.comparisons.aggregates import AGGREGATES, Aggregate, aggregate_columns

    cols = aggregate_columns()
    assert RANKS_COLUMNS[3:3 + len(cols)] == cols
    assert cols[:8] == ("iqm", "iqm_lo", "iqm_hi", "mean", "mean_lo", "mean_hi", "win_rate",
                        "borda")
    x = np.random.default_rng(4).normal(size=(5, 3, 4))
    median = Aggregate("median", "Median", True, "seeds",
                       lambda v: np.median(v, axis=-1), ("median", "median_lo", "median_hi"))
    agg = aggregate_methods(x, list("abc"), True, 300, np.random.default_rng(0),
                            aggregates=(*AGGREGATES, median))
    for j, a in enumerate(agg):
        assert a.values["median"] == pytest.approx(np.median(x[:, j]))
        assert a.interval("median").low <= a.values["median"] <= a.interval("median").high
    plain = aggregate_methods(x, list("abc"), True, 300, np.random.default_rng(0))
    assert [a.iqm for a in plain] == [a.iqm for a in agg]  # the shared draws are unchanged
