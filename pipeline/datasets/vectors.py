"""Vector datasets beside Laplace: a Gaussian mixture and sparse binary inputs.

The Gaussian mixture follows the second synthetic setting of Betser et al. (arXiv 2602.24012):
K = 25 equally weighted isotropic components in R^D. The spread parameters are ours, as options:
component means μ_k ~ N(0, mean_std²·I_D) (drawn from the seed), within-component std
``component_std``.
"""

from __future__ import annotations

import numpy as np

from pipeline.datasets.synthetic import Dataset


def gaussian_mixture_dataset(input_dim: int, n_train: int, n_heldout: int, seed: int,
                             components: int = 25, mean_std: float = 1.0,
                             component_std: float = 0.5) -> Dataset:
    """x = μ_y + component_std·η, y ~ Uniform{0..K−1}: x ``(N, D)`` float32, labels y ``(N,)``
    int64."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, mean_std, size=(components, input_dim))
    n = n_train + n_heldout
    y = rng.integers(0, components, size=n)
    x = (means[y] + component_std * rng.standard_normal((n, input_dim))).astype(np.float32)
    return Dataset("gaussian_mixture", x_train=x[:n_train], x_heldout=x[n_train:],
                   y_train=y[:n_train].astype(np.int64), y_heldout=y[n_train:].astype(np.int64),
                   n_classes=components)


def sparse_binary_dataset(input_dim: int, n_train: int, n_heldout: int, seed: int,
                          density: float = 0.05) -> Dataset:
    """i.i.d. Bernoulli(density) bits as float32 ``(N, D)`` in {0, 1}; no labels."""
    rng = np.random.default_rng(seed)
    x = (rng.random((n_train + n_heldout, input_dim)) < density).astype(np.float32)
    return Dataset("sparse_binary", x_train=x[:n_train], x_heldout=x[n_train:])
