"""Similarity-search cross-entropies and the population InfoNCE risk (SPEC.md §1, §3).

References are to Whiteley (2026), arXiv 2607.09405: the population cross-entropy CE (Eq. 7), the
empirical similarity-search cross-entropy CE_m on m unseen points (Eq. 9), and the population risk
R(φ; k, τ) = E ℓ − log k of InfoNCE with k independent negatives.

Standard errors are over anchors (std with ddof = 1 over √N). In CE_m every anchor shares the same
pool ξ_1..ξ_m, so the se is conditional on the pool: it ignores the pool's own variability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from scipy.special import logsumexp
from torch import Tensor

from pipeline.search.kernels import (
    LogRatio,
    as_tensor,
    check_block,
    check_tau,
    normalize_rows,
    ratio_tiles,
)


def _mean_se(values: np.ndarray) -> tuple[float, float]:
    n = values.size
    se = float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    return float(values.mean()), se


@dataclass(frozen=True)
class SearchCE:
    """A cross-entropy averaged over N anchors: mean ``ce``, its standard error ``se``, and the
    ``(N,)`` per-anchor values (kept for paired differences; excluded from == and repr)."""

    ce: float
    se: float
    n: int
    per_anchor: np.ndarray = field(compare=False, repr=False)

    @classmethod
    def from_values(cls, values: np.ndarray) -> SearchCE:
        mean, se = _mean_se(values)
        return cls(mean, se, int(values.size), values)


@dataclass(frozen=True)
class RiskEstimate:
    """R(φ; k, τ) = mean over N tuples of ℓ − log k, its standard error, and the ``(N,)`` terms."""

    risk: float
    se: float
    k: int
    n: int
    per_anchor: np.ndarray = field(compare=False, repr=False)


def _shifted_exp_sum(x: Tensor, out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(E, Σ E, log Σ exp(x)) per row of ``(b, c)`` x, with E = exp(x − c) written into ``out``
    (which may alias x) and c the row max over finite entries (0 for a row with none)."""
    shift = torch.amax(x, dim=1)
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    e = torch.sub(x, shift[:, None], out=out).exp_()
    total = e.sum(dim=1)
    return e, total, shift + torch.log(total)


