"""Similarity-search cross-entropies and the population InfoNCE risk (SPEC.md §1, §3).

References are to Whiteley (2026), arXiv 2607.09405: the population cross-entropy CE (Eq. 7), the
empirical similarity-search cross-entropy CE_m on m unseen points (Eq. 9), and the population risk
R(φ; k, τ) = E ℓ − log k of InfoNCE with k independent negatives.

Standard errors are over anchors (std with ddof = 1 over √N). In CE_m every anchor shares the same
pool ξ_1..ξ_m, so the se is conditional on the pool: it ignores the pool's own variability.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
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

    Each pool tile leaves three numbers per anchor: log Σ_tile w, the w-weighted mean of s/τ in
    the tile, and log Σ_tile exp(s/τ). They are combined once, after the last tile, with one
    log-sum-exp across tiles (the mean as a convex combination weighted by each tile's share of
    Σ w), so the per-tile work is two matrix products and five passes over the tile.
    st_fast: |s/τ| ≤ 1/τ is small enough that exp(s/τ) neither overflows nor underflows, so no
    row-max shift is needed (one pass instead of three).
    """
    b, m = a_rows.shape[0], p.shape[0]
    n_tiles = -(-m // block)
    lse_w, mean_w, lse_s = (a_rows.new_empty((n_tiles, b)) for _ in range(3))
    for t, c0 in enumerate(range(0, m, block)):
        cols = slice(c0, min(c0 + block, m))
        size = b * (cols.stop - c0)
        st = torch.mm(a_rows, p[cols].T, out=buffers[0][:size].view(b, -1))  # s/τ, (b, c)
        e, den, lse_w[t] = _exp_sum(tile(rows, cols), buffers[1][:size].view(b, -1))
        # e may carry a per-row shift, which cancels in e·st / Σe; a row with no weight in this
        # tile gives 0/0 = NaN, zeroed below (its share of Σ w is 0 too).
        torch.div(e.mul_(st).sum(dim=1), den, out=mean_w[t])
        # in place: st is not needed again
        lse_s[t] = torch.log(st.exp_().sum(dim=1)) if st_fast else _shifted_exp_sum(st, st)[2]
    total_w = torch.logsumexp(lse_w, dim=0)
    share = torch.exp(lse_w - total_w).nan_to_num_(0.0)
    mean_ws = (share * mean_w.nan_to_num_(0.0)).sum(dim=0)
    bad = torch.nonzero(~torch.isfinite(total_w) | ~torch.isfinite(mean_ws))
    if bad.numel():
        raise ValueError(
            f"log_ratio row {rows.start + int(bad[0, 0])}: the weights w = r(z, ξ) "
            "are all zero or not finite"
        )
    return torch.logsumexp(lse_s, dim=0) - mean_ws


def _row_blocks_parallel(fn: Any, starts: list[int], workers: int) -> None:
    """Run ``fn(start)`` for every row block on ``workers`` threads (torch ops release the
    GIL), with intra-op threading off meanwhile so that the cores are not oversubscribed."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for _ in pool.map(fn, starts):
                pass
    finally:
        torch.set_num_threads(threads)


def similarity_search_cross_entropy(
    z: Any,
    pool: Any,
    log_ratio: LogRatio,
    tau: float,
    block: int = 512,
    *,
    dtype: torch.dtype = torch.float64,
    workers: int | None = None,
) -> SearchCE:
    """CE_m averaged over anchors (Eq. 9 of arXiv 2607.09405; SPEC.md §3).

        CE_m(z) = −(1/τ) Σ_i w_i s(z,ξ_i) / Σ_i w_i + log((1/m) Σ_i exp(s(z,ξ_i)/τ)),
        w_i = r(z,ξ_i)

    z: ``(N, d)`` anchor embeddings; pool: ``(m, d)`` embeddings of the unseen points ξ; both
    L2-normalised inside. log_ratio: ``(N, m)`` log r(x_j, ξ_l), or a callable giving tiles of it
    (``log_ratio(rows, cols) -> (b, c)`` or ``log_ratio(rows) -> (b, m)``; see
    `pipeline.search.kernels.ratio_tiles`). The weights are normalised in log space.

    Blocked over anchors and pool: the N × m similarity matrix is never held whole; working
    memory is two block × block buffers per worker plus the ratio tile. The default block (512)
    keeps a float64 tile within a 2 MiB L2 cache, where the elementwise passes are several times
    faster than from memory. ``dtype`` float64 (default) agrees with the dense formula to
    ~1e-12; float32 is about twice as fast, to ~1e-6·(1/τ).

    ``workers`` (default: torch's intra-op thread count) row blocks run at once, one thread each:
    per-tile work is too small for intra-op threads to pay for their synchronisation, so torch's
    intra-op thread count is set to 1 for the duration of the call and restored after. With more
    than one worker a ``log_ratio`` callable is called from several threads at once, so it must
    not reuse one output buffer across calls (a buffer per thread is fine). The result does not
    depend on ``workers``. Runs on the device of ``z`` when it is a torch tensor (one worker on
    a GPU).
    """
    check_tau(tau)
    check_block(block)
    workers = torch.get_num_threads() if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers = {workers}: must be >= 1")
    a = normalize_rows(as_tensor(z, dtype, "z"), "z")
    p = normalize_rows(as_tensor(pool, dtype, "pool"), "pool").to(a.device)
    if a.shape[1] != p.shape[1]:
        raise ValueError(f"pool.shape[1] = {p.shape[1]}: must equal z.shape[1] = {a.shape[1]}")
    n, m = a.shape[0], p.shape[0]
    tile = ratio_tiles(log_ratio, n, m, dtype, a.device)
    a = a / tau
    size = min(block, n) * min(block, m)
    local = threading.local()  # two tile buffers per worker thread
    info = torch.finfo(dtype)
    # exp(±1/τ) must stay well inside the float range, with room for a block's sum.
    st_fast = 1.0 / tau < min(
        -math.log(info.tiny / info.eps**2), math.log(info.max) - math.log(min(block, m)) - 1.0
    )
    per = torch.empty(n, dtype=dtype, device=a.device)

    def run(r0: int) -> None:
        if not hasattr(local, "buffers"):
            local.buffers = (a.new_empty(size), a.new_empty(size))
        rows = slice(r0, min(r0 + block, n))
        per[rows] = _row_block(a[rows], p, tile, rows, block, local.buffers, st_fast)

    starts = list(range(0, n, block))
    workers = min(workers, len(starts)) if a.device.type == "cpu" else 1
    if workers > 1:
        _row_blocks_parallel(run, starts, workers)
    else:
        for r0 in starts:
            run(r0)
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
