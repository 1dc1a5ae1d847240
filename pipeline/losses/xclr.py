"""X-CLR (Sobal et al. 2024): targets softmax_j(S_ij/τ_s) from a similarity graph S among a
batch's samples (SPEC.md §1), on the weighted-InfoNCE core (:mod:`pipeline.losses.weighted`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import torch
import torch.nn.functional as F
from annotated_types import Gt
from torch import Tensor

from pipeline.losses.registry import LOSSES, LossBatch, LossSpec, two_views
from pipeline.losses.soft_supcon import soft_supcon
from pipeline.losses.weighted import tile_two_views, weighted, xclr_weights
from pipeline.options import OptionError, option


@dataclass(frozen=True)
class XclrOptions:
    """``loss_options.xclr``: τ_s and the similarity graph S among a batch's samples.

    graph = labels: S_ij = 1 for samples of the same class, 0 otherwise; class_similarity:
    S_ij = class_similarity[y_i][y_j], a C × C matrix of similarities between the classes
    (X-CLR's own setting derives it from captions or class names; any C × C matrix serves, and
    it scales to every batch size); inputs: S_ij = cos(x_i, x_j) of the raw inputs (flattened),
    a graph from the data alone.
    """

    tau_s: Annotated[float, Gt(0)] = option(0.1, "τ_s of the target softmax over the graph S")
    graph: Literal["labels", "class_similarity", "inputs"] = option(
        "labels", "S among a batch: labels (1 same class, else 0) | class_similarity "
                  "(S_ij = class_similarity[y_i][y_j]) | inputs (cosine of the raw inputs)")
    class_similarity: list[list[float]] | None = option(
        None, "C × C similarities between the classes (row c: class c), for graph: "
              "class_similarity")

    def __post_init__(self) -> None:
        m = self.class_similarity
        if self.graph != "class_similarity":
            if m is not None:
                raise OptionError("class_similarity", "[...]", f"used only with graph: "
                                  f"class_similarity (graph = {self.graph!r})")
            return
        if m is None:
            raise OptionError("class_similarity", None, "required with graph: class_similarity "
                              "(a C × C list of lists, row c for class c)")
        if not m or any(len(row) != len(m) for row in m):
            raise OptionError("class_similarity", f"{len(m)} rows of lengths "
                              f"{sorted({len(r) for r in m})}", "must be a square C × C matrix")


def xclr_graph(graph: str, inputs: Tensor, labels: Tensor | None,
               class_similarity: list[list[float]] | None = None) -> Tensor | None:
    """The ``(B, B)`` similarity S among a batch's samples (see :class:`XclrOptions`).

    inputs: the batch's clean inputs ``(B, ...)`` (before augmentation); labels: ``(B,)`` class
    ids. ``graph = labels`` gives None: the loss computes that graph from the labels itself,
    without a (B, B) matrix (:func:`soft_supcon` with ε = e^(−1/τ_s), the same targets).
    """
    if graph == "labels":
        return None
    if graph == "inputs":
        flat = F.normalize(inputs.reshape(inputs.shape[0], -1), dim=1)
        return flat @ flat.T
    if graph != "class_similarity":
        raise ValueError(f"loss_options.xclr.graph = {graph!r}: allowed: labels, "
                         "class_similarity, inputs")
    if labels is None or class_similarity is None:
        raise ValueError("loss_options.xclr.graph = 'class_similarity': needs class labels and "
                         "loss_options.xclr.class_similarity")
    m = torch.as_tensor(class_similarity, dtype=inputs.dtype, device=labels.device)
    if int(labels.max()) >= m.shape[0] or int(labels.min()) < 0:
        raise ValueError(f"loss_options.xclr.class_similarity is {m.shape[0]} × {m.shape[0]}: "
                         f"the labels run from {int(labels.min())} to {int(labels.max())}")
    y = labels.long()
    return m[y][:, y]


def xclr(z: Tensor, similarity: Tensor, tau: float | Tensor, tau_s: float) -> Tensor:
    """X-CLR: targets softmax_j(S_ij/τ_s) from a given similarity graph ``(N, N)``."""
    return weighted(z, *xclr_weights(similarity.to(z.dtype), tau_s), tau, True)


def xclr_two_views(z1: Tensor, z2: Tensor, similarity: Tensor, tau: float | Tensor,
                   tau_s: float) -> Tensor:
    """:func:`xclr` on two views (B, d) with a (B, B) graph: the value of
    ``xclr(cat(z1, z2), similarity.repeat(2, 2), tau, tau_s)`` with the targets exponentiated on
    (B, B). The partner (weight S_ii) is a candidate, so each row's shift is its full maximum."""
    s = similarity.to(z1.dtype) / tau_s
    w = s.sub_(s.amax(dim=1, keepdim=True)).exp_()
    return weighted(torch.cat([z1, z2]), *tile_two_views(w), tau, True)


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
    z, labels = two_views(batch)
    return soft_supcon(z, labels, tau, math.exp(-1.0 / options["tau_s"]))


LOSSES["xclr"] = LossSpec(fn=_xclr, options=XclrOptions, needs_labels=True,
                          needs_negatives=False, similarity=_xclr_graph,
                          modules=(__name__, "pipeline.losses.weighted"))
