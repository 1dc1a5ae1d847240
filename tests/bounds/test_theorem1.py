"""Theorem 1's terms against a hand computation with plain math; flags and edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.bounds import BoundTerms, complexity_factor, gaussian_channel_e_r2, theorem1


def _hand(emp, n, tau, k, d_theta, R, B, C, delta, e_r2):
    A = math.e * R * B * C
    factor = min(A * math.sqrt(math.log(3) + 1), math.sqrt(math.log(1 + 2 * A) + 1))
    terms = [
        192 / tau * math.sqrt(d_theta / n) * factor,
        12 / tau * math.sqrt(math.log(2 / delta) / (2 * n)),
        4 / (tau * k) * e_r2,
        math.log(1 + math.exp(2 / tau) / k),
    ]
    return A, terms, emp + sum(terms)


@pytest.mark.parametrize(
    "args",
    [
        (0.8, 10_000, 0.5, 64, 1024, 3.0, 40.0, 0.2, 0.05, 2.5),
        (1.2, 500, 1.0, 8, 50, 0.01, 5.0, 1.0, 0.1, 1.0),  # small A: the first branch of the min
        (-0.3, 10**7, 2.0, 1000, 10, 0.001, 1.0, 1.0, 0.01, 1.3),
    ],
)
def test_terms_match_hand_computation(args):
    A, terms, total = _hand(*args)
    got = theorem1(*args, measured_risk=args[0] + 0.05)
    assert got.A == pytest.approx(A, rel=1e-14)
    got_terms = [got.complexity, got.sample_variability, got.finite_k_ratio, got.finite_k_window]
    assert got_terms == pytest.approx(terms, rel=1e-12)
    assert got.total == pytest.approx(total, rel=1e-12)
    assert got.excess == pytest.approx(total - args[0], rel=1e-12)
    assert got.measured_gap == pytest.approx(0.05, rel=1e-9)
    assert got.tightness == pytest.approx((total - args[0]) / 0.05, rel=1e-9)
    tau = args[2]
    assert got.vacuous == (total >= 2 / tau)
    assert got.range_fraction == pytest.approx((total - args[0]) / (4 / tau), rel=1e-12)
    assert (got.n, got.k, got.d_theta, got.delta, got.tau) == (
        args[1],
        args[3],
        args[4],
        args[8],
        args[2],
    )


def test_both_branches_of_the_min():
    small, large = 0.01, 100.0
    assert complexity_factor(small) == pytest.approx(small * math.sqrt(math.log(3) + 1))
    assert complexity_factor(large) == pytest.approx(math.sqrt(math.log(201) + 1))
    assert complexity_factor(0.0) == 0.0 and complexity_factor(math.inf) == math.inf


def test_flags_and_measured_gap():
    tiny = theorem1(0.1, 10**12, 5.0, 10**6, 1, 1e-6, 1.0, 1.0, 0.5, 1.0, measured_risk=0.100001)
    assert not tiny.vacuous and tiny.covers is True and tiny.tightness > 1
    big = theorem1(0.1, 100, 0.1, 4, 10_000, 5.0, 30.0, 2.0, 0.05, 10.0, measured_risk=0.05)
    assert big.vacuous and big.range_fraction > 1
    assert math.isnan(big.tightness) and big.measured_gap == pytest.approx(-0.05)
    none = theorem1(0.1, 100, 0.5, 4, 10, 1.0, 1.0, 1.0, 0.05, 1.0)
    assert none.covers is None and math.isnan(none.measured_gap) and math.isnan(none.tightness)
    assert isinstance(none, BoundTerms)


def test_infinite_lipschitz_and_zero_radius():
    inf = theorem1(0.5, 1000, 0.5, 16, 100, 1.0, 10.0, math.inf, 0.05, 1.0)
    assert inf.complexity == math.inf and inf.total == math.inf and inf.vacuous
    zero = theorem1(0.5, 1000, 0.5, 16, 100, 0.0, 10.0, math.inf, 0.05, 1.0)
    assert zero.A == 0.0 and zero.complexity == 0.0


def test_small_tau_window_does_not_overflow():
    got = theorem1(0.0, 100, 0.001, 10, 1, 1.0, 1.0, 1.0, 0.05, 1.0)
    assert got.finite_k_window == pytest.approx(2000 - math.log(10), rel=1e-12)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"tau": 0.0}, r"tau = 0.0: temperature"),
        ({"delta": 1.0}, r"delta = 1.0: confidence parameter must be in \(0, 1\)"),
        ({"n": 0}, r"n = 0: must be an integer >= 1"),
        ({"k": 2.5}, r"k = 2.5: must be an integer >= 1"),
        ({"R": -1.0}, r"R = -1.0: must be a number >= 0"),
        ({"C_phi": float("nan")}, r"C_phi = nan"),
    ],
)
def test_errors_name_the_parameter(bad, match):
    kw = dict(
        empirical_risk=0.5,
        n=100,
        tau=0.5,
        k=8,
        d_theta=10,
        R=1.0,
        B_tau=1.0,
        C_phi=1.0,
        delta=0.05,
        e_r2=1.0,
    )
    with pytest.raises(ValueError, match=match):
        theorem1(**{**kw, **bad})


def test_gaussian_channel_e_r2_closed_form_and_monte_carlo():
    assert gaussian_channel_e_r2(0.6, 3) == pytest.approx(0.64**-3, rel=1e-14)
    assert gaussian_channel_e_r2(0.0, 10) == 1.0
    assert gaussian_channel_e_r2(0.999, 10**6) == math.inf
    # p = 1, A_c = 0.4: r(x, y) = N(y; a x, 1 − a²) / N(y; 0, 1) with x, y independent N(0, 1)
    rng = np.random.default_rng(3)
    a = 0.4
    x, y = rng.normal(size=400_000), rng.normal(size=400_000)
    log_r = -0.5 * math.log(1 - a * a) - (y - a * x) ** 2 / (2 * (1 - a * a)) + y * y / 2
    mc = np.exp(2 * log_r)
    assert mc.mean() == pytest.approx(gaussian_channel_e_r2(a, 1), abs=4 * mc.std() / 632)
    with pytest.raises(ValueError, match=r"a_c = 1.0: the channel correlation"):
        gaussian_channel_e_r2(1.0, 2)
