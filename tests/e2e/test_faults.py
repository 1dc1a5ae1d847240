"""Fault handling on real Ray, DVC and MLflow: failing cells, a killed driver, a lost node."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pipeline.runtime.store import folders
from tests.conftest import ROOT, cell_runs, venv_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.ray]
NAN_PLUGIN = str(ROOT / "tests" / "fixtures" / "nan_loss.py")


def _cell_runs(path: Path) -> pd.DataFrame:
    return cell_runs(path / "mlruns.db")


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


def _done(cells: Path) -> dict[str, Path]:
    """cell_id -> the folder of its done (intact) version in a store's ``cells/``."""
    out = {}
    for cell in (cells.iterdir() if cells.exists() else []):
        for version in cell.iterdir():
            if not version.name.startswith(".") and folders.inspect(version).status == "done":
                out[cell.name] = version
    return out


def _leftovers(cells: Path) -> list[Path]:
    """Staging folders (a cell being written) and anything in a version folder without a record."""
    out = [p for p in cells.glob("*/.*")]
    out += [v for v in cells.glob("*/*") if not v.name.startswith(".")
            and folders.inspect(v).status == "todo"]
    return out


def test_killed_driver_resumes_without_retraining(project, tiny_params, tmp_path_factory):
    """Whatever number of cells finished before the SIGKILL: none is retrained, none is left
    half-written, the embeddings equal a clean run's, and each cell has one MLflow run."""
    tiny_params["grid"]["k"] = [4, 8, 16]
    tiny_params["grid"]["tau"] = [0.5, 0.2]
    tiny_params["train"]["epochs"] = 30  # about a second per cell: the kill lands mid-grid
    project.write_params(tiny_params)
    _stage(project, "resolve")
    _stage(project, "prepare")
    driver = subprocess.Popen([sys.executable, "-m", "stages.train"], cwd=project.path,
                              env=venv_env(project.store), start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not _done(project.cells) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and everything in its process group
    driver.wait()
    done_before = _done(project.cells)  # Ray's own processes die with the driver (fate sharing):
    stable_since = time.monotonic()     # wait until no cell finishes for 5 s
    while time.monotonic() - stable_since < 5:
        time.sleep(0.5)
        if _done(project.cells) != done_before:
            done_before, stable_since = _done(project.cells), time.monotonic()
    assert done_before, "at least one cell finished before the kill"
    mtimes = {c: (f / "embeddings.parquet").stat().st_mtime_ns for c, f in done_before.items()}
    again = _stage(project, "train")
    n = len(done_before)
    assert f"{n} already done (skipped), {6 - n} to train" in again.stdout
    done = _done(project.cells)
    assert len(done) == 6 and not _leftovers(project.cells)  # nothing half-written is left
    for c, mtime in mtimes.items():  # finished cells were not retrained
        assert done[c] == done_before[c]
        assert (done[c] / "embeddings.parquet").stat().st_mtime_ns == mtime
    # an uninterrupted run of the same grid in another project and store, on this machine with
    # the same thread count (the same kernels in the same order), gives the same bytes
    clean = tmp_path_factory.mktemp("clean")
    (clean / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    for name in ("resolve", "prepare", "train"):
        subprocess.run([sys.executable, "-m", f"stages.{name}"], cwd=clean,
                       env=venv_env(clean / "store"), check=True, capture_output=True)
    reference = _done(clean / "store" / "cells")
    assert set(reference) == set(done)
    for c, folder in done.items():
        assert folder.name == reference[c].name  # the same version: the same code and data
        assert (folder / "embeddings.parquet").read_bytes() == \
            (reference[c] / "embeddings.parquet").read_bytes(), c
    runs = _cell_runs(project.path)
    finished = runs[runs.status == "FINISHED"].groupby("tags.cell_id").size()
    assert len(finished) == 6 and (finished == 1).all()


def test_losing_a_worker_node_mid_grid(tmp_path, tiny_params, monkeypatch):
    import ray
    from ray.cluster_utils import Cluster

    from pipeline.runtime.backends.executor import loopback_only
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
    monkeypatch.setenv("CBENCH_STORE", str(tmp_path / "default-store"))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    try:
        assert resolve.main([]) == 0 and prepare.main([]) == 0

        removed_after: list[int] = []

        errors: list[BaseException] = []

        def remove_a_worker() -> None:
            try:
                while not _done(shared):
                    time.sleep(0.05)
                removed_after.append(len(_done(shared)))
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
    assert len(_done(shared)) == 6 and not _leftovers(shared)
    assert not (tmp_path / "default-store").exists()  # nothing written beside the driver
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
        subprocess.run([sys.executable, "-m", f"stages.{name}"], cwd=clean,
                       env=venv_env(clean / "store"), check=True, capture_output=True)
    reference = _done(clean / "store" / "cells")
    for c, folder in _done(shared).items():
        a = (folder / "embeddings.parquet").read_bytes()
        assert a == (reference[c] / "embeddings.parquet").read_bytes(), c
