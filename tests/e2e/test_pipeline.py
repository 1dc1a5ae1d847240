"""The whole DAG on real DVC, Ray, Dask and MLflow, on a tiny grid in a temporary folder."""

from __future__ import annotations

import contextlib
import json
import sqlite3

import pandas as pd
import pytest

from pipeline.report.papers.one_over_k import LAW_CLAIM
from tests.conftest import cell_runs

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.ray]


def _all_runs(path) -> int:
    """Every run in the MLflow store, parents and deleted ones included, read from its table."""
    with contextlib.closing(sqlite3.connect(path / "mlruns.db")) as db:
        return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def _finished_runs_per_cell(path) -> pd.Series:
    runs = cell_runs(path / "mlruns.db")
    return runs[runs.status == "FINISHED"].groupby("tags.cell_id").size()


def test_dag_runs_skips_done_cells_and_grows(project, tiny_params):
    first = project.repro()
    assert "2 to train" in first.stdout
    leaderboard = pd.read_csv(project.path / "reports" / "leaderboard.csv")
    assert len(leaderboard) == 2  # one seed: one row per cell
    assert {"recall_at_1_mean", "cv_mean", "control_cv_mean",
            "cell_ids"} <= set(leaderboard.columns)
    for ext in ("md", "tex", "html"):
        assert (project.path / "reports" / f"leaderboard.{ext}").stat().st_size > 0
    board = pd.read_csv(project.path / "reports" / "cells.csv")
    assert len(board) == 2 and set(board.status) == {"ok"}
    assert {"cv", "ad_mean", "dp_pass_frac", "recall_at_1", "risk_k", "control_cv",
            "delta_cv_lo", "changed_cv", "null_cv", "null_ad_mean"} <= set(board.columns)
    assert board.recall_at_1.between(0, 1).all()
    metrics = json.loads((project.path / "reports" / "metrics.json").read_text())
    assert metrics["cells"] == 2 and metrics["failed"] == 0
    assert (project.path / "reports" / "plots" / "recall_vs_k.png").stat().st_size > 0
    # the tiny grid is Betser's Laplace/linear setting: the published row beside the measured ones
    paper = (project.path / "reports" / "paper_tables.md").read_text()
    assert "## Laplace, linear encoder" in paper and "| published |" in paper
    assert "**trained / untrained control / Gaussian null**" in paper
    summary = json.loads((project.path / "reports" / "summary.json").read_text())
    assert all(isinstance(v, int | float) for v in metrics.values())  # flat DVC metrics
    assert {c["claim"] for c in summary["paper_claims"]} == {"CV falls as the batch size grows",
                                                             "CV falls as d grows", LAW_CLAIM}
    law = next(c for c in summary["paper_claims"] if c["claim"] == LAW_CLAIM)
    assert law["verdict"] == "unresolved" and law["reason"].startswith("too few seeds")
    stats = pd.read_parquet(project.path / "data" / "stats.parquet")
    # 2 cells x (trained, untrained control) x (raw, normalized, projected), in one stage
    assert set(stats.representation) == {"raw", "normalized", "projected"}
    assert set(stats.epoch) == {0, 2} and len(stats) == 12
    assert {"ce", "r_k", "finite_k_gap", "bound", "gen_gap"} <= set(board.columns)
    assert (project.path / "data" / "finite_k.parquet").exists()

    runs = _finished_runs_per_cell(project.path)
    assert sorted(runs.index) == sorted(board.cell_id) and (runs == 1).all()

    runs_before = _all_runs(project.path)
    second = project.repro()  # nothing changed: nothing is trained, no later stage runs
    assert "2 already done (skipped), 0 to train" in second.stdout
    assert _all_runs(project.path) == runs_before  # no run, not even an empty parent
    for stage in ("stats", "search", "bounds", "report"):
        assert f"Running stage '{stage}'" not in second.stdout

    tiny_params["grid"]["tau"] = [0.5, 0.2]
    project.write_params(tiny_params)
    third = project.repro("train")  # the later stages of a grown grid: the first repro's
    assert "2 already done (skipped), 2 to train" in third.stdout
    grid = json.loads((project.path / "data" / "grid.json").read_text())["cells"]
    assert len(grid) == 4 and {c["status"] for c in grid} == {"ok"}
    runs = _finished_runs_per_cell(project.path)
    assert len(runs) == 4 and (runs == 1).all()


def test_bad_params_fail_before_any_work(project, tiny_params):
    tiny_params["grid"]["tau"] = [0.5, 0]
    project.write_params(tiny_params)
    proc = project.repro(check=False)
    assert proc.returncode != 0
    assert "grid.tau[1] = 0.0: temperature must be > 0" in proc.stderr + proc.stdout
    assert not (project.path / "data").exists()


def test_dag_with_cells_on_a_storage_uri(project, tiny_params, tmp_path_factory):
    """compute.storage as on a cluster: every stage reads and writes cells through pyarrow.fs."""
    store = tmp_path_factory.mktemp("store")
    tiny_params["compute"]["storage"] = f"file://{store}"
    shared = store / "cells"
    project.write_params(tiny_params)
    project.repro()
    board = pd.read_csv(project.path / "reports" / "cells.csv")
    assert len(board) == 2 and set(board.status) == {"ok"}
    assert board.cv.notna().all() and board.recall_at_1.notna().all() and board.bound.notna().all()
    assert {p.name for p in shared.iterdir()} == set(board.cell_id)
    assert not project.cells.exists()  # nothing in the default store
    # the search and bounds tasks read the dataset from the storage too (workers on other nodes)
    assert (store / "datasets" / "laplace.parquet").read_bytes() == \
        (project.path / "data" / "datasets" / "laplace.parquet").read_bytes()
    second = project.repro()
    assert "2 already done (skipped), 0 to train" in second.stdout
