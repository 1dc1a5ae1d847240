"""Held-out InfoNCE risk and retrieval of the positive among a pool (SPEC.md §1, §3)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipeline.search.cross_entropy import RiskEstimate, population_risk
from pipeline.seeding import numpy_generator


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


def positive_ranks(anchor: np.ndarray, pool: np.ndarray, block: int = 1024) -> np.ndarray:
    """For each anchor i, how many pool entries are at least as cosine-similar to it as its own
    positive, pool entry i, is: ``(N,)`` ints, 0 when the positive comes first.

    anchor, pool: ``(N, d)``. Computed in blocks of anchors, never the whole N × N matrix. Ties
    count against the positive (a pessimistic rank).
    """
    a, p = _normalize(anchor), _normalize(pool)
    n = a.shape[0]
    rank = np.empty(n, dtype=np.int64)
    for start in range(0, n, block):
        sims = a[start:start + block] @ p.T  # (b, N)
        rows = np.arange(sims.shape[0])
        own = sims[rows, start + rows][:, None]
        rank[start:start + block] = (sims >= own).sum(axis=1) - 1  # others at least as similar
    return rank


def recall_at_k(anchor: np.ndarray, pool: np.ndarray, ks: Sequence[int] = (1, 5, 10),
                block: int = 1024) -> dict[int, float]:
    """Fraction of anchors i whose own pool entry i is among the top-k cosine neighbours.

    anchor, pool: ``(N, d)``, row i of ``pool`` is the positive of anchor i
    (:func:`positive_ranks`; a pool entry with similarity *equal* to the positive's counts as
    ranked above it, a pessimistic recall).
    """
    return recalls(positive_ranks(anchor, pool, block), ks)


def recalls(rank: np.ndarray, ks: Sequence[int] = (1, 5, 10)) -> dict[int, float]:
    """Recall@k of :func:`positive_ranks`' ranks: the fraction of ranks below k, per k."""
    return {k: float((rank < k).mean()) for k in ks}


SPLIT_SEED = "selection split"  # the key of the one split every cell of every run shares


def selection_split(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The held-out anchors' two disjoint halves: (select, report) row indices, sorted.

    One fixed random half (``n // 2`` rows, drawn from a generator keyed by :data:`SPLIT_SEED`
    and ``n`` alone) chooses the best setting of each loss; the other half (the remaining
    ``n - n // 2`` rows) reports it, so the reported value is not the one it was chosen on. The
    same n gives the same split in every cell, seed and run. Random rather than even/odd rows,
    as a data file's order may follow its classes.
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise ValueError(f"n = {n!r}: need at least 2 held-out anchors to split in two halves")
    order = numpy_generator(SPLIT_SEED, int(n)).permutation(int(n))
    half = int(n) // 2
    return np.sort(order[:half]), np.sort(order[half:])


def split_recall(rank: np.ndarray, ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """Recall@k on each half of :func:`selection_split` of :func:`positive_ranks`' ranks (each
    anchor retrieving among the whole pool).

    Keys ``recall_at_<k>_select``, ``recall_at_<k>_report`` and ``recall_at_<k>_report_se``
    (the binomial standard error over the report half's m anchors, √(p(1 − p)/m): the
    measurement of one fixed encoder, not the variation between trainings), and
    ``recall_report_anchors`` = m. The two halves' recalls average, weighted by their sizes, to
    :func:`recall_at_k`'s.
    """
    select, report = selection_split(int(np.asarray(rank).shape[0]))
    out: dict[str, float] = {"recall_report_anchors": float(report.size)}
    for k in ks:
        hit_s, hit_r = rank[select] < k, rank[report] < k
        p = float(hit_r.mean())
        out[f"recall_at_{k}_select"] = float(hit_s.mean())
        out[f"recall_at_{k}_report"] = p
        out[f"recall_at_{k}_report_se"] = float(np.sqrt(p * (1.0 - p) / hit_r.size))
    return out


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
