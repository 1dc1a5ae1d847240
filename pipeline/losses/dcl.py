"""Decoupled contrastive loss: InfoNCE without the positive in the denominator (SPEC.md §1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from pipeline.losses.infonce import tuple_logits
from pipeline.losses.registry import LOSSES, LossBatch, LossSpec, negatives_of


def dcl_per_anchor(
    anchor: Tensor, positive: Tensor, negatives: Tensor, tau: float | Tensor
) -> Tensor:
    """ℓ_i = log Σ_j exp((s(a,n_j) − s(a,p))/τ) per anchor, shape ``(B,)``.

    Same inputs as :func:`pipeline.losses.infonce`; can be negative (no "1 +").
    """
    logits = tuple_logits(anchor, positive, negatives, tau)
    return torch.logsumexp(logits[:, 1:], dim=1) - logits[:, 0]


def dcl(anchor: Tensor, positive: Tensor, negatives: Tensor, tau: float | Tensor) -> Tensor:
    """Mean over anchors of log Σ_j exp((s(a,n_j) − s(a,p))/τ).

    anchor/positive ``(B, d)``, negatives ``(B, k, d)``; inputs are L2-normalised inside.
    """
    return dcl_per_anchor(anchor, positive, negatives, tau).mean()


def dcl_in_batch(z1: Tensor, z2: Tensor, tau: float | Tensor) -> Tensor:
    """Symmetric in-batch DCL: the NT-Xent layout of :func:`pipeline.losses.nt_xent` with the
    partner view removed from each anchor's denominator (2B − 2 negatives, mean over 2B anchors).

    z1, z2: ``(B, d)`` the two views, L2-normalised inside.
    """
    a = F.normalize(z1, dim=-1)
    p = F.normalize(z2, dim=-1)
    b = a.shape[0]
    eye = torch.eye(b, dtype=torch.bool, device=a.device)
    s01 = a @ p.T / tau
    s01_off = s01.masked_fill(eye, float("-inf"))
    s00 = (a @ a.T / tau).masked_fill(eye, float("-inf"))
    s11 = (p @ p.T / tau).masked_fill(eye, float("-inf"))
    lse1 = torch.logaddexp(torch.logsumexp(s01_off, 1), torch.logsumexp(s00, 1))
    lse2 = torch.logaddexp(torch.logsumexp(s01_off, 0), torch.logsumexp(s11, 1))
    return (lse1.sum() + lse2.sum() - 2 * s01.diagonal().sum()) / (2 * b)


def _dcl(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return dcl(batch.anchor, batch.positive, negatives_of(batch), tau)


def _dcl_in_batch(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return dcl_in_batch(batch.anchor, batch.positive, tau)


LOSSES["dcl"] = LossSpec(fn=_dcl, modules=(__name__,))
LOSSES["dcl_in_batch"] = LossSpec(fn=_dcl_in_batch, needs_negatives=False,
                                  modules=(__name__,))
