"""The finite-k law: CE − R(φ; k, τ) against Proposition 1, k-sweeps and log-log slope fits.

Whiteley (2026), arXiv 2607.09405, Proposition 1 (SPEC.md §3):

    −log(1 + e^{2/τ}/k)  ≤  CE − R(φ; k, τ)  ≤  (e^{2/τ} − 1)² / (8k)

so for a fixed φ, |CE − R_k| shrinks like C/k: a log-log slope of −1 (not −1/2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from pipeline.search.cross_entropy import RiskEstimate, SearchCE, population_risk
from pipeline.search.kernels import check_tau


def _check_k(k: Any, name: str = "k") -> int:
    if not (isinstance(k, int | np.integer) and k >= 1):
        raise ValueError(f"{name} = {k!r}: number of negatives must be an integer >= 1")
    return int(k)


def prop1_window(k: int, tau: float) -> tuple[float, float]:
    """(low, high) = (−log(1 + e^{2/τ}/k), (e^{2/τ} − 1)²/(8k)): Proposition 1's bounds on CE − R_k.

    Computed in log space; ``high`` is +inf when it overflows a float (τ below ~0.0028).
    """
    k = _check_k(k)
    check_tau(tau)
    x = 2.0 / tau
    low = -float(np.logaddexp(0.0, x - math.log(k)))
    log_expm1 = x + math.log1p(-math.exp(-x))  # log(e^x − 1), stable for large x
    log_high = 2.0 * log_expm1 - math.log(8 * k)
    high = math.exp(log_high) if log_high < 709.0 else math.inf
    return low, high


def k_sweep(
    s_pos: Any,
    s_neg_pool: Any,
    ks: Sequence[int],
    tau: float,
    rng: np.random.Generator,
    replace: bool = True,
) -> list[RiskEstimate]:
    """R(φ; k, τ) for each k in ``ks``, with negatives drawn afresh for every k.

    s_pos: ``(N,)`` anchor–positive similarities; s_neg_pool: ``(N, M)`` similarities of each
    anchor to M points drawn from π. For each k, independently of the other ks, each anchor gets k
    pool columns drawn uniformly: with replacement (default; negatives i.i.d. from the pool's
    empirical distribution, a bias O(1/M) against π) or without (k ≤ M; k distinct columns).
    When the pool's columns are the same points for every anchor, anchors share negatives and the
    se (which treats anchors as independent) is slightly optimistic.
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng = {rng!r}: expected a numpy.random.Generator")
    pool = np.asarray(s_neg_pool, dtype=np.float64)
    if pool.ndim != 2:
        raise ValueError(f"s_neg_pool.shape = {pool.shape}: expected (N, M)")
    n, m = pool.shape
    out = []
    for i, k in enumerate(ks):
        k = _check_k(k, f"ks[{i}]")
        if replace:
            idx = rng.integers(0, m, size=(n, k))
        elif k <= m:
            idx = np.argpartition(rng.random((n, m)), k - 1, axis=1)[:, :k]
        else:
            raise ValueError(f"ks[{i}] = {k}: without replacement k must be <= pool size M = {m}")
        out.append(population_risk(s_pos, np.take_along_axis(pool, idx, axis=1), tau))
    return out


@dataclass(frozen=True)
class GapRow:
    """One k of the table CE − R_k, with Proposition 1's window [window_low, window_high].

    gap_se comes from paired per-anchor differences CE(z_i) − ℓ_i when both estimates are on the
    same N anchors (``paired``), else √(ce_se² + risk_se²). ``inside``: the point estimate lies in
    the window (use gap_se for a tolerance).
    """

    k: int
    risk: float
    risk_se: float
    ce: float
    ce_se: float
    gap: float
    gap_se: float
    paired: bool
    window_low: float
    window_high: float
    inside: bool


