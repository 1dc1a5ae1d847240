"""bounds_cell: Theorem 1 assembled from a cell's encoders, its risk against a loop."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pipeline.bounds import parameter_count
from pipeline.bounds.cell import bounds_cell, training_tuples, tuple_risk
from pipeline.config import expand, from_mapping, merge
from pipeline.datasets import load_dataset
from pipeline.train import initial_encoder, train_cell

SETTINGS = SimpleNamespace(delta=0.05, tuples=120)  # what bounds_cell reads of params.bounds


@pytest.fixture
def setup(tiny_params):
    cell = expand(from_mapping(tiny_params))[0]
    dataset = load_dataset("laplace", 600, 200, 0, {"input_dim": 16})
    encoders = {"trained": train_cell(cell, dataset).model.eval(),
                "initial": initial_encoder(cell, (16,)).eval()}
    return cell, dataset, encoders


def test_tuple_risk_matches_a_loop(setup):
    cell, dataset, encoders = setup
    tuples = training_tuples(cell, 40, "test", dataset.x_heldout)
    model, tau = encoders["trained"], cell.tau
    a, p, neg = tuples
    assert a.shape == (40, 16) and neg.shape == (40, cell.k, 16)
    losses = []
    with torch.no_grad():
        for i in range(40):
            u = torch.nn.functional.normalize(model(torch.stack([a[i], p[i], *neg[i]])).double(),
                                              dim=1)
            s = [float(u[0] @ u[j]) for j in range(1, cell.k + 2)]  # positive first
            losses.append(math.log(sum(math.exp((sj - s[0]) / tau) for sj in s)) - math.log(cell.k))
    assert tuple_risk(model, tuples, tau) == pytest.approx(np.mean(losses), rel=1e-9)


def test_bounds_cell_terms_on_a_linear_cell(setup):
    cell, dataset, encoders = setup
    got = bounds_cell(cell, dataset, encoders, SETTINGS)
    assert got.status.startswith("partial: E[r²] unknown")  # laplace: no closed-form E[r²]
    t = got.terms
    assert t is not None and t.e_r2 == 1.0 and t.n == cell.n and t.k == cell.k
    assert t.d_theta == parameter_count({k: v.numpy() for k, v in
                                         encoders["trained"].state_dict().items()}) == 16 * 8
    assert t.R > 0 and math.isfinite(t.C_phi) and t.total > t.empirical_risk
    assert not math.isnan(t.measured_gap)  # R on fresh held-out tuples was measured


def test_bounds_cell_skips_what_it_cannot_bound(setup, tiny_params):
    cell, dataset, encoders = setup
    supervised = expand(from_mapping(merge(tiny_params, {
        "data": {"name": "gaussian_mixture"}, "grid": {"objective": ["supervised"]}})))[0]
    assert bounds_cell(supervised, dataset, {}, SETTINGS).status == "skipped: supervised cell"
    resnet = replace(cell, arch="resnet18")
    assert bounds_cell(resnet, dataset, {}, SETTINGS).status == \
        "skipped: no data-restricted C_Φ for resnet18"
