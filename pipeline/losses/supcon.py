"""SupCon (Khosla et al. 2020), the "out" form: a uniform target over each anchor's other class
members (SPEC.md §1), on the weighted-InfoNCE core (:mod:`pipeline.losses.weighted`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from pipeline.losses.registry import LOSSES, LossBatch, LossSpec, two_views
from pipeline.losses.weighted import class_weighted_infonce


def supcon(z: Tensor, labels: Tensor, tau: float | Tensor) -> Tensor:
    """SupCon (the "out" form): uniform target over i's other class members; z ``(N, d)``."""
    return class_weighted_infonce(z, labels, tau, 0.0)


def _supcon(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    z, labels = two_views(batch)
    return supcon(z, labels, tau)


LOSSES["supcon"] = LossSpec(fn=_supcon, needs_labels=True, needs_negatives=False,
                            modules=(__name__, "pipeline.losses.weighted"))
