"""The Gaussian-channel density ratio against SciPy's bivariate normal and Monte Carlo E[r²]."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from pipeline.config.entries import validate_options
from pipeline.datasets import (
    DATASETS,
    gaussian_channel_log_ratio,
    gaussian_channel_log_ratio_matrix,
    gaussian_channel_second_moment,
    load_dataset,
    make_augmenter,
)


def _scipy_log_ratio(x: np.ndarray, x2: np.ndarray, a: float) -> np.ndarray:
    """log p(x, x2) − log p(x) − log p(x2) for the joint N(0, [[I, aI], [aI, I]])."""
    p = x.shape[1]
    cov = np.block([[np.eye(p), a * np.eye(p)], [a * np.eye(p), np.eye(p)]])
    joint = multivariate_normal(np.zeros(2 * p), cov).logpdf(np.hstack([x, x2]))
    marg = multivariate_normal(np.zeros(p), np.eye(p))
    return joint - marg.logpdf(x) - marg.logpdf(x2)


def test_log_ratio_matches_scipy_and_matrix_form():
    rng = np.random.default_rng(0)
    x, x2 = rng.standard_normal((7, 3)), rng.standard_normal((7, 3))
    got = gaussian_channel_log_ratio(torch.from_numpy(x), torch.from_numpy(x2), 0.6).numpy()
    np.testing.assert_allclose(got, _scipy_log_ratio(x, x2, 0.6), rtol=1e-10, atol=1e-10)
    y = rng.standard_normal((5, 3))
    mat = gaussian_channel_log_ratio_matrix(torch.from_numpy(x), torch.from_numpy(y), 0.6)
    pairs = gaussian_channel_log_ratio(torch.from_numpy(x)[:, None], torch.from_numpy(y)[None], 0.6)
    assert mat.shape == (7, 5)
    torch.testing.assert_close(mat, pairs, rtol=1e-12, atol=1e-12)


def _mc_mean(values: torch.Tensor) -> tuple[float, float]:
    return values.mean().item(), values.std().item() / values.numel() ** 0.5


def test_second_moment_closed_form_by_monte_carlo_independent_pairs():
    # E_{Z,Z' iid π}[r²]; r⁴ has finite mean only for A_c < 1/3, so the estimate's s.e. is valid
    a, p, n = 0.25, 2, 400_000
    g = torch.Generator().manual_seed(0)
    z, z2 = torch.randn(n, p, generator=g, dtype=torch.float64), torch.randn(
        n, p, generator=g, dtype=torch.float64)
    mean, se = _mc_mean(torch.exp(2 * gaussian_channel_log_ratio(z, z2, a)))
    expected = gaussian_channel_second_moment(a, p)
    assert expected == pytest.approx((1 - a * a) ** -p)
    assert abs(mean - expected) < 5 * se, (mean, expected, se)


def test_second_moment_equals_mean_ratio_under_the_channel():
    # E_{π⊗π}[r²] = E_{Z'~M(Z,·)}[r]: draw positives through the registered augmentation
    a, p, n = 0.4, 2, 400_000
    z = torch.randn(n, p, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    view = make_augmenter("gaussian_channel", {"a": a})(z, torch.Generator().manual_seed(2))
    mean, se = _mc_mean(torch.exp(gaussian_channel_log_ratio(z, view, a)))
    assert abs(mean - gaussian_channel_second_moment(a, p)) < 5 * se


def test_channel_view_statistics_and_no_jitter():
    ds = load_dataset("gaussian_channel", 50_000, 10, seed=0, options={"input_dim": 4})
    x = torch.from_numpy(ds.x_train).double()
    view = make_augmenter("gaussian_channel", {"a": 0.6})
    v1, v2 = view(x, torch.Generator().manual_seed(0)), view(x, torch.Generator().manual_seed(1))
    for j in range(4):
        assert np.corrcoef(x[:, j], v1[:, j])[0, 1] == pytest.approx(0.6, abs=0.015)
        assert np.corrcoef(v1[:, j], v2[:, j])[0, 1] == pytest.approx(0.36, abs=0.02)
        assert v1[:, j].var().item() == pytest.approx(1.0, abs=0.03)


def test_bad_channel_correlation_is_named():
    with pytest.raises(ValueError, match=r"a_c = 1.0: .*\[0, 1\)"):
        gaussian_channel_second_moment(1.0, 3)
    spec = DATASETS["gaussian_channel"]
    with pytest.raises(ValueError, match=r"data.augment.a = 1.0: input should be less than 1"):
        validate_options(spec.augment_options, {"a": 1.0}, "data.augment", "gaussian_channel")
