"""Embedding geometry: alignment, uniformity (Wang & Isola 2020), effective rank (Roy &
Vetterli 2007), cosines between non-matching pairs. Pairwise quantities are chunked over rows
so no N×N matrix is built (N = 20000 stays at a few MB)."""

from __future__ import annotations

import numpy as np
import torch
from scipy.special import logsumexp

# Bytes of one (chunk, N) float64 similarity block.
CHUNK_BYTES = 4 * 2**20


def _unit_rows(z: np.ndarray, name: str) -> np.ndarray:
    """(N, d) float64 copy of `z` with rows divided by their L2 norm (zero rows become NaN)."""
    arr = np.asarray(z, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ValueError(f"{name}.shape = {arr.shape}: expected a non-empty 2-D (N, d) array")
    with np.errstate(divide="ignore", invalid="ignore"):
        unit: np.ndarray = arr / np.linalg.norm(arr, axis=1, keepdims=True)
    return unit


def _chunks(n: int) -> list[slice]:
    step = max(1, CHUNK_BYTES // (8 * n))
    return [slice(s, min(n, s + step)) for s in range(0, n, step)]


def alignment(u: np.ndarray, v: np.ndarray) -> float:
    """E_i ‖u_i − v_i‖² over positive pairs (u_i, v_i), rows L2-normalised inside.

    u, v: (N, d). Wang & Isola (2020), ICML, L_align with alpha = 2; range [0, 4].
    """
    a, b = _unit_rows(u, "u"), _unit_rows(v, "v")
    if a.shape != b.shape:
        raise ValueError(f"v.shape = {b.shape}: must equal u.shape = {a.shape} (positive pairs)")
    return float(np.mean(np.sum((a - b) ** 2, axis=1)))


def uniformity(u: np.ndarray, t: float = 2.0) -> float:
    """log mean_{i≠j} exp(−t ‖u_i − u_j‖²) over distinct rows, rows L2-normalised inside.

    u: (N, d) with N ≥ 2; t > 0. Wang & Isola (2020), L_uniform; range [−4t, 0]. Computed by
    log-sum-exp over row chunks using ‖u_i − u_j‖² = 2 − 2 u_i·u_j for unit vectors.
    """
    if not t > 0:
        raise ValueError(f"t = {t}: temperature of the uniformity kernel must be > 0")
    a = _unit_rows(u, "u")
    n = a.shape[0]
    if n < 2:
        raise ValueError(f"u.shape[0] = {n}: uniformity needs at least 2 rows")
    ut = torch.from_numpy(a)
    parts = []
    for sl in _chunks(n):
        logits = torch.mm(ut[sl], ut.T).sub_(1.0).mul_(2.0 * t)  # −t·‖u_i − u_j‖²
        rows = torch.arange(sl.start, sl.stop)
        logits[rows - sl.start, rows] = -torch.inf  # exclude i = j
        top = float(logits.max())  # log-sum-exp shift, in place to keep one block alive
        parts.append(top + float(torch.log(logits.sub_(top).exp_().sum())))
    return float(logsumexp(parts) - np.log(n * (n - 1.0)))


def effective_rank(z: np.ndarray) -> float:
    """exp(H(p)), p = σ / Σσ the singular values of the (N, d) matrix z (not centred).

    Roy & Vetterli (2007), EUSIPCO; 0·log 0 = 0. Range [1, min(N, d)]; NaN for a zero matrix.
    """
    arr = np.asarray(z, dtype=np.float64)
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(f"z.shape = {arr.shape}: expected a non-empty 2-D (N, d) array")
    s = np.linalg.svd(arr, compute_uv=False)
    total = s.sum()
    if not total > 0:
        return float("nan")
    p = s[s > 0] / total
    return float(np.exp(-np.sum(p * np.log(p))))


def negative_cosines(u: np.ndarray, v: np.ndarray | None = None) -> tuple[float, float]:
    """(mean, std with ddof = 0) of cos(u_i, w_j) over all i ≠ j, w = v or u itself.

    u, v: (N, d). With v the second view, pairs (u_i, v_i) are the positives and every other
    pair is a negative; with v None, all pairs of distinct rows of u. Two-pass within each row
    chunk (its mean, then the squared deviations from it), chunks merged with the pairwise
    update of Chan, Golub & LeVeque (1979): a one-pass E[c²] − E[c]² would lose every digit of
    the std when the cosines crowd near one value (collapsed embeddings: mean 0.99, std 1e-6).
    """
    a = _unit_rows(u, "u")
    b = a if v is None else _unit_rows(v, "v")
    if a.shape != b.shape:
        raise ValueError(f"v.shape = {b.shape}: must equal u.shape = {a.shape}")
    n = a.shape[0]
    if n < 2:
        raise ValueError(f"u.shape[0] = {n}: negative pairs need at least 2 rows")
    at, bt = torch.from_numpy(a), torch.from_numpy(b)
    count, mean, m2 = 0.0, 0.0, 0.0  # pairs so far, their mean, Σ (c − mean)²
    for sl in _chunks(n):
        cos = torch.mm(at[sl], bt.T)
        rows = torch.arange(sl.start, sl.stop)
        cos[rows - sl.start, rows] = 0.0  # drop the matching pairs from the sum
        c_count = (sl.stop - sl.start) * (n - 1.0)
        c_mean = float(cos.sum()) / c_count
        cos[rows - sl.start, rows] = c_mean  # ... and from the squared deviations
        dev = cos.sub_(c_mean).view(-1)
        c_m2 = float(torch.dot(dev, dev))
        delta, total = c_mean - mean, count + c_count
        mean += delta * c_count / total
        m2 += c_m2 + delta * delta * count * c_count / total
        count = total
    return mean, float(np.sqrt(m2 / count))
