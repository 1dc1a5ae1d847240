"""When the 1/k expansion of CE − R_k may be read (SPEC §3, Proposition 1;
:mod:`pipeline.search.crn`).

CE − R_k = c₁/k + c₂/k² + c₃/k³ + O(1/k⁴) is an asymptotic series: over a k-range it says anything
only where its later terms are small beside the first. The rule: over a fit range starting at
k_min, the series is *in its regime* when

    |c₂/c₁| / k_min ≤ bound   and   |c₃/c₁| / k_min² ≤ bound

(the second and third terms relative to the first at the smallest k fitted; the ratios only
shrink at larger k). ``bound`` = 0.1 by default: the correction terms move the predicted log-log
slope by about −(c₂/c₁)/k ≈ 0.1 at most, a tenth of the −1 under test. Outside it (e.g. τ = 0.1 on
Laplace data, c₂ ≈ 1.4·10⁴, c₃ ≈ −3.8·10⁶ at k ≥ 8) the expansion's c₁, its slope and k·gap's
limit are not evidence, and only the measured slope is reported.

Pure: plain floats in, a named result out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

REGIME_BOUND = 0.1


@dataclass(frozen=True)
class Regime:
    """in_regime: both ratios finite and at most ``bound``; second / third: |c₂/c₁|/k_min and
    |c₃/c₁|/k_min² (NaN when a coefficient is missing or c₁ = 0); reason: one line when not."""

    in_regime: bool
    second: float
    third: float
    bound: float
    k_min: int
    reason: str


def expansion_regime(c1: float, c2: float, c3: float, k_min: int,
                     bound: float = REGIME_BOUND) -> Regime:
    """Whether c₁/k + c₂/k² + c₃/k³ is in its asymptotic regime for k ≥ ``k_min`` (see above)."""
    if not k_min >= 1:
        raise ValueError(f"k_min = {k_min!r}: the smallest k fitted must be >= 1")
    if not bound > 0:
        raise ValueError(f"bound = {bound!r}: must be > 0")
    values = [float(c) if c is not None else math.nan for c in (c1, c2, c3)]
    if not all(math.isfinite(v) for v in values) or values[0] == 0.0:
        return Regime(False, math.nan, math.nan, bound, int(k_min),
                      "outside the asymptotic regime: the expansion's coefficients are not "
                      "all known (or c₁ = 0)")
    a, b, c = values
    second, third = abs(b / a) / k_min, abs(c / a) / k_min**2
    if second <= bound and third <= bound:
        return Regime(True, second, third, bound, int(k_min), "")
    return Regime(False, second, third, bound, int(k_min),
                  f"outside the asymptotic regime: |c₂/c₁|/k_min = {second:.3g} and "
                  f"|c₃/c₁|/k_min² = {third:.3g} at k_min = {k_min} (both must be ≤ {bound:g})")
