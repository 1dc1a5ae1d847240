"""Gaussian null references against closed forms and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.stats.null import gaussian_null


def test_null_cv_of_an_isotropic_gaussian_is_one_over_sqrt_2d(rng):
    d = 64
    z = rng.normal(size=(4000, d))
    ref = gaussian_null(z, rng, draws=4)
    # ‖x‖² ~ χ²_d: CV(‖x‖) → 1/√(2d) for large d (here 0.0884; the exact value is 0.0881)
    assert ref.cv == pytest.approx(1 / math.sqrt(2 * d), rel=0.05)


def test_null_normality_references(rng):
    z = rng.laplace(size=(2000, 100)) @ rng.normal(size=(100, 100))  # any covariance
    ref = gaussian_null(z, rng, draws=3)
    assert ref.ad_mean == pytest.approx(0.39, abs=0.05)  # SPEC §2: mean A² ≈ 0.39
    assert ref.ad_pass_frac == pytest.approx(0.95, abs=0.03)
    assert ref.dp_pass_frac == pytest.approx(0.95, abs=0.03)
    assert ref.dp_p_mean == pytest.approx(0.5, abs=0.05)  # p-values are uniform under the null


def test_null_keeps_the_covariance_for_cv(rng):
    scales = np.r_[np.full(4, 10.0), np.full(60, 0.1)]  # norm dominated by 4 coordinates
    z = rng.normal(size=(3000, 64)) * scales
    sample_cv = np.std(np.linalg.norm(z, axis=1)) / np.mean(np.linalg.norm(z, axis=1))
    assert gaussian_null(z, rng).cv == pytest.approx(sample_cv, rel=0.08)


def test_bad_shapes():
    with pytest.raises(ValueError, match="need at least 8 rows"):
        gaussian_null(np.ones((3, 2)), np.random.default_rng(0))
