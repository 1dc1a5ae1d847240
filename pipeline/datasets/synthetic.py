"""Synthetic inputs and the Betser et al. augmentation channel (SPEC.md §2, arXiv 2602.24012).

Two views of an input x are drawn through the Gaussian channel x' = A·x + √(1−A²)·ε, ε ~ N(0, I),
then jittered per view: additive noise of std ``noise_std``, feature dropout with probability
``dropout`` (zeroed, not rescaled) and a per-sample scale exp(N(0, scale_std²)).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


@dataclass(frozen=True)
class Dataset:
    """A train / held-out split.

    x_*: ``(N, D)`` float32 for vector sets, ``(N, C, H, W)`` float32 in [0, 1] for image sets;
    labels ``(N,)`` int64 (class sets) or None; ``n_classes`` set for class-labelled sets.
    """

    name: str
    x_train: np.ndarray
    x_heldout: np.ndarray
    y_train: np.ndarray | None = None
    y_heldout: np.ndarray | None = None
    n_classes: int | None = None

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One input's shape without the batch axis: ``(D,)`` or ``(C, H, W)``."""
        return tuple(self.x_train.shape[1:])

    def content_hash(self) -> str:
        """SHA-256 (16 hex digits) of the arrays' bytes: recorded with every cell."""
        h = hashlib.sha256(self.name.encode())
        for arr in (self.x_train, self.x_heldout, self.y_train, self.y_heldout):
            if arr is not None:
                h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()[:16]


def laplace_dataset(input_dim: int, n_train: int, n_heldout: int, seed: int) -> Dataset:
    """Laplace(0, 1) inputs, i.i.d. coordinates (variance 2), as in Betser et al.'s setting."""
    rng = np.random.default_rng(seed)
    x = rng.laplace(0.0, 1.0, size=(n_train + n_heldout, input_dim)).astype(np.float32)
    return Dataset("laplace", x_train=x[:n_train], x_heldout=x[n_train:])


def channel(x: Tensor, a: float, generator: torch.Generator) -> Tensor:
    """The Gaussian channel x' = A·x + √(1−A²)·ε. x: ``(..., D)``."""
    eps = torch.randn(x.shape, generator=generator, dtype=x.dtype)
    return a * x + (1.0 - a * a) ** 0.5 * eps


def jitter(x: Tensor, noise_std: float, dropout: float, scale_std: float,
           generator: torch.Generator) -> Tensor:
    """Additive noise, feature dropout and a per-sample log-normal scale. x: ``(..., D)``."""
    noise = torch.randn(x.shape, generator=generator, dtype=x.dtype) * noise_std
    keep = torch.rand(x.shape, generator=generator) >= dropout
    scale = torch.exp(torch.randn(x.shape[:-1] + (1,), generator=generator) * scale_std)
    return (x + noise) * keep.to(x.dtype) * scale.to(x.dtype)


def augment(x: Tensor, a: float, noise_std: float, dropout: float, scale_std: float,
            generator: torch.Generator) -> Tensor:
    """One augmented view: channel, then jitter."""
    return jitter(channel(x, a, generator), noise_std, dropout, scale_std, generator)
