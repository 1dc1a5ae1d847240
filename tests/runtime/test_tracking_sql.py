"""The one-transaction writes of a local SQLite store (pipeline.runtime.tracking.sql_writer) leave
what MLflow's own client calls leave: the same runs written both ways, read back through
``MlflowClient``, agree in everything but their ids and timestamps."""

from __future__ import annotations

import math
import pathlib
import re

import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from pipeline.runtime.tracking import sql_writer
from pipeline.runtime.tracking.runs import Tracker, cell_metrics, record_cell, record_cells, run_key


def _record(cell_id: str, status: str = "ok", **extra) -> dict:
    return {"cell_id": cell_id, "version": "v1", "status": status,
            "config": {"loss": "infonce", "k": 4, "train": {"lr": 0.1, "epochs": 2},
                       "data": {"name": "laplace", "n_train": 10, "n_heldout": 5}},
            "git_sha": "abc123", "dataset_hash": "d" * 40, "wall_seconds": 1.25,
            "started_at": 1_700_000_000.5, "finished_at": 1_700_000_001.75,
            "code_fingerprint": {"digest": "f" * 16}, **extra}


HISTORY = [{"epoch": 1, "loss": 2.0, "tau_mean": 0.1, "seconds": 0.25},
           {"epoch": 2, "loss": float("nan"), "tau_mean": 0.1, "seconds": 0.5}]
CELLS = [
    (_record("c1"), HISTORY),
    (_record("c2", compute={"precision": "fp32", "memory_format": "contiguous"}),
     [{"epoch": 1, "loss": float("inf"), "seconds": 0.1}]),
    (_record("c3", status="failed", reason="diverged: loss is nan\ntraceback", wall_seconds=None,
             finished_at=None), []),
]


def _view(client: MlflowClient, run_id: str, parents: dict[str, str]) -> dict:
    """Everything a reader of the run sees, ids and times of logging left out."""
    run = client.get_run(run_id)
    info = run.info
    tags = dict(run.data.tags)
    if "mlflow.parentRunId" in tags:
        tags["mlflow.parentRunId"] = parents[tags["mlflow.parentRunId"]]
    histories = {key: sorted((m.step, "nan" if math.isnan(m.value) else m.value)
                             for m in client.get_metric_history(run_id, key))
                 for key in run.data.metrics}
    (given,) = run.inputs.dataset_inputs
    # c3 has no finished_at: each way ends it at its own "now" (compared apart)
    return {"status": info.status, "start": info.start_time,
            "end": "now" if info.run_name == "c3" else info.end_time,
            "name": info.run_name, "user": info.user_id, "stage": info.lifecycle_stage,
            "artifacts": info.artifact_uri.endswith(f"/{run_id}/artifacts"),
            "tags": tags, "params": dict(run.data.params),
            "metrics": {k: "nan" if math.isnan(v) else v for k, v in run.data.metrics.items()},
            "histories": histories,
            "input": (given.dataset.name, given.dataset.digest, given.dataset.source,
                      given.dataset.source_type, sorted((t.key, t.value) for t in given.tags))}


def _both(tmp_path) -> tuple[Tracker, Tracker, str, str]:
    one = Tracker(f"sqlite:///{tmp_path / 'client.db'}", "exp")
    two = Tracker(f"sqlite:///{tmp_path / 'bulk.db'}", "exp")
    return one, two, one.start_parent("train", {}), two.start_parent("train", {})


def test_runs_written_in_one_transaction_read_back_as_the_clients(tmp_path):
    one, two, p1, p2 = _both(tmp_path)
    ids1 = [record_cell(one, p1, r, h) for r, h in CELLS]
    ids2 = record_cells(two, p2, CELLS, {})
    assert len(set(ids2)) == 3
    for a, b in zip(ids1, ids2, strict=True):
        seen = _view(one.client, a, {p1: "parent"})
        assert _view(two.client, b, {p2: "parent"}) == seen
    ends = [t.client.get_run(i[2]).info.end_time for t, i in ((one, ids1), (two, ids2))]
    assert abs(ends[0] - ends[1]) < 60_000
    # the NaN loss, the infinite one and the failed run are as the client left them
    assert seen["status"] == "FAILED" and seen["tags"]["failure_reason"].startswith("diverged")
    first = _view(two.client, ids2[0], {p2: "parent"})
    assert first["histories"]["train_loss"] == [(1, 2.0)]  # a NaN is left out, as Tracker.log
    assert _view(two.client, ids2[1], {p2: "parent"})["metrics"]["train_loss"] > 1e300
    # one dataset row shared by the runs, as log_inputs does
    assert len({r.inputs.dataset_inputs[0].dataset.digest
                for r in two.client.search_runs([two.experiment_id], "tags.cell_id != ''")}) == 1
    # searchable by their key, as the driver finds them again
    assert sorted(two.cell_runs()) == sorted(run_key(r["cell_id"], "v1") for r, _ in CELLS)
    assert {k: v[0] for k, v in cell_metrics(two.uri, "exp").items()} == {
        run_key(r["cell_id"], "v1"): i for (r, _), i in zip(CELLS, ids2, strict=True)}


