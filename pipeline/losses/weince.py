"""WEINCE: InfoNCE blended with an endpoint-shortfall (Weibit) term, gated per anchor by
extreme-value tail fits (SPEC.md §1; Erol et al. 2026, arXiv 2606.00262; code ``hsme98/weince``).

Everything that decides λ_i and β_i is computed on detached similarities, vectorised over
anchors: one ``topk`` for the tail and closed-form least squares per row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import torch
import torch.nn.functional as F
from annotated_types import Ge, Gt, Interval, Le
from torch import Tensor

from pipeline.losses.infonce import tuple_logits
from pipeline.losses.registry import LOSSES, LossBatch, LossSpec, negatives_of
from pipeline.options import option

SHORTFALL_FLOOR = 1e-6  # δ = 1 − s is floored here; s is clamped to ≤ 1 − this in the logits
SSE_FLOOR = 1e-12  # a perfect fit (SSE = 0) would give AIC = −inf; floored as in the official code
BAD_SLOPE_PENALTY = 1e6
MIN_K = 3  # the tail fit needs two points after dropping the first max(1, t//20)


@dataclass(frozen=True)
class WeinceOptions:
    """``loss_options.weince`` (SPEC.md §1): the gate's constants and the Weibit's β."""

    beta: Literal["fixed", "fitted"] = option(
        "fixed",
        "fixed: β = 1 in the logits (the official code); fitted: the paper's Weibull slope")
    kappa_rho: Annotated[float, Gt(0)] = option(10.0, "κ_ρ: sharpness of the endpoint gate")
    kappa_aic: Annotated[float, Gt(0)] = option(1.0, "κ_AIC: sharpness of the tail-model gate")
    margin_aic: float = option(2.0, "m_AIC: the ΔAIC at which the tail gate is one half")
    rho_quantile: Annotated[float, Ge(0), Le(1)] = option(
        0.2, "ρ0 is this quantile of the batch's endpoint gaps")
    tail_frac: Annotated[float, Interval(gt=0, le=1)] = option(
        0.10, "tail size t = clip(max(32, round(tail_frac·k)), 10, k)")


@dataclass(frozen=True)
class TailFit:
    """Per-anchor OLS fits of the upper tail of the negative similarities, each ``(B,)``.

    weibull_slope: β̂ of log F ≈ a + β·log δ.  gumbel_slope: the regression slope of
    log(−log F) on log δ, i.e. −κ̂.  *_sse include the 1e6 penalty for a wrong-signed slope.
    n_eff: points used per row (t minus the dropped first max(1, t//20)).
    """

    weibull_slope: Tensor
    weibull_intercept: Tensor
    weibull_sse: Tensor
    weibull_aic: Tensor
    gumbel_slope: Tensor
    gumbel_intercept: Tensor
    gumbel_sse: Tensor
    gumbel_aic: Tensor
    n_eff: int

    @property
    def delta_aic(self) -> Tensor:
        """ΔAIC_i = AIC_Gumbel − AIC_Weibull (> 0 favours the Weibull, i.e. a finite endpoint)."""
        return self.gumbel_aic - self.weibull_aic


def tail_size(k: int, tail_frac: float = 0.10) -> int:
    """t = clip(max(32, round(tail_frac·k)), 10, k); Python's ``round`` (half to even)."""
    return min(max(max(32, round(tail_frac * k)), 10), k)


def ols_rows(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Least squares y ≈ a + b·x for every row of ``x`` ``(B, n)`` against ``y`` ``(n,)``.

    Returns ``(slope, intercept, sse)`` each ``(B,)``. A row with constant x (all shortfalls
    tied) has no slope; it gets slope 0, which the callers penalise as a failed fit.
    """
    xm = x.mean(dim=1, keepdim=True)
    ym = y.mean()
    xc = x - xm
    yc = y - ym
    sxx = (xc * xc).sum(dim=1)
    sxy = (xc * yc).sum(dim=1)
    slope = torch.where(
        sxx > 0, sxy / sxx.clamp_min(torch.finfo(x.dtype).tiny), torch.zeros_like(sxx)
    )
    intercept = ym - slope * xm.squeeze(1)
    resid = yc - slope[:, None] * xc
    return slope, intercept, (resid * resid).sum(dim=1)


def _aic(sse: Tensor, n_eff: int) -> Tensor:
    return n_eff * torch.log(sse.clamp_min(SSE_FLOOR) / n_eff) + 4.0


def tail_fit(neg_sims: Tensor, tail_frac: float = 0.10) -> TailFit:
    """Weibull and Gumbel fits of each anchor's t largest negative similarities (steps 1, 3, 4).

    neg_sims: ``(B, k)`` cosine similarities of each anchor to its negatives (detached here).
    Shortfalls δ = 1 − s (≥ 1e-6) in ascending order, x_r = log δ_(r), F_r = r/(t+1); the first
    max(1, t//20) points are dropped; AIC = n_eff·log(SSE/n_eff) + 4.
    """
    s = neg_sims.detach()
    k = s.shape[1]
    t = tail_size(k, tail_frac)
    drop = max(1, t // 20)
    n_eff = t - drop
    if n_eff < 2:
        raise ValueError(f"weince: k = {k} negatives leave {n_eff} tail points; need k >= 3")
    top = s.topk(t, dim=1, sorted=True).values  # descending s = ascending δ
    x = torch.log((1.0 - top).clamp_min(SHORTFALL_FLOOR))[:, drop:]
    r = torch.arange(drop + 1, t + 1, dtype=s.dtype, device=s.device)
    f = r / (t + 1)
    w_slope, w_int, w_sse = ols_rows(x, torch.log(f))
    g_slope, g_int, g_sse = ols_rows(x, torch.log(-torch.log(f)))
    w_sse = w_sse + BAD_SLOPE_PENALTY * (w_slope <= 0)
    g_sse = g_sse + BAD_SLOPE_PENALTY * (g_slope >= 0)
    return TailFit(
        weibull_slope=w_slope,
        weibull_intercept=w_int,
        weibull_sse=w_sse,
        weibull_aic=_aic(w_sse, n_eff),
        gumbel_slope=g_slope,
        gumbel_intercept=g_int,
        gumbel_sse=g_sse,
        gumbel_aic=_aic(g_sse, n_eff),
        n_eff=n_eff,
    )


def endpoint_gap(neg_sims: Tensor) -> Tensor:
    """ρ_i = 1 − max_j s(a_i, n_j), floored at 1e-6, ``(B,)`` (step 2; detached)."""
    return (1.0 - neg_sims.detach().amax(dim=1)).clamp_min(SHORTFALL_FLOOR)


def weince_lambda(
    rho: Tensor,
    delta_aic: Tensor,
    kappa_rho: float = 10.0,
    kappa_aic: float = 1.0,
    margin_aic: float = 2.0,
    rho_quantile: float = 0.2,
) -> Tensor:
    """λ_i = σ(κ_ρ·(log ρ0 − log ρ_i)) · σ(κ_AIC·(ΔAIC_i − m_AIC)), ``(B,)`` (step 5).

    ρ0 is the ``rho_quantile`` quantile of ρ over the batch (linear interpolation, as
    ``numpy.quantile``'s default).
    """
    rho0 = torch.quantile(rho, rho_quantile)
    gate_rho = torch.sigmoid(kappa_rho * (torch.log(rho0) - torch.log(rho)))
    gate_aic = torch.sigmoid(kappa_aic * (delta_aic - margin_aic))
    return gate_rho * gate_aic


def weince_logits(sims: Tensor, lam: Tensor, beta: Tensor, tau: float | Tensor) -> Tensor:
    """g_ij = (1 − λ_i)·s_ij/τ + λ_i·(−β_i·log(1 − s_ij)), s clamped to ≤ 1 − 1e-6.

    sims: ``(B, 1 + k)`` cosine similarities (column 0 the positive); lam, beta: ``(B,)``.
    """
    weibit = -beta[:, None] * torch.log1p(-sims.clamp(max=1.0 - SHORTFALL_FLOOR))
    return (1.0 - lam[:, None]) * (sims / tau) + lam[:, None] * weibit


DEFAULTS = WeinceOptions()


def weince(anchor: Tensor, positive: Tensor, negatives: Tensor, tau: float | Tensor,
           options: WeinceOptions = DEFAULTS) -> Tensor:
    """Mean over anchors of −log softmax_j(g_ij) at the positive (SPEC.md §1, WEINCE).

    anchor/positive ``(B, d)``, negatives ``(B, k, d)`` with k ≥ 3; L2-normalised inside.
    ``options`` (``loss_options.weince``; the defaults follow the official code):
    ``beta='fixed'`` uses β_i = 1 in the logits (the official code's final variant), ``'fitted'``
    β_i = max(Weibull slope, 0) (the paper's form); the gate's constants as in
    :class:`WeinceOptions`. λ_i, β_i carry no gradient.
    """
    o = options
    if o.beta not in ("fixed", "fitted"):
        raise ValueError(f"weince: beta = {o.beta!r}: allowed fixed | fitted")
    sims = tuple_logits(anchor, positive, negatives, 1.0)  # (B, 1 + k) cosines
    neg = sims[:, 1:].detach()
    fit = tail_fit(neg, o.tail_frac)
    lam = weince_lambda(endpoint_gap(neg), fit.delta_aic, o.kappa_rho, o.kappa_aic, o.margin_aic,
                        o.rho_quantile)
    b = fit.weibull_slope.clamp_min(0.0) if o.beta == "fitted" else torch.ones_like(lam)
    logits = weince_logits(sims, lam, b, tau)
    return F.cross_entropy(logits, torch.zeros(len(logits), dtype=torch.long, device=logits.device))


def _weince(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return weince(batch.anchor, batch.positive, negatives_of(batch), tau, WeinceOptions(**options))


LOSSES["weince"] = LossSpec(fn=_weince, options=WeinceOptions, min_k=MIN_K,
                            modules=(__name__,))
