"""MLflow on a cluster: ``$MLFLOW_TRACKING_URI`` wins over ``tracking.uri``, and the report goes
to the train run of its own workspace, not to the newest run of another driver on the server."""

from __future__ import annotations

import pytest

from pipeline.runtime.tracking.runs import Tracker


@pytest.fixture
def server(tmp_path, monkeypatch):
    """One tracking store shared by two drivers, named only by the environment."""
    uri = f"sqlite:///{tmp_path / 'server.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


def test_the_environment_names_the_server(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tracker = Tracker("sqlite:///elsewhere.db", "contrastive-bench")
    assert tracker.uri == server and not (tmp_path / "elsewhere.db").exists()
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert Tracker(f"sqlite:///{tmp_path / 'own.db'}", "x").uri.endswith("own.db")


def test_the_report_finds_its_own_workspaces_train_run(server, tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    monkeypatch.chdir(a)
    tracker = Tracker("sqlite:///unused.db", "contrastive-bench")
    mine = tracker.start_parent("train", {})
    monkeypatch.chdir(b)  # another driver, on the same server, starts later
    other = Tracker("sqlite:///unused.db", "contrastive-bench").start_parent("train", {})
    monkeypatch.chdir(a)
    assert tracker.invocation_parent() == mine != other
    monkeypatch.chdir(tmp_path)  # a workspace that ran no train: no run to attach to
    assert Tracker("sqlite:///unused.db", "contrastive-bench").invocation_parent() is None
