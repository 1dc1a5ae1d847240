"""Loop-from-the-formula references for pipeline.stats (SPEC §2). Slow, small inputs only.

Written straight from the published formulas with the math module, sharing no code with the
package: plain Python lists and loops, no vectorisation, no torch, no scipy.
"""

from __future__ import annotations

import math

import numpy as np


def _log_phi(w: float) -> float:
    """log Φ(w) via the complementary error function (accurate while Φ(w) > 1e-300)."""
    return math.log(0.5 * math.erfc(-w / math.sqrt(2.0)))


def anderson_darling_loop(col) -> float:
    """A² = −N − Σ_i (2i−1)/N · (log Φ(w_(i)) + log(1 − Φ(w_(N+1−i)))), s with ddof = 1."""
    x = sorted(float(v) for v in col)
    n = len(x)
    mean = math.fsum(x) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in x) / (n - 1))
    w = [(v - mean) / std for v in x]
    total = 0.0
    for i in range(1, n + 1):
        log_cdf = _log_phi(w[i - 1])
        log_sf = _log_phi(-w[n - i])  # log(1 − Φ(w_(N+1−i)))
        total += (2 * i - 1) / n * (log_cdf + log_sf)
    return -n - total


def thin_shell_cv_loop(z) -> float:
    """std/mean (ddof = 0) of the row norms."""
    norms = [math.sqrt(math.fsum(float(v) ** 2 for v in row)) for row in z]
    mean = math.fsum(norms) / len(norms)
    var = math.fsum((r - mean) ** 2 for r in norms) / len(norms)
    return math.sqrt(var) / mean


def effective_rank_loop(z) -> float:
    """exp of the entropy of σ/Σσ; σ² from the eigenvalues of ZᵀZ (a route other than SVD)."""
    arr = np.asarray(z, dtype=np.float64)
    eig = np.linalg.eigvalsh(arr.T @ arr)
    sig = [math.sqrt(max(float(e), 0.0)) for e in eig]
    total = math.fsum(sig)
    entropy = 0.0
    for s in sig:
        p = s / total
        if p > 1e-12:
            entropy -= p * math.log(p)
    return math.exp(entropy)


def _unit(row) -> list[float]:
    norm = math.sqrt(math.fsum(float(v) ** 2 for v in row))
    return [float(v) / norm for v in row]


def uniformity_loop(u, t: float = 2.0) -> float:
    """log of the mean over ordered pairs i ≠ j of exp(−t ‖u_i − u_j‖²), rows normalised."""
    rows = [_unit(r) for r in u]
    n = len(rows)
    terms = []
    for i in range(n):
        for j in range(n):
            if i != j:
                d2 = math.fsum((a - b) ** 2 for a, b in zip(rows[i], rows[j], strict=True))
                terms.append(math.exp(-t * d2))
    return math.log(math.fsum(terms) / len(terms))


def alignment_loop(u, v) -> float:
    """Mean over i of ‖u_i − v_i‖², rows normalised."""
    total = []
    for ru, rv in zip(u, v, strict=True):
        a, b = _unit(ru), _unit(rv)
        total.append(math.fsum((x - y) ** 2 for x, y in zip(a, b, strict=True)))
    return math.fsum(total) / len(total)


def negative_cosines_loop(u, v=None) -> tuple[float, float]:
    """(mean, std ddof=0) of cos(u_i, w_j) over i ≠ j, w = v or u."""
    a = [_unit(r) for r in u]
    b = a if v is None else [_unit(r) for r in v]
    cos = [
        math.fsum(x * y for x, y in zip(a[i], b[j], strict=True))
        for i in range(len(a))
        for j in range(len(b))
        if i != j
    ]
    mean = math.fsum(cos) / len(cos)
    return mean, math.sqrt(math.fsum((c - mean) ** 2 for c in cos) / len(cos))
