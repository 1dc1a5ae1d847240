"""The stratified-bootstrap interval of P(A > B) (pipeline.stats.comparisons.aggregates.improvement)
resamples the seeds of both methods within each block: against a binomial closed form where one
side is constant, and against a bootstrap loop written here where both vary (issue 48, item 5)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from pipeline.stats.comparisons.aggregates import improvement

N_BOOT, LEVEL = 4000, 0.95
BLOCKS, SEEDS = 3, 8
SPREAD = np.linspace(0.1, 0.9, SEEDS)  # 4 of the 8 seeds below 0.5, 4 above
CONSTANT = np.full(SEEDS, 0.5)


def binomial_interval() -> tuple[float, float]:
    """A constant at 0.5 against seeds half below it: in each resample a block's P is the
    fraction of its S resampled seeds below 0.5, Binomial(S, ½)/S, and the mean over N blocks
    is Binomial(N·S, ½)/(N·S); its equal-tailed quantiles."""
    total = BLOCKS * SEEDS
    tail = (1 - LEVEL) / 2
    return (float(sps.binom.ppf(tail, total, 0.5)) / total,
            float(sps.binom.ppf(1 - tail, total, 0.5)) / total)


@pytest.mark.parametrize("varied", ["b", "a"])
def test_the_side_whose_seeds_vary_is_resampled(varied):
    """P(A > B) = ½ exactly; with the other side constant, the interval is the binomial one
    (to one step of 1/(N·S)). Not resampling the varied side would give [½, ½]."""
    a, b = (CONSTANT, SPREAD) if varied == "b" else (SPREAD, CONSTANT)
    scores = np.stack([np.stack([a, b])] * BLOCKS)  # (N, 2, S)
    imp = improvement(scores, ["a", "b"], True, N_BOOT, np.random.default_rng(0), LEVEL)[0]
    p = imp.probability
    assert p.estimate == pytest.approx(0.5)
    lo, hi = binomial_interval()
    step = 1 / (BLOCKS * SEEDS)
    assert abs(p.low - lo) <= step + 1e-9 and abs(p.high - hi) <= step + 1e-9
    assert p.high - p.low > 0.3


def bootstrap_loop(scores: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Written from SPEC §6: per replicate, within every block draw each method's seeds with
    replacement (as many as it has), P(A > B) there by counting pairs (ties ½), then the mean
    over blocks."""
    out = np.empty(n_boot)
    for r in range(n_boot):
        per_block = []
        for block in scores:
            x = rng.choice(block[0], size=block[0].size, replace=True)
            y = rng.choice(block[1], size=block[1].size, replace=True)
            wins = sum(1.0 if u > v else 0.5 if u == v else 0.0 for u in x for v in y)
            per_block.append(wins / (x.size * y.size))
        out[r] = np.mean(per_block)
    return out


def test_interval_matches_a_bootstrap_loop_when_both_sides_vary():
    rng = np.random.default_rng(3)
    a = rng.normal(0.0, 0.2, size=(BLOCKS, 5))  # A: small spread, B: large
    b = rng.normal(0.1, 1.0, size=(BLOCKS, 5))
    scores = np.stack([a, b], axis=1)
    imp = improvement(scores, ["a", "b"], True, N_BOOT, np.random.default_rng(4), LEVEL)[0]
    draws = bootstrap_loop(scores, 2000, np.random.default_rng(5))
    lo, hi = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    # Monte Carlo error of a 2.5% quantile from 2000 and 4000 draws, with P on a grid of 1/25
    assert imp.probability.low == pytest.approx(lo, abs=0.05)
    assert imp.probability.high == pytest.approx(hi, abs=0.05)
