"""One cell's similarity-search evaluation with its encoders: CE, CE_m, R_k, CE − R_k, the slope.

The tuple form is Whiteley's (arXiv 2607.09405): a clean anchor x ~ π, a positive through the
dataset's view function, negatives i.i.d. from π — here drawn from a pool of unseen points: the
held-out inputs that are not anchors, or fresh draws where π is known. Pure: the encoders come
in as modules (:func:`pipeline.runtime.cells.evaluate.load_encoders` reads them from a cell's
folder).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from torch import Tensor, nn

from pipeline.datasets import Dataset, gaussian_channel_log_ratio_matrix, make_augmenter
from pipeline.encoders.encode import encode
from pipeline.grid import Cell
from pipeline.search.crn import RESOLVED_Z, CRNSweep, crn_gap_sweep, nested_negatives
from pipeline.search.cross_entropy import similarity_search_cross_entropy
from pipeline.search.finite_k import CRNRow, SlopeFit, crn_table, fit_loglog_slope
from pipeline.seeding import numpy_generator, torch_generator


class SearchSettings(Protocol):
    """What :func:`search_cell` reads of ``params.search`` (``pipeline.config.SearchConfig``)."""

    @property
    def anchors(self) -> int: ...
    @property
    def positives(self) -> int: ...
    @property
    def pool(self) -> int: ...
    @property
    def k_sweep(self) -> Sequence[int]: ...
    @property
    def fit_k_min(self) -> int: ...
    @property
    def fit_k_max(self) -> int | None: ...
    @property
    def block(self) -> int: ...
    @property
    def encoders(self) -> Sequence[str]: ...


class CellSearch(NamedTuple):
    """``summary``: one row of ``data/search.parquet`` (the trained encoder's columns bare, any
    other encoder's prefixed ``<name>_``); ``sweep``: the rows of ``data/finite_k.parquet``."""

    summary: dict[str, Any]
    sweep: list[dict[str, Any]]


def unit_embeddings(model: nn.Module, x: Tensor) -> Tensor:
    """``(N, d)`` float64 embeddings of inputs ``x``, each row scaled to unit L2 norm."""
    z = encode(model, x).double()
    unit: Tensor = z / z.norm(dim=1, keepdim=True)
    return unit


def _pool_inputs(cell: Cell, x_rest: Tensor, size: int) -> tuple[Tensor, str]:
    """The pool ζ_1..ζ_M ~ π of the CE − R_k sweep, and where it came from: fresh draws where the
    dataset's π is known (the Gaussian channel's N(0, I_p): the population itself, so M is not
    bounded by the held-out set), else the first ``size`` held-out points that are not anchors."""
    if cell.data.name == "gaussian_channel":
        gen = torch_generator(cell.seed, cell.cell_id, "search-pool")
        return torch.randn((size, *x_rest.shape[1:]), generator=gen, dtype=x_rest.dtype), "fresh"
    return x_rest[:size], "heldout"


def _positive_views(cell: Cell, x_anchor: Tensor, positives: int) -> Tensor:
    """``(N·positives, ...)`` fresh views z' ~ M(z, ·) of each anchor, anchor-major."""
    aug = make_augmenter(cell.data.name, cell.data.augment)
    gen = torch_generator(cell.seed, cell.cell_id, "search-positives")
    return aug(x_anchor.repeat_interleave(positives, dim=0), gen)


def _ce_m(model: nn.Module, cell: Cell, x_anchor: Tensor, x_pool: Tensor,
          block: int) -> tuple[float, float]:
    """Eq. 9's CE_m where the density ratio is known (the Gaussian channel), else NaN."""
    if cell.data.name != "gaussian_channel":
        return math.nan, math.nan
    a = float(cell.data.augment["a"])
    xa, xp = x_anchor.double(), x_pool.double()

    def tile(rows: slice, cols: slice) -> Tensor:
        return gaussian_channel_log_ratio_matrix(xa[rows], xp[cols], a)

    res = similarity_search_cross_entropy(unit_embeddings(model, x_anchor),
                                          unit_embeddings(model, x_pool), tile, cell.tau, block)
    return res.ce, res.se


def _fits(sweep: CRNSweep, cfg: SearchSettings) -> dict[str, SlopeFit]:
    """Log-log slopes over fit_k_min ≤ k ≤ fit_k_max with the gaps' covariance: of the gap, of
    the 1/k expansion c₁/k + c₂/k² + c₃/k³ (the slope the theory predicts over that range), and
    of gap − c₂/k² − c₃/k³ ("leading", whose slope is −1 up to O(k⁻³))."""
    leading, leading_cov = sweep.leading()
    series = (("gap", sweep.gap, sweep.gap_cov),
              ("expansion", sweep.expansion(sweep.ks), sweep.gap_cov),
              ("leading", leading, leading_cov))
    return {name: fit_loglog_slope(sweep.ks, gaps, gap_cov=cov, k_min=cfg.fit_k_min,
                                   k_max=cfg.fit_k_max) for name, gaps, cov in series}


def _sweep_rows(cell: Cell, encoder: str, sweep: CRNSweep, rows: list[CRNRow],
                cfg: SearchSettings) -> list[dict[str, Any]]:
    coefs = dict(zip(("c1", "c2", "c3"), map(float, sweep.coef), strict=True))
    return [{"cell_id": cell.cell_id, "encoder": encoder,
             **{**asdict(r), "gap_cov": list(r.gap_cov),
                "gap_leading_cov": list(r.gap_leading_cov)},
             **coefs, "c1_se": float(math.sqrt(sweep.coef_cov[0, 0])),
             "fit_k_min": cfg.fit_k_min, "fit_k_max": cfg.fit_k_max, "n_anchors": sweep.n,
             "n_positives": sweep.positives, "pool": sweep.pool} for r in rows]


def _summary(prefix: str, sweep: CRNSweep, fits: dict[str, SlopeFit],
             own: CRNRow | None) -> dict[str, Any]:
    c_se = np.sqrt(np.diag(sweep.coef_cov))
    fit, expansion, leading = fits["gap"], fits["expansion"], fits["leading"]
    return {f"{prefix}ce": sweep.ce, f"{prefix}ce_se": sweep.ce_se,
            f"{prefix}r_k": own.risk if own else math.nan,
            f"{prefix}finite_k_gap": own.gap if own else math.nan,
            f"{prefix}finite_k_gap_se": own.gap_se if own else math.nan,
            f"{prefix}slope": fit.slope, f"{prefix}slope_lo": fit.ci_low,
            f"{prefix}slope_hi": fit.ci_high, f"{prefix}slope_lack_of_fit_p": fit.lack_of_fit_p,
            f"{prefix}slope_expansion": expansion.slope,
            f"{prefix}slope_leading": leading.slope, f"{prefix}slope_leading_lo": leading.ci_low,
            f"{prefix}slope_leading_hi": leading.ci_high,
            f"{prefix}gap_c1": float(sweep.coef[0]), f"{prefix}gap_c1_se": float(c_se[0]),
            f"{prefix}gap_c2": float(sweep.coef[1]), f"{prefix}gap_c3": float(sweep.coef[2]),
            f"{prefix}gaps_resolved": bool(np.all(np.abs(sweep.gap) >= RESOLVED_Z * sweep.gap_se))}


def search_cell(cell: Cell, dataset: Dataset, encoders: Mapping[str, nn.Module],
                cfg: SearchSettings) -> CellSearch:
    """CE, CE_m, R_k, CE − R_k and its log-log slope for each encoder named in ``cfg.encoders``.

    encoders: ``{"trained": ..., "initial": ...}`` in eval mode (the cell's saved encoder and the
    same architecture at its seeded initialisation, a fixed φ). CE − R_k by common random
    numbers (:mod:`pipeline.search.crn`): the same anchors, positives, pool and nested negatives
    for every k and for every encoder, so the encoders are compared on the same draws too.
    """
    x = torch.from_numpy(np.ascontiguousarray(dataset.x_heldout))
    n_anchor = min(cfg.anchors, x.shape[0] // 2)
    x_anchor, x_rest = x[:n_anchor], x[n_anchor:]
    ks = sorted(set(cfg.k_sweep) | {cell.k} - {0})
    x_pool, source = _pool_inputs(cell, x_rest, cfg.pool)
    views = _positive_views(cell, x_anchor, cfg.positives)
    neg_index = nested_negatives(numpy_generator(cell.seed, cell.cell_id, "search-negatives"),
                                 n_anchor, x_pool.shape[0], ks[-1])
    summary: dict[str, Any] = {"cell_id": cell.cell_id, "search_pool": int(x_pool.shape[0]),
                               "search_pool_source": source}
    sweep_rows: list[dict[str, Any]] = []
    for name in (n for n in encoders if n in cfg.encoders):
        model = encoders[name]
        zp = unit_embeddings(model, views).reshape(n_anchor, cfg.positives, -1)
        sweep = crn_gap_sweep(unit_embeddings(model, x_anchor), zp, unit_embeddings(model, x_pool),
                              neg_index, ks, cell.tau)
        rows = crn_table(sweep, cell.tau)
        sweep_rows += _sweep_rows(cell, name, sweep, rows, cfg)
        own = next(r for r in rows if r.k == cell.k) if cell.k in ks else None
        ce_m, ce_m_se = _ce_m(model, cell, x_anchor, x_rest, cfg.block)
        prefix = "" if name == "trained" else f"{name}_"
        summary.update(_summary(prefix, sweep, _fits(sweep, cfg), own))
        summary.update({f"{prefix}ce_m": ce_m, f"{prefix}ce_m_se": ce_m_se})
    return CellSearch(summary, sweep_rows)
