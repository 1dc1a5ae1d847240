"""CE − R(φ; k, τ) for a whole k-sweep by common random numbers and a control variate.

Whiteley (2026), arXiv 2607.09405, Proposition 1 bounds the gap CE − R(φ; k, τ) between
−log(1 + e^{2/τ}/k) and (e^{2/τ} − 1)²/(8k) (SPEC.md §3). This module estimates that gap, for every
k of a sweep at once, with a standard error small enough to resolve it up to k = 512.

The identity. Write E(z, ζ) = exp(s(z, ζ)/τ), μ(z) = E_{ζ~π} E(z, ζ) and, for a tuple
(z, p, n_1..n_k), S_k = (1/k) Σ_j E(z, n_j). Since ℓ = log(e^{s(z,p)/τ} + k S_k) − s(z,p)/τ and
CE(z) = −(1/τ) E s(z, p) + log μ(z), the positive's linear term cancels *identically*:

    CE − R_k = E_z E[ log μ(z) − log(e^{s(z,p)/τ}/k + S_k) ]                         (1)
             = −E log(1 + δ_k),   δ_k = U/k + ε̄_k,   U = e^{s(z,p)/τ}/μ(z),
                                  ε̄_k = (1/k) Σ_j (V_j − 1),  V_j = E(z, n_j)/μ(z).

This is exactly Proposition 1's quantity, CE − R(φ; k, τ) with R the population risk E ℓ − log k,
and it needs neither CE's positive term (the cancellation is algebraic, not Monte Carlo) nor a
separate estimate of CE: only log μ(z), the positives and the negatives. (CE itself has no closed
form even on the Gaussian channel — φ(x) = Wx/‖Wx‖ is angular-central-Gaussian — but the gap
does not need it; what the Gaussian channel does give is π itself, so the pool can be drawn
fresh.)

The control variate. E[ε̄_k | z] = 0 exactly, and ε̄_k is the leading random part of δ_k (its
variance is σ²(z)/k, σ² = Var_π V), so the per-anchor estimate

    D_k(z) = ε̄_k − mean_p log(1 + ε̄_k + U_p/k)                                     (2)

has the same expectation as (1) while its variance drops from O(1/k) to O(1/k²): the noise of the
k negatives' mean around μ(z) is subtracted out to first order (−log(1+x) + x = O(x²)). With
|CE − R_k| ≈ |c₁|/k the ratio |gap|/se is then roughly constant in k instead of decaying as 1/√k.
The coefficient 1 of ε̄_k is the large-k optimum and is fixed (not fitted), so (2) stays exactly
unbiased; at k = 1 it can raise the variance (×2.4 on the finite-π test case), from k = 2 on it
lowers it (there ×0.5 at k = 2, ×0.1 at k = 4, ×0.003 at k = 32).

Common random numbers. The same anchors and positives for every k; nested negatives (one draw
of k_max per anchor, the negatives of k its first k); CE and R_k from the same draws. The estimates
for different k are therefore strongly positively correlated: their full covariance is returned
(for the log-log slope), not only the standard errors.

The pool. μ(z) is replaced by μ̂(z), the mean of E(z, ζ_l) over a pool ζ_1..ζ_M ~ π shared by all
anchors, and the negatives are drawn uniformly (with replacement) from the same pool. Given the
pool, (2) is then *exactly* unbiased for the gap under the pool's empirical distribution π̂, since
E[S_k | pool] = μ̂. The difference G_k(π̂) − G_k(π) is O_p(1/(k√M)) (the fluctuations of log μ̂ and
of the negatives cancel to leading order: both enter through E(z, ζ)) with a bias O(1/(kM)).

Standard errors (a two-sample influence, or Hájek, decomposition; chosen over a bootstrap over
anchors because anchors share the pool, which an anchor bootstrap would treat as fixed):

    Var(Ĝ) ≈ Var_i(D(z_i)) / N  +  Var_l(IF(ζ_l)) / M,

the first term conditional on the pool (anchors, their positives and negative indices are i.i.d.
given it), the second the pool's own sampling variability through G(π̂), with the von Mises
influence function of G_k(π) = E_z[log μ − E log T_k], T_k = e^{s_p/τ}/k + S_k, linearised in the
perturbed negative:

    IF_k(ζ) = E_z[ V(z, ζ) · (1 − μ(z) E[1/T_k | z]) ] + const,

estimated at each pool point with the anchors' own draws (an unbiased, slightly noisy plug-in for
E[1/T_k | z]: the noise can only add variance, so it errs on the conservative side). The same
decomposition gives CE's (IF = E_z V − 1), R_k's and the expansion coefficients' standard errors.

The expansion (for the note, not for the estimate). Given z, U is independent of the negatives and
ε̄_k is a mean of k i.i.d. centred terms with central moments μ₂ = σ², μ₃, μ₄ of V, so
E ε̄² = μ₂/k, E ε̄³ = μ₃/k², E ε̄⁴ = 3μ₂²/k² + (μ₄ − 3μ₂²)/k³, E ε̄⁵ = 10μ₂μ₃/k³ + O(k⁻⁴),
E ε̄⁶ = 15μ₂³/k³ + O(k⁻⁴). Collecting E log(1 + δ) = Σ_n (−1)^{n+1} E δⁿ / n by powers of 1/k
(δ bounded away from −1: V, U ∈ [e^{−2/τ}, e^{2/τ}]) gives

    CE − R_k = c₁/k + c₂/k² + c₃/k³ + O(k⁻⁴),   c_j = −E_z a_j(z),
    a₁ = m₁ − μ₂/2,
    a₂ = −EU²/2 + m₁μ₂ + μ₃/3 − 3μ₂²/4,
    a₃ = EU³/3 − (3/2)EU²μ₂ − m₁μ₃ − μ₄/4 + (3/4)μ₂² + 3m₁μ₂² + 2μ₂μ₃ − (5/2)μ₂³,

with m₁ = E[U | z] = E_{M(z,·)} e^{s/τ} / E_π e^{s/τ} and EUʲ the moments of U over the positives.
So k·(CE − R_k) → c₁ as k → ∞, and a log-log fit of |CE − R_k| over a finite range has slope −1
only up to the curvature of the higher terms: −1 − (c₂/c₁)/k + O(k⁻²) locally. The coefficients
are estimated per anchor from the pool's moments of V (to the fourth) and the positives' of U.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pipeline.search.kernels import as_tensor, check_tau, normalize_rows

RESOLVED_Z = 3.0  # a k is resolved when |CE − R_k| >= RESOLVED_Z standard errors
_EXP_SAFE = 690.0  # exp(±x) for x below this stays a normal float64, with room for a sum
# the smallest τ the estimator takes: e^{2/τ} (the largest V = e^{s/τ}/μ̂) is a finite float64
MIN_TAU = 2.0 / 709.0
_MOMENTS = 4  # pool moments of V for the expansion to O(1/k³)


def nested_negatives(rng: np.random.Generator, n: int, m: int, k_max: int) -> np.ndarray:
    """``(n, k_max)`` pool indices, uniform with replacement: anchor i's negatives for any k ≤ k_max
    are the first k entries of row i (the nested, common-random-number draw)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng = {rng!r}: expected a numpy.random.Generator")
    for name, v, low in (("n", n, 1), ("m", m, 1), ("k_max", k_max, 1)):
        if not (isinstance(v, int | np.integer) and v >= low):
            raise ValueError(f"{name} = {v!r}: must be an integer >= {low}")
    return rng.integers(0, m, size=(n, k_max), dtype=np.int64)


