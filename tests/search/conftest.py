"""Make `tests.oracles` importable (the repo root is not on sys.path under plain `pytest`)."""

import sys
from pathlib import Path

import numpy as np
import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20260607)
