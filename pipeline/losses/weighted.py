"""Weighted InfoNCE: cross-entropy between a target distribution over the other samples and
softmax_j(s_ij/τ) (SPEC.md §1): the computation SupCon, Soft SupCon, y-Aware and X-CLR share.
Each of those four is a loss of its own module (``supcon``, ``soft_supcon``, ``y_aware``,
``xclr``), which builds its targets with the helpers here and registers itself.

Candidates for anchor i are all other samples of the batch (self excluded from the softmax).
An anchor whose target row is all zero (SupCon: no other member of its class) is excluded from
the mean; if no anchor has a target the loss is 0 (still attached to the graph).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor


def _eye(n: int, device: torch.device) -> Tensor:
    return torch.eye(n, dtype=torch.bool, device=device)


_SHIFT_LIMIT = 0.9  # fraction of the dtype's exponent range the fixed shift may use


def _weighted_reference(z: Tensor, targets: Tensor, tau: float | Tensor) -> Tensor:
    """Plain-autograd weighted InfoNCE (learnable τ, targets with a gradient, tiny τ)."""
    zn = F.normalize(z, dim=-1)
    eye = _eye(len(zn), zn.device)
    logits = (zn @ zn.T / tau).masked_fill(eye, float("-inf"))
    logp = torch.log_softmax(logits, dim=1).masked_fill(eye, 0.0)  # avoid 0·(−inf)
    per_anchor = -(targets * logp).sum(dim=1)
    valid = targets.sum(dim=1) > 0
    if not bool(valid.any()):
        return (logits.masked_fill(eye, 0.0) * 0.0).sum()
    return per_anchor[valid].mean()


def _fast_inv_tau(tau: float | Tensor, dtype: torch.dtype) -> float | None:
    """1/τ for the fused paths, or None when the plain-autograd path must run instead."""
    if isinstance(tau, Tensor) and tau.requires_grad:
        return None
    inv_tau = 1.0 / float(tau)
    if 2 * inv_tau > _SHIFT_LIMIT * -math.log(torch.finfo(dtype).tiny):
        return None  # e^(−2/τ) would underflow
    return inv_tau


def _shifted_scores(z: Tensor, inv_tau: float) -> Tensor:
    """s_ij − 1/τ = (z_i·z_j − 1)/τ in one matrix product (a constant coordinate carries the
    shift), so the (N, N) block is written once and never re-read to subtract it."""
    c = math.sqrt(inv_tau)
    ones = z.new_full((z.shape[0], 1), c)
    return torch.mm(torch.cat([z * c, ones], 1), torch.cat([z * c, -ones], 1).T)


def _shifted_exp(z: Tensor, inv_tau: float) -> tuple[Tensor, Tensor]:
    """e_ij = exp(s_ij − 1/τ) with s = z·zᵀ/τ, zero diagonal, and row sums r_i."""
    e = _shifted_scores(z, inv_tau).exp_()
    e.fill_diagonal_(0.0)  # self is not a candidate
    return e, e.sum(1)


class _WeightedFused(torch.autograd.Function):
    """Weighted InfoNCE on unit vectors with a hand-written backward (first order only).

    Targets come as w_ij = a_i·u_ij (row scales ``a``, weights ``u``), so callers that build
    targets by exponentiating skip the normalising pass over (N, N). Per anchor,
    −Σ_j w_ij log p_ij = m_i·lse_i − Σ_j w_ij s_ij with m_i = Σ_j w_ij; the log-sum-exp uses
    the fixed shift 1/τ (every logit is ≤ 1/τ; callers keep e^(−2/τ) inside the dtype's range),
    and the kept exponentials give the softmax in the backward: dL/ds_ij = (m_i·p_ij − w_ij) /
    #anchors, symmetric in (i, j) through s = z·zᵀ.
    """

    @staticmethod
    def forward(  # noqa: D102
        ctx: Any, z: Tensor, weights: Tensor, row_scale: Tensor, inv_tau: float,
        mass: Tensor | None,
    ) -> Tensor:
        if mass is None:  # m_i = a_i·Σ_j u_ij, unless the caller knows it (normalised rows: 1)
            mass = weights.sum(1).mul_(row_scale)
        count = (mass > 0).sum()
        e = _shifted_scores(z, inv_tau)
        # Σ_j u_ij (s_ij − 1/τ) per row, as a batch of dot products (no (N, N) temporary)
        us = torch.bmm(weights.unsqueeze(1), e.unsqueeze(2)).flatten()
        ws = torch.dot(row_scale, us) + inv_tau * mass.sum()  # Σ_ij w_ij s_ij; w_ii = 0
        e.exp_().fill_diagonal_(0.0)  # self is not a candidate
        r = e.sum(1)
        loss = ((r.log() + inv_tau) * mass).sum() - ws
        ctx.save_for_backward(z, weights, row_scale, e, mass / (r * row_scale), count)
        ctx.inv_tau = inv_tau
        return loss / count

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor, None, None, None, None]:  # noqa: D102
        z, weights, row_scale, e, scale_rows, count = ctx.saved_tensors
        # h = u − diag(m / (r·a))·e, so that dL/ds = −diag(a)·h / #anchors; one fused pass
        h = torch.addcmul(weights, e, scale_rows[:, None], value=-1.0)
        dz = torch.addmm((h @ z).mul_(row_scale[:, None]), h.T, z * row_scale[:, None])
        return dz.mul_(grad_out * (-ctx.inv_tau) / count), None, None, None, None


class _ClassWeightedFused(torch.autograd.Function):
    """Soft SupCon (SupCon at eps = 0) without an (N, N) target matrix.

    w_ij = (eps + (1 − eps)·[c_i = c_j]) / M_i for j ≠ i, M_i = (1 − eps)·n_i + eps·(N − 1),
    n_i = other members of i's class; rows with M_i = 0 are excluded. The target terms W·z and
    Wᵀ·z are class sums, O(N·d); only the softmax needs the (N, N) block.
    """

    @staticmethod
    def forward(ctx: Any, z: Tensor, onehot: Tensor, eps: float, inv_tau: float) -> Tensor:  # noqa: D102
        n = z.shape[0]
        n_same = onehot @ onehot.sum(0) - 1
        raw_mass = (1 - eps) * n_same + eps * (n - 1)
        mass = (raw_mass > 0).to(z.dtype)
        inv_m = mass / raw_mass.clamp_min(1e-30)
        wz = _class_mix(z, onehot, eps) * inv_m[:, None]  # (W·z)_i
        e, r = _shifted_exp(z, inv_tau)
        count = mass.sum()
        loss = ((r.log() + inv_tau) * mass).sum() - inv_tau * torch.dot(wz.flatten(), z.flatten())
        ctx.save_for_backward(z, onehot, e, mass / r, inv_m, wz, count)
        ctx.eps, ctx.inv_tau = eps, inv_tau
        return loss / count

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor, None, None, None]:  # noqa: D102
        z, onehot, e, scale_rows, inv_m, wz, count = ctx.saved_tensors
        g = e * (scale_rows[:, None] + scale_rows[None, :])  # P + Pᵀ, e symmetric
        dz = g @ z
        dz -= wz + _class_mix(z * inv_m[:, None], onehot, ctx.eps)  # (W + Wᵀ)·z
        return dz.mul_(grad_out * ctx.inv_tau / count), None, None, None


def _class_mix(x: Tensor, onehot: Tensor, eps: float) -> Tensor:
    """Σ_{j≠i} (eps + (1 − eps)·[c_i = c_j]) x_j for every i, via class sums, ``(N, d)``."""
    own = onehot @ (onehot.T @ x)
    return eps * (x.sum(0) - x) + (1 - eps) * (own - x)


def class_weighted_infonce(z: Tensor, labels: Tensor, tau: float | Tensor, eps: float) -> Tensor:
    """Soft SupCon (``eps`` > 0) or SupCon (``eps`` = 0) from class labels ``(N,)``.

    Same value as ``weighted_infonce(z, soft_supcon_targets(labels, eps), tau)`` (resp.
    :func:`supcon_targets`), without building the (N, N) targets.
    """
    zn = F.normalize(z, dim=-1)
    inv_tau = _fast_inv_tau(tau, zn.dtype)
    onehot = F.one_hot(torch.unique(labels, return_inverse=True)[1]).to(zn.dtype)
    n_same = onehot @ onehot.sum(0) - 1
    if inv_tau is None or (eps == 0 and not bool((n_same > 0).any())):
        targets = (
            supcon_targets(labels, zn.dtype)
            if eps == 0
            else soft_supcon_targets(labels, eps, zn.dtype)
        )
        return _weighted_reference(zn, targets, tau)
    out: Tensor = _ClassWeightedFused.apply(zn, onehot, float(eps), inv_tau)
    return out


def weighted_infonce(z: Tensor, targets: Tensor, tau: float | Tensor) -> Tensor:
    """Mean over anchors of −Σ_j w_ij log softmax_{j≠i}(s_ij/τ).

    z: ``(N, d)`` L2-normalised inside; targets: ``(N, N)`` rows summing to 1 (or 0 to exclude
    the anchor) with zero diagonal, no gradient through them on the fast path (a target
    matrix that requires grad, a learnable τ, or e^(−2/τ) underflowing in z's dtype take the
    plain-autograd path; float32: τ < 0.026).
    """
    return weighted(z, targets, None, tau)


def weighted(z: Tensor, weights: Tensor, row_scale: Tensor | None, tau: float | Tensor,
              normalised: bool = False) -> Tensor:
    """Weighted InfoNCE with targets ``diag(row_scale)·weights`` (row_scale None: all ones);
    ``normalised``: the caller guarantees every target row sums to 1 (saves a pass)."""
    zn = F.normalize(z, dim=-1)
    inv_tau = _fast_inv_tau(tau, zn.dtype)
    scale = torch.ones(len(zn), dtype=zn.dtype, device=zn.device) if row_scale is None \
        else row_scale.to(zn.dtype)
    if inv_tau is None or weights.requires_grad or (
            not normalised and not bool((weights.sum(1) > 0).any())):
        return _weighted_reference(zn, weights * scale[:, None], tau)
    mass = torch.ones_like(scale) if normalised else None
    out: Tensor = _WeightedFused.apply(zn, weights.to(zn.dtype), scale, inv_tau, mass)
    return out


def _row_normalise(w: Tensor) -> Tensor:
    """Divide each row by its sum in place; all-zero rows stay zero."""
    mass = w.sum(dim=1, keepdim=True)
    return w.mul_(torch.where(mass > 0, mass.reciprocal(), torch.zeros_like(mass)))


def supcon_targets(labels: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """w_ij uniform over the other members of i's class; a zero row for a singleton class."""
    same = labels[:, None] == labels[None, :]
    return _row_normalise(same.to(dtype).fill_diagonal_(0.0))


def soft_supcon_targets(labels: Tensor, eps: float, dtype: torch.dtype = torch.float32) -> Tensor:
    """Same-class weight 1, other classes ``eps``, self 0, normalised per row.

    A singleton class's anchor gets a uniform target over the other samples (eps > 0).
    """
    same = labels[:, None] == labels[None, :]
    w = torch.full(same.shape, eps, dtype=dtype, device=labels.device).masked_fill(same, 1.0)
    return _row_normalise(w.fill_diagonal_(0.0))


def _exp_rows_(x: Tensor) -> tuple[Tensor, Tensor]:
    """exp(x_ij − max_j x_ij) in place, and 1 / row sums: the row softmax, unnormalised."""
    x.sub_(x.amax(dim=1, keepdim=True)).exp_()
    return x, x.sum(dim=1).reciprocal_()


def label_sq_dists(y: Tensor, sigma: float) -> Tensor:
    """‖y_i − y_j‖²/(2σ²) for labels ``(N,)`` or ``(N, m)``, ``(N, N)``: as a plain squared
    distance of y/(√2·σ), from differences (not the expanded square), so it is exact."""
    yy = y.reshape(len(y), -1)
    if not yy.is_floating_point():
        yy = yy.to(torch.get_default_dtype())
    yy = yy / (math.sqrt(2) * sigma)
    if yy.shape[1] == 1:
        return (yy - yy.T).square_()
    return (yy[:, None, :] - yy[None, :, :]).square().sum(-1)


def y_aware_weights(y: Tensor, sigma: float) -> tuple[Tensor, Tensor]:
    """Unnormalised y-Aware targets and their row scales (targets = diag(scale)·weights)."""
    d2 = label_sq_dists(y, sigma).fill_diagonal_(float("inf"))
    # the row's largest logit is −(its smallest squared distance): exp(min_i − d2_ij) ≤ 1
    w = torch.sub(d2.amin(dim=1, keepdim=True), d2, out=d2).exp_()
    return w, w.sum(dim=1).reciprocal_()


def xclr_weights(similarity: Tensor, tau_s: float) -> tuple[Tensor, Tensor]:
    return _exp_rows_(similarity.mul(1.0 / tau_s).fill_diagonal_(float("-inf")))


def y_aware_targets(y: Tensor, sigma: float) -> Tensor:
    """w_ij ∝ exp(−‖y_i − y_j‖²/(2σ²)), j ≠ i, for continuous labels ``(N,)`` or ``(N, m)``."""
    w, scale = y_aware_weights(y, sigma)
    return w.mul_(scale[:, None])


def xclr_targets(similarity: Tensor, tau_s: float) -> Tensor:
    """w_i· = softmax_{j≠i}(S_ij/τ_s) for a similarity graph ``(N, N)``; self excluded."""
    w, scale = xclr_weights(similarity, tau_s)
    return w.mul_(scale[:, None])


def tile_two_views(w: Tensor) -> tuple[Tensor, Tensor]:
    """Weights over two views from (B, B) ``w``, where row i weighs the B samples (its own
    partner included, at i): ``[[w, w], [w, w]]`` with a zero diagonal, and 1 / row sums."""
    sums = 2 * w.sum(1) - w.diagonal()
    return w.repeat(2, 2).fill_diagonal_(0.0), sums.repeat(2).reciprocal_()
