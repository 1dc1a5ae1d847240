"""Make `tests.oracles` importable (the repo root is not on sys.path under plain `pytest`)."""

import sys
from pathlib import Path

import numpy as np
import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


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
def rng() -> np.random.Generator:
    return np.random.default_rng(20260214)


@pytest.fixture
def draw():
    """draw(dist, shape, rng): 'gauss', 'laplace', 't2' (Student-t, 2 dof) or 'ties' (rounded)."""
    return _draw
