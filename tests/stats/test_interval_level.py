"""report.level travels from the stats stage through the Dask graph into the stats table."""

from __future__ import annotations

import dask
import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import stages.stats
from pipeline.config import expand, from_mapping
from pipeline.runtime.backends import dask_ops
from pipeline.runtime.backends.dask_ops import stats_graph
from pipeline.runtime.cells.analyses import INTERVAL_LEVEL
from pipeline.runtime.store import files

STATS = ("cv", "ad_mean", "ad_pass_frac", "dp_p_mean", "dp_pass_frac")


def _bounds(path, cfg, level):
    tasks, _ = stats_graph({("c", 2): path}, cfg, level=level)
    (results,) = dask.compute(tasks, scheduler="synchronous")  # no cluster needed
    (raw,) = [got for got in results[0] if got.representation == "raw"]
    return raw.intervals


def test_graph_intervals_follow_the_level(tmp_path, tiny_params):
    z = np.random.default_rng(0).normal(size=(300, 6)).astype(np.float32)
    path = tmp_path / "c.parquet"
    files.write_table(files.embeddings_table({0: z, 1: z}, None, {"cell_id": "c"}), path)
    tiny_params["stats"].update(bootstrap=100, projections=0, null_draws=0)
    cfg = from_mapping(tiny_params).stats
    bounds = {lv: _bounds(path, cfg, lv) for lv in (0.9, 0.95, 0.99)}
    for lv, row in bounds.items():
        assert row[INTERVAL_LEVEL] == lv
    for s in STATS:
        w = {lv: row[f"{s}_hi"] - row[f"{s}_lo"] for lv, row in bounds.items()}
        assert w[0.9] < w[0.95] < w[0.99], s  # same resamples at every level: strictly nested
    for lv in (0.9, 0.99):  # AD Avg: a t-interval over the 6 coordinates
        ratio = sps.t.ppf((1 + lv) / 2, 5) / sps.t.ppf(0.975, 5)
        w = {k: bounds[k]["ad_mean_hi"] - bounds[k]["ad_mean_lo"] for k in (lv, 0.95)}
        assert w[lv] / w[0.95] == pytest.approx(ratio, rel=1e-12)
    with pytest.raises(ValueError, match=r"level = 1.0: confidence level must be in \(0, 1\)"):
        stats_graph({("c", 2): path}, cfg, level=1.0)


def test_stage_passes_report_level(tiny_params, monkeypatch, tmp_path):
    tiny_params["report"]["level"] = 0.9
    params = from_mapping(tiny_params)
    seen = {}

    def fake_compute(paths, cfg, compute_cfg, *, level):
        seen["level"] = level
        return pd.DataFrame({"cell_id": [], "status": [], "representation": []}), pd.DataFrame()

    monkeypatch.setattr(stages.stats, "resolved_params", lambda: params)
    cell = expand(params)[0]  # a manifest row as stages.train writes it
    row = {"cell_id": cell.cell_id, "status": "ok", "reason": "", "path": "/store/c/v1",
           **cell.grid_values()}
    monkeypatch.setattr(stages.stats, "read_grid", lambda: pd.DataFrame([row]))
    monkeypatch.setattr(dask_ops, "compute_stats", fake_compute)
    monkeypatch.setattr(stages.stats.files, "write_frame", lambda frame, path: None)
    assert stages.stats.main([]) == 0
    assert seen["level"] == 0.9
