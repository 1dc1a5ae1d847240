"""The report at the cells' cost: its per-cell tables grow with the grid, its figures do not.

The same grid axes with 1, 4 and 10 seeds (36, 144, 360 cells): every figure is the same (by
name), cells.csv and the MLflow metrics have one entry per cell, the leaderboard one row per
setting (its seeds averaged).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.config import expand, from_mapping, merge, read_yaml
from pipeline.report.grid.build import Inputs, build
from tests.report.synthetic import ROOT


def _inputs(seeds: int) -> Inputs:
    params = from_mapping(merge(read_yaml(ROOT / "params.yaml"),
                                {"grid": {"seed": list(range(seeds))}}))
    cells = expand(params)
    rng = np.random.default_rng(seeds)
    ids = [c.cell_id for c in cells]
    grid = pd.DataFrame([{**c.grid_values(), "cell_id": c.cell_id, "status": "ok", "reason": None}
                         for c in cells])
    stats = pd.DataFrame([{"cell_id": i, "epoch": e, "representation": "raw",
                           "cv": rng.uniform(0.18, 0.24), "ad_mean": 0.4, "ad_pass_frac": 0.9,
                           "dp_p_mean": 0.4, "dp_pass_frac": 0.9, "null_cv": 0.18,
                           "status": "ok", "reason": ""}
                          for i in ids for e in (0, params.train.epochs)])
    search = pd.DataFrame({"cell_id": ids, "recall_at_1": rng.uniform(0.3, 0.45, len(ids)),
                           "risk_keval": rng.uniform(-3.2, -1.1, len(ids)), "ce": -3.0,
                           "search_status": "ok", "search_reason": ""})
    bounds = pd.DataFrame({"cell_id": ids, "total": 9.0, "measured_gap": 0.1,
                           "tightness": 90.0, "vacuous": True, "bound_status": "ok"})
    history = pd.DataFrame([{"cell_id": i, "epoch": e, "loss": 2.0 - 0.1 * e}
                            for i in ids for e in (1, 2)])
    records = {i: {"final_loss": 1.8, "wall_seconds": 2.0, "git_sha": "abc",
                   "dataset_hash": "d1", "hardware": "cpu"} for i in ids}
    return Inputs(grid, records, stats, search, bounds, pd.DataFrame(), history, params, "p1")


@pytest.fixture(scope="module")
def reports():
    return {seeds: build(_inputs(seeds)) for seeds in (1, 4, 10)}


def test_figures_do_not_grow_with_the_grid(reports):
    names = {seeds: [f.name for f in r.figures] for seeds, r in reports.items()}
    assert names[1] and names[1] == names[4] == names[10], names


def test_per_cell_tables_grow_linearly(reports):
    for seeds, report in reports.items():
        n = 36 * seeds
        assert len(report.cells) == n  # cells.csv: one row per cell
        assert len(report.board.table) == 36  # the leaderboard: one row per setting, over seeds
        assert len(report.mlflow) == n  # one set of final metrics per cell's run
