"""The encoder-dependent constants of Theorem 1 (arXiv 2607.09405; SPEC.md §4): dΘ, R = ‖θ̂ − θ₀‖₂,
B_τ, and data-restricted Lipschitz constants C_Φ for linear and ReLU-MLP encoders.

Convention for C_Φ (SPEC §4): the Lipschitz constant, in the Frobenius/Euclidean norm of all
trained parameters, of θ ↦ ψ_θ(x) = f_θ(x)/‖f_θ(x)‖ (the normalised embedding), maximised over the
data points x. Weights follow torch's ``nn.Linear`` layout: ``(out, in)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.special import logsumexp

from pipeline.search.kernels import check_tau

CAVEATS: tuple[str, ...] = (
    "C_Φ of a normalised encoder is infinite over all inputs (‖f_θ(x)‖ can be arbitrarily "
    "small); it is finite only restricted to the data, so the bound holds for the empirical "
    "input distribution, not for π.",
    "C_Φ is evaluated at the trained θ̂ (linear: optionally over the ball of radius R around "
    "it); Theorem 1 needs it uniformly over {θ : ‖θ − θ₀‖ ≤ R}, which the local value can "
    "under-state.",
    "For the normalised linear encoder SPEC §4 takes C_Φ = 1/min_x(‖Wx‖/‖x‖), the Lipschitz "
    "constant of W ↦ Wx/‖Wx‖; the constant of W ↦ (Wx/‖Wx‖)/‖x‖ is max_x 1/‖Wx‖, smaller by ‖x‖ "
    "(SPEC's value is the conservative one when every ‖x‖ ≥ 1, as for N(0, I_p) data).",
    "The MLP constant is a first-order (derivative) bound at θ̂ with spectral norms of the later "
    "layers; it ignores how ReLU patterns and norms change along the path from θ₀ to θ̂.",
    "R = ‖θ̂ − θ₀‖₂ is chosen after training (data-dependent); a union bound over a grid of "
    "radii would add a log term that is not included.",
    "The constants 192 and 12 come from chaining Propositions 3 and 5; the theorem prints "
    "'const.', so the numeric bound is as tight as that chaining.",
    "E[r²] = (1 − A_c²)^(−p) is exact only for the Gaussian channel on N(0, I_p) data; it grows "
    "exponentially in p, so the finite-k ratio term is vacuous for large p unless k is huge.",
)


def _np(x: Any, name: str) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    arr = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} has non-finite entries: expected finite numbers")
    return arr


def _arrays(params: Any, name: str) -> list[tuple[str, np.ndarray]]:
    if isinstance(params, Mapping):
        return [(f"{name}[{key!r}]", _np(v, f"{name}[{key!r}]")) for key, v in params.items()]
    if isinstance(params, Sequence) and not isinstance(params, str | bytes):
        return [(f"{name}[{i}]", _np(v, f"{name}[{i}]")) for i, v in enumerate(params)]
    return [(name, _np(params, name))]


def parameter_count(params: Any) -> int:
    """dΘ: the number of scalars in an array, a list of arrays or a dict of arrays (numpy/torch)."""
    return int(sum(a.size for _, a in _arrays(params, "params")))


def parameter_distance(theta_hat: Any, theta_0: Any) -> float:
    """R = ‖θ̂ − θ₀‖₂ over all parameters: arrays, lists or dicts with matching keys and shapes."""
    if isinstance(theta_hat, Mapping) != isinstance(theta_0, Mapping):
        raise ValueError("theta_hat and theta_0 must both be mappings or both be sequences/arrays")
    if isinstance(theta_hat, Mapping) and set(theta_hat) != set(theta_0):
        raise ValueError(f"theta_hat keys {sorted(theta_hat)} != theta_0 keys {sorted(theta_0)}")
    if isinstance(theta_hat, Mapping):
        theta_0 = {key: theta_0[key] for key in theta_hat}
    hat, zero = _arrays(theta_hat, "theta_hat"), _arrays(theta_0, "theta_0")
    if len(hat) != len(zero):
        raise ValueError(f"theta_hat has {len(hat)} arrays, theta_0 has {len(zero)}: must match")
    total = 0.0
    for (name, a), (_, b) in zip(hat, zero, strict=True):
        if a.shape != b.shape:
            raise ValueError(f"{name}.shape = {a.shape}: theta_0 has shape {b.shape}")
        total += float(np.sum((a - b) ** 2))
    return math.sqrt(total)


def b_tau(anchors: Any, positives: Any, negatives: Any, tau: float) -> float:
    """B_τ = rms‖a‖ + rms‖p‖ + (mean ‖n‖^{2/q})^{q/2}, q = min(1, τ), over training inputs
    (SPEC §4).

    anchors, positives: ``(n, p)``; negatives: ``(n, k, p)`` or flattened ``(n·k, p)``. The power
    mean is taken in log space (‖n‖^{2/q} overflows for small τ).
    """
    check_tau(tau)
    a, p, neg = _np(anchors, "anchors"), _np(positives, "positives"), _np(negatives, "negatives")
    if a.ndim != 2 or p.ndim != 2 or neg.ndim not in (2, 3):
        raise ValueError(
            f"shapes {a.shape}, {p.shape}, {neg.shape}: expected anchors (n, p), "
            "positives (n, p), negatives (n, k, p) or (n·k, p)"
        )
    q = min(1.0, float(tau))
    rms = [math.sqrt(float(np.mean(np.sum(x * x, axis=1)))) for x in (a, p)]
    log_norms = np.log(np.linalg.norm(neg.reshape(-1, neg.shape[-1]), axis=1))
    log_mean = logsumexp((2.0 / q) * log_norms) - math.log(log_norms.size)
    return rms[0] + rms[1] + math.exp(0.5 * q * log_mean)


def lipschitz_linear(W: Any, X: Any, radius: float = 0.0) -> float:
    """C_Φ of the normalised linear encoder ψ_W(x) = Wx/‖Wx‖ on the data: max_x ‖x‖/(‖Wx‖ − ρ‖x‖).

    W: ``(d, p)``; X: ``(n, p)`` data inputs; ρ = ``radius`` ≥ 0. Derivation: the derivative of
    W ↦ ψ_W(x) in direction Δ is (I − uuᵀ)Δx/‖Wx‖ with u = ψ_W(x), of norm ≤ ‖Δ‖_F·‖x‖/‖Wx‖ (tight
    for Δ = v xᵀ/‖x‖, v ⊥ u). With ρ = 0 this is SPEC §4's 1/min_x(‖Wx‖/‖x‖), local at W. For W' in
    the convex ball ‖W' − W‖_F ≤ ρ, ‖W'x‖ ≥ ‖Wx‖ − ρ‖x‖, so the value with ρ > 0 bounds the
    Lipschitz constant over the whole ball; +inf when the ball reaches a W' with W'x = 0.
    """
    w, x = _np(W, "W"), _np(X, "X")
    if w.ndim != 2 or x.ndim != 2 or w.shape[1] != x.shape[1]:
        raise ValueError(f"W.shape = {w.shape}, X.shape = {x.shape}: expected (d, p) and (n, p)")
    if radius < 0:
        raise ValueError(f"radius = {radius!r}: must be >= 0")
    ratio = np.linalg.norm(x @ w.T, axis=1) / np.linalg.norm(x, axis=1)  # ‖Wx‖/‖x‖
    slack = float(np.min(ratio)) - radius
    return 1.0 / slack if slack > 0 else math.inf


def lipschitz_mlp(weights: Sequence[Any], X: Any, biases: Sequence[Any] | None = None) -> float:
    """A data-restricted upper bound on C_Φ for a ReLU MLP with normalised output, local at θ̂.

    f(x) = W_L σ(… σ(W_1 x + b_1) …) + b_L, σ = ReLU; weights ``[(h_1, p), …, (d, h_{L−1})]``,
    biases ``[(h_1,), …, (d,)]`` or None (no trained biases); X: ``(n, p)``.

    Derivation. Let h_0 = x, h_l the activations, P_l = Π_{j>l} ‖W_j‖₂ (spectral norms; P_L = 1).
    The Jacobian of f w.r.t. layer l's pre-activation is W_L D_{L−1} W_{L−1} ⋯ D_l with 0/1
    diagonal D (ReLU), so its norm is ≤ P_l. A perturbation (ΔW_l, Δb_l) moves that
    pre-activation by ΔW_l h_{l−1} + Δb_l, of norm ≤ ‖(ΔW_l, Δb_l)‖·√(‖h_{l−1}‖² + β), β = 1 with
    biases, else 0. Summing over layers and Cauchy–Schwarz:
    ‖Df[Δ]‖ ≤ ‖Δ‖·√(Σ_l P_l²(‖h_{l−1}‖² + β)).
    Normalising divides by ‖f(x)‖ (the derivative of v ↦ v/‖v‖ has norm 1/‖v‖). So
    C_Φ ≤ max_x √(Σ_l P_l² (‖h_{l−1}(x)‖² + β)) / ‖f(x)‖, with h and f evaluated on the data. One
    layer without bias gives `lipschitz_linear` exactly.
    """
    ws = [w for _, w in _arrays(list(weights), "weights")]
    bs = None if biases is None else [b for _, b in _arrays(list(biases), "biases")]
    if bs is not None and len(bs) != len(ws):
        raise ValueError(f"len(biases) = {len(bs)}: must equal len(weights) = {len(ws)}")
    h = _np(X, "X")
    if h.ndim != 2:
        raise ValueError(f"X.shape = {h.shape}: expected (n, p)")
    spectral = [float(np.linalg.norm(w, 2)) for w in ws]
    beta = 0.0 if bs is None else 1.0
    sq = np.zeros(h.shape[0])
    for i, w in enumerate(ws):
        if w.ndim != 2 or w.shape[1] != h.shape[1]:
            raise ValueError(f"weights[{i}].shape = {w.shape}: expected (out, {h.shape[1]})")
        sq += math.prod(spectral[i + 1 :]) ** 2 * (np.sum(h * h, axis=1) + beta)
        h = h @ w.T + (0.0 if bs is None else bs[i])
        if i < len(ws) - 1:
            h = np.maximum(h, 0.0)
    out_norm = np.linalg.norm(h, axis=1)
    if np.any(out_norm == 0):
        return math.inf
    return float(np.max(np.sqrt(sq) / out_norm))
