"""Performance profiles and the optimality gap (pipeline.stats.comparisons.profiles) against loops
from the definitions (tests/oracles/profile_oracles.py), rliable 1.2.0's
``aggregate_optimality_gap``, values recorded from rliable 1.2.0's ``create_performance_profile``
and
``get_interval_estimates`` (its ``library`` module needs ``arch``, whose 7.x releases do not
import under pandas 3: recorded in a separate environment with pandas 2.3, see
``RECORDED``), SciPy's percentile bootstrap on one block, and invariances."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from pipeline.stats.comparisons.profiles import (
    normalise,
    optimality_gap_values,
    optimality_gaps,
    performance_profiles,
    profile_values,
    tau_grid,
)
from tests.oracles.profile_oracles import normalise_loop, optimality_gap_loop, profile_loop

METHODS = ["a", "b", "c", "d"]


def _scores(seed: int, blocks: int = 7, seeds: int = 5, missing: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(blocks, len(METHODS), seeds)) * rng.uniform(0.5, 3.0, (blocks, 1, 1))
    x += np.linspace(0, 1, len(METHODS))[None, :, None] + rng.normal(0, 5, (blocks, 1, 1))
    if missing:
        x[rng.random(x.shape) < missing] = np.nan
    return x


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("higher", [True, False])
def test_minmax_normalisation_matches_the_loop(seed, higher):
    x = _scores(seed, missing=0.15)
    got = normalise(x, METHODS, higher).scores
    ref = np.array(normalise_loop(x.tolist(), higher), dtype=float)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_minmax_puts_the_best_mean_at_one_and_the_worst_at_zero():
    x = _scores(3)
    for higher in (True, False):
        means = np.nanmean(normalise(x, METHODS, higher).scores, axis=2)
        np.testing.assert_allclose(means.max(axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(means.min(axis=1), 0.0, atol=1e-12)
        best = np.nanargmax if higher else np.nanargmin
        np.testing.assert_array_equal(means.argmax(axis=1), best(x.mean(axis=2), axis=1))


def test_baseline_normalisation_matches_the_loop():
    x = _scores(4, missing=0.1)
    x[2, 1] = np.nan  # the baseline misses block 2: left out
    x[5, 1] += 100.0  # the baseline is best on block 5: no scale, left out
    norm = normalise(x, METHODS, True, rule="baseline", baseline="b")
    ref = np.array(normalise_loop(x.tolist(), True, baseline=1), dtype=float)
    np.testing.assert_allclose(norm.scores, ref, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert norm.rule == "baseline" and norm.baseline == "b"
    assert np.isnan(norm.scores[[2, 5]]).all() and norm.blocks_flat == 2
    np.testing.assert_allclose(np.nanmean(norm.scores[[0, 1, 3], 1], axis=1), 0.0, atol=1e-12)


def test_a_block_without_a_scale_is_left_out_and_counted():
    x = _scores(5)
    x[1] = 3.0  # every method equal
    x[4, 1:] = np.nan  # one method only
    norm = normalise(x, METHODS, True)
    assert np.isnan(norm.scores[[1, 4]]).all()
    assert np.isfinite(norm.scores[[0, 2, 3, 5, 6]]).all()
    assert (norm.blocks_used, norm.blocks_flat) == (5, 2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_profile_and_gap_match_the_loops_with_missing_seeds(seed):
    x = _scores(seed, missing=0.2)
    tau = np.linspace(-0.5, 1.5, 41)
    res = performance_profiles(x, METHODS, True, 50, np.random.default_rng(0), tau=tau,
                               gamma=0.8)
    ref = normalise_loop(x.tolist(), True)
    for j, p in enumerate(res.profiles):
        np.testing.assert_allclose(p.fraction, profile_loop(ref, j, list(tau)), atol=1e-12)
        assert res.gaps[j].gap.estimate == pytest.approx(optimality_gap_loop(ref, j, 0.8),
                                                         abs=1e-12)
        assert p.runs == int(np.isfinite(np.array(ref)[:, j]).sum())


@pytest.mark.parametrize("seed", [10, 11, 12])
def test_gap_matches_rliable(seed):
    """rliable's ``aggregate_optimality_gap`` of the (runs × tasks) matrix of each method."""
    metrics = pytest.importorskip("rliable.metrics")
    x = _scores(seed, blocks=9, seeds=6)
    res = performance_profiles(x, METHODS, False, 20, np.random.default_rng(0))
    for j, g in enumerate(res.gaps):
        runs = res.normalised.scores[:, j, :].T  # (seeds, blocks): rliable's layout
        assert g.gap.estimate == pytest.approx(float(metrics.aggregate_optimality_gap(runs)),
                                               abs=1e-12)
        for gamma in (0.5, 1.5):
            assert float(optimality_gap_values(runs.ravel(), gamma)) == pytest.approx(
                float(metrics.aggregate_optimality_gap(runs, gamma)), abs=1e-12)


