"""Every registered loss runs through its adapter; options are resolved and validated."""

import pytest
import torch

from pipeline.config.entries import validate_options
from pipeline.losses import (
    LOSSES,
    LossBatch,
    dcl_in_batch,
    infonce,
    nt_xent,
    resolve_options,
    supcon,
    xclr,
)
from pipeline.losses.synco import synco_loss, synthetic_negatives

EXPECTED = {
    "infonce",
    "dcl",
    "dcl_in_batch",
    "weince",
    "synco",
    "supcon",
    "soft_supcon",
    "y_aware",
    "xclr",
    "nt_xent",
}


def _batch(b=8, k=6, d=5, **extra):
    g = torch.Generator().manual_seed(0)
    return LossBatch(
        anchor=torch.randn(b, d, generator=g, dtype=torch.float64, requires_grad=True),
        positive=torch.randn(b, d, generator=g, dtype=torch.float64),
        negatives=torch.randn(b, k, d, generator=g, dtype=torch.float64),
        labels=torch.tensor([0, 1, 2, 0, 1, 2, 0, 1]),
        **extra,
    )


def test_registry_names_and_flags():
    assert set(LOSSES) == EXPECTED
    assert {n for n, s in LOSSES.items() if s.needs_labels} == {
        "supcon",
        "soft_supcon",
        "y_aware",
        "xclr",
    }
    assert {n for n, s in LOSSES.items() if s.needs_negatives} == {
        "infonce",
        "dcl",
        "weince",
        "synco",
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_loss_runs_and_backpropagates(name):
    batch = _batch(generator=torch.Generator().manual_seed(1))
    if name == "y_aware":
        batch = LossBatch(batch.anchor, batch.positive, batch.negatives, batch.labels.double())
    options = resolve_options(name, None, f"loss_options.{name}")
    if name == "synco":
        options = {**options, "hardest": 4}
    loss = LOSSES[name].fn(batch, 0.2, options)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(batch.anchor.grad).all() and batch.anchor.grad.abs().sum() > 0


def test_adapters_compute_the_documented_quantities():
    # `==` where the adapter calls the same loss function on the same tensors (the torch.cat of
    # supcon's two views included): the same operations in the same order, in one process
    b = _batch()
    assert (
        LOSSES["infonce"].fn(b, 0.2, {}).item()
        == infonce(b.anchor, b.positive, b.negatives, 0.2).item()
    )
    assert LOSSES["nt_xent"].fn(b, 0.2, {}).item() == nt_xent(b.anchor, b.positive, 0.2).item()
    assert (LOSSES["dcl_in_batch"].fn(b, 0.2, {}).item()
            == dcl_in_batch(b.anchor, b.positive, 0.2).item())
    z, y = torch.cat([b.anchor, b.positive]), torch.cat([b.labels, b.labels])
    assert LOSSES["supcon"].fn(b, 0.2, {}).item() == supcon(z, y, 0.2).item()
    same = (y[:, None] == y[None, :]).double()
    assert LOSSES["xclr"].fn(b, 0.2, {"tau_s": 0.1}).item() == pytest.approx(
        xclr(z, same, 0.2, 0.1).item(), rel=1e-12
    )
    s = torch.rand(8, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with_graph = LossBatch(b.anchor, b.positive, similarity=s)
    assert LOSSES["xclr"].fn(with_graph, 0.2, {"tau_s": 0.1}).item() == pytest.approx(
        xclr(z, s.repeat(2, 2), 0.2, 0.1).item(), rel=1e-12
    )


def test_synco_adapter_queue_substitute_and_warmup():
    opts = resolve_options("synco", {"hardest": 4}, "loss_options.synco")
    b = _batch(generator=torch.Generator().manual_seed(3))
    counts = {
        kind: opts[f"n_{kind}"]
        for kind in ("interpolated", "extrapolated", "mixup", "noise", "perturbed", "adversarial")
    }
    syn = synthetic_negatives(b.anchor, b.negatives, counts, torch.Generator().manual_seed(3), 4)
    want = synco_loss(b.anchor, b.positive, b.negatives, syn, 0.2)
    assert LOSSES["synco"].fn(b, 0.2, opts).item() == pytest.approx(want.item(), rel=1e-12)
    queue = torch.randn(16, 5, dtype=torch.float64)
    warm = LossBatch(b.anchor, b.positive, b.negatives, queue=queue, step=3)
    no_syn = synco_loss(b.anchor, b.positive, queue, None, 0.2)  # warm-up: the same call
    assert LOSSES["synco"].fn(warm, 0.2, {**opts, "warmup_steps": 5}).item() == no_syn.item()


@pytest.mark.parametrize(
    ("name", "given", "message"),
    [
        ("weince", {"gamma": 1}, "loss_options.weince.gamma = 1: unknown option for loss 'weince'"),
        ("infonce", {"eps": 1},
         r"loss_options.infonce.eps = 1: unknown option for loss 'infonce'; allowed: none"),
        ("weince", {"beta": "x"},
         "loss_options.weince.beta = 'x': input should be 'fixed' or 'fitted'"),
        ("weince", {"rho_quantile": 1.5},
         "loss_options.weince.rho_quantile = 1.5: input should be less than or equal to 1"),
        ("weince", {"kappa_rho": 0},
         "loss_options.weince.kappa_rho = 0: input should be greater than 0"),
        ("synco", {"n_mixup": -1},
         "loss_options.synco.n_mixup = -1: input should be greater than or equal to 0"),
        ("synco", {"hardest": 2.5},
         "loss_options.synco.hardest = 2.5: input should be a valid integer"),
        ("synco", {"beta_max": 0.5},
         "loss_options.synco.beta_max = 0.5: input should be greater than or equal to 1"),
        ("synco", {"queue_size": -8},
         "loss_options.synco.queue_size = -8: input should be greater than or equal to 0"),
        ("synco", {"momentum": 1.5},
         "loss_options.synco.momentum = 1.5: input should be less than or equal to 1"),
        ("soft_supcon", {"eps": 0},
         "loss_options.soft_supcon.eps = 0: input should be greater than 0"),
        ("y_aware", {"sigma": True},
         "loss_options.y_aware.sigma = True: input should be a valid number"),
        ("xclr", {"tau_s": "a"}, "loss_options.xclr.tau_s = 'a': input should be a valid number"),
        ("xclr", {"graph": "text"}, "loss_options.xclr.graph = 'text': input should be 'labels', "
                                    "'class_similarity' or 'inputs'"),
        ("xclr", {"graph": "class_similarity"}, "loss_options.xclr.class_similarity = None: "
                                                "required with graph: class_similarity"),
        ("xclr", {"graph": "class_similarity", "class_similarity": [[1.0, 0.5]]},
         r"loss_options.xclr.class_similarity = '1 rows of lengths \[2\]': must be a square"),
        ("xclr", {"class_similarity": [[1.0]]},
         r"loss_options.xclr.class_similarity = '\[...\]': used only with graph: "
         r"class_similarity \(graph = 'labels'\)"),
    ],
)
def test_options_are_validated_with_the_key(name, given, message):
    """One validation path: each loss's options dataclass, through the params schema."""
    with pytest.raises(ValueError, match=message):
        validate_options(LOSSES[name].options, given, f"loss_options.{name}", f"loss {name!r}")


def test_unknown_loss_is_named():
    with pytest.raises(ValueError, match="loss_options: unknown loss 'bogus'"):
        resolve_options("bogus", {}, "loss_options")


def test_resolve_options_fills_defaults():
    assert resolve_options("weince", {"beta": "fitted"}, "x")["beta"] == "fitted"
    assert resolve_options("weince", None, "x")["kappa_rho"] == 10.0
    assert resolve_options("nt_xent", None, "x") == {}
