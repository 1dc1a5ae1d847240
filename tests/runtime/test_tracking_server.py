"""A tracking server as the store: ``mlflow server`` on 127.0.0.1, backed by its own SQLite file.
The train driver's sync (``record_cells`` after ``cell_run_refs``) goes through MLflow's REST
client there, finds the runs it logged before, and leaves what the direct SQLite writer leaves
in a local database."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline.runtime.tracking import sql_writer
from pipeline.runtime.tracking.runs import Tracker, cell_metrics, record_cells, run_key
from tests.runtime.test_tracking_sql import CELLS, _view


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path):
    port = _free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    proc = subprocess.Popen(
        [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--artifacts-destination", str(tmp_path / "artifacts")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {proc.stderr.read().decode()[-2000:]}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            if time.monotonic() > deadline:
                raise RuntimeError("mlflow server did not answer /health within 120 s")
            time.sleep(0.5)
        yield uri
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_tracking_server_holds_one_run_per_cell_as_a_local_database_does(server, tmp_path):
    assert not sql_writer.is_local_sqlite(server)  # through MLflow's client, not the writer
    parents = {}
    for _ in range(2):  # the train driver's sync, twice: the runs it finds are not created again
        tracker = Tracker(server, "exp")
        parents[tracker.start_parent("train", {})] = "parent"
        record_cells(tracker, list(parents)[-1], CELLS, tracker.cell_run_refs())
    runs = MlflowClient(tracking_uri=server).search_runs([tracker.experiment_id],
                                                         "tags.cell_id != ''")
    assert sorted(r.data.tags["cell_id"] for r in runs) == ["c1", "c2", "c3"]
    assert sorted(tracker.cell_run_refs()) == sorted(run_key(r["cell_id"], "v1") for r, _ in CELLS)
    assert set(cell_metrics(server, "exp")) == set(tracker.cell_run_refs())

    local_parents = {}
    for _ in range(2):  # the same two syncs into a local database, through the direct writer
        local = Tracker(f"sqlite:///{tmp_path / 'local.db'}", "exp")
        local_parents[local.start_parent("train", {})] = "parent"
        local_ids = record_cells(local, list(local_parents)[-1], CELLS, local.cell_run_refs())
    by_name = {r.info.run_name: r.info.run_id for r in runs}
    for run_id in local_ids:
        name = local.client.get_run(run_id).info.run_name
        there = _view(tracker.client, by_name[name], parents)
        here = _view(local.client, run_id, local_parents)
        there.pop("artifacts")  # a server's artifact location is its own
        here.pop("artifacts")
        assert there == here, name
