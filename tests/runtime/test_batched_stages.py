"""The Dask stages run batches of cells: the same tables as the per-cell functions, in order,
failed cells as rows, empty grids, and a progress bar with an ETA on stderr.

The batched run happens in single-threaded Dask workers and the reference in this process,
whose BLAS may use several threads: floats are compared at rtol 1e-9 (a reduction order may
differ; a row of another cell or representation differs at the first digits).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from pipeline.config import expand, from_mapping, merge
from pipeline.datasets import load_dataset
from pipeline.runtime.backends.dask_ops import compute_bounds, compute_search, compute_stats
from pipeline.runtime.cells.analyses import stats_cell
from pipeline.runtime.cells.tables import stats_tables
from pipeline.runtime.store import files

pytestmark = pytest.mark.slow
RTOL = 1e-9


def _embeddings(tmp_path, rng):
    """Five files in a non-sorted order: three Gaussian cells at two epochs, a NaN, a missing."""
    paths = {}
    for name in ("c", "a", "b"):
        for epoch in (2, 0):
            z = rng.normal(size=(120, 5)).astype(np.float32)
            path = tmp_path / f"{name}-{epoch}.parquet"
            files.write_table(files.embeddings_table(
                {0: z, 1: z + rng.normal(0, 0.1, z.shape).astype(np.float32)}, None,
                {"cell_id": name}), path)
            paths[(name, epoch)] = path
    bad = rng.normal(size=(120, 5)).astype(np.float32)
    bad[3, 1] = np.nan
    files.write_table(files.embeddings_table({0: bad, 1: bad}, None, {"cell_id": "nan"}),
                        tmp_path / "nan.parquet")
    paths[("nan", 2)] = tmp_path / "nan.parquet"
    paths[("missing", 2)] = tmp_path / "missing.parquet"
    return paths


def _assert_same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns) and len(got) == len(want) > 0
    assert dict(got.dtypes) == dict(want.dtypes)
    floats = [c for c in want.columns if pd.api.types.is_float_dtype(want[c])]
    pd.testing.assert_frame_equal(got.drop(columns=floats), want.drop(columns=floats))  # order too
    np.testing.assert_allclose(got[floats].to_numpy(float), want[floats].to_numpy(float),
                               rtol=RTOL, atol=0, equal_nan=True)


def test_batched_stats_equal_the_per_cell_results_with_a_progress_bar(tmp_path, tiny_params,
                                                                      rng, capfd):
    tiny_params["stats"].update(n_workers=2, null_draws=20)
    params = from_mapping(tiny_params)
    paths = _embeddings(tmp_path, rng)
    capfd.readouterr()
    summary, detail = compute_stats(paths, params.stats, params.compute,
                                    level=params.report.level)
    err = capfd.readouterr().err
    n = len(paths)
    # tqdm: the stage's name, done of total files, elapsed<remaining (the ETA), the rate
    bar = rf"stats: 100%\|[^|]*\| {n}/{n} \[\d\d:\d\d<\d\d:\d\d, [^\]]*(?:file/s|s/file)\]"
    assert re.search(bar, err), err
    per_cell = []
    for (cell_id, epoch), path in paths.items():
        per_cell += stats_cell(cell_id, epoch, path, params.stats, params.report.level)
    want_summary, want_detail = stats_tables(per_cell)
    _assert_same(summary, want_summary)
    _assert_same(detail, want_detail)
    reps = ("raw", "normalized", "projected")
    assert list(zip(summary.cell_id, summary.epoch, strict=True)) == \
        [key for key in paths for _ in reps]  # the files' order, each file's representations
    failed = summary[summary.status == "failed"].set_index(["cell_id", "representation"])
    assert set(failed.index.get_level_values(0)) == {"nan", "missing"}
    assert "cannot read" in failed.loc[("missing", "raw"), "reason"]
    assert "NaN" in failed.loc[("nan", "raw"), "reason"]
    assert set(detail.cell_id) == {"a", "b", "c"}
    good = summary[summary.cell_id.isin(["a", "b", "c"])]
    assert (good.null_cv.notna() == (good.representation == "raw")).all()  # raw only


def test_empty_grids_give_empty_tables_without_a_cluster(tiny_params, tmp_path):
    params = from_mapping(tiny_params)
    summary, detail = compute_stats({}, params.stats, params.compute, level=params.report.level)
    assert summary.empty and detail.empty
    rows, sweep = compute_search([], tmp_path / "none.parquet", {}, params.search,
                                 params.compute, 1)
    assert rows.empty and sweep.empty
    assert compute_bounds([], tmp_path / "none.parquet", {}, params.bounds, params.compute,
                          1).empty


def test_a_failing_cell_gets_its_row_and_the_batch_goes_on(tiny_params, tmp_path):
    """bounds skips supervised cells without reading anything; the contrastive cell's folder
    is missing, so loading its encoders fails: its row says why, between the others."""
    params = from_mapping(tiny_params)
    contrastive = expand(params)[0]
    supervised = expand(from_mapping(merge(tiny_params, {
        "data": {"name": "gaussian_mixture"}, "grid": {"objective": ["supervised"],
                                                       "seed": [0, 1]}})))
    assert len(supervised) == 2 and contrastive.objective == "contrastive"
    cells = [supervised[0], contrastive, supervised[1]]
    dataset = load_dataset("laplace", 60, 20, 0, {"input_dim": 16})
    files.write_dataset(dataset, tmp_path / "dataset.parquet")
    folders = {c.cell_id: tmp_path / "cells" / c.cell_id for c in cells}
    table = compute_bounds(cells, tmp_path / "dataset.parquet", folders, params.bounds,
                           params.compute, 1)
    assert list(table.cell_id) == [c.cell_id for c in cells]
    assert list(table.bound_status[[0, 2]]) == ["skipped: supervised cell"] * 2
    assert table.bound_status[1].startswith("failed: ") and len(table.bound_status[1]) > 10


def _dataset_address(cell, dataset, folder, cfg):
    """A per-cell function: where the dataset this cell's batch got lives, and its process."""
    import os

    return os.getpid(), dataset.x_train.ctypes.data


@pytest.mark.parametrize("n_workers", [1, 2])
def test_a_stage_reads_its_dataset_once_for_every_batch(tmp_path, tiny_params, monkeypatch,
                                                        n_workers):
    """per_cell reads the dataset once through Run.share (not once per batch, nor shipped to
    each): every batch, forked workers included, holds the one array read here."""
    from pipeline.runtime.backends import dask_ops

    params = from_mapping(tiny_params)
    cells = expand(params)[:12]
    data = load_dataset("laplace", 60, 20, 0, {"input_dim": 16})
    path = tmp_path / "data.parquet"
    files.write_dataset(data, path)
    reads: list[int] = []
    read = files.read_dataset

    def counted(where):
        got = read(where)
        reads.append(got.x_train.ctypes.data)
        return got

    monkeypatch.setattr(files, "read_dataset", counted)
    got = dask_ops.per_cell(_dataset_address, cells, path, {c.cell_id: str(tmp_path)
                                                             for c in cells},
                            None, params.compute, n_workers, "test")
    assert len(reads) == 1 and len(got) == len(cells)
    assert {address for _, address in got} == {reads[0]}
