"""InfoNCE and NT-Xent against loop oracles, closed forms, invariances and lightly."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline.losses import in_batch_negatives, infonce, nt_xent
from pipeline.losses.infonce import _nt_xent_reference
from tests.fixtures import record_lightly_ntxent
from tests.oracles import loss_oracles as oracle


def _rand(*shape, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(grad)


def _tuple(b=5, k=7, d=4, seed=0, grad=False):
    return (
        _rand(b, d, seed=seed, grad=grad),
        _rand(b, d, seed=seed + 1, grad=grad),
        _rand(b, k, d, seed=seed + 2, grad=grad),
    )


@pytest.mark.parametrize("tau", [0.07, 0.5, 2.0])
def test_infonce_matches_oracle(tau):
    a, p, n = _tuple()
    got = infonce(a, p, n, tau).item()
    assert got == pytest.approx(oracle.infonce(a.numpy(), p.numpy(), n.numpy(), tau), rel=1e-12)


def test_infonce_gradcheck():
    a, p, n = _tuple(b=3, k=4, d=3, grad=True)
    assert torch.autograd.gradcheck(lambda *x: infonce(*x, 0.3), (a, p, n))


def test_infonce_all_equal_is_log_k_plus_1():
    v = _rand(1, 6)
    k = 9
    a = v.expand(4, 6)
    n = v.expand(4, k, 6)
    assert infonce(a, a, n, 0.1).item() == pytest.approx(math.log(k + 1), rel=1e-12)


def test_infonce_invariances():
    a, p, n = _tuple(b=6, k=8, d=5)
    base = infonce(a, p, n, 0.2)
    perm = torch.stack(
        [torch.randperm(8, generator=torch.Generator().manual_seed(i)) for i in range(6)]
    )
    n_perm = n[torch.arange(6)[:, None], perm]
    assert infonce(a, p, n_perm, 0.2).item() == pytest.approx(base.item(), rel=1e-12)
    r = torch.from_numpy(oracle.random_orthogonal(5, 3))
    assert infonce(a @ r, p @ r, n @ r, 0.2).item() == pytest.approx(base.item(), rel=1e-12)


def test_in_batch_negatives_excludes_self():
    z = torch.arange(6, dtype=torch.float64)[:, None].expand(6, 2)
    negs = in_batch_negatives(z, 5, torch.Generator().manual_seed(0))
    for i in range(6):
        assert sorted(negs[i, :, 0].tolist()) == [float(j) for j in range(6) if j != i]


# --- NT-Xent --------------------------------------------------------------------------------


@pytest.mark.parametrize("tau", [0.1, 0.5, 1.0])
def test_nt_xent_matches_oracle(tau):
    z1, z2 = _rand(5, 4, seed=1), _rand(5, 4, seed=2)
    got = nt_xent(z1, z2, tau).item()
    assert got == pytest.approx(oracle.nt_xent(z1.numpy(), z2.numpy(), tau), rel=1e-12)


def test_nt_xent_gradcheck_fused_and_learnable_tau():
    z1, z2 = _rand(4, 3, seed=1, grad=True), _rand(4, 3, seed=2, grad=True)
    assert torch.autograd.gradcheck(lambda a, b: nt_xent(a, b, 0.3), (z1, z2))
    tau = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b, t: nt_xent(a, b, t), (z1, z2, tau))


@pytest.mark.parametrize("tau", [0.01, 0.03, 0.1, 1.0])  # 0.01: below the fixed-shift limit
def test_nt_xent_fused_matches_reference_float32(tau):
    z1 = _rand(300, 16, seed=3).float()
    z2 = (z1 + 0.3 * _rand(300, 16, seed=4).float()).requires_grad_()  # positives are close
    z1.requires_grad_()
    fused = nt_xent(z1, z2, tau)
    g_fused = torch.autograd.grad(fused, (z1, z2))
    ref = _nt_xent_reference(F.normalize(z1, dim=-1), F.normalize(z2, dim=-1), torch.tensor(tau))
    g_ref = torch.autograd.grad(ref, (z1, z2))
    torch.testing.assert_close(fused, ref, rtol=1e-5, atol=1e-5)
    want = oracle.nt_xent(z1.detach().double().numpy(), z2.detach().double().numpy(), tau)
    assert fused.item() == pytest.approx(want, rel=1e-4, abs=2e-6 / tau)  # float32 on logits ~1/τ
    for gf, gr in zip(g_fused, g_ref, strict=True):
        torch.testing.assert_close(gf, gr, rtol=1e-4, atol=1e-7)


def test_nt_xent_all_equal_is_log_2b_minus_1():
    v = _rand(1, 5).expand(6, 5)
    assert nt_xent(v, v, 0.2).item() == pytest.approx(math.log(2 * 6 - 1), rel=1e-12)


def test_nt_xent_invariances():
    z1, z2 = _rand(7, 5, seed=5), _rand(7, 5, seed=6)
    base = nt_xent(z1, z2, 0.3).item()
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(0))
    assert nt_xent(z1[perm], z2[perm], 0.3).item() == pytest.approx(base, rel=1e-12)
    assert nt_xent(z2, z1, 0.3).item() == pytest.approx(base, rel=1e-12)
    r = torch.from_numpy(oracle.random_orthogonal(5, 1))
    assert nt_xent(z1 @ r, z2 @ r, 0.3).item() == pytest.approx(base, rel=1e-12)


def test_nt_xent_rejects_bad_shapes():
    with pytest.raises(ValueError, match="must be equal"):
        nt_xent(torch.zeros(3, 2), torch.zeros(4, 2), 0.1)


LIGHTLY = json.loads((Path(__file__).parents[1] / "fixtures" / "lightly_ntxent.json").read_text())


def _grads_close(ours, z, want):
    for g, name in zip(torch.autograd.grad(ours, z), ("grad_z1", "grad_z2"), strict=True):
        np.testing.assert_allclose(g.numpy(), np.array(want[name]), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", LIGHTLY["cases"], ids=lambda c: f"tau={c['tau']}")
def test_nt_xent_equals_lightlys_recorded_values(case):
    """Against lightly's NTXentLoss, recorded by tests/fixtures/record_lightly_ntxent.py (float64:
    the two only differ in reduction order, ~1e-15 relative; 1e-12 / 1e-9 leave room for BLAS)."""
    z = record_lightly_ntxent.inputs()
    for name, total in LIGHTLY["inputs"]["sums"].items():  # the generator still draws them
        assert float(z[name].sum()) == pytest.approx(total, rel=1e-12), name
    z1, z2 = (z[n].requires_grad_() for n in ("z1", "z2"))
    ours = nt_xent(z1, z2, case["tau"])
    assert ours.item() == pytest.approx(case["loss"], rel=1e-12)
    _grads_close(ours, (z1, z2), case)


@pytest.mark.parametrize("tau", [0.1, 0.5])
def test_nt_xent_equals_live_lightly(tau):
    """The same comparison with lightly itself, on other inputs, where it is installed."""
    lightly_loss = pytest.importorskip(
        "lightly.loss", reason="lightly is not installed (the recorded values above always run)")
    z1 = _rand(64, 16, seed=7).requires_grad_()
    z2 = _rand(64, 16, seed=8).requires_grad_()
    ours = nt_xent(z1, z2, tau)
    theirs = lightly_loss.NTXentLoss(temperature=tau)(z1, z2)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    for g1, g2 in zip(
        torch.autograd.grad(ours, (z1, z2)), torch.autograd.grad(theirs, (z1, z2)), strict=True
    ):
        np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-9, atol=1e-12)


def test_tuple_cosines_match_plain_autograd():
    """The fused negatives block equals einsum(normalize(a), normalize(n)), value and gradient,
    including a zero-norm negative (F.normalize's 1e-12 clamp)."""
    from pipeline.losses.infonce import _CosineToRows

    a, n = _rand(4, 5, seed=1, grad=True), _rand(4, 6, 5, seed=2)
    n[1, 2] = 0.0
    n.requires_grad_()
    w = _rand(4, 6, seed=3)
    fused = _CosineToRows.apply(F.normalize(a, dim=-1), n)
    plain = torch.einsum("bd,bkd->bk", F.normalize(a, dim=-1), F.normalize(n, dim=-1))
    torch.testing.assert_close(fused, plain, rtol=1e-14, atol=1e-15)
    for gf, gp in zip(
        torch.autograd.grad((fused * w).sum(), (a, n)),
        torch.autograd.grad((plain * w).sum(), (a, n)),
        strict=True,
    ):
        torch.testing.assert_close(gf, gp, rtol=1e-12, atol=1e-12)
