"""The stats graph on a real local Dask cluster: every cell in one compute, bad cells get a
reason."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from pipeline.config import from_mapping
from pipeline.runtime.backends.dask_ops import compute_stats
from pipeline.runtime.store import files

pytestmark = pytest.mark.slow


def _write(tmp_path, name, z):
    path = tmp_path / f"{name}.parquet"
    files.write_table(files.embeddings_table({0: z, 1: z}, None, {"cell_id": name}), path)
    return path


def test_stats_graph_matches_scipy_and_reports_bad_cells(tmp_path, tiny_params, rng):
    params = from_mapping(tiny_params)
    good = rng.normal(size=(300, 6)).astype(np.float32)
    nan = good.copy()
    nan[5, 2] = np.nan
    const = good.copy()
    const[:, 4] = 1.0
    paths = {("good", 2): _write(tmp_path, "good", good), ("nan", 2): _write(tmp_path, "nan", nan),
             ("const", 2): _write(tmp_path, "const", const),
             ("missing", 2): tmp_path / "missing.parquet"}
    summary, detail = compute_stats(paths, params.stats, params.compute, level=params.report.level)
    raw = summary[summary.representation == "raw"].set_index("cell_id")
    assert raw.loc["good", "status"] == "ok"
    a2 = [scipy.stats.anderson(good[:, j].astype(np.float64), "norm").statistic for j in range(6)]
    assert raw.loc["good", "ad_mean"] == pytest.approx(np.mean(a2), rel=1e-9)
    assert raw.loc["nan", "status"] == "failed" and "NaN" in raw.loc["nan", "reason"]
    assert raw.loc["const", "status"] == "failed" and "constant" in raw.loc["const", "reason"]
    assert (raw.loc["missing", "status"] == "failed"
            and "cannot read" in raw.loc["missing", "reason"])
    raw_detail = detail[detail.representation == "raw"]
    assert set(raw_detail.cell_id) == {"good"} and len(raw_detail) == 6
    # a constant coordinate does not stop the projections, which mix all coordinates
    assert summary.set_index(["cell_id", "representation"]).loc[
        ("const", "projected"), "status"] == "ok"
