"""Held-out InfoNCE risk and retrieval of the positive among a pool (SPEC.md §1, §3)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp


def _normalize(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    return z / np.linalg.norm(z, axis=1, keepdims=True)


@dataclass(frozen=True)
class HeldoutRisk:
    """Mean and standard error of ℓ − log k over held-out anchors."""

    risk: float
    se: float
    k: int


def heldout_infonce_risk(anchor: np.ndarray, positive: np.ndarray, k: int, tau: float,
                         rng: np.random.Generator) -> HeldoutRisk:
    """R(φ; k, τ) estimated with fresh negatives on held-out data: ℓ_i − log k averaged.

    For each anchor i, k negatives are drawn uniformly (with replacement) from the positives of
    the *other* held-out samples. anchor, positive: ``(N, d)`` raw embeddings, normalised here.
    """
    a, p = _normalize(anchor), _normalize(positive)
    n = a.shape[0]
    if n < 2:
        raise ValueError(f"anchor has {n} rows: need at least 2 for held-out negatives")
    # Uniform over j != i: draw from n-1 slots and shift those at or past i.
    idx = rng.integers(0, n - 1, size=(n, k))
    idx += idx >= np.arange(n)[:, None]
    pos = np.einsum("nd,nd->n", a, p)[:, None]
    neg = np.einsum("nd,nkd->nk", a, p[idx])
    logits = np.concatenate([pos, neg], axis=1) / tau
    losses = logsumexp(logits, axis=1) - logits[:, 0] - math.log(k)
    return HeldoutRisk(float(losses.mean()), float(losses.std(ddof=1) / math.sqrt(n)), k)


def recall_at_k(anchor: np.ndarray, pool: np.ndarray, ks: Sequence[int] = (1, 5, 10),
                block: int = 1024) -> dict[int, float]:
    """Fraction of anchors i whose own pool entry i is among the top-k cosine neighbours.

    anchor, pool: ``(N, d)``, row i of ``pool`` is the positive of anchor i. Computed in blocks of
    anchors, never the whole N × N matrix. Ties are resolved against the positive: a pool entry
    with similarity *equal* to the positive's counts as ranked above it (a pessimistic recall).
    """
    a, p = _normalize(anchor), _normalize(pool)
    n = a.shape[0]
    rank = np.empty(n, dtype=np.int64)
    for start in range(0, n, block):
        sims = a[start:start + block] @ p.T  # (b, N)
        rows = np.arange(sims.shape[0])
        own = sims[rows, start + rows][:, None]
        rank[start:start + block] = (sims >= own).sum(axis=1) - 1  # others at least as similar
    return {k: float((rank < k).mean()) for k in ks}


def knn_accuracy(z: np.ndarray, labels: np.ndarray, k: int = 5, block: int = 1024) -> float:
    """Leave-one-out k-nearest-neighbour accuracy (cosine, majority vote, ties to the smallest label).

    z: ``(N, d)``, labels: ``(N,)`` ints. Each point is classified by its k most similar *other*
    points; computed in blocks of rows.
    """
    u = _normalize(z)
    labels = np.asarray(labels)
    n = u.shape[0]
    if not 1 <= k <= n - 1:
        raise ValueError(f"k = {k}: need 1 <= k <= N - 1 = {n - 1}")
    n_classes = int(labels.max()) + 1
    correct = 0
    for start in range(0, n, block):
        sims = u[start:start + block] @ u.T
        rows = np.arange(sims.shape[0])
        sims[rows, start + rows] = -np.inf  # never your own neighbour
        nbrs = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        votes = np.zeros((sims.shape[0], n_classes), dtype=np.int64)
        np.add.at(votes, (np.repeat(rows, k), labels[nbrs].ravel()), 1)
        correct += int((votes.argmax(axis=1) == labels[start:start + block]).sum())
    return correct / n
