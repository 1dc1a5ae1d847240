import numpy as np
import pytest
import torch

import pipeline.stats.geometry as geometry
from pipeline.stats import alignment, effective_rank, negative_cosines, thin_shell_cv, uniformity
from tests.oracles.stats_oracles import (
    alignment_loop,
    effective_rank_loop,
    negative_cosines_loop,
    thin_shell_cv_loop,
    uniformity_loop,
)


def test_thin_shell_cv_matches_loop(rng):
    z = rng.normal(size=(40, 6)) * rng.uniform(0.5, 2.0, size=(40, 1))
    assert thin_shell_cv(z) == pytest.approx(thin_shell_cv_loop(z), rel=1e-12)
    assert thin_shell_cv(z / np.linalg.norm(z, axis=1, keepdims=True)) < 1e-12


def test_effective_rank_matches_loop_and_limits(rng):
    z = rng.normal(size=(30, 5)) @ np.diag([5.0, 3.0, 1.0, 0.5, 0.1])
    assert effective_rank(z) == pytest.approx(effective_rank_loop(z), rel=1e-9)
    assert effective_rank(np.eye(6)) == pytest.approx(6.0, rel=1e-12)
    rank_one = np.outer(rng.normal(size=20), rng.normal(size=4))
    assert effective_rank(rank_one) == pytest.approx(1.0, rel=1e-9)
    assert np.isnan(effective_rank(np.zeros((4, 3))))


@pytest.mark.parametrize("t", [0.5, 2.0])
def test_uniformity_matches_loop(t, rng):
    u = rng.normal(size=(25, 4))
    assert uniformity(u, t) == pytest.approx(uniformity_loop(u, t), rel=1e-10)


def test_uniformity_chunked_equals_single_chunk(rng, monkeypatch):
    u = rng.normal(size=(103, 5))
    whole = uniformity(u)
    monkeypatch.setattr(geometry, "CHUNK_BYTES", 8 * 103 * 7)  # 7 rows per chunk
    assert uniformity(u) == pytest.approx(whole, rel=1e-12)


@pytest.mark.parametrize("n", [2_000, pytest.param(20_000, marks=pytest.mark.slow)])
def test_uniformity_never_builds_n_by_n(n, rng, monkeypatch):
    u = rng.normal(size=(n, 8))
    largest = []
    real_mm = torch.mm

    def spy(a, b):
        out = real_mm(a, b)
        largest.append(out.numel())
        return out

    monkeypatch.setattr(torch, "mm", spy)
    value = uniformity(u)
    assert -8.0 <= value <= 0.0
    assert len(largest) > 1
    assert max(largest) * 8 <= geometry.CHUNK_BYTES  # N×N float64 at N = 20000: 3.2 GB


def test_alignment_matches_loop(rng):
    u = rng.normal(size=(20, 3))
    v = u + 0.3 * rng.normal(size=(20, 3))
    assert alignment(u, v) == pytest.approx(alignment_loop(u, v), rel=1e-12)
    assert alignment(u, 2.0 * u) == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(ValueError, match=r"v.shape = \(3, 3\): must equal u.shape = \(20, 3\)"):
        alignment(u, v[:3])


def test_negative_cosines_match_loop(rng, monkeypatch):
    u = rng.normal(size=(15, 4))
    v = u + 0.5 * rng.normal(size=(15, 4))
    for other in (None, v):
        ref = negative_cosines_loop(u, other)
        np.testing.assert_allclose(negative_cosines(u, other), ref, rtol=1e-10)
    monkeypatch.setattr(geometry, "CHUNK_BYTES", 8 * 15 * 4)
    np.testing.assert_allclose(negative_cosines(u, v), negative_cosines_loop(u, v), rtol=1e-10)


def test_negative_cosines_std_of_collapsed_embeddings(rng, monkeypatch):
    # every cosine is 1 − 7e-8 ± 4e-8: a one-pass E[c²] − E[c]² was 8% off here (eps / var).
    # Each cosine carries ~d·eps = 2e-15 of rounding (BLAS dot vs math.fsum): 1e-7 of the std.
    m = rng.normal(size=8)
    u = m / np.linalg.norm(m) + 1e-4 * rng.normal(size=(30, 8))
    v = m / np.linalg.norm(m) + 1e-4 * rng.normal(size=(30, 8))
    for other in (None, v):
        ref = negative_cosines_loop(u, other)
        np.testing.assert_allclose(negative_cosines(u, other), ref, rtol=1e-7)
        monkeypatch.setattr(geometry, "CHUNK_BYTES", 8 * 30 * 4)  # 4 rows per chunk: merged
        np.testing.assert_allclose(negative_cosines(u, other), ref, rtol=1e-7)
        monkeypatch.undo()


def test_geometry_argument_errors(rng):
    with pytest.raises(ValueError, match=r"t = 0: temperature"):
        uniformity(rng.normal(size=(5, 2)), t=0)
    with pytest.raises(ValueError, match=r"u.shape\[0\] = 1: uniformity needs at least 2 rows"):
        uniformity(np.ones((1, 2)))
    with pytest.raises(ValueError, match=r"z.shape = \(3,\): expected a non-empty 2-D"):
        thin_shell_cv(np.ones(3))
