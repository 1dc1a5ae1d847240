"""DVC experiments as their users run them, in a temporary git repository: a workspace
experiment, a queued one run by `dvc queue start`; both keep their metrics, the queued one reuses
the cells already in the store and logs into the project's MLflow database."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, Project, cell_runs, copy_project, mlflow_runs

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.ray]
DVC = str(Path(sys.executable).parent / "dvc")


@pytest.fixture
def repo(tmp_path, tiny_params) -> Project:
    proj = Project(tmp_path / "repo")
    copy_project(proj.path)
    proj.write_params(tiny_params)
    for args in (["git", "init", "-q"], ["git", "config", "user.email", "ci@example.org"],
                 ["git", "config", "user.name", "ci"], [DVC, "init", "-q"],
                 [DVC, "config", "core.analytics", "false"]):
        proj.run(*args)
    shutil.copytree(ROOT / ".dvc" / "plots", proj.path / ".dvc" / "plots", dirs_exist_ok=True)
    proj.run("git", "add", "-A")
    proj.run("git", "commit", "-qm", "project")
    proj.repro()
    proj.run("git", "add", "-A")
    proj.run("git", "commit", "-qm", "baseline run")
    return proj


def _exp_show(proj: Project) -> list[dict]:
    return json.loads(proj.run(DVC, "exp", "show", "--json").stdout)


def _experiments(rows: list[dict]) -> dict[str, dict]:
    """name -> the experiment's data (its params and metrics)."""
    out = {}
    for row in rows:
        for exp in row.get("experiments") or []:
            for rev in exp["revs"]:
                out[rev.get("name") or rev["rev"]] = rev["data"]
    return out


def _metric(data: dict, key: str) -> object:
    return data["metrics"]["reports/metrics.json"]["data"][key]


def test_workspace_and_queued_experiments_keep_their_numbers(repo):
    repo.run(DVC, "exp", "run", "-n", "tau-01", "-S", "grid.tau=[0.1]")
    repo.run(DVC, "exp", "run", "--queue", "-n", "tau-both", "-S", "grid.tau=[0.5,0.1]")
    repo.run(DVC, "queue", "start")
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        status = repo.run(DVC, "queue", "status").stdout
        if "tau-both" in status and ("Success" in status or "Failed" in status):
            break
        time.sleep(3)
    assert "Success" in status, status
    log = repo.run(DVC, "queue", "logs", "tau-both").stdout
    # tau = 0.5 was trained by the baseline, tau = 0.1 by the first experiment: all reused
    assert "4 already done (skipped), 0 to train" in log, log[-3000:]

    exps = _experiments(_exp_show(repo))
    assert {"tau-01", "tau-both"} <= set(exps)
    for name, cells in (("tau-01", 2), ("tau-both", 4)):
        data = exps[name]
        assert "error" not in data["metrics"]["reports/metrics.json"], data["metrics"]
        assert _metric(data, "cells") == cells
        params = data["params"]["params.tracked.yaml"]["data"]
        assert params["grid"]["tau"] == ([0.1] if name == "tau-01" else [0.5, 0.1])
    assert set(data["params"]) == {"params.tracked.yaml"}  # no second copy of the params

    # every experiment logged into the project's own database
    runs = mlflow_runs(repo.path / "mlruns.db")
    cells = cell_runs(repo.path / "mlruns.db")
    assert (cells["tags.cell_id"].nunique() == 4
            and (cells.groupby("tags.cell_id").size() == 1).all())
    invocations = runs[runs["tags.cbench.kind"] == "invocation"]
    # a train run for the baseline and tau-01, which trained cells; tau-both trained none, so its
    # train stage opened no run
    assert (invocations["tags.cbench.stage"] == "train").sum() == 2
