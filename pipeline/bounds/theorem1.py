"""The generalisation bound of Whiteley (2026), arXiv 2607.09405, Theorem 1 (SPEC.md §4).

With probability ≥ 1 − δ over the n training tuples,

    E CE_k ≤ R̂_n + (192/τ)·√(dΘ/n)·min{A·√(log 3 + 1), √(log(1 + 2A) + 1)}     (complexity)
                 + (12/τ)·√(log(2/δ)/(2n))                                      (sample variability)
                 + (4/(τk))·E[r(Z,Z')²]                                          (finite k, ratio)
                 + log(1 + e^{2/τ}/k)                                            (finite k, window)

A = e·R·B_τ·C_Φ. The constants 192 and 12 chain the paper's Propositions 3 and 5 (the theorem
itself prints "const.").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pipeline.search.kernels import check_tau


@dataclass(frozen=True)
class BoundTerms:
    """Each term of Theorem 1, their sum, and the comparison with a measured generalisation gap.

    total: the right-hand side, a bound on E CE_k. excess = total − empirical_risk: the bound on
    the generalisation gap. measured_gap = measured_risk − empirical_risk, the population risk R
    estimated on fresh tuples minus the training risk R̂_n (NaN without measured_risk).
    tightness = excess / measured_gap: how many times the bound over-states the measured gap
    (NaN when the measured gap is ≤ 0 or missing: then any non-negative excess holds trivially).
    covers: measured_risk ≤ total (None without measured_risk).

    vacuous: total ≥ 2/τ. For any weights, CE_k = −(1/τ)·(weighted mean of s) + log(mean exp(s/τ))
    lies in [−2/τ, 2/τ] because s ∈ [−1, 1]: the loss range of SPEC §4 has width 4/τ, and a bound
    at or above its top, 2/τ, says nothing. range_fraction = excess / (4/τ): the gap bound as a
    fraction of that width (≥ 1 implies vacuous, since R̂_n ≥ −2/τ).
    """

    empirical_risk: float
    complexity: float
    sample_variability: float
    finite_k_ratio: float
    finite_k_window: float
    total: float
    excess: float
    measured_risk: float
    measured_gap: float
    tightness: float
    covers: bool | None
    vacuous: bool
    range_fraction: float
    A: float
    d_theta: int
    R: float
    B_tau: float
    C_phi: float
    e_r2: float
    n: int
    delta: float
    k: int
    tau: float


def _check_positive_int(value: object, name: str) -> int:
    if not (isinstance(value, int | np.integer) and value >= 1):
        raise ValueError(f"{name} = {value!r}: must be an integer >= 1")
    return int(value)


def _check_nonneg(value: float, name: str) -> float:
    if not (isinstance(value, int | float | np.floating | np.integer) and value >= 0):
        raise ValueError(f"{name} = {value!r}: must be a number >= 0 (inf allowed)")
    return float(value)


def _check_tau_delta(tau: float, delta: float) -> None:
    check_tau(tau)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta = {delta!r}: confidence parameter must be in (0, 1)")


def complexity_factor(A: float) -> float:
    """min{A·√(log 3 + 1), √(log(1 + 2A) + 1)}; 0 at A = 0, +inf at A = +inf."""
    if A == 0.0:
        return 0.0
    return min(A * math.sqrt(math.log(3.0) + 1.0), math.sqrt(math.log1p(2.0 * A) + 1.0))


def gaussian_channel_e_r2(a_c: float, p: int) -> float:
    """E[r(Z, Z')²] = (1 − A_c²)^(−p) for the Gaussian channel on N(0, I_p) data (SPEC.md §4).

    Z, Z' independent from π; per coordinate E[r²] = 1/(1 − A_c²). +inf if it overflows.
    """
    if not 0.0 <= a_c < 1.0:
        raise ValueError(f"a_c = {a_c!r}: the channel correlation must be in [0, 1)")
    p = _check_positive_int(p, "p")
    log_val = -p * math.log1p(-a_c * a_c)
    return math.exp(log_val) if log_val < 709.0 else math.inf


def theorem1(
    empirical_risk: float,
    n: int,
    tau: float,
    k: int,
    d_theta: int,
    R: float,
    B_tau: float,
    C_phi: float,
    delta: float,
    e_r2: float,
    measured_risk: float | None = None,
) -> BoundTerms:
    """The terms of Theorem 1 (arXiv 2607.09405; SPEC.md §4) for one trained encoder.

    empirical_risk: R̂_n = mean training ℓ − log k; n: training tuples; d_theta: trained parameter
    count; R ≥ ‖θ̂ − θ₀‖₂; B_tau, C_phi: see `pipeline.bounds.b_tau`, `lipschitz_linear`,
    `lipschitz_mlp` (C_phi may be +inf); delta ∈ (0, 1); e_r2 = E[r(Z,Z')²] ≥ 1; measured_risk:
    R on fresh tuples, for the measured gap. Each term is computed in plain float arithmetic.
    """
    _check_tau_delta(tau, delta)
    n, k, d_theta = (
        _check_positive_int(v, f) for v, f in ((n, "n"), (k, "k"), (d_theta, "d_theta"))
    )
    R, B_tau, C_phi, e_r2 = (
        _check_nonneg(v, f)
        for v, f in ((R, "R"), (B_tau, "B_tau"), (C_phi, "C_phi"), (e_r2, "e_r2"))
    )
    A = 0.0 if 0.0 in (R, B_tau, C_phi) else math.e * R * B_tau * C_phi
    emp = float(empirical_risk)
    terms = (
        (192.0 / tau) * math.sqrt(d_theta / n) * complexity_factor(A),  # complexity
        (12.0 / tau) * math.sqrt(math.log(2.0 / delta) / (2.0 * n)),  # sample variability
        4.0 / (tau * k) * e_r2,  # finite k, density ratio
        float(np.logaddexp(0.0, 2.0 / tau - math.log(k))),  # log(1 + e^{2/τ}/k)
    )
    total = emp + sum(terms)
    excess = total - emp
    measured = math.nan if measured_risk is None else float(measured_risk)
    gap = measured - emp
    covers = None if measured_risk is None else bool(measured <= total)
    tightness = excess / gap if gap > 0 else math.nan
    return BoundTerms(emp, *terms, total, excess, measured, gap, tightness, covers,
                      bool(total >= 2.0 / tau), excess / (4.0 / tau), A, d_theta, R, B_tau,
                      C_phi, e_r2, n, float(delta), k, float(tau))  # fmt: skip