@dataclass(frozen=True)
class CRNSweep:
    """CE − R_k for every k of ``ks`` from one set of draws (see the module docstring).

    gap, risk ``(n_k,)``; gap_cov ``(n_k, n_k)``: the covariance of the gap estimates (anchors +
    pool), gap_cov_pool its pool part; ce a float; coef = (c₁, c₂, c₃) of the 1/k expansion with its
    ``(3, 3)`` covariance and gap_coef_cov ``(n_k, 3)`` its covariance with the gaps (the same
    draws estimate both); per_anchor ``(N, n_k)`` the D_k(z_i) of Eq. (2).
    """

    ks: tuple[int, ...]
    gap: np.ndarray
    gap_cov: np.ndarray
    gap_cov_pool: np.ndarray
    risk: np.ndarray
    risk_se: np.ndarray
    ce: float
    ce_se: float
    coef: np.ndarray
    coef_cov: np.ndarray
    gap_coef_cov: np.ndarray
    n: int
    positives: int
    pool: int
    per_anchor: np.ndarray = field(compare=False, repr=False)

    @property
    def gap_se(self) -> np.ndarray:
        return np.sqrt(np.diag(self.gap_cov))

    @property
    def gap_se_pool(self) -> np.ndarray:
        return np.sqrt(np.diag(self.gap_cov_pool))

    def expansion(self, k: Any, terms: int = 3) -> np.ndarray:
        """Σ_{j ≤ terms} c_j / k^j: the expansion's gap at ``k`` (NaN where it was not computed)."""
        kk = np.asarray(k, dtype=np.float64)
        return sum((self.coef[j] / kk ** (j + 1) for j in range(terms)), np.zeros_like(kk))

    def leading(self) -> tuple[np.ndarray, np.ndarray]:
        """(gap − c₂/k² − c₃/k³, its ``(n_k, n_k)`` covariance): the gap with the expansion's
        higher terms taken off, c₁/k + O(k⁻⁴), whose log-log slope is −1 up to O(k⁻³) — the
        covariance includes the coefficients' own error and their correlation with the gaps."""
        k = np.asarray(self.ks, dtype=np.float64)
        a = np.stack([np.zeros_like(k), k**-2, k**-3], axis=1)
        cross = self.gap_coef_cov @ a.T
        cov = self.gap_cov - cross - cross.T + a @ self.coef_cov @ a.T
        return self.gap - a @ self.coef, cov


