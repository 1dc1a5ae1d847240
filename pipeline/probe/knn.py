"""Weighted k-nearest-neighbour classification of frozen features (SPEC.md §5).

Wu et al. 2018, "Unsupervised feature learning via non-parametric instance discrimination",
§3.4, as in DINO's ``eval_knn.py``: bank and queries are L2-normalised (a zero row stays zero,
similarity 0 to everything); the k bank rows of largest cosine similarity s_j to a query vote for
their labels with weight exp(s_j / T); the prediction is the class of the largest summed weight.

Ties, made deterministic here (DINO leaves both to ``torch.topk`` / ``sort``):
- neighbours: rows are ranked by (similarity descending, bank index ascending), so among equal
  similarities the earlier bank row is the nearer. Only exact float ties count: rows equal in
  exact arithmetic may differ in the last bit through the BLAS, and then the larger one wins.
- votes: equal summed weights go to the smallest class id.

Weights are computed as exp((s_j − s_1)/T) in float64 (s_1 the query's largest similarity): the
same argmax as exp(s_j / T), without overflow at small T. Queries are processed in blocks, so the
memory is O(block · n_bank); the top max(k) neighbours are found once and every k is scored on
their prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from pipeline.probe import checks
from pipeline.stats.intervals import wilson_interval
from pipeline.stats.uncertainty import ConfidenceInterval, check_level

BLOCK_ELEMENTS = 1 << 24  # similarities held at once by default (64 MiB in float32)


@dataclass(frozen=True)
class KnnResult:
    """Weighted-kNN top-1 accuracy of the queries for one k."""

    k: int
    temperature: float
    accuracy: float
    ci: ConfidenceInterval  # Wilson interval at ``ci.level``
    n_bank: int
    n_queries: int
    n_classes: int  # distinct labels of the bank


def _ks(k: int | Sequence[int], n_bank: int) -> tuple[int, ...]:
    single = isinstance(k, int | np.integer) and not isinstance(k, bool)
    values = [k] if single else k
    if not isinstance(values, Sequence | np.ndarray) or len(values) == 0:
        raise ValueError(f"k = {k!r}: need an integer or a non-empty list of integers in "
                         f"1..n_bank = {n_bank}")
    out = []
    for i, v in enumerate(values):
        name = "k" if single else f"k[{i}]"
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or not 1 <= v <= n_bank:
            raise ValueError(f"{name} = {v!r}: the number of neighbours must be an integer in "
                             f"1..n_bank = {n_bank} (the bank's rows)")
        out.append(int(v))
    if len(set(out)) != len(out):
        raise ValueError(f"k = {list(out)}: values must be distinct")
    return tuple(out)


def _top(sims: Tensor, kmax: int) -> tuple[Tensor, Tensor]:
    """Top-kmax (values, bank indices) per row, ordered by (value desc, index asc)."""
    vals, idx = sims.topk(kmax, dim=1)
    # rows where the kmax-th value is shared with rows beyond it: topk's pick is arbitrary
    spill = (sims >= vals[:, -1:]).sum(dim=1) > kmax
    if bool(spill.any()):
        rows = spill.nonzero().squeeze(1)
        v, i = torch.sort(sims[rows], dim=1, descending=True, stable=True)
        vals[rows], idx[rows] = v[:, :kmax], i[:, :kmax]
    order = idx.argsort(dim=1)
    vals, idx = vals.gather(1, order), idx.gather(1, order)
    order = vals.argsort(dim=1, descending=True, stable=True)
    return vals.gather(1, order), idx.gather(1, order)


def _inputs(bank: Any, bank_labels: Any, queries: Any, k: int | Sequence[int],
            temperature: float, block: int | None, dtype: torch.dtype,
            device: str | torch.device | None) -> tuple[Tensor, np.ndarray, Tensor, tuple[int, ...],
                                                        float, int]:
    t = checks.positive_float(temperature, "temperature")
    dev = checks.resolve_device(device, bank, queries)
    xb = checks.features(bank, "bank", dtype, dev)
    xq = checks.features(queries, "queries", dtype, dev, n_cols=xb.shape[1], cols_of="bank")
    yb = checks.labels(bank_labels, "bank_labels", xb.shape[0], "bank")
    ks = _ks(k, xb.shape[0])
    rows = (max(1, BLOCK_ELEMENTS // xb.shape[0]) if block is None
            else checks.positive_int(block, "block"))
    return xb, yb, xq, ks, t, rows


def _predict(xb: Tensor, yb: np.ndarray, xq: Tensor, ks: tuple[int, ...], t: float,
             rows: int) -> dict[int, np.ndarray]:
    """Predicted class ids (0..K−1 in sorted order of ``np.unique(yb)``) per k."""
    dev = xb.device
    ids = torch.from_numpy(np.unique(yb, return_inverse=True)[1].astype(np.int64)).to(dev)
    n_classes = int(ids.max()) + 1
    xb, xq = F.normalize(xb, dim=1), F.normalize(xq, dim=1)
    preds = {kk: torch.empty(xq.shape[0], dtype=torch.int64, device=dev) for kk in ks}
    for start in range(0, xq.shape[0], rows):
        vals, idx = _top(xq[start:start + rows] @ xb.T, max(ks))
        weights = torch.exp((vals.double() - vals[:, :1].double()) / t)  # (b, kmax)
        neighbour_labels = ids[idx]
        for kk in ks:
            votes = torch.zeros(vals.shape[0], n_classes, dtype=torch.float64, device=dev)
            votes.scatter_add_(1, neighbour_labels[:, :kk], weights[:, :kk])
            preds[kk][start:start + rows] = votes.argmax(dim=1)  # first max: the smallest id
    return {kk: p.cpu().numpy() for kk, p in preds.items()}


def knn_predict(bank: Any, bank_labels: Any, queries: Any, k: int | Sequence[int],
                temperature: float, *, block: int | None = None,
                dtype: torch.dtype = torch.float32,
                device: str | torch.device | None = None) -> dict[int, np.ndarray]:
    """Weighted-kNN predicted labels ``(n_q,)`` of ``queries`` (values of bank_labels), per k.

    Arguments as in :func:`weighted_knn`, without the query labels.
    """
    xb, yb, xq, ks, t, rows = _inputs(bank, bank_labels, queries, k, temperature, block, dtype,
                                      device)
    classes = np.unique(yb)
    return {kk: classes[p] for kk, p in _predict(xb, yb, xq, ks, t, rows).items()}


def weighted_knn(bank: Any, bank_labels: Any, queries: Any, query_labels: Any,
                 k: int | Sequence[int], temperature: float, *, level: float = 0.95,
                 block: int | None = None, dtype: torch.dtype = torch.float32,
                 device: str | torch.device | None = None) -> dict[int, KnnResult]:
    """Weighted-kNN top-1 accuracy of ``queries`` against ``bank``, one result per k.

    bank ``(n_bank, d)``, queries ``(n_q, d)``: raw features (numpy or torch), normalised here.
    bank_labels ``(n_bank,)``, query_labels ``(n_q,)``: integer class ids, any values; every query
    class must occur in the bank. k: an int or a list of distinct ints in 1..n_bank.
    temperature: T > 0 of the vote weights exp(s/T) (0.07 in DINO). block: queries per block
    (default: as many as keep block · n_bank <= 2^24 similarities). device: default the bank's
    device if a tensor, else the CPU.
    """
    check_level(level)
    xb, yb, xq, ks, t, rows = _inputs(bank, bank_labels, queries, k, temperature, block, dtype,
                                      device)
    yq = checks.labels(query_labels, "query_labels", xq.shape[0], "queries")
    classes, _, yq_ids = checks.encode_labels(yb, "bank_labels", yq, "query_labels")
    n_q = xq.shape[0]
    out = {}
    for kk, pred in _predict(xb, yb, xq, ks, t, rows).items():
        correct = int((pred == yq_ids).sum())
        out[kk] = KnnResult(k=kk, temperature=t, accuracy=correct / n_q,
                            ci=wilson_interval(correct, n_q, level), n_bank=xb.shape[0],
                            n_queries=n_q, n_classes=int(classes.size))
    return out
