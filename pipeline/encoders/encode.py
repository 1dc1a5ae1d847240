"""Running an encoder over a whole split without gradients, in batches of rows."""

from __future__ import annotations

import torch
from torch import Tensor, nn

# Rows per forward pass wherever a split is encoded without gradients (the held-out
# embeddings, the search and bounds evaluations, the probes' features). It bounds the
# activations' memory (a small-stem ResNet-18 on 32×32 images: ~0.27 GB for its largest
# activation at 1024 rows), not the result: rows are encoded independently.
ENCODE_BATCH = 1024


@torch.no_grad()
def encode(model: nn.Module, x: Tensor, batch_size: int = ENCODE_BATCH) -> Tensor:
    """``model(x)`` ``(N, d)`` without gradients, ``batch_size`` rows at a time, on ``x``'s device.

    The caller sets the mode (``model.eval()`` for frozen features).
    """
    return torch.cat([model(x[i:i + batch_size]) for i in range(0, x.shape[0], batch_size)])
