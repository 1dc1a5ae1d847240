"""Softmax search kernels on m unseen points, and the blocked-computation helpers (SPEC.md §3).

Whiteley (2026), arXiv 2607.09405, §3: the softmax search kernel Q(z, dz') ∝ exp(s(z,z')/τ) π(dz')
and, on unseen points ξ_1..ξ_m, its empirical version
Q̂(z, ξ_i) = exp(s(z,ξ_i)/τ) / Σ_l exp(s(z,ξ_l)/τ);
the idealised kernel M̂(z, ξ_i) = r(z,ξ_i) / Σ_l r(z,ξ_l) when the density ratio r is known.
All kernels are computed in log space (log-sum-exp), never exp-then-log.
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

LogRatio = np.ndarray | Tensor | Callable[..., Any]
"""An (N, m) array of log r(x_i, ξ_l), or a callable returning tiles of it (see `ratio_tiles`)."""


def check_tau(tau: float, name: str = "tau") -> float:
    """``tau`` as a float; ValueError naming ``name`` unless it is a finite number > 0.

    The library's one check of a temperature (search, the k-sweep, Theorem 1's terms).
    """
    if isinstance(tau, bool) or not (isinstance(tau, int | float) and math.isfinite(tau)
                                     and tau > 0):
        raise ValueError(f"{name} = {tau!r}: temperature must be a finite number > 0")
    return float(tau)


def check_block(block: int) -> None:
    if not (isinstance(block, int | np.integer) and block >= 1):
        raise ValueError(f"block = {block!r}: block size must be an integer >= 1")


def as_tensor(x: Any, dtype: torch.dtype, name: str) -> Tensor:
    """``x`` (numpy array, torch tensor or nested list) as a detached CPU/GPU tensor of
    ``dtype``."""
    t = x.detach() if isinstance(x, Tensor) else torch.as_tensor(np.asarray(x))
    if t.dtype.is_complex or t.dtype == torch.bool:
        raise ValueError(f"{name}.dtype = {t.dtype}: expected a real floating-point array")
    return t.to(dtype)


def normalize_rows(x: Tensor, name: str) -> Tensor:
    """Rows of ``(n, d)`` ``x`` scaled to unit L2 norm; a zero row is an error, not a NaN."""
    if x.ndim != 2:
        raise ValueError(f"{name}.shape = {tuple(x.shape)}: expected a 2-D (rows, d) array")
    norms = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    bad = torch.nonzero(~(norms[:, 0] > 0) | ~torch.isfinite(norms[:, 0]))
    if bad.numel():
        raise ValueError(
            f"{name}[{int(bad[0, 0])}] has norm {float(norms[bad[0, 0], 0])}: "
            "cannot L2-normalise a zero or non-finite row"
        )
    unit: Tensor = x / norms
    return unit


def _positional_arity(fn: Callable[..., Any]) -> int:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return 1
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 2
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return 2 if sum(p.kind in kinds and p.default is p.empty for p in params) >= 2 else 1


def ratio_tiles(
    log_ratio: LogRatio, n: int, m: int, dtype: torch.dtype, device: torch.device
) -> Callable[[slice, slice], Tensor]:
    """A function ``tile(rows, cols) -> (b, c)`` tensor of log r over anchor rows × pool columns.

    ``log_ratio`` may be
    - an ``(n, m)`` array: tiles are slices of it (no copy for float64 numpy input);
    - a callable of two slices ``log_ratio(rows, cols) -> (b, c)``: memory stays O(b·c);
    - a callable of one slice ``log_ratio(rows) -> (b, m)``: called once per row block and
      cached (per thread) while that block's columns are visited, so memory is O(b·m).
    Each tile is used up before the next is requested and is never written to, so a callable may
    return views of its own data or reuse one output buffer.
    """
    if not callable(log_ratio):
        full = as_tensor(log_ratio, dtype, "log_ratio").to(device)
        if tuple(full.shape) != (n, m):
            raise ValueError(f"log_ratio.shape = {tuple(full.shape)}: expected (N, m) = ({n}, {m})")
        return lambda rows, cols: full[rows, cols]
    two = _positional_arity(log_ratio) == 2
    # the cached row block, per thread (callers may run row blocks at once)
    local = threading.local()

    def tile(rows: slice, cols: slice) -> Tensor:
        want = (rows.stop - rows.start, cols.stop - cols.start)
        if two:
            out = as_tensor(log_ratio(rows, cols), dtype, "log_ratio(rows, cols)").to(device)
        else:
            key = (rows.start, rows.stop)
            if getattr(local, "key", None) != key:
                block = as_tensor(log_ratio(rows), dtype, "log_ratio(rows)").to(device)
                if tuple(block.shape) != (want[0], m):
                    raise ValueError(
                        f"log_ratio(rows).shape = {tuple(block.shape)}: expected "
                        f"(rows, m) = ({want[0]}, {m})"
                    )
                local.key, local.block = key, block
            out = local.block[:, cols]
        if tuple(out.shape) != want:
            raise ValueError(f"log_ratio tile shape = {tuple(out.shape)}: expected {want}")
        return out

    return tile


def log_softmax_search_kernel(
    z: Any, pool: Any, tau: float, rows: slice | None = None, dtype: torch.dtype = torch.float64
) -> np.ndarray:
    """log Q̂(z_i, ξ_l) for the anchors in ``rows``: ``(b, m)``, each row log-normalised.

    z: ``(N, d)`` anchor embeddings, pool: ``(m, d)`` embeddings of the unseen points ξ; both
    L2-normalised inside. Memory O(b·m): pass a row slice for large N. SPEC.md §3.
    """
    check_tau(tau)
    rows = slice(None) if rows is None else rows
    a = normalize_rows(as_tensor(z, dtype, "z"), "z")[rows]
    p = normalize_rows(as_tensor(pool, dtype, "pool"), "pool").to(a.device)
    if a.shape[1] != p.shape[1]:
        raise ValueError(f"pool.shape[1] = {p.shape[1]}: must equal z.shape[1] = {a.shape[1]}")
    st = (a / tau) @ p.T
    return (st - torch.logsumexp(st, dim=1, keepdim=True)).cpu().numpy()


def softmax_search_kernel(
    z: Any, pool: Any, tau: float, rows: slice | None = None, dtype: torch.dtype = torch.float64
) -> np.ndarray:
    """Q̂(z_i, ξ_l) = exp(s_il/τ) / Σ_l' exp(s_il'/τ): ``(b, m)`` rows summing to 1 (SPEC.md §3)."""
    kernel: np.ndarray = np.exp(log_softmax_search_kernel(z, pool, tau, rows, dtype))
    return kernel


def idealised_search_kernel(log_ratio_rows: Any) -> np.ndarray:
    """M̂(z_i, ξ_l) = r(z_i,ξ_l) / Σ_l' r(z_i,ξ_l') from ``(b, m)`` log r, normalised in log
    space."""
    lr = as_tensor(log_ratio_rows, torch.float64, "log_ratio_rows")
    if lr.ndim != 2:
        raise ValueError(f"log_ratio_rows.shape = {tuple(lr.shape)}: expected (b, m)")
    return torch.exp(lr - torch.logsumexp(lr, dim=1, keepdim=True)).cpu().numpy()
