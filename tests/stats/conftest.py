"""Test data of named distributions for the statistics tests."""

import numpy as np
import pytest


def _draw(dist: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Test data of the named distribution (float64)."""
    if dist == "gauss":
        return rng.normal(1.5, 2.0, size=shape)
    if dist == "laplace":
        return rng.laplace(size=shape)
    if dist == "t2":
        return rng.standard_t(2, size=shape)
    if dist == "ties":
        return np.round(rng.normal(size=shape), 1)
    raise ValueError(f"dist = {dist!r}: unknown")


@pytest.fixture
def draw():
    """draw(dist, shape, rng): 'gauss', 'laplace', 't2' (Student-t, 2 dof) or 'ties' (rounded)."""
    return _draw
