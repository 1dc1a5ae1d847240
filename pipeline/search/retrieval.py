"""Held-out InfoNCE risk and retrieval of the positive among a pool (SPEC.md §1, §3)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipeline.search.cross_entropy import RiskEstimate, population_risk


def _normalize(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    unit: np.ndarray = z / np.linalg.norm(z, axis=1, keepdims=True)
    return unit


def heldout_infonce_risk(anchor: np.ndarray, positive: np.ndarray, k: int, tau: float,
                         rng: np.random.Generator) -> RiskEstimate:
    """R(φ; k, τ) estimated with fresh negatives on held-out data: ℓ_i − log k averaged
    (:func:`pipeline.search.population_risk` on the drawn similarities).

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
    return population_risk(np.einsum("nd,nd->n", a, p), np.einsum("nd,nkd->nk", a, p[idx]), tau)


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


def loo_majority_knn_accuracy(z: np.ndarray, labels: np.ndarray, k: int,
                              block: int = 1024) -> float:
    """Leave-one-out k-nearest-neighbour accuracy among the held-out points themselves.

    Each point i is classified by a majority vote of the labels of its k most cosine-similar
    *other* points (itself left out), ties between classes to the smallest label; the result is
    the fraction classified correctly. Not the weighted kNN probe of SPEC §5 (a training-set
    bank, votes weighted by exp(s/T): :mod:`pipeline.probe.knn`). Ties in similarity at the k-th
    neighbour are broken by ``numpy.argpartition`` (arbitrary but deterministic).

    z: ``(N, d)``, labels: ``(N,)`` non-negative ints; computed in blocks of ``block`` rows.
    """
    u = _normalize(z)
    labels = np.asarray(labels)
    n: int = u.shape[0]
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
