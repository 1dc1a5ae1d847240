"""dΘ, R, B_τ and the data-restricted Lipschitz constants C_Φ against loops and brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pipeline import bounds
from tests.oracles.search_oracles import b_tau_loop


@pytest.mark.parametrize("tau", [0.05, 0.3, 1.0, 2.0])
def test_b_tau_matches_loop(rng, tau):
    a, p, neg = rng.normal(size=(7, 4)), rng.normal(size=(7, 4)), 3 * rng.normal(size=(7, 5, 4))
    want = b_tau_loop(a, p, neg, tau)
    assert bounds.b_tau(a, p, neg, tau) == pytest.approx(want, rel=1e-12)
    assert bounds.b_tau(a, p, neg.reshape(-1, 4), tau) == pytest.approx(want, rel=1e-12)
    assert bounds.b_tau(torch.tensor(a), torch.tensor(p), torch.tensor(neg),
                        tau) == pytest.approx(want)


def test_b_tau_small_tau_no_overflow(rng):
    neg = np.full((3, 2, 1000), 10.0)  # ‖n‖ ≈ 316; ‖n‖^{2/0.005} = 316^400 overflows a float
    got = bounds.b_tau(np.ones((3, 1000)), np.ones((3, 1000)), neg, 0.005)
    assert got == pytest.approx(2 * math.sqrt(1000) + math.sqrt(1000) * 10, rel=1e-12)
    with pytest.raises(ValueError, match=r"tau = -1.0: temperature"):
        bounds.b_tau(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), -1.0)
    with pytest.raises(ValueError, match=r"expected anchors \(n, p\)"):
        bounds.b_tau(np.ones(3), np.ones((3, 2)), np.ones((3, 2)), 1.0)


def test_parameter_count_and_distance(rng):
    hat = {"w": rng.normal(size=(3, 4)), "b": rng.normal(size=3)}
    zero = {"b": rng.normal(size=3), "w": rng.normal(size=(3, 4))}
    want = math.sqrt(sum(float(((hat[k] - zero[k]) ** 2).sum()) for k in hat))
    assert bounds.parameter_distance(hat, zero) == pytest.approx(want, rel=1e-14)
    as_torch = [torch.tensor(hat["w"]), torch.tensor(hat["b"])]
    assert bounds.parameter_distance(as_torch, [zero["w"], zero["b"]]) == pytest.approx(want)
    assert bounds.parameter_count(hat) == 15 and bounds.parameter_count(as_torch) == 15
    assert bounds.parameter_count(np.zeros((2, 5))) == 10
    with pytest.raises(ValueError, match=r"theta_hat\[1\].shape = \(3,\): theta_0 has shape"):
        bounds.parameter_distance([hat["w"], hat["b"]], [zero["w"], np.zeros(4)])
    with pytest.raises(ValueError, match=r"theta_hat keys"):
        bounds.parameter_distance(hat, {"w": zero["w"]})


def _psi(w, x):
    z = x @ w.T
    return z / np.linalg.norm(z, axis=-1, keepdims=True)


def test_lipschitz_linear_holds_and_is_tight_on_data(rng):
    w, x = rng.normal(size=(3, 6)), rng.normal(size=(40, 6))
    c = bounds.lipschitz_linear(w, x)
    ratios = np.linalg.norm(x @ w.T, axis=1) / np.linalg.norm(x, axis=1)
    assert c == pytest.approx(1 / ratios.min(), rel=1e-14)
    h = 1e-6
    for _ in range(200):  # random directions, finite differences: the bound holds on the data
        delta = rng.normal(size=w.shape)
        delta /= np.linalg.norm(delta)
        fd = np.linalg.norm(_psi(w + h * delta, x) - _psi(w, x), axis=1) / h
        assert fd.max() <= c * (1 + 1e-4)
    # the worst data point in the worst direction v xᵀ/‖x‖ (v ⊥ ψ) attains it
    i = int(ratios.argmin())
    u = _psi(w, x[i])
    v = rng.normal(size=3)
    v -= (v @ u) * u
    delta = np.outer(v / np.linalg.norm(v), x[i] / np.linalg.norm(x[i]))
    fd = np.linalg.norm(_psi(w + h * delta, x[i]) - u) / h
    assert fd == pytest.approx(c, rel=1e-4)


def test_lipschitz_linear_over_a_ball(rng):
    w, x = rng.normal(size=(3, 5)), rng.normal(size=(30, 5))
    rho = 0.3
    c_ball = bounds.lipschitz_linear(w, x, radius=rho)
    assert c_ball > bounds.lipschitz_linear(w, x)
    for _ in range(100):
        d = rng.normal(size=w.shape)
        w2 = w + rho * rng.uniform() * d / np.linalg.norm(d)
        assert bounds.lipschitz_linear(w2, x) <= c_ball * (1 + 1e-12)
    assert bounds.lipschitz_linear(w, x, radius=10.0) == math.inf
    with pytest.raises(ValueError, match=r"radius = -1"):
        bounds.lipschitz_linear(w, x, radius=-1)
    with pytest.raises(ValueError, match=r"W.shape = \(3, 5\), X.shape = \(30, 4\)"):
        bounds.lipschitz_linear(w, x[:, :4])


def test_lipschitz_mlp_one_layer_is_linear(rng):
    w, x = rng.normal(size=(3, 6)), rng.normal(size=(25, 6))
    assert bounds.lipschitz_mlp([w], x) == pytest.approx(bounds.lipschitz_linear(w, x), rel=1e-13)


def _mlp_psi(params, x, n_layers):
    h = x
    for i in range(n_layers):
        h = h @ params[2 * i].T + params[2 * i + 1]
        if i < n_layers - 1:
            h = torch.relu(h)
    return h / torch.linalg.vector_norm(h)


def test_lipschitz_mlp_bounds_exact_jacobian_on_data(rng):
    """Exact Jacobian of θ ↦ ψ_θ(x) (autograd) at every data point: spectral norm ≤ the bound;
    and finite differences along random directions of all parameters."""
    shapes = [(8, 5), (8,), (6, 8), (6,), (3, 6), (3,)]
    params = [torch.tensor(rng.normal(size=s) / 2) for s in shapes]
    x = torch.tensor(rng.normal(size=(20, 5)))
    c = bounds.lipschitz_mlp(params[0::2], x, biases=params[1::2])
    worst = 0.0
    for xi in x:
        jac = torch.autograd.functional.jacobian(
            lambda *ps, xi=xi: _mlp_psi(ps, xi, 3), tuple(params)
        )
        full = torch.cat([j.reshape(3, -1) for j in jac], dim=1)
        worst = max(worst, float(torch.linalg.matrix_norm(full, ord=2)))
    assert worst <= c
    h = 1e-6
    for _ in range(50):
        d = [torch.tensor(rng.normal(size=s)) for s in shapes]
        norm = math.sqrt(sum(float((t * t).sum()) for t in d))
        moved = [p + h * t / norm for p, t in zip(params, d, strict=True)]
        for xi in x:
            fd = float(torch.linalg.vector_norm(_mlp_psi(moved, xi, 3) - _mlp_psi(params, xi, 3)))
            assert fd / h <= c * (1 + 1e-4)


def test_lipschitz_mlp_errors_and_caveats(rng):
    with pytest.raises(ValueError, match=r"len\(biases\) = 1: must equal len\(weights\) = 2"):
        bounds.lipschitz_mlp([np.ones((2, 3)), np.ones((2, 2))], np.ones((4, 3)), [np.ones(2)])
    with pytest.raises(ValueError, match=r"weights\[1\].shape = \(2, 3\): expected \(out, 2\)"):
        bounds.lipschitz_mlp([np.ones((2, 3)), np.ones((2, 3))], np.ones((4, 3)))
    # a dead output (all-zero) makes the normalised encoder non-Lipschitz on the data
    assert bounds.lipschitz_mlp([np.zeros((2, 3))], np.ones((4, 3))) == math.inf
    assert len(bounds.CAVEATS) >= 4 and all(isinstance(c, str) and c for c in bounds.CAVEATS)
