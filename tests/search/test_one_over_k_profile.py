"""The whiteley-k profile, CPU-sized: |CE − R_k| resolved at every k and falling like 1/k, with
k·(CE − R_k) tending to the expansion's c₁ and the slope over k >= 8 the expansion's slope."""

from __future__ import annotations

import pytest

from pipeline.config import expand, from_mapping, merge, read_yaml
from pipeline.datasets import load_dataset
from pipeline.search.cell import search_cell
from pipeline.train import initial_encoder, train_cell
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_finite_k_gap_has_slope_minus_one():
    raw = merge(read_yaml(ROOT / "params.yaml"), read_yaml(ROOT / "profiles" / "whiteley-k.yaml"))
    raw = merge(raw, {"data": {"n_train": 1000, "n_heldout": 3000}, "grid": {"n": [1000]},
                      "train": {"epochs": 3},
                      "search": {"anchors": 1500, "positives": 16}})  # pool: the profile's
    params = from_mapping(raw)
    (cell,) = expand(params)
    d = params.data
    dataset = load_dataset(d.name, d.n_train, d.n_heldout, d.seed, d.options)
    encoders = {"trained": train_cell(cell, dataset).model.eval(),
                "initial": initial_encoder(cell, dataset.input_shape).eval()}
    summary, sweep = search_cell(cell, dataset, encoders, params.search)
    assert {r["encoder"] for r in sweep} == {"trained", "initial"}
    assert [r["k"] for r in sweep
            if r["encoder"] == "trained"] == [2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert summary["search_pool_source"] == "fresh" and summary["search_pool"] == 32768
    for prefix in ("", "initial_"):
        assert summary[f"{prefix}gaps_resolved"], summary
        assert -1.1 <= summary[f"{prefix}slope"] <= -0.9, summary
        # the fitted slope is the one the 1/k expansion predicts over the same range
        assert abs(summary[f"{prefix}slope"] - summary[f"{prefix}slope_expansion"]) < 0.01
        # and with the expansion's higher terms taken off, the slope is −1
        assert summary[f"{prefix}slope_leading_lo"] - 0.005 <= -1.0 <= \
            summary[f"{prefix}slope_leading_hi"] + 0.005, summary
    for r in sweep:
        assert r["resolved"] and abs(r["gap"]) >= 3 * r["gap_se"]
        # the Proposition 1 window holds at every k, up to sampling error
        assert r["window_low"] - 3 * r["gap_se"] <= r["gap"] <= r["window_high"] + 3 * r["gap_se"]
        if r["k"] >= 64:  # k·gap is within 1% of the expansion, which tends to c₁
            assert r["k_gap"] == pytest.approx(r["k"] * r["gap_expansion"], rel=0.01)
