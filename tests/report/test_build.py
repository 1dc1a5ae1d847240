"""build() on stage tables shaped like the real ones, and publish.write(): every file the report
stage declares in dvc.yaml, the metrics.json keys, MLflow names from the registry."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from pipeline.config import expand, load
from pipeline.metrics import is_metric
from pipeline.report.grid.build import Inputs, build
from pipeline.report.grid.figure_plan import norm_cells
from pipeline.report.render import figures, publish
from pipeline.report.render.publish import write
from tests.report.synthetic import ROOT


@pytest.fixture
def inputs() -> Inputs:
    params = load(ROOT / "params.yaml")
    cells = expand(params)
    rng = np.random.default_rng(3)
    grid = pd.DataFrame([{**c.grid_values(), "cell_id": c.cell_id, "status": "ok", "reason": None}
                         for c in cells])
    grid.loc[0, ["status", "reason"]] = ["failed", "train: NaN loss"]
    stats, search, history = [], [], []
    for c in cells:
        for epoch in (0, params.train.epochs):
            cv = rng.uniform(0.18, 0.24)
            stats.append({"cell_id": c.cell_id, "epoch": epoch, "representation": "raw",
                          "cv": cv, "cv_lo": cv - 0.01, "cv_hi": cv + 0.01, "ad_mean": 0.4,
                          "ad_mean_lo": 0.3, "ad_mean_hi": 0.5, "ad_pass_frac": 0.9,
                          "dp_p_mean": 0.4, "dp_pass_frac": 0.9, "null_cv": 0.18,
                          "status": "ok", "reason": ""})
        search.append({"cell_id": c.cell_id, "recall_at_1": rng.uniform(0.3, 0.45),
                       "risk_keval": rng.uniform(-3.2, -1.1), "ce": -3.0, "search_status": "ok",
                       "search_reason": ""})
        history += [{"cell_id": c.cell_id, "epoch": e, "loss": 2.0 - 0.1 * e} for e in (1, 2)]
    records = {c.cell_id: {"final_loss": 1.8, "wall_seconds": 2.0, "git_sha": "abc",
                           "dataset_hash": "d1", "hardware": "cpu"} for c in cells[1:]}
    bounds = pd.DataFrame({"cell_id": [c.cell_id for c in cells], "total": 9.0,
                           "measured_gap": 0.1, "tightness": 90.0, "vacuous": True,
                           "bound_status": "ok"})
    return Inputs(grid, records, pd.DataFrame(stats), pd.DataFrame(search), bounds,
                  pd.DataFrame(), pd.DataFrame(history), params, "p1")


def test_build_is_complete(inputs):
    report = build(inputs)
    assert len(report.cells) == 108 and report.failed == 1  # 36 settings × 3 seeds
    assert len(report.board.table) == 36 and report.board.axes == ("loss", "arch", "k", "tau")
    assert [m.name for m in report.board.columns] == ["recall_at_1", "risk_keval", "ce", "cv",
                                                     "ad_mean", "ad_pass_frac", "dp_pass_frac"]
    summary = report.summary.to_json()
    assert {"cells", "failed", "mean", "best", "best_setting", "controls", "paper_claims"} <= set(
        summary)
    assert set(summary["best"]) == {"recall_at_1", "risk_keval"}  # the ranked headline metrics
    names = {name for values in report.mlflow.values() for name, _ in values}
    assert names and all(is_metric(n.removesuffix("_lo").removesuffix("_hi")) for n in names)
    assert {"cv", "control_cv", "delta_cv", "recall_at_1", "bound"} <= names
    assert list(report.history.columns[:2]) == ["series", "epoch"]
    assert set(report.history.series) == set(report.cells.loss)  # one series per variant
    flat = report.summary.flat()
    assert all(isinstance(v, int | float) for v in flat.values())  # DVC metrics: numbers
    assert flat["cells"] == 108 and "mean_recall_at_1" in flat and "best_recall_at_1" in flat
    assert report.cells_columns[:5] == ("rank", "loss", "arch", "k", "tau")
    assert {s.name for s in report.figures} >= {"cv_vs_k", "recall_vs_k", "variant_recall_at_1",
                                                "bound_terms", "norm_histograms",
                                                "critical_difference", "performance_profile"}
    assert {"optimality_gap", "optimality_gap_lo", "optimality_gap_hi"} <= set(report.ranks)
    assert len(report.ranks) == 3 and len(report.pairs) == 3  # three losses over 12 settings
    assert {"compare_iman_davenport_p", "compare_cd", "compare_infonce_mean_rank"} <= set(flat)


def test_write_gives_every_declared_output(inputs, tmp_path):
    report = build(inputs)
    norms = {c: np.abs(np.random.default_rng(0).normal(3, 0.3, 200))
             for c in norm_cells(report.figures)}
    write(report, tmp_path, norms)
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["report"]
    declared = [next(iter(o)) if isinstance(o, dict) else o
                for key in ("outs", "metrics", "plots") for o in stage[key]]
    for out in declared:
        path = tmp_path / out.removeprefix("reports/")
        assert path.exists(), out
    assert len(list((tmp_path / "plots").glob("*.png"))) == len(report.figures)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["cells"] == 108 and metrics["failed"] == 1
    assert all(not isinstance(v, dict | list | str) for v in metrics.values())
    # the headline in metrics.json (the columns of `dvc exp show`), every other number beside it
    detail = json.loads((tmp_path / "metrics_detail.json").read_text())
    assert all(not isinstance(v, dict | list | str) for v in detail.values())
    assert not set(metrics) & set(detail) and metrics | detail == report.summary.flat()
    assert set(metrics) == {"cells", "failed", "mean_recall_at_1", "best_recall_at_1",
                            "mean_risk_keval", "best_risk_keval", *(
                                f"compare_{loss}_p_rank1" for loss in report.ranks["loss"])}
    assert {"mean_cv", "compare_cd", "compare_infonce_mean_rank"} <= set(detail)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["cells"] == 108 and "paper_claims" in summary
    page = (tmp_path / "leaderboard.html").read_text()
    assert page.count("data:image/png;base64,") == len(report.figures)


def test_figures_drawn_in_worker_processes_give_the_same_files(inputs, monkeypatch):
    """render() draws the figures in forked workers where it can: the same bytes, in the same
    order, as drawing each in this process (the pool taken away)."""
    report = build(inputs)
    norms = {c: np.abs(np.random.default_rng(0).normal(3, 0.3, 200))
             for c in norm_cells(report.figures)}
    pool = publish.figure_pool(len(report.figures))
    if pool is None:
        pytest.skip("needs Linux and two usable cores (the workers are forked)")
    pool.shutdown()
    pooled = publish.render(report, norms)
    monkeypatch.setattr(publish, "figure_pool", lambda figures_to_draw: None)
    here = publish.render(report, norms)
    assert list(pooled) == list(here)
    assert all(pooled[name] == here[name] for name in here), [
        name for name in here if pooled[name] != here[name]]


def test_a_figure_that_fails_in_a_worker_fails_the_report(inputs, monkeypatch):
    report = build(inputs)
    if publish.figure_pool(len(report.figures)) is None:
        pytest.skip("needs Linux and two usable cores (the workers are forked)")
    last = report.figures[-1].name
    draw = figures.draw

    def failing(spec, norms=None):  # the forked workers see this module's patched draw
        if spec.name == last:
            raise RuntimeError(f"cannot draw {spec.name}")
        return draw(spec, norms)

    monkeypatch.setattr(figures, "draw", failing)
    with pytest.raises(RuntimeError, match=f"cannot draw {last}"):
        publish.render(report, {})
