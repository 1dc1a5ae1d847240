"""Dask on Ray: the statistics graph on a local multi-node Ray cluster gives the local Dask table.

The cluster is the fault tests' simulation (``ray.cluster_utils.Cluster``: a head without CPUs
and two one-CPU worker nodes, all on 127.0.0.1), so the tasks run in other nodes' workers, as on
a real cluster. Both schedulers run the same pure functions on the same files, each task in a
single-threaded worker (Dask: ``OMP_NUM_THREADS=1``; Ray: one CPU per task): the floats are
compared at rtol 1e-12 (what differs is only where a task runs, not its arithmetic).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import ray

from pipeline.config import from_mapping
from pipeline.runtime.backends.dask_ops import compute_stats
from pipeline.runtime.backends.executor import loopback_only
from pipeline.runtime.store import files

pytestmark = [pytest.mark.ray, pytest.mark.slow]
RTOL = 1e-12


@pytest.fixture(scope="module")
def ray_cluster():
    from ray.cluster_utils import Cluster

    loopback_only()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def _cells(tmp_path, rng):
    """Three cells and one bad: Gaussian, heavy-tailed, anisotropic; a NaN in the fourth."""
    views = {
        "gauss": rng.normal(size=(300, 12)),
        "heavy": rng.standard_t(3, size=(300, 12)),
        "aniso": rng.normal(size=(300, 12)) * np.linspace(0.2, 3.0, 12),
    }
    bad = rng.normal(size=(300, 12))
    bad[7, 3] = np.nan
    views["nan"] = bad
    paths = {}
    for epoch, scale in ((0, 1.0), (2, 1.5)):
        for name, z in views.items():
            z = (z * scale).astype(np.float32)
            pos = (z + 0.1 * rng.normal(size=z.shape)).astype(np.float32)
            path = tmp_path / f"{name}-e{epoch}.parquet"
            files.write_table(files.embeddings_table({0: z, 1: pos}, None, {"cell_id": name}),
                                path)
            paths[(name, epoch)] = path
    return paths


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.sort_values(keys).reset_index(drop=True)[sorted(frame.columns)]


def test_stats_on_the_ray_scheduler_equal_the_local_dask_table(ray_cluster, tiny_params,
                                                                  tmp_path, rng, capfd):
    params = from_mapping(tiny_params)
    paths = _cells(tmp_path, rng)
    level = params.report.level
    local_summary, local_detail = compute_stats(paths, params.stats, params.compute, level=level)
    assert not ray.is_initialized()  # the local run used Dask's own cluster
    on_ray = params.compute.model_copy(update={"ray_address": ray_cluster.address})
    capfd.readouterr()
    ray_summary, ray_detail = compute_stats(paths, params.stats, on_ray, level=level)
    assert ray.is_initialized()
    # the progress bar follows the Ray tasks (ray.wait on their refs) to all files done
    assert re.search(rf"stats: 100%\|[^|]*\| {len(paths)}/{len(paths)} \[", capfd.readouterr().err)
    nodes = {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
    assert nodes == {"127.0.0.1"} and sum(n["Alive"] for n in ray.nodes()) == 3
    keys = ["cell_id", "epoch", "representation"]
    a, b = _sorted(local_summary, keys), _sorted(ray_summary, keys)
    assert list(a.columns) == list(b.columns) and len(a) == len(b) == 4 * 2 * 3
    numeric = [c for c in a.columns if pd.api.types.is_float_dtype(a[c])]
    assert {"cv", "ad_mean", "dp_p_mean"} <= set(numeric)
    pd.testing.assert_frame_equal(a.drop(columns=numeric), b.drop(columns=numeric))
    np.testing.assert_allclose(a[numeric].to_numpy(float), b[numeric].to_numpy(float),
                               rtol=RTOL, atol=0, equal_nan=True)
    assert (a.loc[a.cell_id == "nan", "status"] == "failed").all()
    assert (a.loc[a.cell_id != "nan", "status"] == "ok").all()
    dkeys = ["cell_id", "epoch", "representation", "coord"]
    da, db = _sorted(local_detail, dkeys), _sorted(ray_detail, dkeys)
    assert len(da) == len(db) > 0
    pd.testing.assert_frame_equal(da, db, check_exact=False, rtol=RTOL, atol=0)
