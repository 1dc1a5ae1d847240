"""Soft SupCon: same-class weight 1, other classes ε > 0, normalised per anchor (SPEC.md §1),
on the weighted-InfoNCE core (:mod:`pipeline.losses.weighted`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from annotated_types import Gt
from torch import Tensor

from pipeline.losses.registry import LOSSES, LossBatch, LossSpec, two_views
from pipeline.losses.weighted import class_weighted_infonce
from pipeline.options import option


@dataclass(frozen=True)
class SoftSupconOptions:
    """``loss_options.soft_supcon``."""

    eps: Annotated[float, Gt(0)] = option(0.1, "weight of other-class samples before normalising")


def soft_supcon(z: Tensor, labels: Tensor, tau: float | Tensor, eps: float) -> Tensor:
    """Soft SupCon: same-class weight 1, other classes ``eps`` > 0, normalised."""
    return class_weighted_infonce(z, labels, tau, eps)


def _soft_supcon(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    z, labels = two_views(batch)
    return soft_supcon(z, labels, tau, options["eps"])


LOSSES["soft_supcon"] = LossSpec(fn=_soft_supcon, options=SoftSupconOptions, needs_labels=True,
                                 needs_negatives=False,
                                 modules=(__name__, "pipeline.losses.weighted"))
