"""A cell's MLflow run read back through the client, as the UI shows it: its real duration,
MLflow's source tags, the dataset as an input, the parent run, the experiment's view."""

from __future__ import annotations

import copy

import pytest
from mlflow.tracking import MlflowClient

from pipeline.config import expand, from_mapping, merge, read_yaml
from pipeline.datasets import load_dataset
from pipeline.runtime.cells.one_cell import run_cell
from pipeline.runtime.tracking.runs import EXPERIMENT_KIND, Tracker, record_cell
from tests.conftest import ROOT, TINY


@pytest.fixture(scope="module")
def cell_run(tmp_path_factory):
    """One cell trained by run_cell and recorded by record_cell into a fresh SQLite store."""
    tmp_path = tmp_path_factory.mktemp("mlflow")
    cell = expand(from_mapping(merge(read_yaml(ROOT / "params.yaml"), copy.deepcopy(TINY))))[0]
    dataset = load_dataset("laplace", 600, 200, 0, {"input_dim": 16})
    meta = {"git_sha": "0123456789ab", "dataset_hash": dataset.content_hash(),
            "code_version": "0", "version": "v1"}
    outcome = run_cell(cell, dataset, tmp_path / "cells" / cell.cell_id / "v1", meta)
    assert outcome.status == "ok", outcome.reason
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    tracker = Tracker(uri, "house-test")
    parent = tracker.start_parent("train", {})
    run_id = record_cell(tracker, parent, outcome.record, outcome.history)
    tracker.end(parent)
    return MlflowClient(tracking_uri=uri), run_id, parent, outcome.record, dataset


def test_the_run_lasts_as_long_as_the_cell(cell_run):
    client, run_id, _, record, _ = cell_run
    info = client.get_run(run_id).info
    assert info.status == "FINISHED"
    assert (info.end_time - info.start_time) / 1000 == pytest.approx(record["wall_seconds"],
                                                                      abs=1.0)
    assert info.start_time / 1000 == pytest.approx(record["started_at"], abs=1.0)
    assert record["wall_seconds"] > 0  # the cell really trained (two epochs)


def test_the_run_carries_mlflows_source_tags_and_its_parent(cell_run):
    client, run_id, parent, record, _ = cell_run
    tags = client.get_run(run_id).data.tags
    assert tags["mlflow.source.git.commit"] == record["git_sha"] == "0123456789ab"
    assert tags["mlflow.source.name"] == "stages/train.py"
    assert tags["mlflow.source.type"] == "LOCAL"
    assert tags["mlflow.parentRunId"] == parent and tags["mlflow.runName"] == record["cell_id"]
    assert tags["cell_id"] == record["cell_id"] and tags["cell_version"] == "v1"
    assert client.get_run(parent).info.status == "FINISHED"


def test_the_dataset_is_a_run_input(cell_run):
    client, run_id, _, record, dataset = cell_run
    (given,) = client.get_run(run_id).inputs.dataset_inputs
    assert given.dataset.name == "laplace"
    assert given.dataset.digest == dataset.content_hash()[:36]
    assert {t.key: t.value for t in given.tags} == {"mlflow.data.context": "train"}


def test_params_metrics_and_the_experiment_view(cell_run):
    client, run_id, _, record, _ = cell_run
    run = client.get_run(run_id)
    assert run.data.params["loss"] == "infonce" and run.data.params["train.epochs"] == "2"
    history = client.get_metric_history(run_id, "train_loss")
    assert sorted(m.step for m in history) == [1, 2]
    assert run.data.metrics["wall_seconds"] == pytest.approx(record["wall_seconds"])
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.tags[EXPERIMENT_KIND[0]] == EXPERIMENT_KIND[1]  # the model-training view
