"""The finite-k law: CE − R(φ; k, τ) against Proposition 1, k-sweeps and log-log slope fits.

Whiteley (2026), arXiv 2607.09405, Proposition 1 (SPEC.md §3):

    −log(1 + e^{2/τ}/k)  ≤  CE − R(φ; k, τ)  ≤  (e^{2/τ} − 1)² / (8k)

so for a fixed φ, |CE − R_k| shrinks like C/k: a log-log slope of −1 (not −1/2), reached as
k → ∞ (over a finite range the slope is −1 − (c₂/c₁)/k locally; see `pipeline.search.crn`).

Two estimators: the plain one (`k_sweep` with fresh negatives per k, CE apart, paired by
`ce_minus_risk_table`) and the common-random-number one (`pipeline.search.crn.crn_gap_sweep`,
tabulated by `crn_table`), whose standard error on the whiteley-k profile is ~7× smaller at k = 8
and ~500× at k = 512 (the plain one's is ≈ 0.004 at every k there), and which comes with the
covariance across k that `fit_loglog_slope` needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from pipeline.search.crn import RESOLVED_Z, CRNSweep
from pipeline.search.cross_entropy import RiskEstimate, SearchCE, population_risk
from pipeline.search.kernels import check_tau
from pipeline.stats.uncertainty import check_level


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
class CRNRow(GapRow):
    """One k of a common-random-number sweep (`pipeline.search.crn`), with Proposition 1's window.

    The fields of `GapRow` (risk, ce and their se on the same draws; gap the control-variate
    estimate; paired is always True), plus gap_se_pool (the pool's part of gap_se), k_gap = k·gap
    and its se, resolved (|gap| ≥ RESOLVED_Z·gap_se), gap_expansion (c₁/k + c₂/k² + c₃/k³),
    gap_cov: the covariance of this k's gap with the gap at each k of the sweep, in sweep order,
    and gap_leading, gap_leading_cov: the same for gap − c₂/k² − c₃/k³ (`CRNSweep.leading`).
    """

    gap_se_pool: float
    k_gap: float
    k_gap_se: float
    resolved: bool
    gap_expansion: float
    gap_cov: tuple[float, ...]
    gap_leading: float
    gap_leading_cov: tuple[float, ...]


def crn_table(sweep: CRNSweep, tau: float) -> list[CRNRow]:
    """One `CRNRow` per k of ``sweep``, in increasing k."""
    check_tau(tau)
    se, se_pool = sweep.gap_se, sweep.gap_se_pool
    leading, leading_cov = sweep.leading()
    rows = []
    for i, k in enumerate(sweep.ks):
        low, high = prop1_window(k, tau)
        gap = float(sweep.gap[i])
        rows.append(CRNRow(
            k=k, risk=float(sweep.risk[i]), risk_se=float(sweep.risk_se[i]), ce=sweep.ce,
            ce_se=sweep.ce_se, gap=gap, gap_se=float(se[i]), paired=True, window_low=low,
            window_high=high, inside=bool(low <= gap <= high), gap_se_pool=float(se_pool[i]),
            k_gap=k * gap, k_gap_se=k * float(se[i]), resolved=bool(abs(gap) >= RESOLVED_Z * se[i]),
            gap_expansion=float(sweep.expansion(k)),
            gap_cov=tuple(float(v) for v in sweep.gap_cov[i]), gap_leading=float(leading[i]),
            gap_leading_cov=tuple(float(v) for v in leading_cov[i])))
    return rows


@dataclass(frozen=True)
class SlopeFit:
    """log|gap| ≈ intercept + slope·log k; [ci_low, ci_high] an interval for the slope at
    ``level`` (NaN where there is none); n_points used, n_dropped (|gap| ≤ 0 or not finite, inside
    the range). k_min, k_max: the fitted range (None: unbounded). method: ``ols``, ``wls``,
    ``wls_known_se`` or ``wls_sandwich`` (a covariance of the gaps was given). lack_of_fit_p:
    with a covariance, the p-value of the residuals' χ² (n − 2 dof) against a straight line —
    small when log|gap| is curved over the range beyond its noise (NaN otherwise)."""

    slope: float
    intercept: float
    slope_se: float
    ci_low: float
    ci_high: float
    n_points: int
    n_dropped: int
    level: float = 0.95
    k_min: float | None = None
    k_max: float | None = None
    method: str = "ols"
    lack_of_fit_p: float = float("nan")


def _check_range(k_min: Any, k_max: Any) -> None:
    for name, v in (("k_min", k_min), ("k_max", k_max)):
        if v is not None and not (isinstance(v, int | float | np.integer | np.floating)
                                  and math.isfinite(v) and v > 0):
            raise ValueError(f"{name} = {v!r}: the fit range's ends must be numbers > 0, or None")
    if k_min is not None and k_max is not None and k_max < k_min:
        raise ValueError(f"k_max = {k_max!r}: must be >= k_min = {k_min!r}")


def _as_cov(gap_cov: Any, size: int) -> np.ndarray:
    cov = np.asarray(gap_cov, dtype=np.float64)
    if cov.shape != (size, size):
        raise ValueError(f"gap_cov.shape = {cov.shape}: expected ({size}, {size}), one row per k")
    if not np.allclose(cov, cov.T, rtol=1e-8, atol=0.0, equal_nan=True):
        raise ValueError("gap_cov: must be a symmetric covariance matrix")
    return cov


def _sandwich(design: np.ndarray, w: np.ndarray, resid: np.ndarray, cov_y: np.ndarray
              ) -> tuple[float, float]:
    """(variance of the WLS slope under Cov(y) = cov_y, lack-of-fit p-value of the residuals)."""
    bread = np.linalg.inv(design.T @ (design * w[:, None]))
    proj = bread @ (design * w[:, None]).T  # β = proj @ y
    var = float((proj @ cov_y @ proj.T)[1, 1])
    n = design.shape[0]
    if n < 3:
        return var, float("nan")
    hat = np.eye(n) - design @ proj  # resid = hat @ y
    cov_r = hat @ cov_y @ hat.T
    chi2 = float(resid @ np.linalg.pinv(cov_r, rcond=1e-10, hermitian=True) @ resid)
    return var, float(sps.chi2.sf(chi2, n - 2))


def fit_loglog_slope(k: Any, gap: Any, gap_se: Any = None, level: float = 0.95,
                     se_known: bool = False, *, gap_cov: Any = None, k_min: Any = None,
                     k_max: Any = None) -> SlopeFit:
    """(Weighted) least squares of log|gap| on log k over k_min ≤ k ≤ k_max, with an interval.

    With ``gap_se`` the weights are (|gap|/gap_se)² (delta method: se of log|gap| ≈ se/|gap|); the
    residual variance is estimated, so only the weights' ratios matter, and the interval is a
    t-interval (n − 2 dof). Points whose gap is 0 or not finite, or whose gap_se is ≤ 0 or not
    finite, are dropped and counted. Expect −1 under Proposition 1's O(1/k) law; |gap| near the
    noise floor biases the slope towards 0.

    ``se_known``: ``gap_se`` are standard errors in their own right, not only relative weights.
    The slope's variance is then the larger of the one they imply, 1/Σ w (log k − mean)², with a
    normal quantile, and the residual one (three or more points), so scatter beyond the stated
    errors still widens the interval; two points get the first alone.

    ``gap_cov``: the ``(n, n)`` covariance of the gaps (rows in the order of ``k``), for estimates
    that share draws (common random numbers make them strongly correlated across k, which the
    residual scatter does not see). Weights as above from its diagonal; the slope's variance is the
    sandwich (XᵀWX)⁻¹ XᵀW Σ_y W X (XᵀWX)⁻¹ with Σ_y = Σ / (gap gapᵀ) (delta method), and the
    interval normal. It is the sampling variance of the fitted line's slope; the residuals are not
    used as a floor (when the gaps are this precise the residuals are the curve's curvature, not
    noise) but tested instead: ``lack_of_fit_p``. Pass gap_se or gap_cov, not both.
    ``k_min``, ``k_max``: the fit range (inclusive; None: unbounded).
    """
    check_level(level)
    if gap_cov is not None and gap_se is not None:
        raise ValueError("gap_se and gap_cov: pass one of them (gap_cov's diagonal gives the se)")
    _check_range(k_min, k_max)
    kk, g = np.asarray(k, dtype=np.float64).ravel(), np.asarray(gap, dtype=np.float64).ravel()
    cov = None if gap_cov is None else _as_cov(gap_cov, kk.size)
    if gap_se is not None:
        se = np.asarray(gap_se, dtype=np.float64).ravel()
    elif cov is not None:
        se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    else:
        se = np.ones_like(g)
    if not kk.shape == g.shape == se.shape:
        raise ValueError(f"k, gap, gap_se sizes = {kk.size}, {g.size}, {se.size}: must be equal")
    if np.any(~(kk > 0)):
        raise ValueError(f"k = {kk.tolist()}: every k must be > 0 for a log-log fit")
    in_range = (kk >= (k_min if k_min is not None else 0.0)) & (
        kk <= (k_max if k_max is not None else np.inf))
    keep = in_range & np.isfinite(g) & (np.abs(g) > 0) & np.isfinite(se) & (se > 0)
    x, y = np.log(kk[keep]), np.log(np.abs(g[keep]))
    weighted = gap_se is not None or cov is not None
    w = (np.abs(g[keep]) / se[keep]) ** 2 if weighted else np.ones_like(x)
    n, dropped = int(keep.sum()), int((in_range & ~keep).sum())
    method = "wls_sandwich" if cov is not None else (
        ("wls_known_se" if se_known else "wls") if gap_se is not None else "ols")
    nan = float("nan")
    extra = {"k_min": k_min, "k_max": k_max, "method": method}
    if n < 2 or np.ptp(x) == 0:
        return SlopeFit(nan, nan, nan, nan, nan, n, dropped, level, **extra)
    design = np.stack([np.ones_like(x), x], axis=1)
    xtwx = design.T @ (design * w[:, None])
    beta = np.linalg.solve(xtwx, design.T @ (w * y))
    resid = y - design @ beta
    z_quantile = float(sps.norm.ppf((1.0 + level) / 2.0))
    if cov is not None:
        gk = g[keep]
        var, p_fit = _sandwich(design, w, resid, cov[np.ix_(keep, keep)] / np.outer(gk, gk))
        half = z_quantile * math.sqrt(var)
        return SlopeFit(float(beta[1]), float(beta[0]), math.sqrt(var), float(beta[1]) - half,
                        float(beta[1]) + half, n, dropped, level, **extra, lack_of_fit_p=p_fit)
    inv = float(np.linalg.inv(xtwx)[1, 1])
    candidates = []  # (se of the slope, quantile of its interval)
    if se_known and gap_se is not None:
        candidates.append((math.sqrt(inv), z_quantile))
    if n >= 3:
        s2 = float(w @ resid**2) / (n - 2)
        candidates.append((math.sqrt(s2 * inv), float(sps.t.ppf((1.0 + level) / 2.0, n - 2))))
    if not candidates:
        return SlopeFit(float(beta[1]), float(beta[0]), nan, nan, nan, n, dropped, level, **extra)
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
        **extra,
    )
