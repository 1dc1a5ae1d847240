"""The supervised baseline: the same encoder with a linear classifier on its embedding."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


def classifier_head(embed_dim: int, n_classes: int) -> nn.Module:
    """Logits ``(B, n_classes)`` from raw embeddings ``(B, embed_dim)``: one linear layer."""
    for name, value in (("embed_dim", embed_dim), ("n_classes", n_classes)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} = {value!r}: must be an integer >= 1")
    return nn.Linear(embed_dim, n_classes)


def supervised_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of logits ``(B, K)`` against int labels ``(B,)`` (log-softmax inside)."""
    return F.cross_entropy(logits, labels.long())