# Recorded with rliable 1.2.0 (numpy 2.4.6, scipy 1.17.1, pandas 2.3.3, arch 7.2.0):
#   x = np.random.default_rng(seed).uniform(0, 1, size=(5, 3))  # (runs, tasks), one method
#   np.random.seed(seed)  # rliable's bootstrap draws from numpy's global generator
#   profiles, cis = rliable.library.create_performance_profile(
#       {"m": x}, TAU_RLIABLE, reps=20000)
#   _, gap_ci = rliable.library.get_interval_estimates(
#       {"m": x}, lambda s: np.array([rliable.metrics.aggregate_optimality_gap(s)]), reps=20000)
# (its rng differs from ours: the bands are compared at a Monte Carlo tolerance).
TAU_RLIABLE = [0.0, 0.2, 0.4, 0.6, 0.8]
RECORDED: dict[int, dict[str, list[float]]] = {
    20: {"profile": [1.0, 0.666666666667, 0.466666666667, 0.2, 0.066666666667],
         "profile_lo": [1.0, 0.466667, 0.266667, 0.0, 0.0],
         "profile_hi": [1.0, 0.866667, 0.666667, 0.4, 0.2],
         "gap": [0.637810844946, 0.515021, 0.754226]},
    21: {"profile": [1.0, 0.8, 0.733333333333, 0.666666666667, 0.266666666667],
         "profile_lo": [1.0, 0.6, 0.533333, 0.466667, 0.066667],
         "profile_hi": [1.0, 1.0, 0.933333, 0.866667, 0.466667],
         "gap": [0.407147694764, 0.29438, 0.526582]},
    22: {"profile": [1.0, 0.733333333333, 0.533333333333, 0.333333333333, 0.2],
         "profile_lo": [1.0, 0.533333, 0.333333, 0.133333, 0.0],
         "profile_hi": [1.0, 0.933333, 0.733333, 0.6, 0.4],
         "gap": [0.55128655997, 0.407547, 0.66991]},
}


def test_profile_band_and_gap_interval_match_rliable_recorded():
    for seed, rec in RECORDED.items():
        x = np.random.default_rng(seed).uniform(0, 1, size=(5, 3))  # (runs, tasks)
        # Already normalised: min–max of a block whose methods' means are 0 and 1 is identity.
        scores = np.stack([x.T, np.zeros((3, 5)), np.ones((3, 5))], axis=1)
        res = performance_profiles(scores, ["m", "zero", "one"], True, 20000,
                                   np.random.default_rng(seed), tau=np.array(TAU_RLIABLE))
        p, g = res.profiles[0], res.gaps[0]
        np.testing.assert_allclose(p.fraction, rec["profile"], atol=1e-12)
        np.testing.assert_allclose(p.low, rec["profile_lo"], atol=0.07)
        np.testing.assert_allclose(p.high, rec["profile_hi"], atol=0.07)
        assert g.gap.estimate == pytest.approx(rec["gap"][0], abs=1e-12)
        assert g.gap.low == pytest.approx(rec["gap"][1], abs=0.02)
        assert g.gap.high == pytest.approx(rec["gap"][2], abs=0.02)


def test_gap_interval_matches_scipy_bootstrap_on_one_block():
    """One block: the stratified bootstrap is SciPy's percentile bootstrap of the seeds."""
    rng = np.random.default_rng(6)
    x = np.stack([rng.uniform(0, 1, 12), np.zeros(12), np.ones(12)])[None]  # (1, 3, 12)
    res = performance_profiles(x, ["m", "zero", "one"], True, 20000, np.random.default_rng(7))
    seeds = res.normalised.scores[0, 0]
    ref = sps.bootstrap((seeds,), lambda v, axis: np.maximum(0, 1 - v).mean(axis=axis),
                        n_resamples=20000, method="percentile",
                        rng=np.random.default_rng(8)).confidence_interval
    assert res.gaps[0].gap.low == pytest.approx(ref.low, abs=0.01)
    assert res.gaps[0].gap.high == pytest.approx(ref.high, abs=0.01)


def test_bootstrap_resamples_seeds_within_blocks():
    """Two blocks, one where a method is far below the best and one where it is the best, each
    with a narrow spread over seeds: resampling within the blocks keeps half of its runs in
    each, so the gap's interval is narrow; resampling the pooled runs would make it wide."""
    rng = np.random.default_rng(9)
    a = np.stack([rng.normal(0.0, 0.01, 6), rng.normal(1.0, 0.01, 6)])  # (2 blocks, 6 seeds)
    x = np.stack([a, np.stack([np.ones(6), np.zeros(6)])], axis=1)  # (2, 2, 6)
    g = performance_profiles(x, ["a", "b"], True, 4000, np.random.default_rng(10)).gaps[0].gap
    assert g.estimate == pytest.approx(0.5, abs=0.02)
    assert g.high - g.low < 0.03


