"""SynCo: loss against a loop oracle; each synthetic type checked against its formula."""

import math

import pytest
import torch
import torch.nn.functional as F

from pipeline.losses import enqueue, infonce, synco_loss, synthetic_negatives
from pipeline.losses.synco import SYNTHETIC_COUNTS, queue_similarities
from tests.oracles import loss_oracles as oracle


def _rand(*shape, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(grad)


def _unit(*shape, seed=0):
    return F.normalize(_rand(*shape, seed=seed), dim=-1)


@pytest.mark.parametrize("tau", [0.07, 0.5])
def test_synco_loss_matches_oracle(tau):
    q, k, queue, syn = _rand(4, 5), _rand(4, 5, seed=1), _unit(9, 5, seed=2), _unit(4, 3, 5, seed=3)
    got = synco_loss(q, k, queue, syn, tau).item()
    assert got == pytest.approx(
        oracle.synco(q.numpy(), k.numpy(), queue.numpy(), syn.numpy(), tau), rel=1e-12
    )


def test_synco_loss_per_anchor_queue_is_infonce():
    a, p, n = _rand(4, 5), _rand(4, 5, seed=1), _rand(4, 6, 5, seed=2)
    assert synco_loss(a, p, n, None, 0.2).item() == pytest.approx(
        infonce(a, p, n, 0.2).item(), rel=1e-12
    )


def test_synco_gradcheck_and_detached_negatives():
    q, k = _rand(3, 4, grad=True), _rand(3, 4, seed=1, grad=True)
    queue, syn = _rand(5, 4, seed=2, grad=True), _rand(3, 2, 4, seed=3, grad=True)
    assert torch.autograd.gradcheck(lambda x, y: synco_loss(x, y, queue, syn, 0.3), (q, k))
    synco_loss(q, k, queue, syn, 0.3).backward()
    assert queue.grad is None and syn.grad is None


def test_synco_closed_form_and_invariances():
    v = _unit(1, 4)
    assert synco_loss(
        v.expand(3, 4), v.expand(3, 4), v.expand(6, 4), v.expand(3, 2, 4), 0.1
    ).item() == pytest.approx(math.log(1 + 6 + 2), rel=1e-12)
    q, k, queue, syn = _rand(4, 5), _rand(4, 5, seed=1), _unit(9, 5, seed=2), _unit(4, 3, 5, seed=3)
    base = synco_loss(q, k, queue, syn, 0.2).item()
    assert synco_loss(q, k, queue.flip(0), syn.flip(1), 0.2).item() == pytest.approx(
        base, rel=1e-12
    )
    r = torch.from_numpy(oracle.random_orthogonal(5, 0))
    assert synco_loss(q @ r, k @ r, queue @ r, syn @ r, 0.2).item() == pytest.approx(
        base, rel=1e-12
    )


def _only(kind, n=5):
    return {t: (n if t == kind else 0) for t in SYNTHETIC_COUNTS}


def _coefficients(s, q, n):
    """Least-squares s ≈ c0·q + c1·n; returns (c0, c1, residual)."""
    basis = torch.stack([q, n], dim=1)
    c = torch.linalg.lstsq(basis, s[:, None]).solution[:, 0]
    return c[0].item(), c[1].item(), (basis @ c - s).norm().item()


def test_synthetic_types_follow_their_formulas():
    b, kq, d, h = 3, 20, 8, 4
    q, queue = _unit(b, d, seed=1), _unit(kq, d, seed=2)
    hard = (q @ queue.T).topk(h, dim=1).indices
    gen = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    for kind in SYNTHETIC_COUNTS:
        syn = synthetic_negatives(q, queue, _only(kind), gen(), hardest=h)
        assert syn.shape == (b, 5, d)
        torch.testing.assert_close(syn.norm(dim=-1), torch.ones(b, 5, dtype=torch.float64))
        for i in range(b):
            cands = queue[hard[i]]
            for s in syn[i]:
                if kind == "perturbed":
                    want = F.normalize(cands + 0.01 * q[i], dim=-1)
                    assert (want - s).norm(dim=-1).min() < 1e-12
                elif kind == "adversarial":
                    want = F.normalize(cands + 0.01 * q[i].sign(), dim=-1)
                    assert (want - s).norm(dim=-1).min() < 1e-12
                elif kind == "noise":
                    assert (cands - s).norm(dim=-1).min() < 0.01 * 6 * math.sqrt(d)
                elif kind == "mixup":
                    ok = False
                    for x in cands:
                        for y in cands:
                            c0, c1, res = _coefficients(s, x, y)
                            ok |= res < 1e-9 and c0 >= -1e-9 and c1 >= -1e-9
                    assert ok
                else:
                    ok = False
                    for x in cands:
                        c0, c1, res = _coefficients(s, q[i], x)
                        w = c0 / (c0 + c1)  # weight on q: α, or 1 − β when extrapolating
                        if kind == "interpolated":
                            ok |= res < 1e-9 and -1e-9 <= w <= 0.5 + 1e-9
                        else:
                            ok |= res < 1e-9 and -0.5 - 1e-9 <= w <= 1e-9
                    assert ok, kind


def test_synthetic_negatives_defaults_determinism_and_per_anchor_queue():
    q, queue = _rand(2, 6, seed=1, grad=True), _rand(40, 6, seed=2)
    syn = synthetic_negatives(q, queue, generator=torch.Generator().manual_seed(3))
    assert syn.shape == (2, sum(SYNTHETIC_COUNTS.values()), 6) and not syn.requires_grad
    again = synthetic_negatives(q, queue, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(syn, again, rtol=0, atol=0)
    per_anchor = synthetic_negatives(
        q, queue.expand(2, 40, 6), generator=torch.Generator().manual_seed(3)
    )
    # A shared queue's cosines come from one matmul, a per-anchor queue's from bmm: they may
    # differ in the last bits. That can reorder the hardest-first list only for cosines closer
    # than that (none here), and the later steps act on the same rows, so: equal to rounding.
    cos = queue_similarities(F.normalize(q.detach(), dim=-1), queue).sort(dim=1).values
    assert cos.diff(dim=1).min() > 1e-9
    torch.testing.assert_close(per_anchor, syn, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="unknown synthetic type 'bogus'"):
        synthetic_negatives(q, queue, {"bogus": 1})


def test_enqueue_is_pure_and_wraps():
    queue = torch.zeros(5, 2)
    keys = torch.arange(6.0).reshape(3, 2)
    new, ptr = enqueue(queue, keys, 3)
    assert ptr == 1 and queue.abs().sum() == 0
    assert new[3:].tolist() == keys[:2].tolist() and new[0].tolist() == keys[2].tolist()
    with pytest.raises(ValueError, match="do not fit"):
        enqueue(queue, torch.zeros(6, 2), 0)
