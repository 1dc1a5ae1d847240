"""WEINCE against a per-row numpy.polyfit oracle, gradient parity, closed forms, invariances."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline.losses import infonce, weince
from pipeline.losses.infonce import tuple_logits
from pipeline.losses.weince import (
    WeinceOptions,
    endpoint_gap,
    ols_rows,
    tail_fit,
    tail_size,
    weince_lambda,
    weince_logits,
)
from tests.oracles import loss_oracles as oracle

FITTED = WeinceOptions(beta="fitted")


def _rand(*shape, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(grad)


def _batch(b=12, k=60, d=6, seed=0, grad=False):
    a = _rand(b, d, seed=seed, grad=grad)
    p = _rand(b, d, seed=seed + 1, grad=grad)
    n = _rand(b, k, d, seed=seed + 2, grad=grad)
    return a, p, n


def test_tail_size_rule():
    assert tail_size(5) == 5
    assert tail_size(40) == 32
    assert tail_size(1000) == 100
    assert tail_size(1000, 0.05) == 50
    assert tail_size(100000, 0.10) == 10000


def test_ols_rows_matches_polyfit():
    x = _rand(4, 9, seed=3)
    y = _rand(9, seed=4)
    slope, intercept, sse = ols_rows(x, y)
    for i in range(4):
        b, a = np.polyfit(x[i].numpy(), y.numpy(), 1)
        assert slope[i].item() == pytest.approx(b, rel=1e-10)
        assert intercept[i].item() == pytest.approx(a, rel=1e-10, abs=1e-12)
        assert sse[i].item() == pytest.approx(
            np.sum((y.numpy() - a - b * x[i].numpy()) ** 2), rel=1e-9
        )


@pytest.mark.parametrize("k", [3, 40, 400])
def test_tail_fit_matches_oracle(k):
    a, _, n = _batch(b=5, k=k)
    sims = torch.einsum("bd,bkd->bk", F.normalize(a, dim=-1), F.normalize(n, dim=-1))
    fit = tail_fit(sims)
    for i in range(5):
        ref = oracle.weince_row_fit(sims[i].tolist())
        assert fit.n_eff == ref["n_eff"]
        for name in ("weibull_slope", "gumbel_slope", "weibull_aic", "gumbel_aic"):
            assert getattr(fit, name)[i].item() == pytest.approx(ref[name], rel=1e-8, abs=1e-8), (
                name
            )


@pytest.mark.parametrize("beta", ["fixed", "fitted"])
@pytest.mark.parametrize(
    "options", [{}, {"kappa_aic": 0.1, "margin_aic": -5.0, "rho_quantile": 0.5}]
)
def test_weince_matches_oracle(beta, options):
    a, p, n = _batch()
    # a hard positive and a few near-duplicate negatives make λ_i spread over (0, 1)
    n = n.clone()
    n[:4, :3] = a[:4, None, :] + 0.05 * n[:4, :3]
    got = weince(a, p, n, 0.2, WeinceOptions(beta=beta, **options)).item()
    ref, lams = oracle.weince(a.numpy(), p.numpy(), n.numpy(), 0.2, beta=beta, **options)
    assert got == pytest.approx(ref, rel=1e-9)
    assert max(lams) > 0.05  # the Weibit term is active somewhere, so the check is not vacuous


def test_weince_lambda_matches_oracle():
    a, p, n = _batch(seed=4)
    sims = torch.einsum("bd,bkd->bk", F.normalize(a, dim=-1), F.normalize(n, dim=-1))
    lam = weince_lambda(endpoint_gap(sims), tail_fit(sims).delta_aic)
    _, ref = oracle.weince(a.numpy(), p.numpy(), n.numpy(), 0.2)
    np.testing.assert_allclose(lam.numpy(), ref, rtol=1e-9, atol=1e-15)


def test_weince_gradcheck_with_saturated_gates():
    # κ large: λ_i is exactly 0 or 1 and locally constant, so finite differences see no gate
    a, p, n = _batch(b=4, k=6, d=3, grad=True)
    for margin in (-1e3, 1e3):  # AIC gate fully open / shut

        def fn(*x, margin=margin):
            return weince(*x, 0.3, WeinceOptions(kappa_rho=1e6, kappa_aic=1e6, margin_aic=margin))

        assert torch.autograd.gradcheck(fn, (a, p, n))


@pytest.mark.parametrize("beta", ["fixed", "fitted"])
def test_weince_gradient_ignores_the_gates(beta):
    """λ_i and β_i are detached: the gradient equals that of the loss with them frozen,
    and the frozen-gate loss passes gradcheck."""
    a, p, n = _batch(b=6, k=20, d=4, grad=True)
    sims = tuple_logits(a, p, n, 1.0).detach()
    fit = tail_fit(sims[:, 1:])
    lam = weince_lambda(endpoint_gap(sims[:, 1:]), fit.delta_aic, kappa_aic=0.05, margin_aic=-20)
    b = fit.weibull_slope.clamp_min(0) if beta == "fitted" else torch.ones_like(lam)

    def frozen(a, p, n):
        g = weince_logits(tuple_logits(a, p, n, 1.0), lam, b, 0.3)
        return (torch.logsumexp(g, 1) - g[:, 0]).mean()

    assert torch.autograd.gradcheck(frozen, (a, p, n))
    g_ref = torch.autograd.grad(frozen(a, p, n), (a, p, n))
    g = torch.autograd.grad(
        weince(a, p, n, 0.3, WeinceOptions(beta=beta, kappa_aic=0.05, margin_aic=-20)), (a, p, n)
    )
    for x, y in zip(g, g_ref, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-14)


def test_weince_closed_forms():
    v = _rand(1, 5)
    k = 20
    a, n = v.expand(4, 5), v.expand(4, k, 5)
    assert weince(a, a, n, 0.1).item() == pytest.approx(math.log(k + 1), rel=1e-9)
    # λ = 0 everywhere (AIC gate shut) is InfoNCE
    a, p, n = _batch(seed=7)
    assert weince(a, p, n, 0.2,
                  WeinceOptions(kappa_aic=1e6, margin_aic=1e9)).item() == pytest.approx(
        infonce(a, p, n, 0.2).item(), rel=1e-12
    )


def test_weince_invariances():
    a, p, n = _batch(seed=9)
    base = weince(a, p, n, 0.2, FITTED).item()
    perm = torch.randperm(n.shape[1], generator=torch.Generator().manual_seed(0))
    assert weince(a, p, n[:, perm], 0.2, FITTED).item() == pytest.approx(base, rel=1e-9)
    r = torch.from_numpy(oracle.random_orthogonal(6, 2))
    assert weince(a @ r, p @ r, n @ r, 0.2, FITTED).item() == pytest.approx(base, rel=1e-9)


def test_weince_errors():
    a, p, n = _batch(k=2)
    with pytest.raises(ValueError, match="need k >= 3"):
        weince(a, p, n, 0.2)
    with pytest.raises(ValueError, match="beta = 'x': allowed fixed | fitted"):
        weince(*_batch(), 0.2, WeinceOptions(beta="x"))