def _check_ks(ks: Sequence[int], k_max: int) -> tuple[int, ...]:
    out = []
    for i, k in enumerate(ks):
        if not (isinstance(k, int | np.integer) and 1 <= k <= k_max):
            raise ValueError(
                f"ks[{i}] = {k!r}: must be an integer in [1, {k_max}] "
                f"(neg_index has {k_max} columns)"
            )
        out.append(int(k))
    if not out or len(set(out)) != len(out):
        raise ValueError(f"ks = {list(ks)!r}: must be a non-empty list of distinct k")
    return tuple(sorted(out))


def _inputs(
    z_anchor: Any, z_pos: Any, z_pool: Any, neg_index: Any, dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    a = normalize_rows(as_tensor(z_anchor, dtype, "z_anchor"), "z_anchor")
    pos = as_tensor(z_pos, dtype, "z_pos").to(a.device)
    if (pos.ndim != 3 or pos.shape[0] != a.shape[0] or pos.shape[2] != a.shape[1]
            or pos.shape[1] < 1):
        raise ValueError(
            f"z_pos.shape = {tuple(pos.shape)}: expected (N, P, d) = "
            f"({a.shape[0]}, P >= 1, {a.shape[1]})"
        )
    n, p_count, d = pos.shape
    pos = normalize_rows(pos.reshape(n * p_count, d), "z_pos").reshape(n, p_count, d)
    pool = normalize_rows(as_tensor(z_pool, dtype, "z_pool"), "z_pool").to(a.device)
    if pool.shape[1] != d:
        raise ValueError(f"z_pool.shape[1] = {pool.shape[1]}: must equal z_anchor.shape[1] = {d}")
    idx = torch.as_tensor(np.asarray(neg_index))
    if idx.dtype.is_floating_point or idx.dtype == torch.bool or idx.ndim != 2 or idx.shape[0] != n:
        raise ValueError(
            f"neg_index: shape {tuple(idx.shape)}, dtype {idx.dtype}: "
            f"expected integers (N, k_max), N = {n}"
        )
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= pool.shape[0]):
        raise ValueError(
            f"neg_index values in [{int(idx.min())}, {int(idx.max())}]: must index the pool, "
            f"[0, {pool.shape[0] - 1}]"
        )
    return a, pos, pool, idx.to(device=a.device, dtype=torch.long)


