"""Trained-vs-control differences and the "not changed by training" decision on fixed tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pipeline.report.grid.controls import control_columns, difference_interval


def test_difference_interval_by_hand():
    # trained 0.10 [0.08, 0.12], control 0.05 [0.04, 0.06]: se = √(0.01² + 0.005²)/1.96·… by hand
    diff, lo, hi = difference_interval(0.10, 0.08, 0.12, 0.05, 0.04, 0.06)
    z = 1.959963984540054
    se = math.sqrt((0.04 / (2 * z)) ** 2 + (0.02 / (2 * z)) ** 2)
    assert diff == pytest.approx(0.05)
    assert (lo, hi) == pytest.approx((0.05 - z * se, 0.05 + z * se))


def _rows(values):
    return pd.DataFrame([{"cell_id": c, "cv": v, "cv_lo": lo, "cv_hi": hi}
                         for c, (v, lo, hi) in values.items()])


def test_changed_is_decided_by_the_interval():
    trained = _rows({"a": (0.20, 0.19, 0.21), "b": (0.06, 0.05, 0.07),
                     "c": (0.1, math.nan, math.nan)})
    control = _rows({"a": (0.05, 0.04, 0.06), "b": (0.057, 0.05, 0.064), "c": (0.1, 0.09, 0.11)})
    out = control_columns(trained, control).set_index("cell_id")
    assert out.loc["a", "changed_cv"] is True or bool(out.loc["a", "changed_cv"])  # far apart
    assert not bool(out.loc["b", "changed_cv"])  # interval covers zero: not changed by training
    assert pd.isna(out.loc["c", "changed_cv"])  # unknown interval: unresolved
    assert out.loc["a", "control_cv"] == 0.05 and out.loc["a", "delta_cv"] == pytest.approx(0.15)


def test_control_summary_counts_cells():
    from pipeline.report.grid.controls import control_summary

    board = pd.DataFrame({"changed_cv": pd.array([True, False, pd.NA], dtype="boolean")})
    (line,) = control_summary(board)
    assert line.startswith("cv: changed by training in 1 of 2 cells")
    assert line.endswith("not changed in 1.")


def test_supervised_control_is_the_cell_with_the_same_encoder_and_weights():
    from pipeline.report.grid.controls import supervised_columns

    def row(cell, objective, arch, seed, cv):
        return {"cell_id": cell, "objective": objective, "loss": "x", "arch": arch, "n": 100,
                "embed_dim": 8, "batch_size": 32, "seed": seed, "status": "ok", "cv": cv,
                "ad_mean": 10 * cv}

    board = pd.DataFrame([row("c0", "contrastive", "mlp", 0, 0.1),
                          row("c1", "contrastive", "mlp", 1, 0.2),
                          row("c2", "contrastive", "linear", 0, 0.3),
                          row("s0", "supervised", "mlp", 0, 0.5),
                          row("s1", "supervised", "mlp", 1, 0.6)])
    out = supervised_columns(board).set_index("cell_id")
    assert out.loc["c0", "supervised_cv"] == 0.5 and out.loc["c1", "supervised_cv"] == 0.6
    assert out.loc["c1", "supervised_ad_mean"] == 6.0
    assert pd.isna(out.loc["c2", "supervised_cv"])  # no supervised linear cell
    assert pd.isna(out.loc["s0", "supervised_cv"])  # a supervised cell is not its own control
    contrastive_only = board[board.objective == "contrastive"]
    assert supervised_columns(contrastive_only).equals(contrastive_only)
