"""Names → loss functions, with the options each accepts (``grid.loss`` / ``loss_options``).

Each loss's module defines its adapter and adds its entry to :data:`LOSSES`, as a plugin does.
Every loss is called through one adapter signature, ``fn(batch, tau, options) -> scalar``, so the
training loop needs no per-loss branches. ``options`` holds exactly the keys of ``defaults``
(``params.yaml``'s ``loss_options.<name>`` is validated against the loss's options dataclass by
the params schema before any work starts).

Two-view losses on labels (supcon, soft_supcon, y_aware, xclr) concatenate anchor and positive
into 2B samples with the labels repeated, so each anchor's other view is always a positive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

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


# Every registered loss by name. Each loss's module adds its own entry
# (``LOSSES["name"] = LossSpec(...)``, as a plugin does), and ``pipeline.losses`` imports them
# all, so importing any part of the package fills it. The code fingerprint reads an assignment
# into this table as the entry, not as code every importer runs (pipeline.fingerprint).
LOSSES: dict[str, LossSpec] = {}


# --- what an adapter takes from the batch -----------------------------------------------------


def negatives_of(batch: LossBatch) -> Tensor:
    """The batch's negatives ``(B, k, d)``; refused when the loop built none."""
    if batch.negatives is None:
        raise ValueError("this loss needs batch.negatives (B, k, d)")
    return batch.negatives


def labels_of(batch: LossBatch) -> Tensor:
    """The batch's labels; refused on unlabelled data."""
    if batch.labels is None:
        raise ValueError("this loss needs batch.labels")
    return batch.labels


def two_views(batch: LossBatch) -> tuple[Tensor, Tensor]:
    """(2B, d) samples and (2B, ...) labels: anchor views then positive views."""
    labels = labels_of(batch)
    return torch.cat([batch.anchor, batch.positive]), torch.cat([labels, labels])


def resolve_options(name: str, given: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """Every option of loss ``name``: its defaults overlaid with ``given``.

    Fills and checks the keys only; the values are validated by the params schema
    (``pipeline.config``), which every cell's options have passed.
    """
    if name not in LOSSES:
        raise ValueError(f"{where}: unknown loss {name!r}; allowed: {sorted(LOSSES)}")
    return fill(LOSSES[name].options, given, where)
