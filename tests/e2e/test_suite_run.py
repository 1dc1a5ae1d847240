"""A suite end to end on real DVC, Ray, Dask and MLflow: two tiny tasks (one without labels, one
with), one DVC pipeline, the leaderboard across them, and a rerun that does nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.ray]

SUITE = {
    "description": "two tiny tasks",
    "params": {"grid": {"loss": ["infonce", "dcl"], "k": [4], "seed": [0, 1]},
               "probe": {"shots": [1], "episodes": 2, "knn_k": [5]}},
    "tasks": [{"name": "vec"},
              {"name": "mix", "data": {"name": "gaussian_mixture",
                                       "options": {"input_dim": 16, "components": 4}}}],
}


def test_a_suite_runs_every_task_as_one_pipeline_and_reruns_nothing(project):
    (project.path / "suites").mkdir(exist_ok=True)
    (project.path / "suites" / "tiny.yaml").write_text(yaml.safe_dump(SUITE))
    cbench = str(Path(sys.executable).parent / "cbench")
    first = project.run(cbench, "suite", "suites/tiny.yaml", "--repro", timeout=900)
    out = project.path / "runs" / "tiny"
    for task in ("vec", "mix"):
        assert f"Running stage 'runs/tiny/dvc.yaml:{task}-train'" in first.stdout
        cells = pd.read_csv(out / task / "reports" / "cells.csv")
        assert len(cells) == 4 and set(cells.status) == {"ok"}  # 2 losses x 2 seeds
    assert "tiny 2/2 mix · cells" in first.stderr  # the progress line names the task
    assert f"leaderboard across tasks: {out / 'reports' / 'suite.md'}" in first.stdout
    assert "suite 8/8 done" in first.stderr
    assert json.loads((out / "suite.json").read_text())["tasks"][1]["labelled"] is True
    agg = pd.read_csv(out / "reports" / "suite_aggregate.csv")
    assert set(agg.loss) == {"infonce", "dcl"} and set(agg.tasks) == {2}
    md = (out / "reports" / "suite.md").read_text()
    assert "vec" in md and "mix" in md
    # the cells live in the project's store, shared with every other run
    assert len(list(project.cells.glob("*/*/cell.json"))) == 8
    again = project.run(cbench, "suite", "suites/tiny.yaml", "--repro", timeout=900)
    ran = [line for line in again.stdout.splitlines() if line.startswith("Running stage")]
    # resolve and train always run (they are cheap and find every cell done); nothing else does
    assert all(s.endswith(("-resolve':", "-train':")) for s in ran), ran
