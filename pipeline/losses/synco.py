"""SynCo: MoCo-style InfoNCE with synthetic hard negatives built from the hardest queue entries
(SPEC.md §1; Giakoumoglou & Stathaki, arXiv 2410.02401; code ``giakoumoglou/synco``).

The queue and the momentum encoder belong to the training loop's state; here are only pure
functions: the synthetic negatives, the loss, and ``enqueue``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

# type → default count (SPEC.md §1 table); the order is the column order of the output
SYNTHETIC_COUNTS: dict[str, int] = {
    "interpolated": 256,
    "extrapolated": 256,
    "mixup": 256,
    "noise": 64,
    "perturbed": 64,
    "adversarial": 64,
}


def _rand(shape: tuple[int, ...], like: Tensor, generator: torch.Generator | None) -> Tensor:
    return torch.rand(shape, generator=generator, dtype=like.dtype).to(like.device)


def _pick(queue: Tensor, hard: Tensor, n: int, generator: torch.Generator | None) -> Tensor:
    """``n`` entries per query drawn with replacement from its hardest ``hard`` ``(B, h)``."""
    b, h = hard.shape
    col = torch.randint(h, (b, n), generator=generator).to(hard.device)
    idx = hard.gather(1, col)  # (B, n) queue indices
    if queue.dim() == 2:
        return queue[idx]
    return queue[torch.arange(b, device=queue.device)[:, None], idx]


def queue_similarities(q: Tensor, queue: Tensor) -> Tensor:
    """q·queueᵀ ``(B, K)`` for a shared queue ``(K, d)`` or per-query negatives ``(B, K, d)``."""
    if queue.dim() == 2:
        return q @ queue.T
    return torch.einsum("bd,bkd->bk", q, queue)


def synthetic_negatives(
    q: Tensor,
    queue: Tensor,
    counts: Mapping[str, int] | None = None,
    generator: torch.Generator | None = None,
    hardest: int = 1024,
    alpha_max: float = 0.5,
    beta_max: float = 1.5,
    sigma: float = 0.01,
    delta: float = 0.01,
    eta: float = 0.01,
) -> Tensor:
    """The six SynCo types from each query's ``hardest`` queue entries, ``(B, Σ counts, d)``.

    q: ``(B, d)`` queries; queue: ``(K, d)`` shared keys or ``(B, K, d)`` per-query negatives.
    Both are L2-normalised and detached here; uses min(hardest, K) entries (largest q·n), sampled
    with replacement. Types, in this column order (counts default to :data:`SYNTHETIC_COUNTS`):
    interpolated α·q + (1−α)·n, α ~ U(0, alpha_max); extrapolated q + β·(n − q), β ~ U(1, beta_max);
    mixup γ·n_a + (1−γ)·n_b, γ ~ U(0, 1); noise n + N(0, sigma² I); perturbed n + delta·q
    (∇_n q·n = q); adversarial n + eta·sign(q). Every output is re-normalised and detached.
    Draws come from ``generator`` (CPU) or, when None, torch's global RNG.
    """
    counts = dict(SYNTHETIC_COUNTS) if counts is None else dict(counts)
    unknown = sorted(set(counts) - set(SYNTHETIC_COUNTS))
    if unknown:
        raise ValueError(
            f"synco: unknown synthetic type {unknown[0]!r}; allowed: {list(SYNTHETIC_COUNTS)}"
        )
    with torch.no_grad():
        q = F.normalize(q.detach(), dim=-1)
        queue = F.normalize(queue.detach(), dim=-1)
        b, d = q.shape
        hard = queue_similarities(q, queue).topk(min(hardest, queue.shape[-2]), dim=1).indices
        qb = q[:, None, :]
        parts = []
        for kind in SYNTHETIC_COUNTS:
            n = counts.get(kind, 0)
            if n <= 0:
                continue
            base = _pick(queue, hard, n, generator)  # (B, n, d)
            if kind == "interpolated":
                a = alpha_max * _rand((b, n, 1), q, generator)
                parts.append(a * qb + (1 - a) * base)
            elif kind == "extrapolated":
                s = 1 + (beta_max - 1) * _rand((b, n, 1), q, generator)
                parts.append(qb + s * (base - qb))
            elif kind == "mixup":
                g = _rand((b, n, 1), q, generator)
                parts.append(g * base + (1 - g) * _pick(queue, hard, n, generator))
            elif kind == "noise":
                noise = torch.randn((b, n, d), generator=generator, dtype=q.dtype).to(q.device)
                parts.append(base + sigma * noise)
            elif kind == "perturbed":
                parts.append(base + delta * qb)
            else:  # adversarial
                parts.append(base + eta * torch.sign(qb))
        if not parts:
            return q.new_zeros((b, 0, d))
        return F.normalize(torch.cat(parts, dim=1), dim=-1)


def synco_logits(
    q: Tensor, k_pos: Tensor, queue: Tensor | None, synthetic: Tensor | None, tau: float | Tensor
) -> Tensor:
    """[q·k⁺, q·queue, q·synthetic] / τ, ``(B, 1 + K + m)``; column 0 is the positive.

    q, k_pos ``(B, d)`` are L2-normalised here; queue ``(K, d)`` or ``(B, K, d)`` and
    synthetic ``(B, m, d)`` are normalised and detached (queue entries are constants, as in MoCo).
    """
    q = F.normalize(q, dim=-1)
    cols = [(q * F.normalize(k_pos, dim=-1)).sum(-1, keepdim=True)]
    if queue is not None:
        cols.append(queue_similarities(q, F.normalize(queue.detach(), dim=-1)))
    if synthetic is not None and synthetic.shape[1] > 0:
        cols.append(torch.einsum("bd,bmd->bm", q, F.normalize(synthetic.detach(), dim=-1)))
    return torch.cat(cols, dim=1) / tau


def synco_loss(
    q: Tensor, k_pos: Tensor, queue: Tensor | None, synthetic: Tensor | None, tau: float | Tensor
) -> Tensor:
    """Mean cross-entropy at the positive of :func:`synco_logits`.

    ``k_pos`` is not detached here: the training loop's momentum encoder produces it under
    ``no_grad``; in the generic loop (no momentum encoder) it gets a gradient like InfoNCE's.
    """
    logits = synco_logits(q, k_pos, queue, synthetic, tau)
    return torch.logsumexp(logits, dim=1).mean() - logits[:, 0].mean()


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
