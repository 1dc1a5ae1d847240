"""The two-stage (seeds, then rows) bootstrap against closed forms and SciPy's row bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from pipeline.stats import hierarchical_bootstrap


def _spread(ci) -> float:
    """The interval's half-width in standard deviations of a normal (95%: 1.96 σ)."""
    return (ci.high - ci.low) / (2 * sps.norm.ppf(0.975))


def test_its_spread_is_the_between_plus_within_seed_variance():
    """Var* = (B + W)/S: B the ddof-0 variance of the seed means, W the mean of each seed's
    ddof-0 row variance over its rows (the law of total variance of one two-stage draw)."""
    rng = np.random.default_rng(1)
    groups = [rng.normal(mu, sd, size=n) for mu, sd, n in
              ((0.0, 1.0, 40), (0.5, 2.0, 60), (1.5, 0.5, 30), (0.2, 1.0, 50))]
    means = np.array([g.mean() for g in groups])
    b = means.var()
    w = np.mean([g.var() / g.size for g in groups])
    ci = hierarchical_bootstrap(groups, 20000, np.random.default_rng(2))
    assert ci.estimate == pytest.approx(means.mean())
    assert _spread(ci) == pytest.approx(np.sqrt((b + w) / len(groups)), rel=0.06)


def test_one_seed_is_a_row_bootstrap_as_scipy_computes_it():
    rows = np.random.default_rng(3).exponential(size=80)
    ours = hierarchical_bootstrap([rows], 20000, np.random.default_rng(4))
    ref = sps.bootstrap((rows,), np.mean, n_resamples=20000, method="percentile",
                        random_state=np.random.default_rng(5)).confidence_interval
    assert ours.low == pytest.approx(ref.low, abs=0.02)
    assert ours.high == pytest.approx(ref.high, abs=0.02)


def test_constant_rows_leave_the_seeds_bootstrap_of_the_mean():
    """No within-seed variation: the second stage adds nothing, the first is SciPy's."""
    seeds = np.array([0.61, 0.64, 0.58, 0.70, 0.66])
    ours = hierarchical_bootstrap([np.full(25, v) for v in seeds], 20000,
                                  np.random.default_rng(6))
    ref = sps.bootstrap((seeds,), np.mean, n_resamples=20000, method="percentile",
                        random_state=np.random.default_rng(7)).confidence_interval
    assert ours.low == pytest.approx(ref.low, abs=0.004)
    assert ours.high == pytest.approx(ref.high, abs=0.004)


def test_adding_the_rows_widens_the_seeds_interval():
    rng = np.random.default_rng(8)
    hits = [(rng.random(200) < p).astype(float) for p in (0.55, 0.60, 0.58)]
    flat = [np.full(200, h.mean()) for h in hits]
    both = hierarchical_bootstrap(hits, 4000, np.random.default_rng(9))
    seeds_only = hierarchical_bootstrap(flat, 4000, np.random.default_rng(9))
    assert both.high - both.low > seeds_only.high - seeds_only.low


def test_the_chunked_draws_are_the_same_distribution():
    groups = [np.arange(10.0), np.arange(5.0) * 3]
    small = hierarchical_bootstrap(groups, 6000, np.random.default_rng(10), chunk=7)
    large = hierarchical_bootstrap(groups, 6000, np.random.default_rng(10))
    assert _spread(small) == pytest.approx(_spread(large), rel=0.08)


@pytest.mark.parametrize(("groups", "n_boot", "word"), [
    ([], 10, "groups"), ([np.array([])], 10, "groups"), ([np.array([1.0, np.nan])], 10, "NaN"),
    ([np.ones(3)], 0, "n_boot")])
def test_bad_input_names_the_parameter(groups, n_boot, word):
    with pytest.raises(ValueError, match=word):
        hierarchical_bootstrap(groups, n_boot, np.random.default_rng(0))
