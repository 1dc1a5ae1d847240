"""The regime rule's bound is inclusive (pipeline.search.regime): a ratio exactly at the bound is
in the regime, the next float above it is not, for each of the two ratios (issue 48, item 5).
The values are exact in binary (powers of two), so "exactly" is exact."""

from __future__ import annotations

import math

import pytest

from pipeline.search.regime import REGIME_BOUND, expansion_regime


@pytest.mark.parametrize(("c2", "c3"), [(2.0, 0.0), (0.0, 16.0), (2.0, 16.0), (-2.0, -16.0)])
def test_a_ratio_exactly_at_the_bound_is_in_the_regime(c2, c3):
    r = expansion_regime(c1=1.0, c2=c2, c3=c3, k_min=8, bound=0.25)  # 2/8 = 16/64 = 0.25
    assert r.in_regime and r.reason == ""
    assert max(r.second, r.third) == 0.25


@pytest.mark.parametrize(("c2", "c3"), [(math.nextafter(2.0, 3.0), 0.0),
                                        (0.0, math.nextafter(16.0, 17.0))])
def test_just_above_the_bound_is_outside(c2, c3):
    r = expansion_regime(c1=1.0, c2=c2, c3=c3, k_min=8, bound=0.25)
    assert not r.in_regime and "both must be ≤ 0.25" in r.reason


def test_the_default_bound_is_inclusive_too():
    # |c2/c1|/k_min = 0.5/5 and |c3/c1|/k_min² = 2.5/25: 1/10 rounded once, the double 0.1
    assert 0.5 / 5 == REGIME_BOUND and 2.5 / 25 == REGIME_BOUND
    assert expansion_regime(c1=1.0, c2=0.5, c3=2.5, k_min=5).in_regime