def test_more_params_and_metrics_than_one_request_holds(tmp_path):
    """MLflow's per-request limits (100 params, 1000 metrics) are the client's to split: a run
    of 150 params and 1500 history values is written whole, as the client writes it."""
    big = _record("big")
    big["config"]["options"] = {f"option_{i:03d}": i for i in range(150)}
    history = [{"epoch": e, "loss": 1.0 / e, "tau_mean": 0.1, "seconds": 0.01}
               for e in range(1, 501)]
    one, two, p1, p2 = _both(tmp_path)
    a = record_cell(one, p1, big, history)
    (b,) = record_cells(two, p2, [(big, history)], {})
    seen = _view(one.client, a, {p1: "parent"})
    assert _view(two.client, b, {p2: "parent"}) == seen
    assert len(seen["params"]) > 150 and len(seen["histories"]["train_loss"]) == 500


def test_a_cell_whose_run_exists_is_logged_into_it(tmp_path):
    _, two, _, p2 = _both(tmp_path)
    (first,) = record_cells(two, p2, CELLS[:1], {})
    again = record_cells(two, p2, CELLS[:2], two.cell_run_refs())
    assert again[0] == first and again[1] != first
    assert len(two.cell_runs()) == 2  # no second run for c1


def test_metrics_of_many_runs_in_one_transaction_read_back_as_log_batchs(tmp_path):
    one, two, p1, p2 = _both(tmp_path)
    ids1 = record_cells(one, p1, CELLS, {})  # created in bulk in both stores: the logging differs
    ids2 = record_cells(two, p2, CELLS, {})
    now = 1_800_000_000_000
    values = [("recall_at_1", 0.5, 0), ("cv", float("nan"), 0), ("risk", -float("inf"), 0),
              ("wall_seconds", 9.0, 0), ("train_loss", 1.0, 1)]
    from mlflow.entities import Metric
    for run_id in ids1:  # the client: one log_batch per run
        one.client.log_batch(run_id, metrics=[Metric(k, v, now, s) for k, v, s in values])
    sql_writer.log_metrics(two.uri, {run_id: [Metric(k, v, now, s) for k, v, s in values]
                                       for run_id in ids2})
    # the same values again: MLflow leaves out an identical (key, timestamp, step, value)
    sql_writer.log_metrics(two.uri, {ids2[0]: [Metric("recall_at_1", 0.5, now, 0)]})
    # an older value does not become the latest
    sql_writer.log_metrics(two.uri, {ids2[0]: [Metric("recall_at_1", 0.9, now - 5, 0)]})
    one.client.log_batch(ids1[0], metrics=[Metric("recall_at_1", 0.9, now - 5, 0)])
    for a, b in zip(ids1, ids2, strict=True):
        assert _view(two.client, b, {p2: "parent"}) == _view(one.client, a, {p1: "parent"})
    assert two.client.get_run(ids2[0]).data.metrics["recall_at_1"] == 0.5


def test_log_changed_on_sqlite_logs_only_what_changed(tmp_path):
    _, two, _, p2 = _both(tmp_path)
    (run_id,) = record_cells(two, p2, CELLS[:1], {})
    latest = {k: v[1] for k, v in cell_metrics(two.uri, "exp").items()}
    assert two.log_changed({run_id: latest[run_key("c1", "v1")]},
                           {run_id: [("wall_seconds", 1.25, 0), ("r1", 0.25, 0)]}) == 1
    history = two.client.get_metric_history(run_id, "wall_seconds")
    assert len(history) == 1  # unchanged: not logged again
    assert two.client.get_run(run_id).data.metrics["r1"] == 0.25


def test_a_bad_value_is_refused_before_anything_is_written(tmp_path):
    _, two, _, p2 = _both(tmp_path)
    bad = _record("c9")
    bad["config"]["k" * 300] = 1  # a param key longer than MLflow allows
    with pytest.raises(MlflowException, match="Param key. exceeds the maximum length"):
        record_cells(two, p2, [CELLS[0], (bad, [])], {})
    assert two.cell_runs() == {}  # the good run of the batch was not written either
    with pytest.raises(ValueError, match="no such active run"):
        from mlflow.entities import Metric
        sql_writer.log_metrics(two.uri, {"0" * 32: [Metric("a", 1.0, 0, 0)]})