def test_band_covers_the_profile_and_narrows_with_seeds():
    x = _scores(13, seeds=4)
    many = np.concatenate([x] * 8, axis=2) + np.random.default_rng(14).normal(0, 0.01, (7, 4, 32))
    width = []
    for s in (x, many):
        res = performance_profiles(s, METHODS, True, 2000, np.random.default_rng(15),
                                   tau=np.linspace(0, 1, 21))
        for p in res.profiles:
            assert np.all(p.low <= p.fraction + 1e-12) and np.all(p.fraction <= p.high + 1e-12)
        width.append(np.mean([np.mean(p.high - p.low) for p in res.profiles]))
    assert width[1] < 0.6 * width[0]


def test_one_seed_per_cell_gives_estimates_without_intervals():
    x = _scores(16, seeds=1)
    res = performance_profiles(x, METHODS, True, 200, np.random.default_rng(0))
    assert all(np.isnan(p.low).all() and np.isnan(p.high).all() for p in res.profiles)
    assert all(np.isfinite(g.gap.estimate) and np.isnan(g.gap.low) for g in res.gaps)


def test_profile_is_nonincreasing_and_the_default_grid_spans_the_middle_runs():
    x = _scores(17)
    res = performance_profiles(x, METHODS, True, 100, np.random.default_rng(0))
    runs = res.normalised.scores[np.isfinite(res.normalised.scores)]
    lo, hi = np.quantile(runs, [0.05, 0.95])
    assert res.tau[0] == pytest.approx(min(0.0, lo)) and res.tau[-1] == pytest.approx(max(1, hi))
    assert res.tau.size == 101
    for p in res.profiles:
        assert np.all(np.diff(p.fraction) <= 0)
    np.testing.assert_allclose(profile_values(np.array([0.0, 0.5, 1.0]), np.array([0.5])), [1 / 3])
    assert tau_grid(np.full((2, 2), np.nan)).tolist() == np.linspace(0, 1, 101).tolist()


def test_gap_of_the_best_everywhere_is_zero_and_flipping_agrees():
    x = _scores(18, seeds=1)
    x[:, 3] = x.max(axis=1) + 1.0  # d best on every block
    res = performance_profiles(x, METHODS, True, 10, np.random.default_rng(0))
    assert res.gap("d").gap.estimate == 0.0
    flipped = performance_profiles(-x, METHODS, False, 10, np.random.default_rng(0))
    for g, f in zip(res.gaps, flipped.gaps, strict=True):
        assert g.gap.estimate == pytest.approx(f.gap.estimate, abs=1e-12)


def test_bad_arguments_say_what_is_allowed():
    x = _scores(19)
    with pytest.raises(ValueError, match="rule = 'rank': allowed"):
        normalise(x, METHODS, True, rule="rank")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="baseline = 'z': the baseline rule needs one of"):
        normalise(x, METHODS, True, rule="baseline", baseline="z")
    with pytest.raises(ValueError, match="n_boot = 0"):
        performance_profiles(x, METHODS, True, 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="tau = "):
        performance_profiles(x, METHODS, True, 10, np.random.default_rng(0), tau=np.array([]))
    with pytest.raises(KeyError, match="no method 'z'"):
        performance_profiles(x, METHODS, True, 10, np.random.default_rng(0)).gap("z")


def test_the_registry_form_is_the_gap_and_its_interval():
    x = _scores(20, missing=0.1)
    table = optimality_gaps(x, False, 300, np.random.default_rng(3))
    res = performance_profiles(x, METHODS, False, 300, np.random.default_rng(3),
                               tau=np.array([0.0]))
    np.testing.assert_allclose(table, [[g.gap.estimate, g.gap.low, g.gap.high]
                                       for g in res.gaps], atol=1e-12)


def test_the_gap_is_an_aggregate_registry_entry():
    """ranks.csv's optimality_gap columns: the registry's entry gives the gap of the scores."""
    from pipeline.stats.comparisons.aggregates import aggregate_columns, aggregate_methods

    assert {"optimality_gap", "optimality_gap_lo", "optimality_gap_hi"} <= set(
        aggregate_columns())
    x = _scores(21, missing=0.1)
    aggs = aggregate_methods(x, METHODS, True, 200, np.random.default_rng(0))
    ref = normalise_loop(x.tolist(), True)
    for j, a in enumerate(aggs):
        assert a.values["optimality_gap"] == pytest.approx(optimality_gap_loop(ref, j), abs=1e-12)
        assert a.values["optimality_gap_lo"] <= a.values["optimality_gap"]
        assert a.values["optimality_gap"] <= a.values["optimality_gap_hi"]
