"""The RayJob on a simulated three-node cluster: the cells land on the shared volume, not on a
node's own disk; a lost worker costs nothing; a second job skips what the first did.

A Ray head (no CPUs: the driver only) and two one-CPU worker nodes on 127.0.0.1, each with its
own HOME and TMPDIR (its "local disk") and one shared folder as the volume, with the environment
every pod of the manifests has (``CBENCH_STORE`` on the volume, the image's project folder as
working directory). The project folder is a copy of this checkout's, as the image holds it; the
grid is tiny and the cluster profile is cluster/params.cluster.yaml with CPU resources instead
of GPUs. The job is the manifest's exact entrypoint, submitted as KubeRay's submitter does.
Invariants only: every cell once in the shared store, the later stages read them, nothing of
the pipeline's on any node's disk, the job's status.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pipeline.runtime.store import folders
from tests.cluster.ray_nodes import Cluster, Node, manifest_entrypoint
from tests.conftest import ROOT, copy_project, venv_env

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.e2e]
N_CELLS = 6
# Caches that programs keep in a home folder whatever the pipeline does; nothing of a run's state
CACHES = (".cache/matplotlib", ".config/matplotlib", ".cache/dvc", ".config/dvc")


def _image(path: Path, tiny_params: dict) -> Path:
    """This checkout's project as cluster/Dockerfile copies it into the image."""
    copy_project(path)
    shutil.copytree(ROOT / ".dvc" / "plots", path / ".dvc" / "plots")
    shutil.copytree(ROOT / "cluster", path / "cluster")
    params = {**tiny_params, "grid": {**tiny_params["grid"], "k": [4, 8, 16], "tau": [0.5, 0.2]},
              "train": {**tiny_params["train"], "epochs": 30}}  # about a second per cell
    (path / "params.yaml").write_text(yaml.safe_dump(params))
    profile = yaml.safe_load((ROOT / "cluster" / "params.cluster.yaml").read_text())
    profile["compute"].update(num_cpus=1, num_gpus=0)  # no GPUs here: one CPU per cell
    profile["train"].update(device="cpu", threads=1)
    (path / "cluster" / "params.cluster.yaml").write_text(yaml.safe_dump(profile))
    return path


def _done(cells: Path) -> dict[str, list[Path]]:
    """cell_id -> its version folders that are done (intact)."""
    out: dict[str, list[Path]] = {}
    for cell in sorted(cells.iterdir()) if cells.exists() else []:
        out[cell.name] = [v for v in cell.iterdir()
                          if not v.name.startswith(".") and folders.inspect(v).status == "done"]
    return {c: v for c, v in out.items() if v}


def _pipeline_files(node: Node) -> list[str]:
    """What the pipeline left on a node's own disk: every file of its HOME and TMPDIR except
    the caches of :data:`CACHES`."""
    caches = [node.home / c for c in CACHES]
    return [str(p) for p in node.local_files() if not any(c in p.parents for c in caches)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, tiny_params_module):
    root = tmp_path_factory.mktemp("sim")
    image = _image(root / "image", tiny_params_module)
    volume = root / "volume"
    env = venv_env(volume)  # CBENCH_STORE=<volume>, as the manifests set it on every pod
    env["PYTHONPATH"] = str(image)  # the image's editable install of its project folder
    for key in ("MLFLOW_TRACKING_URI", "XDG_CACHE_HOME", "CBENCH_STORE_SHARED"):
        env.pop(key, None)
    sim = Cluster(root, image, env, workers=2)
    try:
        yield sim.start()
    finally:
        sim.close()


@pytest.fixture(scope="module")
def tiny_params_module():
    from pipeline.config import merge, read_yaml
    from tests.conftest import TINY

    return merge(read_yaml(ROOT / "params.yaml"), yaml.safe_load(yaml.safe_dump(TINY)))


def test_the_rayjob_on_three_nodes_with_a_lost_worker(cluster):
    volume = Path(cluster.env["CBENCH_STORE"])
    cells, workspace = volume / "cells", volume / "workspace"
    entrypoint = manifest_entrypoint(ROOT / "cluster" / "kuberay-rayjob.yaml")
    head, lost = cluster.nodes[0], cluster.nodes[1]
    killed_after: list[int] = []

    def lose_a_worker() -> None:  # as a spot node goes: killed, not drained, mid-grid
        deadline = time.monotonic() + 600
        while not _done(cells) and time.monotonic() < deadline:
            time.sleep(0.05)
        killed_after.append(len(_done(cells)))
        cluster.kill(lost)

    killer = threading.Thread(target=lose_a_worker, daemon=True)
    killer.start()
    submitter = cluster.submit(entrypoint, "run-1")
    status = cluster.wait("run-1")
    submitter.communicate(timeout=120)
    killer.join(timeout=60)
    logs = cluster.logs("run-1")
    assert status == "SUCCEEDED", logs[-6000:]
    assert killed_after and killed_after[0] < N_CELLS, "the worker must go mid-grid"

    # every cell once, on the volume, intact; nothing half-written left beside them
    done = _done(cells)
    assert len(done) == N_CELLS and all(len(v) == 1 for v in done.values()), done
    assert not list(cells.glob("*/.*")), "a staging folder was left"
    # the later stages (Dask on the workers, the report on the head) read every cell
    board = pd.read_csv(workspace / "reports" / "cells.csv")
    assert sorted(board.cell_id) == sorted(done) and (board.status == "ok").all()
    assert set(pd.read_parquet(workspace / "data" / "stats.parquet").cell_id) == set(done)
    # DVC's state is the workspace's on the volume
    assert (workspace / "dvc.lock").exists() and any((workspace / ".dvc" / "cache").rglob("*"))
    # one MLflow run per cell, in the workspace's database on the volume
    with sqlite3.connect(workspace / "mlruns.db") as db:
        rows = db.execute("select t.value, r.status from runs r join tags t on r.run_uuid = "
                          "t.run_uuid where t.key = 'cell_id'").fetchall()
    assert sorted(c for c, s in rows if s == "FINISHED") == sorted(done)
    # no node kept anything of the run on its own disk
    for node in cluster.nodes:
        assert _pipeline_files(node) == [], node.name
    assert head.proc.poll() is None

    # a second RayJob: the same image, the state on the volume: nothing is trained or recomputed
    mtimes = {c: (v[0] / "embeddings.parquet").stat().st_mtime_ns for c, v in done.items()}
    submitter = cluster.submit(entrypoint, "run-2")
    status = cluster.wait("run-2")
    submitter.communicate(timeout=120)
    logs = cluster.logs("run-2")
    assert status == "SUCCEEDED", logs[-6000:]
    assert f"{N_CELLS} already done (skipped), 0 to train" in logs
    for stage in ("prepare", "stats", "search", "bounds", "probe", "report"):
        assert f"Stage '{stage}' didn't change, skipping" in logs, stage
    assert {c: (v[0] / "embeddings.parquet").stat().st_mtime_ns
            for c, v in _done(cells).items()} == mtimes
    for node in cluster.nodes:
        assert _pipeline_files(node) == [], node.name
