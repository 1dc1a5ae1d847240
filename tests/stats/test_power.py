"""What would settle a pair (pipeline.stats.comparisons.power): the closed-form power against a
simulation of the paired t-test, the fit recovering a generating model, the seeds it asks for
separating the effect in about 80% of replications, and the ROPE."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats as sps

from pipeline.stats.comparisons.power import (
    blocks_to_separate,
    fit_pair,
    power,
    seeds_to_separate,
    settle,
)

DELTA, SD_BLOCK, SD_SEED, BLOCKS, ALPHA = 0.01, 0.004, 0.03, 12, 0.05


def generate(rng: np.random.Generator, blocks: int, seeds: int,
             delta: float = DELTA) -> tuple[np.ndarray, np.ndarray]:
    """Scores of a and b, ``(blocks, seeds)`` each: a common block effect, a block interaction
    of sd SD_BLOCK in the difference, seed noise of sd SD_SEED/√2 each (so one seed of a minus
    one of b has sd SD_SEED)."""
    common = rng.normal(0.5, 0.05, size=(blocks, 1))
    u = rng.normal(0.0, SD_BLOCK, size=(blocks, 1))
    noise = SD_SEED / np.sqrt(2)
    a = common + delta + u + rng.normal(0, noise, size=(blocks, seeds))
    b = common + rng.normal(0, noise, size=(blocks, seeds))
    return a, b


def rejection_rate(rng: np.random.Generator, blocks: int, seeds: int, reps: int) -> float:
    hits = 0
    for _ in range(reps):
        a, b = generate(rng, blocks, seeds)
        hits += sps.ttest_1samp(a.mean(axis=1) - b.mean(axis=1), 0.0).pvalue < ALPHA
    return hits / reps


def test_closed_form_power_matches_a_simulation():
    """At 3 (blocks, seeds) points, 400 replications each: within 3 Monte Carlo sd."""
    rng = np.random.default_rng(1)
    for blocks, seeds in ((12, 3), (12, 10), (6, 20)):
        p = float(power(DELTA, SD_SEED**2, SD_BLOCK**2, blocks, seeds, ALPHA))
        rate = rejection_rate(rng, blocks, seeds, 400)
        assert abs(rate - p) <= 3 * np.sqrt(p * (1 - p) / 400) + 1e-9, (blocks, seeds, p, rate)


def test_the_fit_recovers_the_model():
    a, b = generate(np.random.default_rng(2), 4000, 5)
    fit = fit_pair(a, b)
    assert fit.delta == pytest.approx(DELTA, abs=0.0005)
    assert fit.sigma2_seed == pytest.approx(SD_SEED**2, rel=0.05)
    assert fit.sigma2_block == pytest.approx(SD_BLOCK**2, rel=0.25)
    assert fit.blocks == 4000 and fit.seeds == 5


def test_the_estimated_seeds_separate_the_effect_in_about_80_percent():
    """A pilot (4000 blocks × 5 seeds) fits the model; at 12 blocks the fit asks for S seeds per
    block (the least with 80% power in the fitted model); 400 new data sets with S seeds: the
    paired t-test rejects in about 80% of them (at least 0.8 − 3 Monte Carlo sd, and within 3 sd
    of the true power at S). Here S = 8, true power 0.794, rejected in 0.80 of them."""
    fit = dataclasses.replace(fit_pair(*generate(np.random.default_rng(3), 4000, 5)),
                              blocks=BLOCKS)
    seeds = seeds_to_separate(fit, ALPHA)
    assert seeds is not None and 3 <= seeds <= 40
    true = float(power(DELTA, SD_SEED**2, SD_BLOCK**2, BLOCKS, seeds, ALPHA))
    fitted = [float(power(fit.delta, fit.sigma2_seed, fit.sigma2_block, BLOCKS, s, ALPHA))
              for s in (seeds - 1, seeds)]
    assert fitted[0] < 0.8 <= fitted[1]  # the least S that the fitted model says reaches 80%
    rate = rejection_rate(np.random.default_rng(4), BLOCKS, seeds, 400)
    mc = np.sqrt(0.8 * 0.2 / 400)
    assert rate >= 0.8 - 3 * mc, (seeds, true, rate)
    assert abs(rate - true) <= 3 * np.sqrt(true * (1 - true) / 400), (seeds, true, rate)


def test_blocks_when_seeds_cannot_do_it():
    """A block interaction as large as the effect: no number of seeds reaches 80% at 6 blocks
    (the power tends to that of the block term alone); more blocks do, and the least such N is
    where the power crosses 0.8."""
    fit = dataclasses.replace(fit_pair(*generate(np.random.default_rng(5), 50, 3)), delta=0.01,
                              sigma2_block=0.01**2, sigma2_seed=0.03**2, blocks=6, seeds=3.0)
    assert seeds_to_separate(fit, ALPHA) is None
    n = blocks_to_separate(fit, ALPHA)
    assert n is not None
    assert power(0.01, 0.03**2, 0.01**2, n, 3.0, ALPHA) >= 0.8
    assert power(0.01, 0.03**2, 0.01**2, n - 1, 3.0, ALPHA) < 0.8


def test_rope_says_practically_equivalent_instead_of_asking_for_compute():
    a, b = generate(np.random.default_rng(6), 12, 5, delta=0.001)
    near = settle(a, b, ALPHA, 0.95, rope=0.02)
    assert near.practically_equivalent and near.seeds is None and near.blocks is None
    assert -0.02 <= near.fit.delta_low <= near.fit.delta_high <= 0.02
    far = settle(a, b, ALPHA, 0.95, rope=0.0)  # no region: it asks for compute
    assert not far.practically_equivalent and far.blocks is not None
    narrow = settle(a, b, ALPHA, 0.95, rope=0.0001)  # the interval is wider than the region
    assert not narrow.practically_equivalent
    # the estimate inside the region but not its interval: not equivalent (the rule is the
    # interval's, Benavoli et al.'s, not the point estimate's)
    f = near.fit
    mid = (abs(f.delta) + max(abs(f.delta_low), abs(f.delta_high))) / 2
    assert abs(f.delta) < mid < max(abs(f.delta_low), abs(f.delta_high))
    assert not settle(a, b, ALPHA, 0.95, rope=mid).practically_equivalent
    with pytest.raises(ValueError, match="rope = -0.1"):
        settle(a, b, ALPHA, 0.95, rope=-0.1)


def test_one_seed_per_block_gives_blocks_only():
    a, b = generate(np.random.default_rng(7), 10, 1)
    s = settle(a, b, ALPHA, 0.95, rope=0.0)
    assert np.isnan(s.fit.sigma2_seed) and s.seeds is None
    assert s.fit.sigma2_block == pytest.approx(s.fit.var_d)
