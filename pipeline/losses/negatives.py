"""How the training loop assembles negatives: in-batch picks and the MoCo queue.

These are the training path's, not a loss's: every cell with in-batch negatives uses
:func:`in_batch_negatives`, and SynCo's queue is updated with :func:`enqueue`.
"""

from __future__ import annotations

import torch
from torch import Tensor


def in_batch_negatives(
    positive: Tensor, k: int, generator: torch.Generator | None = None
) -> Tensor:
    """Negatives for anchor i drawn from the positives of the other batch members, ``(B, k, d)``.

    For each anchor, ``k`` distinct indices ``j != i`` are chosen uniformly without replacement
    (requires ``k <= B - 1``). With ``k == B - 1`` every other sample is used.
    """
    b = positive.shape[0]
    if not 1 <= k <= b - 1:
        raise ValueError(f"k = {k}: in-batch negatives need 1 <= k <= batch_size - 1 = {b - 1}")
    scores = torch.rand(b, b, generator=generator, device="cpu").to(positive.device)
    scores.fill_diagonal_(-1.0)  # never pick the anchor's own positive
    idx = scores.topk(k, dim=1).indices  # (B, k), distinct, excludes i
    return positive[idx]


def enqueue(queue: Tensor, keys: Tensor, ptr: int) -> tuple[Tensor, int]:
    """Write ``keys`` ``(n, d)`` into a copy of ``queue`` ``(K, d)`` from row ``ptr``, wrapping.

    Returns ``(new_queue, (ptr + n) % K)``; the keys are detached. n ≤ K.
    """
    k, n = queue.shape[0], keys.shape[0]
    if n > k:
        raise ValueError(f"enqueue: {n} keys do not fit a queue of {k}")
    if not 0 <= ptr < k:
        raise ValueError(f"enqueue: ptr = {ptr}: must be in [0, {k})")
    rows = (ptr + torch.arange(n, device=queue.device)) % k
    new = queue.clone()
    new[rows] = keys.detach().to(queue.dtype)
    return new, (ptr + n) % k
