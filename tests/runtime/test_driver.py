"""The train driver in one process (the Ray executor replaced by run_cell in a loop): a second
run trains nothing and logs nothing (the tracking database holds the same runs), a lost MLflow
store is logged again from the cell store (one run per training), and stale cells under
``train.on_code_change: fail`` stop the stage."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from pipeline.runtime import driver
from pipeline.runtime.cells.one_cell import run_cell
from pipeline.runtime.context import GRID, resolved_params, tracking_uri
from pipeline.runtime.tracking.runs import Tracker
from tests.conftest import mlflow_runs

pytestmark = pytest.mark.slow  # trains two tiny cells, four drivers' worth of MLflow


def _in_process(cells, dataset, folders, metas, compute, threads, snaps, on_done, plugins,
                ready=None):
    if ready is not None:
        ready()
    out = []
    for cell in cells:
        outcome = run_cell(cell, dataset, folders[cell.cell_id], metas[cell.cell_id], threads,
                           snaps)
        on_done(outcome)
        out.append(outcome)
    return out


def _workspace(tmp_path, monkeypatch, params):
    from stages import prepare, resolve

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.setenv("CBENCH_STORE", str(tmp_path / "store"))
    monkeypatch.setattr(driver, "run_cells", _in_process)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    assert resolve.main([]) == 0 and prepare.main([]) == 0


def _finished_runs(params) -> int:
    runs = Tracker(tracking_uri(params), params.tracking.experiment).cell_runs()
    return sum(r.info.status == "FINISHED" for r in runs.values())


def test_a_second_run_reuses_and_a_lost_tracking_store_is_synced(tmp_path, monkeypatch,
                                                                  tiny_params):
    _workspace(tmp_path, monkeypatch, tiny_params)
    params = resolved_params()
    first = driver.train_grid(params)
    assert [r["status"] for r in first.rows] == ["ok", "ok"] and first.failed == 0
    assert (len(first.trained), first.done, first.synced) == (2, 0, 0)
    assert _finished_runs(params) == 2

    again = driver.train_grid(params)
    assert (len(again.trained), again.done, again.synced) == (0, 2, 0)
    assert again.rows == first.rows

    # a new tracking store (the runs are lost; the cells are in the store): mlflow keeps the
    # old file's engine open, so the test points at another file rather than deleting it
    lost = params.model_copy(update={"tracking": params.tracking.model_copy(
        update={"uri": "sqlite:///elsewhere.db"})})
    synced = driver.train_grid(lost)
    assert (len(synced.trained), synced.done, synced.synced) == (0, 2, 2)
    assert _finished_runs(lost) == 2
    assert driver.train_grid(lost).synced == 0

    # a driver died between creating a cell's run and ending it: the next one finishes that
    # run (through the client, into the same run id), and creates none for it
    tracker = Tracker(tracking_uri(lost), lost.tracking.experiment)
    runs = tracker.cell_runs()
    key, run = sorted(runs.items())[0]
    tracker.client.update_run(run.info.run_id, status="RUNNING")
    assert _finished_runs(lost) == 1
    assert driver.train_grid(lost).synced == 1
    after = tracker.cell_runs()
    assert _finished_runs(lost) == 2 and after[key].info.run_id == run.info.run_id
    assert len(after) == 2


def test_a_rerun_with_nothing_to_train_creates_no_mlflow_run(tmp_path, monkeypatch,
                                                             tiny_params):
    tiny_params["grid"]["k"] = [4]  # one cell
    _workspace(tmp_path, monkeypatch, tiny_params)
    params = resolved_params()
    db = tracking_uri(params).removeprefix("sqlite:///")
    driver.train_grid(params)
    first = mlflow_runs(db)  # read back through a client of its own
    kinds = first["tags.cbench.kind"].fillna("cell").tolist()
    assert sorted(kinds) == ["cell", "invocation"]  # the work is recorded as before
    parent = first[first["tags.cbench.kind"] == "invocation"].iloc[0]
    cell = first[first["tags.cell_id"].notna()].iloc[0]
    assert cell["tags.mlflow.parentRunId"] == parent.run_id and cell.status == "FINISHED"
    assert parent["metrics.cells_trained"] == 1 and parent.status == "FINISHED"

    again = driver.train_grid(params)
    assert (len(again.trained), again.done, again.synced) == (0, 1, 0)
    after = mlflow_runs(db)
    assert len(after) == len(first) == 2
    assert sorted(after.run_id) == sorted(first.run_id)


def test_stale_cells_with_on_code_change_fail_stop_the_stage(tmp_path, monkeypatch,
                                                             tiny_params, capsys):
    from stages import train

    tiny_params["train"]["on_code_change"] = "fail"
    _workspace(tmp_path, monkeypatch, tiny_params)
    real_plan = driver.plan

    def stale_plan(*args, **kwargs):
        return [replace(e, action="stale", changed=("pipeline.train",))
                for e in real_plan(*args, **kwargs)]

    monkeypatch.setattr(driver, "plan", stale_plan)
    assert train.main([]) == 2
    err = capsys.readouterr().err
    assert "train: 2 cells were trained by other code or data (changed: pipeline.train); " \
           "train.on_code_change = fail" in err
    assert not GRID.exists()


def test_a_tracking_store_that_cannot_open_stops_the_stage_before_any_cell(tmp_path, monkeypatch,
                                                                           tiny_params):
    # the store opens in a thread while Ray starts; the cells wait for it (run_cells' ready)
    _workspace(tmp_path, monkeypatch, tiny_params)
    params = resolved_params()

    def unreachable(*args, **kwargs):
        raise ConnectionError("tracking server at http://127.0.0.1:9 refused the connection")

    monkeypatch.setattr(driver, "_open_tracking", unreachable)
    with pytest.raises(ConnectionError, match="refused"):
        driver.train_grid(params)
    assert not list((tmp_path / "store").rglob("cell.json"))  # no cell trained
