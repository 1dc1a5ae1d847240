"""The rule for reading the 1/k expansion (pipeline.search.regime) and what the report publishes
in and outside its regime."""

from __future__ import annotations

import math

import pytest

from pipeline.report.grid.build import _numbers
from pipeline.search.regime import expansion_regime


def test_in_regime_when_both_ratios_are_small():
    r = expansion_regime(c1=2.0, c2=1.0, c3=4.0, k_min=8)  # 1/16 and 4/128 of c₁'s term
    assert r.in_regime and r.second == pytest.approx(1 / 16) and r.third == pytest.approx(4 / 128)


@pytest.mark.parametrize(("c2", "c3"), [(2.0, 0.0), (0.0, 20.0)])
def test_either_ratio_above_the_bound_is_outside(c2, c3):
    r = expansion_regime(c1=2.0, c2=c2, c3=c3, k_min=8)  # 2/(2·8) = 0.125; 20/(2·64) = 0.156
    assert not r.in_regime and r.reason.startswith("outside the asymptotic regime")


def test_the_default_grid_case_is_outside():
    """τ = 0.1 on Laplace data (issue 24): c₂ = 13 726, c₃ = −3.8·10⁶ at k ≥ 8."""
    r = expansion_regime(c1=60.0, c2=13726.0, c3=-3.8e6, k_min=8)
    assert not r.in_regime and r.second > 10


def test_missing_coefficients_are_outside_and_bad_k_fails():
    assert not expansion_regime(1.0, math.nan, 0.0, 8).in_regime
    assert not expansion_regime(0.0, 0.0, 0.0, 8).in_regime
    with pytest.raises(ValueError, match="k_min = 0"):
        expansion_regime(1.0, 0.0, 0.0, 0)


def test_internal_check_stays_out_of_metrics_json():
    entry = {"one_over_k": {"trained": {"slope": -0.98, "internal_check": {"slope_leading": -1.0}}}}
    assert _numbers(entry) == {"one_over_k_trained_slope": -0.98}
