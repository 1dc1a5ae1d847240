"""y-Aware InfoNCE (Dufumier et al. 2021): targets from a Gaussian kernel on continuous labels
(SPEC.md §1), on the weighted-InfoNCE core (:mod:`pipeline.losses.weighted`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import torch
from annotated_types import Gt
from torch import Tensor

from pipeline.losses.registry import LOSSES, LossBatch, LossSpec, labels_of
from pipeline.losses.weighted import label_sq_dists, tile_two_views, weighted, y_aware_weights
from pipeline.options import option


@dataclass(frozen=True)
class YAwareOptions:
    """``loss_options.y_aware``."""

    sigma: Annotated[float, Gt(0)] = option(1.0, "σ of the label kernel exp(−‖y_i − y_j‖²/(2σ²))")


def y_aware(z: Tensor, y: Tensor, tau: float | Tensor, sigma: float) -> Tensor:
    """y-Aware InfoNCE with a Gaussian kernel of width ``sigma`` on continuous labels ``y``."""
    return weighted(z, *y_aware_weights(y.to(z.dtype), sigma), tau, True)


def y_aware_two_views(z1: Tensor, z2: Tensor, y: Tensor, tau: float | Tensor,
                      sigma: float) -> Tensor:
    """:func:`y_aware` on two views (B, d) of B samples with labels ``y`` (B, ...): the value of
    ``y_aware(cat(z1, z2), cat(y, y), tau, sigma)`` with the targets built on (B, B), a quarter
    of the (2B, 2B) work. Each row's largest weight is its partner's (distance 0), so
    exp(−‖y_i − y_j‖²/(2σ²)) needs no shift."""
    d2 = label_sq_dists(y.to(z1.dtype), sigma)
    return weighted(torch.cat([z1, z2]), *tile_two_views(d2.neg_().exp_()), tau, True)


def _y_aware(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return y_aware_two_views(batch.anchor, batch.positive, labels_of(batch), tau, options["sigma"])


LOSSES["y_aware"] = LossSpec(fn=_y_aware, options=YAwareOptions, needs_labels=True,
                             needs_negatives=False,
                             modules=(__name__, "pipeline.losses.weighted"))
