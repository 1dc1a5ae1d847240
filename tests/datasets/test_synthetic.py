"""The augmentation channel of SPEC.md §2 against its closed-form statistics."""

from __future__ import annotations

import numpy as np
import torch

from pipeline.datasets import augment, channel, laplace_dataset
from pipeline.datasets.synthetic import jitter


def test_channel_correlation_matches_closed_form():
    # Two views through x' = A·x + √(1−A²)·ε share A²·v of covariance: corr = A²v / (A²v + 1 − A²).
    a, v = 0.6, 2.0  # Laplace(0, 1) has variance 2
    ds = laplace_dataset(input_dim=8, n_train=40000, n_heldout=8, seed=1)
    x = torch.from_numpy(ds.x_train).double()
    g = torch.Generator().manual_seed(0)
    v1, v2 = channel(x, a, g).numpy(), channel(x, a, g).numpy()
    corr = np.array([np.corrcoef(v1[:, j], v2[:, j])[0, 1] for j in range(8)])
    expected = a * a * v / (a * a * v + 1 - a * a)
    # standard error of a correlation ≈ (1 − ρ²)/√n ≈ 0.003 here; 5 s.e. per coordinate
    assert np.all(np.abs(corr - expected) < 0.015), (corr, expected)


def test_jitter_statistics():
    g = torch.Generator().manual_seed(0)
    x = torch.ones(20000, 50, dtype=torch.float64)
    y = jitter(x, noise_std=0.0, dropout=0.1, scale_std=0.0, generator=g)
    assert abs((y == 0).double().mean().item() - 0.1) < 0.005  # dropout rate
    y = jitter(x, noise_std=0.0, dropout=0.0, scale_std=0.1, generator=g)
    log_scale = torch.log(y[:, 0])
    assert torch.allclose(y, y[:, :1].expand_as(y))  # one scale per sample
    assert abs(log_scale.std().item() - 0.1) < 0.005
    y = jitter(x, noise_std=0.2, dropout=0.0, scale_std=0.0, generator=g)
    assert abs((y - 1).std().item() - 0.2) < 0.005


def test_dataset_determinism_and_hash():
    a = laplace_dataset(4, 100, 20, seed=3)
    b = laplace_dataset(4, 100, 20, seed=3)
    c = laplace_dataset(4, 100, 20, seed=4)
    assert np.array_equal(a.x_train, b.x_train) and a.content_hash() == b.content_hash()
    assert a.content_hash() != c.content_hash()
    assert a.x_train.dtype == np.float32 and a.x_heldout.shape == (20, 4)


def test_augment_is_deterministic_under_a_generator():
    x = torch.randn(10, 6, generator=torch.Generator().manual_seed(0))
    one = augment(x, 0.6, 0.2, 0.1, 0.1, torch.Generator().manual_seed(5))
    two = augment(x, 0.6, 0.2, 0.1, 0.1, torch.Generator().manual_seed(5))
    assert torch.equal(one, two)
