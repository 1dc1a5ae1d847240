"""Fault handling on real Ray, DVC and MLflow: failing cells, a killed driver, a lost node."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml

from pipeline.runtime import storage
from tests.conftest import ROOT, venv_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.ray]
NAN_PLUGIN = str(ROOT / "tests" / "fixtures" / "nan_loss.py")


def _cell_runs(path: Path) -> pd.DataFrame:
    mlflow.set_tracking_uri(f"sqlite:///{path / 'mlruns.db'}")
    runs = mlflow.search_runs(experiment_names=["contrastive-bench"])
    return runs[runs["tags.cell_id"].notna()]


def test_a_failing_cell_is_recorded_and_the_grid_goes_on(project, tiny_params):
    tiny_params["plugins"] = [NAN_PLUGIN]
    tiny_params["grid"]["loss"] = ["infonce", "nan_probe"]
    tiny_params["grid"]["k"] = [4]
    project.write_params(tiny_params)
    proc = project.repro(check=False)
    assert proc.returncode != 0  # the report stage says how many cells failed
    assert "1 of 2 cells failed" in proc.stderr
    board = pd.read_csv(project.path / "reports" / "cells.csv").set_index("loss")
    assert board.loc["infonce", "status"] == "ok"
    assert board.loc["nan_probe", "status"] == "failed"
    assert board.loc["nan_probe", "reason"].startswith("diverged: loss is nan at epoch 1")
    assert "nan_probe" in (project.path / "reports" / "leaderboard.md").read_text()
    runs = _cell_runs(project.path).set_index("tags.cell_id")
    failed_id = board.loc["nan_probe", "cell_id"]
    assert runs.loc[failed_id, "status"] == "FAILED"
    assert runs.loc[failed_id, "tags.failure_reason"].startswith("diverged")
    assert (runs.status == "FINISHED").sum() == 1


def _stage(project, name: str) -> subprocess.CompletedProcess:
    return project.run(sys.executable, "-m", f"stages.{name}")


def _done(path: Path, cells: Path | None = None) -> set[str]:
    cells = cells or path / "data" / "cells"
    return {p.name for p in cells.iterdir() if storage.cell_status(cells, p.name) == "ok"} \
        if cells.exists() else set()


def test_killed_driver_resumes_without_retraining(project, tiny_params, tmp_path_factory):
    tiny_params["grid"]["k"] = [4, 8, 16]
    tiny_params["grid"]["tau"] = [0.5, 0.2]
    tiny_params["train"]["epochs"] = 30  # about a second per cell: the kill lands mid-grid
    project.write_params(tiny_params)
    _stage(project, "resolve")
    _stage(project, "prepare")
    driver = subprocess.Popen([sys.executable, "-m", "stages.train"], cwd=project.path,
                              env=venv_env(), start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while len(_done(project.path)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and everything in its process group
    driver.wait()
    done_before = _done(project.path)  # Ray's own processes die with the driver (fate sharing):
    stable_since = time.monotonic()    # wait until no cell finishes for 5 s
    while time.monotonic() - stable_since < 5:
        time.sleep(0.5)
        if _done(project.path) != done_before:
            done_before, stable_since = _done(project.path), time.monotonic()
    assert 2 <= len(done_before) < 6, "kill the driver mid-grid"
    mtimes = {c: (project.path / "data" / "cells" / c / "embeddings.parquet").stat().st_mtime_ns
              for c in done_before}
    again = _stage(project, "train")
    assert f"{len(done_before)} already done (skipped), {6 - len(done_before)} to train" in again.stdout
    for c, mtime in mtimes.items():  # finished cells were not retrained
        assert (project.path / "data" / "cells" / c / "embeddings.parquet").stat().st_mtime_ns == mtime
    # an uninterrupted run of the same grid elsewhere gives byte-identical embeddings
    clean = tmp_path_factory.mktemp("clean")
    (clean / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    for name in ("resolve", "prepare", "train"):
        subprocess.run([sys.executable, "-m", f"stages.{name}"], cwd=clean, env=venv_env(),
                       check=True, capture_output=True)
    cells = sorted(p.name for p in (clean / "data" / "cells").iterdir())
    assert len(cells) == 6 and _done(project.path) == set(cells)
    for c in cells:
        ours = (project.path / "data" / "cells" / c / "embeddings.parquet").read_bytes()
        assert ours == (clean / "data" / "cells" / c / "embeddings.parquet").read_bytes(), c
    runs = _cell_runs(project.path)
    finished = runs[runs.status == "FINISHED"].groupby("tags.cell_id").size()
    assert len(finished) == 6 and (finished == 1).all()


def test_losing_a_worker_node_mid_grid(tmp_path, tiny_params, monkeypatch):
    import ray
    from ray.cluster_utils import Cluster

    from pipeline.runtime.executor import loopback_only
    from stages import prepare, resolve, train

    loopback_only()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    tiny_params["grid"]["k"] = [4, 8, 16]
    tiny_params["grid"]["tau"] = [0.5, 0.2]
    tiny_params["train"]["epochs"] = 30  # a few seconds per cell: the node goes mid-grid
    tiny_params["compute"]["ray_address"] = cluster.address
    tiny_params["compute"]["max_retries"] = 3
    # as on a cluster: every node writes to one URI (s3://… there); cells go under <storage>/cells
    tiny_params["compute"]["storage"] = f"file://{tmp_path / 'shared'}"
    shared = tmp_path / "shared" / "cells"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    try:
        assert resolve.main([]) == 0 and prepare.main([]) == 0

        removed_after: list[int] = []

        errors: list[BaseException] = []

        def remove_a_worker() -> None:
            try:
                while not _done(tmp_path, shared):
                    time.sleep(0.05)
                removed_after.append(len(_done(tmp_path, shared)))
                # killed, not drained: its running task is lost and retried on the other node
                cluster.remove_node(workers[0], allow_graceful=False)
            except BaseException as err:  # surfaced below: a thread's exception is otherwise lost
                errors.append(err)

        killer = threading.Thread(target=remove_a_worker, daemon=True)
        killer.start()
        assert train.main([]) == 0
        killer.join(timeout=60)
        assert not errors, errors
        assert removed_after and removed_after[0] < 6, "the node must go mid-grid"
        deadline = time.monotonic() + 60  # the GCS marks a killed node dead after its health checks
        while sum(n["Alive"] for n in ray.nodes()) != 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert sum(n["Alive"] for n in ray.nodes()) == 2  # the head and one worker are left
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert len(_done(tmp_path, shared)) == 6
    assert not any((tmp_path / "data" / "cells").iterdir())  # nothing written beside the driver
    runs = _cell_runs(tmp_path)
    finished = runs[runs.status == "FINISHED"].groupby("tags.cell_id").size()
    assert len(finished) == 6 and (finished == 1).all()
    # identical outputs to a clean local run of the same cells
    local = {**tiny_params, "compute": {**tiny_params["compute"], "ray_address": None,
                                        "storage": None}}
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "params.yaml").write_text(yaml.safe_dump(local))
    for name in ("resolve", "prepare", "train"):
        subprocess.run([sys.executable, "-m", f"stages.{name}"], cwd=clean, env=venv_env(),
                       check=True, capture_output=True)
    for c in _done(tmp_path, shared):
        a = (shared / c / "embeddings.parquet").read_bytes()
        assert a == (clean / "data" / "cells" / c / "embeddings.parquet").read_bytes(), c
