"""The cell store on real DVC, Ray and MLflow: code edits, damaged cells, two drivers at once."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import Project, cell_runs, copy_project, venv_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.ray]


def _grid(project: Project) -> pd.DataFrame:
    return pd.DataFrame(json.loads((project.path / "data" / "grid.json").read_text())["cells"])


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_only_the_edited_losss_cells_go_stale(project, tiny_params):
    tiny_params["grid"].update(loss=["infonce", "dcl"], k=[4])
    project.write_params(tiny_params)
    assert "0 already done (skipped), 2 to train" in project.repro("train").stdout
    dcl = project.path / "pipeline" / "losses" / "dcl.py"
    before = _grid(project).set_index("loss")

    # comments and docstrings are not code: nothing is retrained
    _edit(dcl, '"""', '"""A note added to the docstring.\n\n')
    dcl.write_text(dcl.read_text() + "\n# a trailing comment\n")
    out = project.run(sys.executable, "-m", "stages.train").stdout
    assert "2 already done (skipped), 0 to train" in out

    # a change of code: dcl's cell is stale; with keep it is used, marked stale
    text = dcl.read_text()
    body = re.search(r"\n    return (.+)\n", text)
    assert body, "dcl.py: no return statement to edit"
    _edit(dcl, f"\n    return {body.group(1)}\n", f"\n    return 1.0 * ({body.group(1)})\n")
    tiny_params["train"]["on_code_change"] = "keep"
    project.write_params(tiny_params)
    out = project.repro().stdout
    assert "1 already done (skipped), 0 to train" in out
    assert "1 cells were trained by other code or data (changed: pipeline.losses.dcl)" in out
    board = pd.read_csv(project.path / "reports" / "cells.csv").set_index("loss")
    assert bool(board.loc["dcl", "stale"]) and not bool(board.loc["infonce", "stale"])
    assert "stale" in (project.path / "reports" / "leaderboard.md").read_text()

    # fail: stop before any work, naming what changed
    tiny_params["train"]["on_code_change"] = "fail"
    project.write_params(tiny_params)
    failed = project.repro("train", check=False)
    assert failed.returncode != 0 and "train.on_code_change = fail" in failed.stderr

    # retrain (the default): exactly the dcl cell, beside its old version
    tiny_params["train"]["on_code_change"] = "retrain"
    project.write_params(tiny_params)
    assert "1 already done (skipped), 1 to train" in project.repro("train").stdout
    after = _grid(project).set_index("loss")
    assert after.loc["dcl", "cell_id"] == before.loc["dcl", "cell_id"]  # same config
    assert after.loc["dcl", "version"] != before.loc["dcl", "version"]  # other code
    assert after.loc["infonce", "version"] == before.loc["infonce", "version"]
    versions = sorted(p.name for p in (project.cells / before.loc["dcl", "cell_id"]).iterdir())
    assert versions == sorted([before.loc["dcl", "version"], after.loc["dcl", "version"]])
    assert not after.stale.any()


def test_a_damaged_cell_is_retrained_and_a_failed_one_is_not(project, tiny_params):
    tiny_params["plugins"] = [str(Path(__file__).parents[1] / "fixtures" / "nan_loss.py")]
    tiny_params["grid"].update(loss=["infonce", "nan_probe"], k=[4])
    project.write_params(tiny_params)
    for stage in ("resolve", "prepare", "train"):
        project.run(sys.executable, "-m", f"stages.{stage}")
    grid = _grid(project).set_index("loss")
    assert grid.loc["nan_probe", "status"] == "failed"
    embeddings = Path(grid.loc["infonce", "path"]) / "embeddings.parquet"
    embeddings.write_bytes(embeddings.read_bytes()[:-100])  # truncated
    out = project.run(sys.executable, "-m", "stages.train").stdout
    # the damaged cell is retrained; the failed one is not retried (same config, same code)
    assert "0 already done (skipped), 1 to train, 1 failed before (not retried)" in out
    assert _grid(project).set_index("loss").loc["infonce", "status"] == "ok"
    out = project.run(sys.executable, "-m", "stages.train").stdout
    assert "1 already done (skipped), 0 to train, 1 failed before (not retried)" in out


def test_two_drivers_on_one_store_train_each_cell_once(project, tiny_params, tmp_path):
    """Two workspaces of one project (as `dvc queue start -j 2` runs them) with overlapping
    grids, their train stages started at the same moment."""
    other = Project(tmp_path / "other", store=project.store)
    copy_project(other.path)
    first, second = dict(tiny_params), json.loads(json.dumps(tiny_params))
    first["grid"] = {**tiny_params["grid"], "k": [4, 8, 16]}
    second["grid"] = {**tiny_params["grid"], "k": [8, 16, 32]}
    first["train"] = second["train"] = {**tiny_params["train"], "epochs": 20}
    project.write_params(first)
    other.write_params(second)
    env = {**venv_env(project.store), "DVC_ROOT": str(project.path)}  # one MLflow database
    for proj in (project, other):
        for stage in ("resolve", "prepare"):
            subprocess.run([sys.executable, "-m", f"stages.{stage}"], cwd=proj.path, env=env,
                           check=True, capture_output=True)
    drivers = [subprocess.Popen([sys.executable, "-m", "stages.train"], cwd=proj.path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for proj in (project, other)]
    outputs = [d.communicate(timeout=900) for d in drivers]
    assert [d.returncode for d in drivers] == [0, 0], outputs
    trained = [int(re.search(r"train: trained (\d+)", out).group(1)) for out, _ in outputs]
    assert sum(trained) == 4, outputs  # k = 4, 8, 16, 32: each cell trained by one driver
    cells = {p.name: sorted(q.name for q in p.iterdir()) for p in project.cells.iterdir()}
    assert len(cells) == 4 and all(len(v) == 1 for v in cells.values())
    runs = cell_runs(project.path / "mlruns.db")
    assert sorted(runs["tags.cell_id"]) == sorted(cells)  # one run per cell, in one database
    assert (runs.status == "FINISHED").all()
    for proj in (project, other):
        assert set(_grid(proj).status) == {"ok"}


def test_cells_that_differ_only_in_what_their_loss_ignores_are_one_training(project, tiny_params):
    """nt_xent reads no k: grid.k [4, 8] is one training (one folder, one MLflow run, the same
    embeddings), evaluated at each cell's own k; infonce reads k: two trainings."""
    tiny_params["grid"].update(loss=["nt_xent", "infonce"], k=[4, 8])
    project.write_params(tiny_params)
    out = project.repro().stdout
    assert "0 already done (skipped), 3 to train (4 cells, 3 distinct trainings)" in out
    grid = _grid(project).set_index(["loss", "k"])
    a, b = grid.loc[("nt_xent", 4)], grid.loc[("nt_xent", 8)]
    assert a.training_id == b.training_id and a.path == b.path and a.cell_id != b.cell_id
    assert grid.loc[("infonce", 4)].path != grid.loc[("infonce", 8)].path
    runs = cell_runs(project.path / "mlruns.db")
    assert sorted(runs["tags.cell_id"]) == sorted({*grid.training_id})  # one run per training
    shared = runs[runs["tags.cell_id"] == a.training_id].iloc[0]  # each cell's metrics, by k
    assert {"metrics.final_loss/k_4", "metrics.final_loss/k_8"} <= set(shared.dropna().index)
    cells = pd.read_csv(project.path / "reports" / "cells.csv").set_index(["loss", "k"])
    assert len(cells) == 4  # both k's of the shared training are evaluated and reported
    again = project.run(sys.executable, "-m", "stages.train").stdout
    assert "4 already done (skipped), 0 to train" in again
    # cbench verify: each sampled training retrained here agrees with its stored cell
    checked = project.run(sys.executable, "-m", "pipeline.cli", "verify", "--sample", "2")
    assert "2 of 2 cells reproduced within the tolerances" in checked.stdout, checked.stdout
    assert len(list((project.store / "verify").rglob("*.json"))) == 2
    refused = project.run(sys.executable, "-m", "pipeline.cli", "verify", "--cells", "nope",
                          check=False)
    assert refused.returncode == 2 and "--cells nope: not cells of this grid" in refused.stderr