def _pool_log_moments(a: Tensor, pool: Tensor, cols: int, tau: float, orders: int) -> Tensor:
    """``(orders, N)`` log of the pool means of E^j, j = 1..orders (E = exp(s/τ); ``a`` is z/τ).

    |s/τ| ≤ 1/τ, so exp(s/τ − 1/τ) lies in [e^{−2/τ}, 1]: while 2·orders/τ < 690 its powers
    neither overflow nor become subnormal, and one exp per similarity serves every moment (a sum
    of positive terms loses no relative precision). Otherwise one log-sum-exp per moment.
    """
    out = a.new_zeros((orders, a.shape[0]))
    fast = 2.0 * orders / tau < _EXP_SAFE
    if not fast:
        out.fill_(-math.inf)
    for c0 in range(0, pool.shape[0], cols):
        st = a @ pool[c0:c0 + cols].T
        if fast:
            e = st.sub_(1.0 / tau).exp_()
            power = e.clone()
            for j in range(orders):
                if j:
                    power.mul_(e)
                out[j] += power.sum(dim=1)
        else:
            for j in range(orders):
                out[j] = torch.logaddexp(out[j], torch.logsumexp((j + 1) * st, dim=1))
    if fast:
        out = out.log_() + torch.arange(1, orders + 1, dtype=a.dtype,
                                        device=a.device)[:, None] / tau
    return out - math.log(pool.shape[0])


def _log_negative_means(a: Tensor, pool: Tensor, idx: Tensor, log_mu: Tensor,
                        ks: tuple[int, ...], rows: int) -> Tensor:
    """``(N, n_k)`` log(S_k/μ̂) = log((1/k) Σ_{j≤k} V_j) over each anchor's nested negatives, by a
    cumulative log-sum-exp (accurate whether V is tiny, near 1 or huge)."""
    cols = torch.as_tensor([k - 1 for k in ks], device=a.device)
    log_k = torch.log(torch.as_tensor(ks, dtype=a.dtype, device=a.device))
    out = a.new_empty((a.shape[0], len(ks)))
    k_max = ks[-1]
    for r0 in range(0, a.shape[0], rows):
        r = slice(r0, r0 + rows)
        sn = torch.einsum("bd,bkd->bk", a[r], pool[idx[r, :k_max]])
        out[r] = torch.logcumsumexp(sn - log_mu[r, None], dim=1)[:, cols] - log_k
    return out


