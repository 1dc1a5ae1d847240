"""DCL against loop oracles, closed forms and invariances."""

import math

import pytest
import torch

from pipeline.losses import dcl, dcl_in_batch, infonce
from tests.oracles import loss_oracles as oracle


def _rand(*shape, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(grad)


@pytest.mark.parametrize("tau", [0.1, 1.0])
def test_dcl_matches_oracle(tau):
    a, p, n = _rand(5, 4), _rand(5, 4, seed=1), _rand(5, 6, 4, seed=2)
    assert dcl(a, p, n, tau).item() == pytest.approx(
        oracle.dcl(a.numpy(), p.numpy(), n.numpy(), tau), rel=1e-12
    )


def test_dcl_in_batch_matches_oracle():
    z1, z2 = _rand(6, 4, seed=3), _rand(6, 4, seed=4)
    assert dcl_in_batch(z1, z2, 0.2).item() == pytest.approx(
        oracle.dcl_in_batch(z1.numpy(), z2.numpy(), 0.2), rel=1e-12
    )


def test_dcl_gradcheck():
    a, p, n = (
        _rand(3, 3, grad=True),
        _rand(3, 3, seed=1, grad=True),
        _rand(3, 4, 3, seed=2, grad=True),
    )
    assert torch.autograd.gradcheck(lambda *x: dcl(*x, 0.4), (a, p, n))
    z1, z2 = _rand(4, 3, seed=3, grad=True), _rand(4, 3, seed=4, grad=True)
    assert torch.autograd.gradcheck(lambda x, y: dcl_in_batch(x, y, 0.4), (z1, z2))


def test_dcl_closed_forms():
    v = _rand(1, 5)
    k = 7
    a, n = v.expand(3, 5), v.expand(3, k, 5)
    assert dcl(a, a, n, 0.1).item() == pytest.approx(math.log(k), rel=1e-12)
    assert dcl_in_batch(v.expand(4, 5), v.expand(4, 5), 0.1).item() == pytest.approx(math.log(6))
    # InfoNCE = log(1 + exp(DCL_i)) per anchor: check with a single anchor
    a1, p1, n1 = _rand(1, 4, seed=5), _rand(1, 4, seed=6), _rand(1, 5, 4, seed=7)
    assert infonce(a1, p1, n1, 0.3).item() == pytest.approx(
        math.log1p(math.exp(dcl(a1, p1, n1, 0.3).item()))
    )


def test_dcl_invariances():
    a, p, n = _rand(5, 4), _rand(5, 4, seed=1), _rand(5, 6, 4, seed=2)
    base = dcl(a, p, n, 0.2).item()
    assert dcl(a, p, n.flip(1), 0.2).item() == pytest.approx(base, rel=1e-12)
    r = torch.from_numpy(oracle.random_orthogonal(4, 0))
    assert dcl(a @ r, p @ r, n @ r, 0.2).item() == pytest.approx(base, rel=1e-12)
