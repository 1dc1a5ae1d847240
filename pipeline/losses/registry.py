"""Names → loss functions, with the options each accepts (``grid.loss`` / ``loss_options``).

Every loss is called through one adapter signature, ``fn(batch, tau, options) -> scalar``, so the
training loop needs no per-loss branches. ``options`` holds exactly the keys of ``defaults``
(``params.yaml``'s ``loss_options.<name>`` is validated against the loss's options dataclass by
the params schema before any work starts).

Two-view losses on labels (supcon, soft_supcon, y_aware, xclr) concatenate anchor and positive
into 2B samples with the labels repeated, so each anchor's other view is always a positive.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from pipeline.losses.dcl import dcl, dcl_in_batch
from pipeline.losses.infonce import infonce, nt_xent
from pipeline.losses.synco import SYNTHETIC_COUNTS, SyncoOptions, synco_loss, synthetic_negatives
from pipeline.losses.weighted import (
    SoftSupconOptions,
    XclrOptions,
    YAwareOptions,
    soft_supcon,
    supcon,
    xclr_graph,
    xclr_two_views,
    y_aware_two_views,
)
from pipeline.losses.weince import MIN_K as WEINCE_MIN_K
from pipeline.losses.weince import WeinceOptions, weince
from pipeline.options import NoOptions, defaults, fill


@dataclass(frozen=True)
class LossBatch:
    """Encoder outputs for one training step (raw, not normalised).

    anchor, positive: ``(B, d)``; negatives: ``(B, k, d)`` (independent draws or in-batch
    picks, built by the training loop); labels: ``(B,)`` or ``None`` for unlabelled data
    (class ids for supcon/soft_supcon, continuous ``(B,)``/``(B, m)`` values for y_aware).
    queue: ``(K, d)`` MoCo keys for synco (``None``: batch.negatives stand in);
    generator: CPU generator for draws inside a loss (synco); similarity: ``(B, B)`` graph among
    the batch's samples, from the loss's ``LossSpec.similarity`` (X-CLR); step: the training step
    (synco's warm-up).
    """

    anchor: Tensor
    positive: Tensor
    negatives: Tensor | None = None
    labels: Tensor | None = None
    queue: Tensor | None = None
    generator: torch.Generator | None = None
    similarity: Tensor | None = None
    step: int | None = None


LossFn = Callable[[LossBatch, Any, Mapping[str, Any]], Tensor]
# (clean inputs (B, ...), labels (B,) or None, options) -> the batch's (B, B) graph, or None
GraphFn = Callable[[Tensor, Tensor | None, Mapping[str, Any]], Tensor | None]


@dataclass(frozen=True)
class LossSpec:
    """A registered loss: its adapter, its options, and what it needs.

    ``options``: a frozen dataclass declaring the options with defaults and constraints (see
    :mod:`pipeline.options`); the params schema validates ``loss_options.<name>`` against it.
    ``min_k``: the fewest negatives per anchor the loss is defined for (checked in ``resolve``).
    ``modules``: the modules whose code computes the loss, for readers; the code fingerprint
    (:mod:`pipeline.fingerprint`) follows the adapter's own references and does not read it.
    ``similarity``: builds ``LossBatch.similarity`` from the batch's clean inputs and labels
    (the training loop calls it for every batch).
    """

    fn: LossFn
    options: type = NoOptions
    needs_labels: bool = False
    needs_negatives: bool = True  # uses batch.negatives (the grid's k)
    min_k: int = 1
    modules: tuple[str, ...] = ()
    similarity: GraphFn | None = None

    @property
    def defaults(self) -> dict[str, Any]:
        return defaults(self.options)

    @property
    def unread(self) -> tuple[str, ...]:
        """The keys of a cell's config (dotted) that training with this loss never reads: without
        negatives, neither the grid's k nor ``train.negatives``. Cells that differ only there
        share one training (:meth:`pipeline.grid.Cell.training_config`)."""
        return () if self.needs_negatives else ("k", "train.negatives")


# --- adapters -----------------------------------------------------------------------------


def _negatives(batch: LossBatch) -> Tensor:
    if batch.negatives is None:
        raise ValueError("this loss needs batch.negatives (B, k, d)")
    return batch.negatives


def _labels(batch: LossBatch) -> Tensor:
    if batch.labels is None:
        raise ValueError("this loss needs batch.labels")
    return batch.labels


def _two_views(batch: LossBatch) -> tuple[Tensor, Tensor]:
    """(2B, d) samples and (2B, ...) labels: anchor views then positive views."""
    labels = _labels(batch)
    return torch.cat([batch.anchor, batch.positive]), torch.cat([labels, labels])


def _infonce(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return infonce(batch.anchor, batch.positive, _negatives(batch), tau)


def _nt_xent(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return nt_xent(batch.anchor, batch.positive, tau)


def _dcl(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return dcl(batch.anchor, batch.positive, _negatives(batch), tau)


def _dcl_in_batch(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return dcl_in_batch(batch.anchor, batch.positive, tau)


def _weince(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return weince(batch.anchor, batch.positive, _negatives(batch), tau, WeinceOptions(**options))


def _synco(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    """Queries = anchor, keys = positive. Without ``batch.queue`` (no MoCo state in the generic
    loop) the per-anchor ``batch.negatives`` (B, k, d) stand in for the queue: they are detached,
    like queue entries, and the synthetic negatives come from each anchor's own k negatives."""
    o = dict(options)
    queue = batch.queue if batch.queue is not None else _negatives(batch)
    synthetic = None
    if batch.step is None or batch.step >= o["warmup_steps"]:
        counts = {kind: o[f"n_{kind}"] for kind in SYNTHETIC_COUNTS}
        synthetic = synthetic_negatives(
            batch.anchor, queue, counts, batch.generator, o["hardest"],
            o["alpha_max"], o["beta_max"], o["sigma"], o["delta"], o["eta"],
        )  # fmt: skip
    return synco_loss(batch.anchor, batch.positive, queue, synthetic, tau)


def _supcon(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    z, labels = _two_views(batch)
    return supcon(z, labels, tau)


def _soft_supcon(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    z, labels = _two_views(batch)
    return soft_supcon(z, labels, tau, options["eps"])


def _y_aware(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return y_aware_two_views(batch.anchor, batch.positive, _labels(batch), tau, options["sigma"])


def _xclr_graph(inputs: Tensor, labels: Tensor | None, options: Mapping[str, Any]) -> Tensor | None:
    return xclr_graph(options["graph"], inputs, labels, options["class_similarity"])


def _xclr(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    """The graph is ``batch.similarity`` (B, B) (``loss_options.xclr.graph``, built by
    :func:`_xclr_graph`) tiled to (2B, 2B), so each view's partner gets S_ii. Without one (graph:
    labels), S_ij = 1 for equal labels and 0 otherwise; softmax_j(S_ij/τ_s) then weighs
    same-class samples e^(1/τ_s) times the others, which is Soft SupCon with ε = e^(−1/τ_s),
    computed that way (no (2B, 2B) target matrix)."""
    if batch.similarity is not None:
        return xclr_two_views(batch.anchor, batch.positive, batch.similarity, tau,
                              options["tau_s"])
    z, labels = _two_views(batch)
    return soft_supcon(z, labels, tau, math.exp(-1.0 / options["tau_s"]))


LOSSES: dict[str, LossSpec] = {
    "infonce": LossSpec(fn=_infonce, modules=("pipeline.losses.infonce",)),
    "nt_xent": LossSpec(fn=_nt_xent, needs_negatives=False, modules=("pipeline.losses.infonce",)),
    "dcl": LossSpec(fn=_dcl, modules=("pipeline.losses.dcl",)),
    "dcl_in_batch": LossSpec(fn=_dcl_in_batch, needs_negatives=False,
                             modules=("pipeline.losses.dcl",)),
    "weince": LossSpec(fn=_weince, options=WeinceOptions, min_k=WEINCE_MIN_K,
                       modules=("pipeline.losses.weince",)),
    "synco": LossSpec(fn=_synco, options=SyncoOptions, modules=("pipeline.losses.synco",)),
    "supcon": LossSpec(fn=_supcon, needs_labels=True, needs_negatives=False,
                       modules=("pipeline.losses.weighted",)),
    "soft_supcon": LossSpec(fn=_soft_supcon, options=SoftSupconOptions, needs_labels=True,
                            needs_negatives=False, modules=("pipeline.losses.weighted",)),
    "y_aware": LossSpec(fn=_y_aware, options=YAwareOptions, needs_labels=True,
                        needs_negatives=False, modules=("pipeline.losses.weighted",)),
    "xclr": LossSpec(fn=_xclr, options=XclrOptions, needs_labels=True, needs_negatives=False,
                     modules=("pipeline.losses.weighted",), similarity=_xclr_graph),
}


def resolve_options(name: str, given: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """Every option of loss ``name``: its defaults overlaid with ``given``.

    Fills and checks the keys only; the values are validated by the params schema
    (``pipeline.config``), which every cell's options have passed.
    """
    if name not in LOSSES:
        raise ValueError(f"{where}: unknown loss {name!r}; allowed: {sorted(LOSSES)}")
    return fill(LOSSES[name].options, given, where)
