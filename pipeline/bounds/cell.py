"""Theorem 1 (Whiteley 2026, arXiv 2607.09405; SPEC.md §4) for one trained cell, assembled from
its encoders and the dataset: R̂_n on training tuples, the encoder constants dΘ, R, B_τ, C_Φ,
and R on fresh tuples for the measured gap. Pure: the encoders come in as modules
(:func:`pipeline.runtime.cells.evaluate.load_encoders` reads them from a cell's folder).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import Tensor, nn

from pipeline.bounds.constants import (
    b_tau,
    lipschitz_linear,
    lipschitz_mlp,
    parameter_count,
    parameter_distance,
)
from pipeline.bounds.theorem1 import BoundTerms, gaussian_channel_e_r2, theorem1
from pipeline.datasets import Dataset, make_augmenter
from pipeline.grid import Cell
from pipeline.search.cell import unit_embeddings
from pipeline.search.cross_entropy import population_risk
from pipeline.seeding import numpy_generator, torch_generator
from pipeline.train import subsample

ARCHS = ("linear", "mlp")  # the encoders with a data-restricted C_Φ (SPEC §4 caveats)
# anchors (n, ...), positives (n, ...), negatives (n, k, ...)
Tuples = tuple[Tensor, Tensor, Tensor]


class BoundsSettings(Protocol):
    """What :func:`bounds_cell` reads of ``params.bounds`` (``pipeline.config.BoundsConfig``)."""

    @property
    def delta(self) -> float: ...
    @property
    def tuples(self) -> int: ...


@dataclass(frozen=True)
class CellBound:
    """``status``: ok, ``partial: ...`` (E[r²] unknown, 1 used) or ``skipped: ...`` (no terms)."""

    status: str
    terms: BoundTerms | None = None


def training_tuples(cell: Cell, n: int, stream: str, source: np.ndarray) -> Tuples:
    """n tuples (anchor, positive view, max(k, 1) negatives) drawn from the rows ``source``
    (inputs), from the cell's random stream ``stream``."""
    rng = numpy_generator(cell.seed, cell.cell_id, stream)
    x = torch.from_numpy(np.ascontiguousarray(source))
    anchors = x[rng.integers(0, x.shape[0], n)] if n < x.shape[0] else x
    negatives = x[rng.integers(0, x.shape[0], (anchors.shape[0], max(cell.k, 1)))]
    aug = make_augmenter(cell.data.name, cell.data.augment)
    return anchors, aug(anchors, torch_generator(cell.seed, cell.cell_id, stream)), negatives


def tuple_risk(model: nn.Module, tuples: Tuples, tau: float) -> float:
    """R = mean ℓ − log k of ``model`` on ``tuples`` (:func:`pipeline.search.population_risk`)."""
    a, p, neg = tuples
    za, zp = unit_embeddings(model, a), unit_embeddings(model, p)
    zn = unit_embeddings(model, neg.reshape(-1, *neg.shape[2:])).reshape(*neg.shape[:2], -1)
    s_neg = torch.einsum("nd,nkd->nk", za, zn)
    return population_risk((za * zp).sum(1).numpy(), s_neg.numpy(), tau).risk


def data_lipschitz(arch: str, model: nn.Module, x: np.ndarray) -> float:
    """Data-restricted C_Φ of a linear or MLP encoder on inputs ``x`` (SPEC §4 caveats)."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    flat = x.reshape(x.shape[0], -1)
    if arch == "linear" and len(linears) == 1:
        return lipschitz_linear(linears[0].weight.detach().double().numpy(), flat)
    if arch == "mlp":
        weights = [m.weight.detach().double().numpy() for m in linears]
        biases = [m.bias.detach().double().numpy() if m.bias is not None
                  else np.zeros(m.out_features) for m in linears]
        return lipschitz_mlp(weights, flat, biases)
    raise ValueError(f"arch = {arch!r}: no data-restricted C_Φ (allowed: {', '.join(ARCHS)})")


def bounds_cell(cell: Cell, dataset: Dataset, encoders: Mapping[str, nn.Module],
                cfg: BoundsSettings) -> CellBound:
    """Theorem 1's terms for the ``"trained"`` encoder (``"initial"``: θ₀, for R ≥ ‖θ̂ − θ₀‖),
    next to the measured generalisation gap. Supervised cells and encoders without a
    data-restricted C_Φ are skipped (the bound would be +inf)."""
    if cell.objective != "contrastive":
        return CellBound("skipped: supervised cell")
    if cell.arch not in ARCHS:
        return CellBound(f"skipped: no data-restricted C_Φ for {cell.arch}")
    rows = dataset.x_train[subsample(cell, dataset.x_train.shape[0])]
    train = training_tuples(cell, cfg.tuples, "bounds-train", rows)
    fresh = training_tuples(cell, cfg.tuples, "bounds-fresh", dataset.x_heldout)
    trained = encoders["trained"]
    params = {k: v.detach().numpy() for k, v in trained.state_dict().items()}
    init = {k: v.detach().numpy() for k, v in encoders["initial"].state_dict().items()}
    # E[r²] is known in closed form only for the Gaussian channel; elsewhere the smallest value
    # it can take (1) is used, so the reported total is a lower bound on the bound.
    known = cell.data.name == "gaussian_channel"
    e_r2 = gaussian_channel_e_r2(float(cell.data.augment["a"]), int(np.prod(dataset.input_shape))) \
        if known else 1.0
    anchors, positives = (t.reshape(t.shape[0], -1).numpy() for t in train[:2])
    negatives = train[2].reshape(*train[2].shape[:2], -1).numpy()
    terms = theorem1(empirical_risk=tuple_risk(trained, train, cell.tau), n=cell.n, tau=cell.tau,
                     k=max(cell.k, 1), d_theta=parameter_count(params),
                     R=parameter_distance(params, init),
                     B_tau=b_tau(anchors, positives, negatives, cell.tau),
                     C_phi=data_lipschitz(cell.arch, trained, rows), delta=cfg.delta, e_r2=e_r2,
                     measured_risk=tuple_risk(trained, fresh, cell.tau))
    status = "ok" if known else "partial: E[r²] unknown for this dataset, 1 used (a lower bound)"
    return CellBound(status, terms)
