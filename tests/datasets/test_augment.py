"""Batched views: channel statistics, bit-flip rate, crops and flips, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.datasets import load_dataset, make_augmenter, resolve_augment_options
from pipeline.datasets.augment import bit_flip, image_view

NO_JITTER = {"noise_std": 0.0, "dropout": 0.0, "scale_std": 0.0}


@pytest.mark.parametrize("name,variance", [("laplace", 2.0), ("gaussian_channel", 1.0)])
def test_views_correlation_before_jitter(name, variance):
    # corr(x'_1, x'_2) = A²v / (A²v + 1 − A²); s.e. ≈ (1 − ρ²)/√n ≈ 0.004, tolerance ~4 s.e.
    a, n = 0.6, 40_000
    x = torch.from_numpy(load_dataset(name, n, 8, seed=1, options={"input_dim": 6}).x_train)
    opts = {"a": a, **NO_JITTER} if name == "laplace" else {"a": a}
    view = make_augmenter(name, opts)
    g = torch.Generator().manual_seed(0)
    v1, v2 = view(x.double(), g).numpy(), view(x.double(), g).numpy()
    expected = a * a * variance / (a * a * variance + 1 - a * a)
    corr = np.array([np.corrcoef(v1[:, j], v2[:, j])[0, 1] for j in range(6)])
    assert np.all(np.abs(corr - expected) < 0.015), (corr, expected)


def test_vector_view_defaults_are_spec_section_2():
    assert resolve_augment_options("laplace", None) == {"a": 0.6, "noise_std": 0.2,
                                                        "dropout": 0.1, "scale_std": 0.1}


def test_bit_flip_rate_and_values():
    g = torch.Generator().manual_seed(0)
    for base in (torch.zeros(2000, 1000), torch.ones(2000, 1000)):
        y = bit_flip(base, 0.001, g)
        rate = (y != base).double().mean().item()
        assert abs(rate - 0.001) < 5 * (0.001 * 0.999 / base.numel()) ** 0.5
        assert set(torch.unique(y).tolist()) <= {0.0, 1.0}


def test_sparse_binary_uses_bit_flips_only():
    ds = load_dataset("sparse_binary", 4000, 10, seed=0, options={"input_dim": 500, "density": 0.1})
    assert abs(ds.x_train.mean() - 0.1) < 0.003
    x = torch.from_numpy(ds.x_train)
    y = make_augmenter("sparse_binary")(x, torch.Generator().manual_seed(0))
    assert set(torch.unique(y).tolist()) <= {0.0, 1.0}
    assert abs((y != x).double().mean().item() - 0.001) < 0.0002


def _ramp(b: int = 6, size: int = 32) -> torch.Tensor:
    ramp = torch.linspace(0, 1, size, dtype=torch.float64)
    return ramp.expand(b, 1, size, size).clone()


IDENTITY = {"crop_scale": (1.0, 1.0), "crop_ratio": (1.0, 1.0), "hflip": False,
            "jitter_prob": 0.0, "grayscale_prob": 0.0, "blur_prob": 0.0}


def test_full_crop_without_jitter_is_identity_and_flip_mirrors():
    x = torch.rand(40, 3, 12, 12, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    out = image_view(x, torch.Generator().manual_seed(1), **IDENTITY)
    torch.testing.assert_close(out, x, atol=1e-12, rtol=0)
    out = image_view(x, torch.Generator().manual_seed(1), **{**IDENTITY, "hflip": True})
    same = [torch.allclose(o, i, atol=1e-12) for o, i in zip(out, x, strict=True)]
    mirrored = [torch.allclose(o, i.flip(-1), atol=1e-12) for o, i in zip(out, x, strict=True)]
    assert all(s != m for s, m in zip(same, mirrored, strict=True))  # each is exactly one of them
    assert any(same) and any(mirrored)


def test_crop_zooms_by_the_side_fraction():
    # area 1/4 at ratio 1: the crop spans half the width, so a linear ramp's slope halves
    x = _ramp()
    out = image_view(x, torch.Generator().manual_seed(0),
                     **{**IDENTITY, "crop_scale": (0.25, 0.25)})
    step_in = (x[..., 1] - x[..., 0]).mean()
    slopes = (out[..., 9:23].diff(dim=-1) / step_in)
    torch.testing.assert_close(slopes, torch.full_like(slopes, 0.5), atol=1e-9, rtol=0)


@pytest.mark.parametrize("name", ["digits", "mnist", "fashion_mnist", "cifar10"])
def test_image_views_are_valid_and_deterministic(name):
    x = torch.rand(8, 3 if name == "cifar10" else 1, 16, 16,
                   generator=torch.Generator().manual_seed(0))
    view = make_augmenter(name)
    one, two = view(x, torch.Generator().manual_seed(3)), view(x, torch.Generator().manual_seed(3))
    other = view(x, torch.Generator().manual_seed(4))
    assert one.shape == x.shape and one.dtype == x.dtype
    assert one.min() >= 0 and one.max() <= 1 and torch.isfinite(one).all()
    assert torch.equal(one, two) and not torch.equal(one, other)
    # no flips for digits
    assert resolve_augment_options(name, None)["hflip"] is (name == "cifar10")


def test_views_leave_the_global_rng_alone():
    images, vectors = torch.ones(2, 3, 8, 8) / 2, torch.ones(2, 8)
    state = torch.random.get_rng_state()
    make_augmenter("cifar10")(images, torch.Generator().manual_seed(0))
    make_augmenter("laplace")(vectors, torch.Generator().manual_seed(0))
    assert torch.equal(state, torch.random.get_rng_state())


def test_image_option_errors_name_the_key():
    with pytest.raises(ValueError, match=r"data.augment.crop_scale = \[0.9, 0.5\]: must be a pair"):
        make_augmenter("mnist", {"crop_scale": [0.9, 0.5]})
    with pytest.raises(ValueError, match=r"data.augment.blur = 1: unknown option; allowed: \["):
        make_augmenter("mnist", {"blur": 1})
    with pytest.raises(ValueError, match=r"x.shape = \(4, 16\): image views need"):
        image_view(torch.rand(4, 16), torch.Generator())
