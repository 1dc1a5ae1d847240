"""Random orthonormal projections of embeddings, so the per-coordinate tests can be run on
directions that are not the encoder's own axes."""

from __future__ import annotations

import numpy as np


def random_projections(z: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Project (N, d) embeddings onto `count` random orthonormal directions: (N, count) float64.

    The directions are the Q factor of the QR decomposition of a (d, count) standard Gaussian
    matrix drawn from `rng` (Haar-distributed up to column signs); count must be in [1, d].
    """
    arr = np.asarray(z, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"z.shape = {arr.shape}: expected a 2-D (N, d) array")
    d = arr.shape[1]
    if not 1 <= count <= d:
        raise ValueError(f"count = {count}: must be in [1, d = {d}] for orthonormal directions")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng = {rng!r}: expected a numpy.random.Generator")
    q, _ = np.linalg.qr(rng.standard_normal((d, count)))
    projected: np.ndarray = arr @ q
    return projected
