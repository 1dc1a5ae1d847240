"""The three-valued verdict (SPEC §7): one interval's side, the strict majority over groups, and
the per-seed log-log slopes a trend verdict reads (against numpy's polyfit)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.stats.comparisons.inference import Verdict, majority, seed_slopes, side_verdict


@pytest.mark.parametrize(("low", "high", "claimed", "seeds", "value", "reason"), [
    (-0.3, -0.1, -1, 3, "held", ""),
    (0.1, 0.3, -1, 3, "contradicted", ""),
    (0.1, 0.3, +1, 5, "held", ""),
    (-0.3, -0.1, +1, 3, "contradicted", ""),
    (-0.3, 0.1, -1, 3, "unresolved", "interval covers zero"),
    (-0.3, 0.0, -1, 3, "unresolved", "interval covers zero"),  # a bound at zero covers it
    (-0.3, -0.1, -1, 2, "unresolved", "too few seeds (2 < 3)"),  # however clear the interval
    (math.nan, math.nan, -1, 3, "unresolved", "no values"),
])
def test_side_verdict(low, high, claimed, seeds, value, reason):
    got = side_verdict(low, high, claimed, seeds)
    assert (got.value, got.reason) == (value, reason)
    assert got.decided == (value in ("held", "contradicted"))


def test_side_verdict_names_the_allowed_sides():
    with pytest.raises(ValueError, match=r"claimed = 0: the claimed side must be -1 or \+1"):
        side_verdict(-1.0, 1.0, 0, 3)


H, C = Verdict("held"), Verdict("contradicted")
Z, F = Verdict("unresolved", "interval covers zero"), Verdict("unresolved", "too few seeds (1 < 3)")


@pytest.mark.parametrize(("verdicts", "value", "reason"), [
    ([H], "held", ""),
    ([Z], "unresolved", "interval covers zero"),
    ([H, H, Z], "held", ""),
    ([H, Z, Z], "unresolved", "groups disagree: 1 held, 0 contradicted, 2 unresolved of 3"),
    ([H, H, Z, Z], "unresolved", "groups disagree: 2 held, 0 contradicted, 2 unresolved of 4"),
    ([C, C, H], "contradicted", ""),
    ([C, H], "unresolved", "groups disagree: 1 held, 1 contradicted, 0 unresolved of 2"),
    ([Z, Z, Z], "unresolved", "interval covers zero"),
    ([Z, F], "unresolved", "groups disagree: 0 held, 0 contradicted, 2 unresolved of 2"),
    ([], "unresolved", "no values"),
])
def test_majority_is_strictly_more_than_half(verdicts, value, reason):
    got = majority(verdicts)
    assert (got.value, got.reason) == (value, reason)


def test_seed_slopes_against_polyfit():
    rng = np.random.default_rng(3)
    x = np.tile([8.0, 16.0, 32.0, 64.0, 64.0], 3)  # a replicate point per seed
    seed = np.repeat([0, 1, 2], 5)
    y = 0.3 * x ** -0.2 * np.exp(rng.normal(0, 0.1, x.size))
    got = seed_slopes(x, y, seed)
    for s in range(3):
        at = seed == s
        assert got[s] == pytest.approx(np.polyfit(np.log(x[at]), np.log(y[at]), 1)[0],
                                       rel=1e-12)


def test_a_seed_needs_two_distinct_positive_points():
    x = np.array([8.0, 16.0, 8.0, 8.0, 8.0, 16.0, 8.0, 16.0])
    y = np.array([0.2, 0.1, 0.2, 0.3, 0.2, np.nan, 0.2, -0.1])
    seed = np.array(["a", "a", "b", "b", "c", "c", "d", "d"])
    # b: one x only; c: its second point NaN; d: its second point not positive
    assert seed_slopes(x, y, seed) == {"a": pytest.approx(-1.0)}
    with pytest.raises(ValueError, match="must be equal"):
        seed_slopes(x, y[:3], seed)
