"""Gaussian data through a Gaussian channel: the one setting whose density ratio is closed-form.

x ~ N(0, I_p); the positive view is x' = A_c·x + √(1−A_c²)·ε, ε ~ N(0, I_p), with no jitter, so
(x, x') is jointly Gaussian with per-coordinate correlation A_c and both marginals N(0, I_p).
The density ratio of SPEC.md §3/§4 is
r(x, x') = dM(x,·)/dπ (x') = N(x'; A_c x, (1−A_c²) I) / N(x'; 0, I).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from pipeline.datasets.synthetic import Dataset


def gaussian_channel_dataset(input_dim: int, n_train: int, n_heldout: int, seed: int) -> Dataset:
    """N(0, I_p) inputs, float32 ``(N, p)``, no labels; the channel is applied as the
    augmentation."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_train + n_heldout, input_dim)).astype(np.float32)
    return Dataset("gaussian_channel", x_train=x[:n_train], x_heldout=x[n_train:])


def _check_a(a_c: float) -> None:
    if not 0 <= a_c < 1:
        raise ValueError(f"a_c = {a_c!r}: the channel correlation must be in [0, 1)")


def gaussian_channel_log_ratio(x: Tensor, x2: Tensor, a_c: float) -> Tensor:
    """log r(x, x2) for pairs: x, x2 ``(..., p)`` broadcast against each other → ``(...)``.

    log r = [2·A·⟨x, x2⟩ − A²(‖x‖² + ‖x2‖²)] / (2(1−A²)) − (p/2)·log(1−A²); symmetric in (x, x2).
    For all n×m pairs of two sets use :func:`gaussian_channel_log_ratio_matrix`.
    """
    _check_a(a_c)
    a2 = a_c * a_c
    p = x.shape[-1]
    quad = 2 * a_c * (x * x2).sum(-1) - a2 * ((x * x).sum(-1) + (x2 * x2).sum(-1))
    return quad / (2 * (1 - a2)) - 0.5 * p * math.log1p(-a2)


def gaussian_channel_log_ratio_matrix(x: Tensor, x2: Tensor, a_c: float) -> Tensor:
    """log r(x_i, x2_j) for every pair: x ``(n, p)``, x2 ``(m, p)`` → ``(n, m)`` (one matmul)."""
    _check_a(a_c)
    a2 = a_c * a_c
    p = x.shape[-1]
    quad = 2 * a_c * (x @ x2.T) - a2 * ((x * x).sum(-1)[:, None] + (x2 * x2).sum(-1)[None, :])
    return quad / (2 * (1 - a2)) - 0.5 * p * math.log1p(-a2)


def gaussian_channel_second_moment(a_c: float, p: int) -> float:
    """E[r(Z, Z')²] = (1 − A_c²)^(−p) for Z, Z' independent draws of π = N(0, I_p) (SPEC.md §4).

    Per coordinate E[r²] = 1/(1−ρ²) for a standard bivariate normal with correlation ρ = A_c;
    coordinates are independent, so the moments multiply. Equivalently E_{Z'~M(Z,·)}[r(Z, Z')].
    """
    _check_a(a_c)
    return float((1.0 - a_c * a_c) ** (-p))


def gaussian_channel_view(x: Tensor, a_c: float, generator: torch.Generator) -> Tensor:
    """x' = A_c·x + √(1−A_c²)·ε for ``(..., p)``; the same channel as ``synthetic.channel``."""
    eps = torch.randn(x.shape, generator=generator, dtype=x.dtype)
    return a_c * x + math.sqrt(1.0 - a_c * a_c) * eps
