import ast
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.stats import ConfidenceInterval, bootstrap_ci, random_projections, seed_ci


def test_seed_ci_by_hand():
    # mean 2.5, s = sqrt(5/3) = 1.2909944, sem = 0.6454972, t_{0.975, 3} = 3.1824463
    ci = seed_ci([1.0, 2.0, 3.0, 4.0])
    half = 3.182446305284263 * 0.6454972243679028
    assert ci.estimate == 2.5
    assert ci.low == pytest.approx(2.5 - half, rel=1e-12)
    assert ci.high == pytest.approx(2.5 + half, rel=1e-12)


def test_seed_ci_too_few_values():
    ci = seed_ci([0.7])
    assert ci.estimate == 0.7 and np.isnan(ci.low) and np.isnan(ci.high)
    assert np.isnan(seed_ci([]).estimate)
    with pytest.raises(ValueError, match=r"level = 1.5: confidence level must be in \(0, 1\)"):
        seed_ci([1.0, 2.0], level=1.5)


def test_bootstrap_contains_estimate_and_is_reproducible(rng):
    z = np.random.default_rng(3).normal(size=(200, 4))
    ci = bootstrap_ci(z, lambda a: float(a[:, 0].mean()), 300, np.random.default_rng(1))
    assert isinstance(ci, ConfidenceInterval)
    assert ci.low < ci.estimate < ci.high
    assert ci.high - ci.low == pytest.approx(2 * 1.96 / np.sqrt(200), rel=0.25)
    again = bootstrap_ci(z, lambda a: float(a[:, 0].mean()), 300, np.random.default_rng(1))
    assert again == ci  # bit for bit: same generator seed, same NumPy calls, no threads or BLAS


def test_bootstrap_argument_errors(rng):
    with pytest.raises(ValueError, match=r"n_boot = 0"):
        bootstrap_ci(np.ones((5, 2)), np.mean, 0, rng)
    with pytest.raises(ValueError, match=r"rng = 3: expected a numpy.random.Generator"):
        bootstrap_ci(np.ones((5, 2)), np.mean, 10, 3)


def test_random_projections_are_orthonormal(rng):
    z = rng.normal(size=(50, 6))
    p = random_projections(z, 3, np.random.default_rng(5))
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((6, 3)))
    np.testing.assert_allclose(p, z @ q, rtol=1e-12)
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)
    full = random_projections(z, 6, rng)  # a rotation keeps row norms
    np.testing.assert_allclose(np.linalg.norm(full, axis=1), np.linalg.norm(z, axis=1), rtol=1e-12)
    with pytest.raises(ValueError, match=r"count = 7: must be in \[1, d = 6\]"):
        random_projections(z, 7, rng)


def test_stats_imports_only_numpy_scipy_torch():
    allowed = {"numpy", "scipy", "torch", "pipeline", "__future__"}
    stdlib = set(sys.stdlib_module_names)
    root = Path(__file__).resolve().parents[2] / "pipeline" / "stats"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top in allowed | stdlib, f"{path.name} imports {name}"