def ce_minus_risk_table(ce: SearchCE, risks: Sequence[RiskEstimate], tau: float) -> list[GapRow]:
    """Rows (k, R_k, CE, CE − R_k, se, Proposition 1 window) for each estimate in ``risks``.

    Pairing assumes ``ce.per_anchor`` and each ``r.per_anchor`` are over the same anchors in the
    same order (it is used whenever their shapes agree).
    """
    rows = []
    for r in risks:
        paired = r.per_anchor.shape == ce.per_anchor.shape and ce.n > 1
        if paired:
            diff = ce.per_anchor - r.per_anchor
            gap, gap_se = float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(diff.size))
        else:
            gap, gap_se = ce.ce - r.risk, math.hypot(ce.se, r.se)
        low, high = prop1_window(r.k, tau)
        rows.append(
            GapRow(
                r.k,
                r.risk,
                r.se,
                ce.ce,
                ce.se,
                gap,
                gap_se,
                paired,
                low,
                high,
                bool(low <= gap <= high),
            )
        )
    return rows


@dataclass(frozen=True)
class SlopeFit:
    """log|gap| ≈ intercept + slope·log k; [ci_low, ci_high] a t-interval for the slope at
    ``level`` (NaN with fewer than 3 points); n_points used, n_dropped (|gap| ≤ 0 or not finite)."""

    slope: float
    intercept: float
    slope_se: float
    ci_low: float
    ci_high: float
    n_points: int
    n_dropped: int
    level: float = 0.95


def fit_loglog_slope(k: Any, gap: Any, gap_se: Any = None, level: float = 0.95,
                     se_known: bool = False) -> SlopeFit:
    """(Weighted) least squares of log|gap| on log k, with a t-interval (n − 2 dof) for the slope.

    With ``gap_se`` the weights are (|gap|/gap_se)² (delta method: se of log|gap| ≈ se/|gap|); the
    residual variance is estimated, so only the weights' ratios matter. Points whose gap is 0 or
    not finite, or whose gap_se is ≤ 0 or not finite, are dropped and counted. Expect −1 under
    Proposition 1's O(1/k) law; |gap| near the noise floor biases the slope towards 0.

    ``se_known``: ``gap_se`` are standard errors in their own right, not only relative weights.
    The slope's variance is then the larger of the one they imply, 1/Σ w (log k − mean)², with a
    normal quantile, and the residual one (three or more points), so scatter beyond the stated
    errors still widens the interval; two points get the first alone.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level = {level}: confidence level must be in (0, 1)")
    kk, g = np.asarray(k, dtype=np.float64).ravel(), np.asarray(gap, dtype=np.float64).ravel()
    se = np.ones_like(g) if gap_se is None else np.asarray(gap_se, dtype=np.float64).ravel()
    if not kk.shape == g.shape == se.shape:
        raise ValueError(f"k, gap, gap_se sizes = {kk.size}, {g.size}, {se.size}: must be equal")
    if np.any(~(kk > 0)):
        raise ValueError(f"k = {kk.tolist()}: every k must be > 0 for a log-log fit")
    keep = np.isfinite(g) & (np.abs(g) > 0) & np.isfinite(se) & (se > 0)
    x, y = np.log(kk[keep]), np.log(np.abs(g[keep]))
    w = np.ones_like(x) if gap_se is None else (np.abs(g[keep]) / se[keep]) ** 2
    n, dropped = int(keep.sum()), int((~keep).sum())
    nan = float("nan")
    if n < 2 or np.ptp(x) == 0:
        return SlopeFit(nan, nan, nan, nan, nan, n, dropped, level)
    design = np.stack([np.ones_like(x), x], axis=1)
    xtwx = design.T @ (design * w[:, None])
    beta = np.linalg.solve(xtwx, design.T @ (w * y))
    inv = float(np.linalg.inv(xtwx)[1, 1])
    candidates = []  # (se of the slope, quantile of its interval)
    if se_known and gap_se is not None:
        candidates.append((math.sqrt(inv), float(sps.norm.ppf((1.0 + level) / 2.0))))
    if n >= 3:
        resid = y - design @ beta
        s2 = float(w @ resid**2) / (n - 2)
        candidates.append((math.sqrt(s2 * inv), float(sps.t.ppf((1.0 + level) / 2.0, n - 2))))
    if not candidates:
        return SlopeFit(float(beta[1]), float(beta[0]), nan, nan, nan, n, dropped, level)
    slope_se, quantile = max(candidates)
    half = quantile * slope_se
    return SlopeFit(
        float(beta[1]),
        float(beta[0]),
        slope_se,
        float(beta[1]) - half,
        float(beta[1]) + half,
        n,
        dropped,
        level,
    )
