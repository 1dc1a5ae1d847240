"""InfoNCE in Whiteley's tuple form, and its risk (SPEC.md §1, arXiv 2607.09405)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from pipeline.losses.registry import LOSSES, LossBatch, LossSpec, negatives_of

_NORM_EPS = 1e-12  # as F.normalize


class _CosineToRows(torch.autograd.Function):
    """s_bk = ⟨a_b, n_bk⟩ / max(‖n_bk‖, 1e-12) for unit ``a`` (B, d) and raw ``n`` (B, k, d).

    Equal to ``einsum(a, F.normalize(n))`` without materialising the normalised (B, k, d) copy
    or recording its backward: the (B, k, d) tensor is read twice forward and about three
    times backward. First-order only.
    """

    @staticmethod
    def forward(ctx: Any, a: Tensor, n: Tensor) -> Tensor:  # noqa: D102
        norm = torch.linalg.vector_norm(n, dim=-1).clamp_min_(_NORM_EPS)
        s = torch.bmm(n, a[:, :, None]).squeeze(-1).div_(norm)
        ctx.save_for_backward(a, n, norm, s)
        return s

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:  # noqa: D102
        a, n, norm, s = ctx.saved_tensors
        g_over = g / norm  # (B, k)
        # ∂s/∂n = (a − s·n/‖n‖)/‖n‖ (the second term vanishes where the norm is clamped)
        radial = torch.where(norm > _NORM_EPS, g_over * s / norm, torch.zeros_like(s))
        grad_n = torch.baddbmm(n * -radial[:, :, None], g_over[:, :, None], a[:, None, :])
        grad_a = torch.bmm(g_over[:, None, :], n).squeeze(1)
        return grad_a, grad_n


def tuple_logits(
    anchor: Tensor, positive: Tensor, negatives: Tensor, tau: float | Tensor
) -> Tensor:
    """Logits ``[s(a,p), s(a,n_1), ..., s(a,n_k)] / tau`` of shape ``(B, 1 + k)``.

    anchor, positive: ``(B, d)``; negatives: ``(B, k, d)``. All are L2-normalised here,
    so ``s`` is cosine similarity. Column 0 is the positive.
    """
    a = F.normalize(anchor, dim=-1)
    p = F.normalize(positive, dim=-1)
    pos = (a * p).sum(-1, keepdim=True)  # (B, 1)
    neg: Tensor = _CosineToRows.apply(a, negatives)  # (B, k)
    return torch.cat([pos, neg], dim=1) / tau


def infonce_per_anchor(
    anchor: Tensor, positive: Tensor, negatives: Tensor, tau: float | Tensor
) -> Tensor:
    """ℓ_i = log(1 + Σ_j exp((s(a,n_j) − s(a,p))/τ)) per anchor, shape ``(B,)``.

    Computed as cross-entropy on logits (−log softmax of the positive), never exp-then-log.
    """
    logits = tuple_logits(anchor, positive, negatives, tau)
    return torch.logsumexp(logits, dim=1) - logits[:, 0]


def infonce(anchor: Tensor, positive: Tensor, negatives: Tensor, tau: float | Tensor) -> Tensor:
    """Mean over anchors of −log softmax of the positive among positive + k negatives.

    anchor/positive ``(B, d)``, negatives ``(B, k, d)``; inputs are L2-normalised inside.
    Does not subtract ``log k``: the risk R(φ; k, τ) on similarities is
    :func:`pipeline.search.population_risk`.
    """
    return infonce_per_anchor(anchor, positive, negatives, tau).mean()


_SHIFT_LIMIT = 0.9  # fraction of the dtype's exponent range the fixed shift may use


def _nt_xent_reference(z1: Tensor, z2: Tensor, tau: float | Tensor) -> Tensor:
    """Plain-autograd NT-Xent on unit vectors: three (B, B) blocks, no (2B, 2B) copy.

    Used when ``tau`` needs a gradient (learnable temperature) and as the parity reference
    of the fused path.
    """
    b = z1.shape[0]
    eye = torch.eye(b, dtype=torch.bool, device=z1.device)
    s01 = z1 @ z2.T / tau  # s01[i, j] = s(z1_i, z2_j); column i of it serves view-2 anchors
    s00 = (z1 @ z1.T / tau).masked_fill(eye, float("-inf"))
    s11 = (z2 @ z2.T / tau).masked_fill(eye, float("-inf"))
    lse1 = torch.logaddexp(torch.logsumexp(s01, 1), torch.logsumexp(s00, 1))
    lse2 = torch.logaddexp(torch.logsumexp(s01, 0), torch.logsumexp(s11, 1))
    return (lse1.sum() + lse2.sum() - 2 * s01.diagonal().sum()) / (2 * b)


class _NTXentFused(torch.autograd.Function):
    """NT-Xent on unit vectors with a hand-written backward (first order only).

    Every logit is ≤ 1/τ (unit vectors), so exp(logit − 1/τ) cannot overflow, and callers
    ensure 2/τ stays inside the dtype's exponent range so that it cannot underflow to zero
    either: one fixed shift then serves rows and columns alike, with no max pass. The three
    (B, B) blocks of exponentials are kept for the backward, where they become softmax weights.
    """

    @staticmethod
    def forward(ctx: Any, z1: Tensor, z2: Tensor, inv_tau: float) -> Tensor:  # noqa: D102
        b = z1.shape[0]
        shift = z1.new_full((1, 1), -inv_tau)
        pos = (z1 * z2).sum() * inv_tau
        e01 = torch.addmm(shift, z1, z2.T, alpha=inv_tau).exp_()  # exp(s − 1/τ)
        e00 = torch.addmm(shift, z1, z1.T, alpha=inv_tau).exp_()
        e11 = torch.addmm(shift, z2, z2.T, alpha=inv_tau).exp_()
        e00.fill_diagonal_(0.0)  # self-similarity is not a candidate
        e11.fill_diagonal_(0.0)
        r1 = e01.sum(1) + e00.sum(1)  # Σ over view-1 anchor i's candidates, times e^(−1/τ)
        r2 = e01.sum(0) + e11.sum(1)
        lse_sum = r1.log().sum() + r2.log().sum() + 2 * b * inv_tau
        ctx.save_for_backward(z1, z2, e01, e00, e11, r1, r2)
        ctx.inv_tau = inv_tau
        return (lse_sum - 2 * pos) / (2 * b)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor, Tensor, None]:  # noqa: D102
        z1, z2, e01, e00, e11, r1, r2 = ctx.saved_tensors
        b = z1.shape[0]
        inv1, inv2 = r1.reciprocal()[:, None], r2.reciprocal()
        # dL/ds01[i,j] ∝ p1[i, j] + p2[j, i] − 2·δ_ij (view-1 anchor i, view-2 anchor j)
        p01 = e01 * (inv1 + inv2[None, :])
        p01.diagonal().sub_(2.0)
        # s00 = z1·z1ᵀ feeds both factors: (P00 + P00ᵀ)·z1 with P00 = e00·inv1 row-scaled and
        # e00 symmetric, so one broadcast replaces a transpose or a second matmul
        g00 = e00 * (inv1 + inv1.T)
        g11 = e11 * (inv2[:, None] + inv2[None, :])
        g1 = torch.addmm(g00 @ z1, p01, z2)
        g2 = torch.addmm(g11 @ z2, p01.T, z1)
        scale = grad_out * (ctx.inv_tau / (2 * b))
        return g1.mul_(scale), g2.mul_(scale), None


def nt_xent(z1: Tensor, z2: Tensor, tau: float | Tensor) -> Tensor:
    """Symmetric in-batch SimCLR loss (SPEC.md §1, NT-Xent).

    z1, z2: ``(B, d)`` the two views, L2-normalised inside. Each of the 2B views has its
    partner as positive and the other 2B − 2 views as negatives; mean over the 2B anchors.
    Equal to lightly's ``NTXentLoss(temperature=tau)`` without a memory bank.

    Works on the three (B, B) blocks z1·z2ᵀ, z1·z1ᵀ, z2·z2ᵀ (z2·z1ᵀ is a transpose) with a
    fused backward; a ``tau`` tensor that requires grad, or a τ so small that e^(−2/τ)
    underflows in the input dtype (float32: τ < 0.026), takes the plain-autograd path.
    """
    if z1.shape != z2.shape or z1.dim() != 2:
        raise ValueError(
            f"nt_xent: z1 {tuple(z1.shape)} and z2 {tuple(z2.shape)} must be equal (B, d)"
        )
    a = F.normalize(z1, dim=-1)
    p = F.normalize(z2, dim=-1)
    if isinstance(tau, Tensor) and tau.requires_grad:
        return _nt_xent_reference(a, p, tau)
    inv_tau = 1.0 / float(tau)
    if 2 * inv_tau > _SHIFT_LIMIT * -math.log(torch.finfo(a.dtype).tiny):
        return _nt_xent_reference(a, p, 1.0 / inv_tau)  # e^(−2/τ) would underflow
    out: Tensor = _NTXentFused.apply(a, p, inv_tau)
    return out


def _infonce(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return infonce(batch.anchor, batch.positive, negatives_of(batch), tau)


def _nt_xent(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return nt_xent(batch.anchor, batch.positive, tau)


LOSSES["infonce"] = LossSpec(fn=_infonce, modules=(__name__,))
LOSSES["nt_xent"] = LossSpec(fn=_nt_xent, needs_negatives=False, modules=(__name__,))
