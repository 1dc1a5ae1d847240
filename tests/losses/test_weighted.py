"""Weighted InfoNCE family against loop oracles, closed forms, invariances, simplex geometry."""

import math

import pytest
import torch

from pipeline.losses.geometry_check import optimise_free_embeddings, simplex_eps
from pipeline.losses.soft_supcon import soft_supcon
from pipeline.losses.supcon import supcon
from pipeline.losses.weighted import (
    _weighted_reference,
    soft_supcon_targets,
    supcon_targets,
    weighted_infonce,
    xclr_targets,
    y_aware_targets,
)
from pipeline.losses.xclr import xclr, xclr_graph, xclr_two_views
from pipeline.losses.y_aware import y_aware, y_aware_two_views
from tests.oracles import loss_oracles as oracle

LABELS = torch.tensor([0, 1, 0, 2, 1, 0, 3])  # class 3 is a singleton


def _rand(*shape, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(grad)


def _cases():
    y = _rand(7, seed=5)
    s = _rand(7, 7, seed=6)
    s = (s + s.T) / 2
    return {
        "supcon": (lambda z: supcon(z, LABELS, 0.3), oracle.supcon_targets(LABELS.tolist())),
        "soft_supcon": (
            lambda z: soft_supcon(z, LABELS, 0.3, 0.1),
            oracle.soft_supcon_targets(LABELS.tolist(), 0.1),
        ),
        "y_aware": (lambda z: y_aware(z, y, 0.3, 0.7), oracle.y_aware_targets(y.numpy(), 0.7)),
        "xclr": (lambda z: xclr(z, s, 0.3, 0.2), oracle.xclr_targets(s.numpy(), 0.2)),
    }


@pytest.mark.parametrize("name", ["supcon", "soft_supcon", "y_aware", "xclr"])
def test_matches_oracle_and_gradcheck(name):
    fn, targets = _cases()[name]
    z = _rand(7, 4, seed=1, grad=True)
    assert fn(z).item() == pytest.approx(
        oracle.weighted(z.detach().numpy(), targets, 0.3), rel=1e-12
    )
    assert torch.autograd.gradcheck(fn, (z,))


def test_targets_match_oracles():
    torch.testing.assert_close(
        supcon_targets(LABELS, torch.float64),
        torch.from_numpy(oracle.supcon_targets(LABELS.tolist())),
    )
    torch.testing.assert_close(
        soft_supcon_targets(LABELS, 0.2, torch.float64),
        torch.from_numpy(oracle.soft_supcon_targets(LABELS.tolist(), 0.2)),
    )
    y2 = _rand(7, 2, seed=3)  # vector labels
    torch.testing.assert_close(
        y_aware_targets(y2, 1.3), torch.from_numpy(oracle.y_aware_targets(y2.numpy(), 1.3))
    )
    s = _rand(7, 7, seed=4)
    torch.testing.assert_close(
        xclr_targets(s, 0.5), torch.from_numpy(oracle.xclr_targets(s.numpy(), 0.5))
    )


def test_singleton_class_is_excluded_from_supcon_mean():
    z = _rand(7, 4, seed=2)
    targets = supcon_targets(LABELS, torch.float64)
    has_positive = targets.sum(1) > 0
    assert has_positive.tolist() == [True, True, True, False, True, True, False]
    # equal to the mean of the per-anchor terms of the anchors that have a positive
    per_anchor = []
    for i in torch.nonzero(has_positive).flatten().tolist():
        one_row = torch.zeros_like(targets)
        one_row[i] = targets[i]
        per_anchor.append(weighted_infonce(z, one_row, 0.3))
    assert supcon(z, LABELS, 0.3).item() == pytest.approx(
        torch.stack(per_anchor).mean().item(), rel=1e-12
    )
    # no anchor with a positive: zero loss, still differentiable
    zz = _rand(3, 4, grad=True)
    loss = supcon(zz, torch.tensor([0, 1, 2]), 0.3)
    loss.backward()
    assert loss.item() == 0 and torch.all(zz.grad == 0)


def test_closed_form_all_equal_is_log_n_minus_1():
    z = _rand(1, 4).expand(7, 4)
    for name, (fn, _) in _cases().items():
        assert fn(z).item() == pytest.approx(math.log(6), rel=1e-12), name


@pytest.mark.parametrize("name", ["supcon", "soft_supcon", "y_aware", "xclr"])
def test_rotation_invariance(name):
    fn, _ = _cases()[name]
    z = _rand(7, 4, seed=8)
    r = torch.from_numpy(oracle.random_orthogonal(4, 1))
    assert fn(z @ r).item() == pytest.approx(fn(z).item(), rel=1e-12)


def test_joint_permutation_invariance():
    z, perm = _rand(7, 4, seed=9), torch.randperm(7, generator=torch.Generator().manual_seed(1))
    assert supcon(z[perm], LABELS[perm], 0.3).item() == pytest.approx(
        supcon(z, LABELS, 0.3).item(), rel=1e-12
    )
    y = _rand(7, seed=2)
    assert y_aware(z[perm], y[perm], 0.3, 1.0).item() == pytest.approx(
        y_aware(z, y, 0.3, 1.0).item(), rel=1e-12
    )


# --- geometry (Vock et al. 2026): simplex with cosine −1/(C − 1) ----------------------------

TAU = 0.5
SIMPLEX = -1 / 3


def _max_deviation(cos):
    off = cos[~torch.eye(len(cos), dtype=torch.bool)]
    return (off - SIMPLEX).abs().max().item()


@pytest.mark.parametrize("name", ["supcon", "soft_supcon"])
def test_balanced_classes_form_a_simplex(name):
    cos = optimise_free_embeddings(name, (10, 10, 10, 10), d=3, tau=TAU, steps=200, seed=0)
    assert _max_deviation(cos) < 0.02


def test_imbalanced_classes_soft_supcon_keeps_simplex_supcon_does_not():
    counts = (40, 10, 5, 5)
    soft = optimise_free_embeddings("soft_supcon", counts, d=3, tau=TAU, steps=200, seed=0)
    hard = optimise_free_embeddings("supcon", counts, d=3, tau=TAU, steps=200, seed=0)
    assert _max_deviation(soft) < 0.02
    assert _max_deviation(hard) > 0.02
    assert simplex_eps(4, TAU) == pytest.approx(math.exp(-8 / 3))


def test_geometry_rejects_other_losses():
    with pytest.raises(ValueError, match="loss_name = 'infonce': allowed supcon | soft_supcon"):
        optimise_free_embeddings("infonce", (2, 2), d=3, tau=0.5, steps=1, seed=0)


@pytest.mark.parametrize("tau", [0.01, 0.05, 0.3])  # 0.01: below the fixed-shift limit
def test_fused_matches_reference_float32(tau):
    z = _rand(200, 16, seed=3).float().requires_grad_()
    labels = torch.randint(0, 5, (200,), generator=torch.Generator().manual_seed(0))
    labels[0] = 99  # a singleton: excluded row
    targets = supcon_targets(labels)
    fused = weighted_infonce(z, targets, tau)
    (g_fused,) = torch.autograd.grad(fused, z)
    ref = _weighted_reference(torch.nn.functional.normalize(z, dim=-1), targets, tau)
    (g_ref,) = torch.autograd.grad(ref, z)
    torch.testing.assert_close(fused, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g_fused, g_ref, rtol=1e-4, atol=1e-7)
    # a learnable τ takes the autograd path: same value and z-gradient, plus a τ-gradient
    t = torch.tensor(tau, requires_grad=True)
    learn = weighted_infonce(z, targets, t)
    g_z, g_t = torch.autograd.grad(learn, (z, t))
    torch.testing.assert_close(learn, fused, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g_z, g_fused, rtol=1e-4, atol=1e-7)
    assert torch.isfinite(g_t)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_class_path_matches_dense_targets_float32(eps):
    """supcon / soft_supcon (class sums, no (N, N) targets) against the dense-target path."""
    z = _rand(200, 16, seed=5).float().requires_grad_()
    labels = torch.randint(0, 7, (200,), generator=torch.Generator().manual_seed(1))
    labels[:2] = torch.tensor([50, 51])  # singletons
    fast = supcon(z, labels, 0.1) if eps == 0 else soft_supcon(z, labels, 0.1, eps)
    targets = supcon_targets(labels) if eps == 0 else soft_supcon_targets(labels, eps)
    dense = weighted_infonce(z, targets, 0.1)
    torch.testing.assert_close(fast, dense, rtol=1e-5, atol=1e-5)
    (g_fast,) = torch.autograd.grad(fast, z)
    (g_dense,) = torch.autograd.grad(dense, z)
    torch.testing.assert_close(g_fast, g_dense, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("labels", ["scalar", "vector"])
def test_y_aware_two_views_equals_the_tiled_form(labels):
    # the registry's form: targets built on (B, B) and tiled; must equal y_aware on 2B samples
    z1, z2 = _rand(6, 4, seed=11, grad=True), _rand(6, 4, seed=12, grad=True)
    y = _rand(6, seed=13) if labels == "scalar" else _rand(6, 3, seed=13)
    fast = y_aware_two_views(z1, z2, y, 0.3, 0.8)
    ref = y_aware(torch.cat([z1, z2]), torch.cat([y, y]), 0.3, 0.8)
    assert fast.item() == pytest.approx(ref.item(), rel=1e-12)
    g_fast = torch.autograd.grad(fast, (z1, z2))
    g_ref = torch.autograd.grad(ref, (z1, z2))
    for a, b in zip(g_fast, g_ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(lambda a, b: y_aware_two_views(a, b, y, 0.3, 0.8), (z1, z2))


def test_xclr_two_views_equals_the_tiled_form():
    z1, z2 = _rand(6, 4, seed=21, grad=True), _rand(6, 4, seed=22, grad=True)
    s = _rand(6, 6, seed=23) * 3  # not symmetric, large entries: the row shift matters
    fast = xclr_two_views(z1, z2, s, 0.3, 0.2)
    ref = xclr(torch.cat([z1, z2]), s.repeat(2, 2), 0.3, 0.2)
    assert fast.item() == pytest.approx(ref.item(), rel=1e-12)
    assert oracle.weighted(torch.cat([z1, z2]).detach().numpy(),
                           oracle.xclr_targets(s.repeat(2, 2).numpy(), 0.2), 0.3) == \
        pytest.approx(fast.item(), rel=1e-12)
    assert torch.autograd.gradcheck(lambda a, b: xclr_two_views(a, b, s, 0.3, 0.2), (z1, z2))


def test_xclr_graph_from_class_similarities_and_inputs_matches_loops():
    m = [[1.0, 0.3, -0.2, 0.0], [0.3, 1.0, 0.5, 0.1], [-0.2, 0.5, 1.0, 0.4], [0.0, 0.1, 0.4, 1.0]]
    x = _rand(7, 2, 3, seed=9)  # image-shaped inputs: the cosine is over the flattened rows
    got = xclr_graph("class_similarity", x, LABELS, m)
    want = [[m[int(LABELS[i])][int(LABELS[j])] for j in range(7)] for i in range(7)]
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=0, atol=0)
    cos = xclr_graph("inputs", x, None)
    flat = x.reshape(7, -1)
    for i in range(7):
        for j in range(7):
            want_ij = float(flat[i] @ flat[j] / (flat[i].norm() * flat[j].norm()))
            assert float(cos[i, j]) == pytest.approx(want_ij, rel=1e-12)
    assert xclr_graph("labels", x, LABELS) is None  # the class path builds that graph itself


def test_xclr_graph_errors_name_the_option():
    x = _rand(7, 3, seed=1)
    with pytest.raises(ValueError, match=r"class_similarity is 2 × 2: the labels run from 0 to 3"):
        xclr_graph("class_similarity", x, LABELS, [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"graph = 'class_similarity': needs class labels"):
        xclr_graph("class_similarity", x, None, [[1.0]])