def _expansion_terms(q: Tensor, ev: Tensor) -> tuple[Tensor, Tensor]:
    """Per-anchor −(a₁, a₂, a₃) of the 1/k expansion ``(3, N)`` and their gradients ``(3, 4, N)``
    with respect to the pool's normalised moments ν_j = mean_l V^j, j = 1..4, at (1, ev[1:]).

    q ``(3, N)``: the positives' means of U, U², U³; ev ``(4, N)``: mean V^j (ev[0] = 1). Written in
    ν so that autograd gives the influence of a pool point (the means rescale with ν₁).
    """
    nu = [ev[j].clone().requires_grad_() for j in range(4)]
    with torch.enable_grad():
        m1, eu2, eu3 = (q[j] / nu[0] ** (j + 1) for j in range(3))
        e2, e3, e4 = (nu[j] / nu[0] ** (j + 1) for j in range(1, 4))
        mu2, mu3 = e2 - 1.0, e3 - 3.0 * e2 + 2.0
        mu4 = e4 - 4.0 * e3 + 6.0 * e2 - 3.0
        terms = torch.stack([
            -(m1 - mu2 / 2.0),
            -(-eu2 / 2.0 + m1 * mu2 + mu3 / 3.0 - 0.75 * mu2**2),
            -(eu3 / 3.0 - 1.5 * eu2 * mu2 - m1 * mu3 - mu4 / 4.0 + 0.75 * mu2**2
              + 3.0 * m1 * mu2**2 + 2.0 * mu2 * mu3 - 2.5 * mu2**3),
        ])
        grads = torch.stack([
            torch.stack(torch.autograd.grad(t.sum(), nu, retain_graph=True, allow_unused=True,
                                            materialize_grads=True))
            for t in terms])
    return terms.detach(), grads


def _pool_influence(a: Tensor, pool: Tensor, log_mu: Tensor, c1: Tensor, c_hi: Tensor | None,
                    cols: int) -> Tensor:
    """``(M, q)`` b_l = Σ_i V_il c1_iq, plus Σ_i Σ_j V_il^{j+2} c_hi[j] in the last
    ``c_hi.shape[2]`` columns: each pool point's influence up to a constant (which cancels in its
    variance over l). c_hi: ``(J, N, h)`` or None."""
    out = a.new_empty((pool.shape[0], c1.shape[1]))
    for c0 in range(0, pool.shape[0], cols):
        v = torch.exp(a @ pool[c0:c0 + cols].T - log_mu[:, None])
        b = v.T @ c1
        if c_hi is not None:
            power = v.clone()
            for j in range(c_hi.shape[0]):
                power.mul_(v)
                b[:, -c_hi.shape[2]:] += power.T @ c_hi[j]
        out[c0:c0 + cols] = b
    return out


def _cov(x: Tensor) -> np.ndarray:
    """Sample covariance of the rows of ``(n, q)`` x over n, as float64 numpy (q, q)."""
    xc = x - x.mean(dim=0, keepdim=True)
    return (xc.T @ xc / max(x.shape[0] - 1, 1)).cpu().numpy().astype(np.float64)