@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_a_uri_with_a_query_string_holds_one_run_per_cell(where, tmp_path, monkeypatch):
    """``?timeout=30`` is an option of SQLite's connection, not part of the file's name: a second
    sync of the same cells finds their runs (it made 6 runs of 3 cells when the path check took
    the query for the name)."""
    monkeypatch.chdir(tmp_path)  # a relative path is the working folder's, as SQLAlchemy's
    path = "mlruns.db" if where == "relative" else str(tmp_path / "mlruns.db")
    uri = f"sqlite:///{path}?timeout=30"
    for _ in range(2):  # the train driver's sync, twice: the runs it finds are not created again
        tracker = Tracker(uri, "exp")
        record_cells(tracker, tracker.start_parent("train", {}), CELLS, tracker.cell_run_refs())
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([tracker.experiment_id], "tags.cell_id != ''")
    assert sorted(r.data.tags["cell_id"] for r in runs) == ["c1", "c2", "c3"]
    assert sorted(tracker.cell_run_refs()) == sorted(run_key(r["cell_id"], "v1") for r, _ in CELLS)
    assert set(cell_metrics(uri, "exp")) == set(tracker.cell_run_refs())
    assert not [p.name for p in tmp_path.iterdir() if "?" in p.name]  # no file named by the query
    assert (tmp_path / "mlruns.db").is_file() and (tmp_path / "mlruns.db.lock").exists()


def test_every_form_of_a_sqlite_uri_names_its_file(tiny_params, tmp_path, monkeypatch):
    from pipeline.config import from_mapping
    from pipeline.runtime import context
    from pipeline.runtime.paths import sqlite_path
    from stages.train import tracking_db

    assert sqlite_path("sqlite:///mlruns.db?timeout=30") == "mlruns.db"
    assert sqlite_path("sqlite:////abs/m.db?timeout=30&uri=true") == "/abs/m.db"
    assert sqlite_path("sqlite:///m.db") == "m.db"
    for other in ("sqlite://", "sqlite:///:memory:", "http://127.0.0.1:5000", "postgresql:///m",
                  "file:///tmp/mlruns", "mlruns"):
        assert sqlite_path(other) is None, other
    monkeypatch.setattr(context, "project_root", lambda: tmp_path)
    tiny_params["tracking"]["uri"] = "sqlite:///m.db?timeout=30"
    params = from_mapping(tiny_params)
    assert context.tracking_uri(params) == f"sqlite:///{tmp_path / 'm.db'}?timeout=30"
    (tmp_path / "m.db").touch()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    assert tracking_db({"tracking": {"uri": "sqlite:///m.db?timeout=30"}}) == pathlib.Path("m.db")


def _drop(uri: str, statement: str) -> None:
    """Change a real MLflow database's tables as another MLflow version would have them."""
    engine = sql_writer.engine(uri)
    with engine.begin() as db:
        db.exec_driver_sql(statement)
    engine.dispose()


@pytest.mark.parametrize(("change", "says"), [
    ("ALTER TABLE inputs DROP COLUMN step", "table inputs lacks column(s) step"),
    ("ALTER TABLE runs ADD COLUMN workspace VARCHAR(63)",
     "table runs has extra column(s) workspace"),
])
def test_a_database_of_another_schema_is_refused_before_anything_is_written(change, says,
                                                                            tmp_path):
    """MLflow 2.16's ``inputs`` has no ``step``: the rows were written without it, silently."""
    _, two, _, p2 = _both(tmp_path)
    (run_id,) = record_cells(two, p2, CELLS[:1], {})  # the schema this module writes: accepted
    _drop(two.uri, change)
    expected = re.escape(f"MLflow database {tmp_path / 'bulk.db'}: {says}: pipeline.runtime."
                         f"tracking.sql_writer writes the tables of MLflow "
                         f"{sql_writer.MLFLOW_TESTED} (installed: mlflow ")
    with pytest.raises(sql_writer.SchemaMismatch, match=expected):
        record_cells(two, p2, CELLS[1:], {})
    from mlflow.entities import Metric
    with pytest.raises(sql_writer.SchemaMismatch, match=re.escape(says)):
        sql_writer.log_metrics(two.uri, {run_id: [Metric("r1", 0.5, 0, 0)]})
    assert sorted(two.cell_run_refs()) == [run_key("c1", "v1")]  # nothing more was written
    # (read from the tables: MLflow's own client cannot read a run of the changed schema)
    assert "r1" not in cell_metrics(two.uri, "exp")[run_key("c1", "v1")][1]


def test_mlflow_is_bounded_to_the_version_whose_tables_are_written():
    from importlib import metadata
    from pathlib import Path

    from mlflow.store.tracking.dbmodels import models

    tested = sql_writer.MLFLOW_TESTED
    major, minor = (int(x) for x in tested.split("."))
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert f'"mlflow>={tested},<{major}.{minor + 1}"' in pyproject
    assert metadata.version("mlflow").startswith(f"{tested}.")
    # the installed MLflow's models are the schema written (a new column there fails here first)
    tables = {t: {c.name for c in getattr(models, m).__table__.columns} for t, m in (
        ("runs", "SqlRun"), ("tags", "SqlTag"), ("params", "SqlParam"), ("metrics", "SqlMetric"),
        ("latest_metrics", "SqlLatestMetric"), ("datasets", "SqlDataset"),
        ("inputs", "SqlInput"), ("input_tags", "SqlInputTag"))}
    assert tables == sql_writer.SCHEMA
