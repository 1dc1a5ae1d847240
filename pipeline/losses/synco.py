"""SynCo: MoCo-style InfoNCE with synthetic hard negatives built from the hardest queue entries
(SPEC.md §1; Giakoumoglou & Stathaki, arXiv 2410.02401; code ``giakoumoglou/synco``).

The queue and the momentum encoder belong to the training loop's state; here are only pure
functions: the synthetic negatives and the loss (the queue's update is
:func:`pipeline.losses.negatives.enqueue`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import torch
import torch.nn.functional as F
from annotated_types import Ge, Interval
from torch import Tensor

from pipeline.losses.registry import LOSSES, LossBatch, LossSpec, negatives_of
from pipeline.options import defaults, option

Count = Annotated[int, Ge(0)]


@dataclass(frozen=True)
class SyncoOptions:
    """``loss_options.synco`` (SPEC.md §1 table: the six synthetic types and their counts)."""

    hardest: Annotated[int, Ge(1)] = option(
        1024, "synthetic negatives come from this many hardest queue entries")
    n_interpolated: Count = option(256, "α·q + (1−α)·n, α ~ U(0, alpha_max)")
    n_extrapolated: Count = option(256, "q + β·(n − q), β ~ U(1, beta_max)")
    n_mixup: Count = option(256, "γ·n_a + (1−γ)·n_b, γ ~ U(0, 1)")
    n_noise: Count = option(64, "n + N(0, sigma² I)")
    n_perturbed: Count = option(64, "n + delta·q")
    n_adversarial: Count = option(64, "n + eta·sign(q)")
    alpha_max: Annotated[float, Interval(ge=0, le=1)] = option(0.5, "upper end of α")
    beta_max: Annotated[float, Ge(1)] = option(1.5, "upper end of β")
    sigma: Annotated[float, Ge(0)] = option(0.01, "std of the noise type")
    delta: Annotated[float, Ge(0)] = option(0.01, "step of the perturbed type")
    eta: Annotated[float, Ge(0)] = option(0.01, "step of the adversarial type")
    warmup_steps: Annotated[int, Ge(0)] = option(0, "steps before synthetic negatives are added")
    # MoCo state, read by the training loop (not by the loss): a queue of this many keys from a
    # momentum encoder updated with this coefficient; 0 = no queue, the batch's negatives stand in
    queue_size: Annotated[int, Ge(0)] = option(
        0, "MoCo queue length (0: the batch's negatives stand in)")
    momentum: Annotated[float, Interval(ge=0, le=1)] = option(0.999, "momentum of the key encoder")


# type → default count; the order is the column order of the output
SYNTHETIC_COUNTS: dict[str, int] = {key[2:]: value for key, value in defaults(SyncoOptions).items()
                                    if key.startswith("n_")}


def _rand(shape: tuple[int, ...], like: Tensor, generator: torch.Generator | None) -> Tensor:
    return torch.rand(shape, generator=generator, dtype=like.dtype).to(like.device)


def _unit_(x: Tensor) -> Tensor:
    """Normalise the last dimension of ``x`` in place (as F.normalize: norm floored at 1e-12)."""
    return x.div_(torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min_(1e-12))


def _pick(queue: Tensor, hard: Tensor, n: int, generator: torch.Generator | None) -> Tensor:
    """``n`` entries per query drawn with replacement from its hardest ``hard`` ``(B, h)``,
    L2-normalised, ``(B, n, d)``."""
    b, h = hard.shape
    col = torch.randint(h, (b, n), generator=generator).to(hard.device)
    idx = hard.gather(1, col)  # (B, n) queue indices
    d = queue.shape[-1]
    if queue.dim() == 3:  # per-query rows: offset into the flattened (B·K, d) view
        idx = idx + queue.shape[1] * torch.arange(b, device=idx.device)[:, None]
    picked = queue.reshape(-1, d).index_select(0, idx.flatten()).view(b, n, d)
    return _unit_(picked)


def queue_similarities(q: Tensor, queue: Tensor) -> Tensor:
    """Cosines q·n̂ ``(B, K)`` of unit queries ``q`` to a shared queue ``(K, d)`` or per-query
    negatives ``(B, K, d)``; a per-query queue is not copied to normalise it."""
    if queue.dim() == 2:
        return q @ F.normalize(queue, dim=-1).T
    norm = torch.linalg.vector_norm(queue, dim=-1).clamp_min_(1e-12)
    return torch.bmm(queue, q[:, :, None]).squeeze(-1).div_(norm)


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
        queue = queue.detach()
        b, d = q.shape
        hard = queue_similarities(q, queue).topk(min(hardest, queue.shape[-2]), dim=1).indices
        kinds = [(kind, counts.get(kind, 0)) for kind in SYNTHETIC_COUNTS]
        kinds = [(kind, n) for kind, n in kinds if n > 0]
        m = sum(n for _, n in kinds)
        base = _pick(queue, hard, m + counts.get("mixup", 0), generator)  # mixup takes two
        out = q.new_empty((b, m, d))
        qb = q[:, None, :]
        start = 0
        for kind, n in kinds:
            nb, o = base[:, start : start + n], out[:, start : start + n]
            if kind == "interpolated":  # α·q + (1 − α)·n
                torch.lerp(nb, qb.expand_as(nb), alpha_max * _rand((b, n, 1), q, generator), out=o)
            elif kind == "extrapolated":  # q + β·(n − q)
                beta = 1 + (beta_max - 1) * _rand((b, n, 1), q, generator)
                torch.lerp(qb.expand_as(nb), nb, beta, out=o)
            elif kind == "mixup":  # γ·n_a + (1 − γ)·n_b
                torch.lerp(base[:, m:], nb, _rand((b, n, 1), q, generator), out=o)
            elif kind == "noise":
                noise = torch.randn((b, n, d), generator=generator, dtype=q.dtype).to(q.device)
                torch.add(nb, noise, alpha=sigma, out=o)
            elif kind == "perturbed":  # ∇_n (q·n) = q
                torch.add(nb, qb, alpha=delta, out=o)
            else:  # adversarial
                torch.add(nb, torch.sign(qb), alpha=eta, out=o)
            start += n
        return _unit_(out)


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
        cols.append(queue_similarities(q, queue.detach()))
    if synthetic is not None and synthetic.shape[1] > 0:
        cols.append(queue_similarities(q, synthetic.detach()))
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


def _synco(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    """Queries = anchor, keys = positive. Without ``batch.queue`` (no MoCo state in the generic
    loop) the per-anchor ``batch.negatives`` (B, k, d) stand in for the queue: they are detached,
    like queue entries, and the synthetic negatives come from each anchor's own k negatives."""
    o = dict(options)
    queue = batch.queue if batch.queue is not None else negatives_of(batch)
    synthetic = None
    if batch.step is None or batch.step >= o["warmup_steps"]:
        counts = {kind: o[f"n_{kind}"] for kind in SYNTHETIC_COUNTS}
        synthetic = synthetic_negatives(
            batch.anchor, queue, counts, batch.generator, o["hardest"],
            o["alpha_max"], o["beta_max"], o["sigma"], o["delta"], o["eta"],
        )  # fmt: skip
    return synco_loss(batch.anchor, batch.positive, queue, synthetic, tau)


LOSSES["synco"] = LossSpec(fn=_synco, options=SyncoOptions, modules=(__name__,))