def crn_gap_sweep(
    z_anchor: Any,
    z_pos: Any,
    z_pool: Any,
    neg_index: Any,
    ks: Sequence[int],
    tau: float,
    *,
    block_elems: int = 1 << 22,
    dtype: torch.dtype = torch.float64,
) -> CRNSweep:
    """CE − R(φ; k, τ) for every k in ``ks`` with its covariance across k (module docstring).

    z_anchor ``(N, d)``: anchors z_i ~ π; z_pos ``(N, P, d)``: P positives per anchor,
    z' ~ M(z_i, ·); z_pool ``(M, d)``: the pool ζ_l ~ π, shared by all anchors, for log μ̂ and as
    the source of the negatives; neg_index ``(N, k_max)``: pool indices of each anchor's nested
    negatives (see `nested_negatives`), k_max ≥ max(ks). Embeddings are L2-normalised inside.

    The gap estimate is the mean over anchors of Eq. (2); R_k = mean of mean_p ℓ − log k and
    CE = mean of (log μ̂ − mean_p s_p/τ) on the same draws (so CE − R_k is also their plain
    difference, up to the control variate's mean, which is 0 ± noise). Computed in blocks of about
    ``block_elems`` similarities (N × M is never held whole); two passes over the pool.
    The expansion coefficients are NaN when e^{8/τ} would overflow a float64 (τ < 0.0116).
    """
    check_tau(tau)
    if not tau > MIN_TAU:
        raise ValueError(f"tau = {tau!r}: must be > {MIN_TAU:.5f} here (V = e^{{s/τ}}/μ̂ reaches "
                         "e^{2/τ}, which must be a finite float64)")
    if not (isinstance(block_elems, int) and block_elems >= 1):
        raise ValueError(f"block_elems = {block_elems!r}: must be an integer >= 1")
    a, pos, pool, idx = _inputs(z_anchor, z_pos, z_pool, neg_index, dtype)
    kt = _check_ks(ks, idx.shape[1])
    n, p_count, _ = pos.shape
    m = pool.shape[0]
    if n < 2:
        raise ValueError(f"z_anchor has {n} rows: at least 2 anchors are needed for a "
                         "standard error")
    a = a / tau
    cols = max(1, block_elems // n)
    orders = _MOMENTS if 2.0 * _MOMENTS / tau < _EXP_SAFE else 1  # V⁴ ≤ e^{8/τ}
    log_m = _pool_log_moments(a, pool, cols, tau, orders)
    log_mu = log_m[0]
    sp = torch.einsum("nd,npd->np", a, pos)  # s_p/τ
    u = torch.exp(sp - log_mu[:, None])  # U = e^{s_p/τ}/μ̂
    log_s = _log_negative_means(a, pool, idx, log_mu, kt,
                                max(1, block_elems // (idx.shape[1] * a.shape[1])))
    log_k = torch.log(torch.as_tensor(kt, dtype=a.dtype, device=a.device))
    # log(T_k/μ̂) = log(U/k + S_k/μ̂) = log(1 + δ_k), (N, P, n_k)
    log_t = torch.logaddexp((sp - log_mu[:, None])[:, :, None] - log_k, log_s[:, None, :])
    d_k = torch.expm1(log_s) - log_t.mean(dim=1)  # Eq. (2): ε̄_k − mean_p log(1 + δ_k)
    ce_i = log_mu - sp.mean(dim=1)
    risk_i = log_t.mean(dim=1) + ce_i[:, None]  # mean_p ℓ − log k = log(T/μ̂) + log μ̂ − s_p/τ
    w = torch.exp(-log_t).mean(dim=1)  # μ̂ · mean_p 1/T_k
    if orders == _MOMENTS:
        ev = torch.exp(log_m - torch.arange(1, orders + 1, dtype=a.dtype, device=a.device)[:, None]
                       * log_mu)
        q = torch.stack([(u ** j).mean(dim=1) for j in (1, 2, 3)])
        terms, grads = _expansion_terms(q, ev)  # (3, N), (3, 4, N)
        c_hi = grads[:, 1:].permute(1, 2, 0) / n  # (ν₂..ν₄) × N × (c₁, c₂, c₃)
    else:
        terms, grads = a.new_full((3, n), math.nan), a.new_full((3, 1, n), math.nan)
        c_hi = None
    # columns: gaps (n_k), risks (n_k), CE, −a₁, −a₂, −a₃
    values = torch.cat([d_k, risk_i, ce_i[:, None], terms.T], dim=1)
    c1 = torch.cat([1.0 - w, w, torch.ones_like(ce_i)[:, None], grads[:, 0].T], dim=1) / n
    b = _pool_influence(a, pool, log_mu, c1, c_hi, cols)
    cov_pool = _cov(b) / m
    cov = _cov(values) / n + cov_pool
    mean = values.mean(dim=0).cpu().numpy().astype(np.float64)
    nk = len(kt)
    g, r = slice(0, nk), slice(nk, 2 * nk)
    return CRNSweep(
        ks=kt,
        gap=mean[g],
        gap_cov=cov[g, g],
        gap_cov_pool=cov_pool[g, g],
        risk=mean[r],
        risk_se=np.sqrt(np.diag(cov)[r]),
        ce=float(mean[2 * nk]),
        ce_se=float(math.sqrt(cov[2 * nk, 2 * nk])),
        coef=mean[-3:],
        coef_cov=cov[-3:, -3:],
        gap_coef_cov=cov[g, -3:],
        n=n,
        positives=p_count,
        pool=m,
        per_anchor=d_k.cpu().numpy().astype(np.float64),
    )