def _exp_sum(x: Tensor, out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """As `_shifted_exp_sum` (``out`` must not alias x), trying c = 0 first: one pass, kept when
    every row sum is finite and ≥ tiny/eps², so any underflowed term is below eps² relative."""
    e = torch.exp(x, out=out)
    total = e.sum(dim=1)
    info = torch.finfo(x.dtype)
    if bool(((total >= info.tiny / info.eps**2) & torch.isfinite(total)).all()):
        return e, total, torch.log(total)
    return _shifted_exp_sum(x, out)


def _row_block(
    a_rows: Tensor,
    p: Tensor,
    tile: Any,
    rows: slice,
    block: int,
    buffers: tuple[Tensor, Tensor],
    st_fast: bool,
) -> Tensor:
    """CE_m(z) + log m for one block of anchors (a_rows = a/τ, ``(b, d)``), over pool blocks.

    Two online log-sum-exps run across pool blocks: L_s = log Σ exp(s/τ) and L_w = log Σ w; the
    w-weighted mean of s/τ is kept as a convex combination of the tiles' means, rescaled by
    exp(L_tile − L_w,new). st_fast: |s/τ| ≤ 1/τ is small enough that exp(s/τ) neither
    overflows nor underflows, so no row-max shift is needed (one pass instead of three).
    """
    b, m = a_rows.shape[0], p.shape[0]
    lse_s = torch.full((b,), -math.inf, dtype=a_rows.dtype, device=a_rows.device)
    lse_w = lse_s.clone()
    mean_ws = torch.zeros_like(lse_s)
    for c0 in range(0, m, block):
        cols = slice(c0, min(c0 + block, m))
        size = b * (cols.stop - c0)
        st = torch.mm(a_rows, p[cols].T, out=buffers[0][:size].view(b, -1))  # s/τ, (b, c)
        e, den, lse_t = _exp_sum(tile(rows, cols), buffers[1][:size].view(b, -1))
        # e may carry a per-row shift, which cancels in e·st / Σe; a row with no weight in this
        # tile gives 0/0 = NaN, zeroed (its factor exp(lse_t − new) is 0 too).
        mean_t = (e.mul_(st).sum(dim=1) / den).nan_to_num(0.0)
        new = torch.logaddexp(lse_w, lse_t)
        keep, add = torch.exp(lse_w - new).nan_to_num(0.0), torch.exp(lse_t - new).nan_to_num(0.0)
        mean_ws = mean_ws * keep + mean_t * add
        lse_w = new
        # in place: st is not needed again
        lse_st = torch.log(st.exp_().sum(dim=1)) if st_fast else _shifted_exp_sum(st, st)[2]
        lse_s = torch.logaddexp(lse_s, lse_st)
    bad = torch.nonzero(~torch.isfinite(lse_w) | ~torch.isfinite(mean_ws))
    if bad.numel():
        raise ValueError(
            f"log_ratio row {rows.start + int(bad[0, 0])}: the weights w = r(z, ξ) "
            "are all zero or not finite"
        )
    return lse_s - mean_ws


def similarity_search_cross_entropy(
    z: Any,
    pool: Any,
    log_ratio: LogRatio,
    tau: float,
    block: int = 512,
    *,
    dtype: torch.dtype = torch.float64,
) -> SearchCE:
    """CE_m averaged over anchors (Eq. 9 of arXiv 2607.09405; SPEC.md §3).

        CE_m(z) = −(1/τ) Σ_i w_i s(z,ξ_i) / Σ_i w_i + log((1/m) Σ_i exp(s(z,ξ_i)/τ)),  w_i = r(z,ξ_i)

    z: ``(N, d)`` anchor embeddings; pool: ``(m, d)`` embeddings of the unseen points ξ; both
    L2-normalised inside. log_ratio: ``(N, m)`` log r(x_j, ξ_l), or a callable giving tiles of it
    (``log_ratio(rows, cols) -> (b, c)`` or ``log_ratio(rows) -> (b, m)``; see
    `pipeline.search.kernels.ratio_tiles`). The weights are normalised in log space.

    Blocked over anchors and pool (online log-sum-exp across pool blocks): the N × m similarity
    matrix is never held whole; working memory is two block × block buffers plus the ratio tile.
    The default block (512) keeps a float64 tile within a 2 MiB L2 cache, where the elementwise
    passes are several times faster than from memory. ``dtype`` float64 (default) agrees with
    the dense formula to ~1e-12; float32 is about twice as fast, to ~1e-6·(1/τ).
    Runs on the device of ``z`` when it is a torch tensor.
    """
    check_tau(tau)
    check_block(block)
    a = normalize_rows(as_tensor(z, dtype, "z"), "z")
    p = normalize_rows(as_tensor(pool, dtype, "pool"), "pool").to(a.device)
    if a.shape[1] != p.shape[1]:
        raise ValueError(f"pool.shape[1] = {p.shape[1]}: must equal z.shape[1] = {a.shape[1]}")
    n, m = a.shape[0], p.shape[0]
    tile = ratio_tiles(log_ratio, n, m, dtype, a.device)
    a = a / tau
    size = min(block, n) * min(block, m)
    buffers = (a.new_empty(size), a.new_empty(size))
    info = torch.finfo(dtype)
    # exp(±1/τ) must stay well inside the float range, with room for a block's sum.
    st_fast = 1.0 / tau < min(
        -math.log(info.tiny / info.eps**2), math.log(info.max) - math.log(min(block, m)) - 1.0
    )
    per = torch.empty(n, dtype=dtype, device=a.device)
    for r0 in range(0, n, block):
        rows = slice(r0, min(r0 + block, n))
        per[rows] = _row_block(a[rows], p, tile, rows, block, buffers, st_fast)
    values = per.cpu().numpy().astype(np.float64) - math.log(m)
    return SearchCE.from_values(values)


def _as_2d(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x.detach().cpu() if isinstance(x, Tensor) else x, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError(f"{name}.shape = {arr.shape}: expected (N,) or (N, M) with M >= 1")
    return arr


def population_cross_entropy(s_pos: Any, s_neg: Any, tau: float) -> SearchCE:
    """CE (Eq. 7 of arXiv 2607.09405) by Monte Carlo, averaged over N anchors z:

        CE(z) = −(1/τ) mean_j s(z, z'_j) + log mean_l exp(s(z, ζ_l)/τ)

    s_pos: ``(N, M1)`` (or ``(N,)``) similarities to z'_j ~ M(z,·); s_neg: ``(N, M2)`` similarities
    to ζ_l ~ π. By Jensen the log-mean-exp under-estimates log E exp by O(1/M2).
    """
    check_tau(tau)
    sp, sn = _as_2d(s_pos, "s_pos"), _as_2d(s_neg, "s_neg")
    if sp.shape[0] != sn.shape[0]:
        raise ValueError(
            f"s_neg.shape[0] = {sn.shape[0]}: must equal s_pos.shape[0] = {sp.shape[0]}"
        )
    values = -sp.mean(axis=1) / tau + logsumexp(sn / tau, axis=1) - math.log(sn.shape[1])
    return SearchCE.from_values(values)


def population_risk(s_pos: Any, s_neg: Any, tau: float) -> RiskEstimate:
    """R(φ; k, τ) = E ℓ − log k on fresh tuples (SPEC.md §1), ℓ = log(1 + Σ_j exp((s_nj − s_p)/τ)).

    s_pos: ``(N,)`` anchor–positive similarities; s_neg: ``(N, k)`` similarities to k independent
    negatives per anchor, fresh for this estimate. ℓ is the cross-entropy on logits (log-sum-exp).
    """
    check_tau(tau)
    sp = np.asarray(s_pos.detach().cpu() if isinstance(s_pos, Tensor) else s_pos, dtype=np.float64)
    sn = _as_2d(s_neg, "s_neg")
    if sp.ndim != 1 or sp.shape[0] != sn.shape[0]:
        raise ValueError(
            f"s_pos.shape = {sp.shape}: expected (N,) with N = s_neg.shape[0] = {sn.shape[0]}"
        )
    k = sn.shape[1]
    logits = np.concatenate([sp[:, None], sn], axis=1) / tau
    values = logsumexp(logits, axis=1) - logits[:, 0] - math.log(k)
    mean, se = _mean_se(values)
    return RiskEstimate(mean, se, k, int(values.size), values)
