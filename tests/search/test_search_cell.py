"""search_cell on a tiny grid: the CRN sweep's rows and summary, the pool's source per dataset."""

from __future__ import annotations

import pytest

from pipeline.config import expand, from_mapping, merge
from pipeline.datasets import load_dataset
from pipeline.search.cell import search_cell
from pipeline.train import initial_encoder, train_cell

# data/finite_k.parquet's columns before the CRN estimator; they must all stay
OLD_COLUMNS = {"cell_id", "encoder", "k", "risk", "risk_se", "ce", "ce_se", "gap", "gap_se",
               "paired", "window_low", "window_high", "inside"}
NEW_COLUMNS = {"gap_se_pool", "k_gap", "k_gap_se", "resolved", "gap_expansion", "gap_cov",
               "gap_leading", "gap_leading_cov", "c1",
               "c1_se", "c2", "c3", "fit_k_min", "fit_k_max", "n_anchors", "n_positives", "pool"}


def _run(raw):
    params = from_mapping(raw)
    cell = expand(params)[0]
    d = params.data
    dataset = load_dataset(d.name, d.n_train, d.n_heldout, d.seed, d.options)
    encoders = {"trained": train_cell(cell, dataset).model.eval(),
                "initial": initial_encoder(cell, dataset.input_shape).eval()}
    return cell, search_cell(cell, dataset, encoders, params.search)


@pytest.mark.parametrize("data, source, pool", [
    ({"name": "laplace"}, "heldout", 150),  # the 200 held-out rows minus the 50 anchors
    ({"name": "gaussian_channel", "options": {"input_dim": 16}, "augment": {"a": 0.6}},
     "fresh", 4096),
])
def test_search_cell_rows_and_summary(tiny_params, data, source, pool):
    raw = merge(tiny_params, {"data": data, "grid": {"k": [4]},
                              "search": {"encoders": ["trained", "initial"], "pool": 4096,
                                         "k_sweep": [2, 8, 32], "fit_k_min": 2}})
    if data["name"] == "gaussian_channel":
        raw["data"]["augment"] = data["augment"]
    cell, (summary, rows) = _run(raw)
    assert summary["search_pool_source"] == source and summary["search_pool"] == pool
    assert len(rows) == 8 and {r["encoder"] for r in rows} == {"trained", "initial"}
    for r in rows:
        assert OLD_COLUMNS | NEW_COLUMNS <= set(r), sorted(OLD_COLUMNS | NEW_COLUMNS - set(r))
        assert r["pool"] == pool and r["n_anchors"] == 50 and len(r["gap_cov"]) == 4
        assert r["k"] in (2, 4, 8, 32) and r["paired"]
    for prefix in ("", "initial_"):
        assert summary[f"{prefix}finite_k_gap"] == next(
            r["gap"] for r in rows
            if r["k"] == cell.k and r["encoder"] == (prefix[:-1] or "trained"))
        for key in ("slope", "slope_lo", "slope_hi", "slope_expansion", "slope_leading",
                    "slope_leading_lo", "slope_leading_hi", "gap_c1", "ce", "ce_m"):
            assert f"{prefix}{key}" in summary
