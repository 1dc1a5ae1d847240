"""The per-cell table: joining the stage tables, failures, ranking; merging several runs."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pipeline.report.grid.leaderboard import MixedRunsError, join, mark_failures, merge_runs, ranked


def _grid():
    return pd.DataFrame([
        {"cell_id": c, "objective": "contrastive", "loss": loss, "k": 4, "tau": 0.1,
         "arch": "linear", "seed": 0, "status": status, "reason": reason}
        for c, loss, status, reason in (("a", "infonce", "ok", None), ("b", "dcl", "ok", None),
                                        ("c", "weince", "failed", "train: NaN loss"))])


def _stats():
    rows = []
    for cell, cv in (("a", 0.20), ("b", 0.25)):
        for epoch, shift in ((0, 0.05), (10, 0.0)):  # epoch 0: the untrained control
            for rep, scale in (("raw", 1.0), ("normalized", 0.0)):
                v = (cv + shift) * scale
                rows.append({"cell_id": cell, "epoch": epoch, "representation": rep, "cv": v,
                             "cv_lo": v - 0.01, "cv_hi": v + 0.01, "ad_mean": 0.4,
                             "null_cv": 0.18, "unknown_column": 1.0, "status": "ok",
                             "reason": ""})
    return pd.DataFrame(rows)


def _search():
    return pd.DataFrame({"cell_id": ["a", "b"], "recall_at_1": [0.30, 0.40],
                         "risk_keval": [-2.0, -2.5], "search_status": ["ok", "failed"],
                         "search_reason": ["", "NaN similarity"]})


RECORDS = {"a": {"final_loss": 1.5, "wall_seconds": 2.0, "git_sha": "abc", "hardware": "cpu",
                 "code_fingerprint": "f1"},
           "b": {"final_loss": 1.7, "wall_seconds": 3.0, "git_sha": "abc", "hardware": "cpu"}}


def test_join_puts_every_stage_under_registry_names():
    bounds = pd.DataFrame({"cell_id": ["a"], "total": [9.0], "measured_gap": [0.1],
                           "tightness": [90.0], "vacuous": [True], "bound_status": ["ok"]})
    board = join(_grid(), RECORDS, _stats(), _search(), 10, bounds, "p1", 0.95)
    a = board.set_index("cell_id").loc["a"]
    assert a.cv == 0.20 and a.norm_cv == 0.0 and a.cv_lo == pytest.approx(0.19)
    assert a.null_cv == 0.18 and "unknown_column" not in board  # only registered statistics
    assert a.control_cv == pytest.approx(0.25) and a.delta_cv == pytest.approx(-0.05)
    assert bool(a.changed_cv)  # 0.20 ± 0.01 against 0.25 ± 0.01: the difference excludes 0
    assert a.bound == 9.0 and a.gen_gap == 0.1 and a.params_hash == "p1"
    assert a.code_fingerprint == "f1" and a.final_loss == 1.5 and a.git_sha == "abc"
    assert math.isnan(board.set_index("cell_id").loc["b", "bound"])


def test_join_marks_failures_and_ranked_ranks_by_the_primary():
    board = ranked(join(_grid(), RECORDS, _stats(), _search(), 10), "recall_at_1")
    by = board.set_index("cell_id")
    assert by.loc["b", "status"] == "failed" and by.loc["b", "reason"] == "search: NaN similarity"
    assert by.loc["c", "reason"] == "train: NaN loss"
    # recall: a 0.30, b 0.40 (failed in search, still ranked by its value), c NaN last
    assert list(board.cell_id) == ["b", "a", "c"] and list(board["rank"]) == [1, 2, 3]
    by_risk = ranked(board, "risk_keval")  # lower is better
    assert list(by_risk.cell_id) == ["b", "a", "c"]
    assert list(ranked(board, "nope").cell_id) == ["a", "b", "c"]  # no such column: by id


def test_join_without_an_epoch_zero_has_no_control():
    stats = _stats()
    board = join(_grid(), RECORDS, stats[stats.epoch == 10], _search(), 10)
    assert "control_cv" not in board and "cv" in board


def test_mark_failures_keeps_the_first_failure():
    board = pd.DataFrame({"cell_id": ["x"], "status": ["failed"], "reason": ["train: boom"],
                          "raw_stats_status": ["failed"], "raw_stats_reason": ["stats: bad"]})
    assert mark_failures(board).reason.iloc[0] == "train: boom"


def _run(cells: dict[str, str], **cols):
    """cell id -> code fingerprint ('' unknown); k taken from the id."""
    return pd.DataFrame({"cell_id": list(cells), "loss": "infonce",
                         "k": [int(c[1:]) for c in cells], "seed": 0, "status": "ok",
                         "recall_at_1": 0.5, "code_fingerprint": list(cells.values()), **cols})


def test_merge_keeps_one_row_per_cell_with_every_source():
    merged = merge_runs([("a.csv", _run({"c4": "f1", "c8": "f1"})),
                         ("b.csv", _run({"c8": "f1", "c16": ""}))])
    by = merged.set_index("cell_id")
    assert sorted(by.index) == ["c16", "c4", "c8"]
    assert by.loc["c8", "source"] == "a.csv;b.csv" and by.loc["c16", "source"] == "b.csv"
    assert merged.attrs["split_by"] == []


def test_merge_an_unknown_fingerprint_agrees_with_a_known_one():
    merged = merge_runs([("a.csv", _run({"c4": ""})), ("b.csv", _run({"c4": "f2"}))])
    assert merged.code_fingerprint.tolist() == ["f2"]


def test_merge_refuses_different_code_for_one_cell():
    runs = [("a.csv", _run({"c4": "f1"})), ("b.csv", _run({"c4": "f2"}))]
    with pytest.raises(MixedRunsError, match=r"cell c4: code_fingerprint f1 in a\.csv but f2 in "
                                             r"b\.csv.*--allow-mixed"):
        merge_runs(runs)
    mixed = merge_runs(runs, allow_mixed=True)
    assert sorted(mixed.code_fingerprint) == ["f1", "f2"]
    assert mixed.attrs["split_by"] == ["code_fingerprint"]


def test_merge_refuses_cells_it_cannot_tell_apart():
    runs = [("a.csv", _run({"c4": "f1"})), ("b.csv", _run({"x4": "f1"}))]  # same k, other id
    with pytest.raises(MixedRunsError, match="share every grid value .* but not their id"):
        merge_runs(runs)
    assert merge_runs(runs, allow_mixed=True).attrs["split_by"] == ["source"]


def test_merge_without_fingerprints_and_errors():
    old = _run({"c4": ""}).drop(columns="code_fingerprint")
    assert merge_runs([("old.csv", old)]).code_fingerprint.tolist() == [""]
    with pytest.raises(ValueError, match="no per-cell tables"):
        merge_runs([])


def _with_backbone(stats):
    """The head rows as they were, and backbone rows for cell a only (b's encoder has no head)."""
    head = stats.assign(layer="head")
    back = stats[stats.cell_id == "a"].assign(layer="backbone")
    back = back.assign(cv=back.cv + 0.1, cv_lo=back.cv_lo + 0.1, cv_hi=back.cv_hi + 0.1,
                       status=back.status.where(back.epoch == 0, "failed"))
    return pd.concat([head, back], ignore_index=True)


def test_backbone_columns_beside_the_head_columns():
    before = join(_grid(), RECORDS, _stats(), _search(), 10)
    board = join(_grid(), RECORDS, _with_backbone(_stats()), _search(), 10)
    # the head's columns and rows are what they were without the backbone rows
    pd.testing.assert_frame_equal(board[before.columns], before)
    a, b = board.set_index("cell_id").loc["a"], board.set_index("cell_id").loc["b"]
    assert a.backbone_cv == pytest.approx(0.30) and a.backbone_norm_cv == pytest.approx(0.1)
    assert a.backbone_null_cv == 0.18 and a.backbone_cv_lo == pytest.approx(0.29)
    assert a.backbone_control_cv == pytest.approx(0.35)
    assert a.backbone_delta_cv == pytest.approx(-0.05) and bool(a.backbone_changed_cv)
    assert math.isnan(b.backbone_cv)  # no backbone: no values
    # a backbone's failed statistics are reported, and do not fail the cell
    assert a.backbone_raw_stats_status == "failed" and a.status == "ok"


def test_backbone_supervised_control():
    grid = _grid()
    grid.loc[1, ["objective", "loss"]] = ["supervised", "cross_entropy"]
    grid["n"], grid["embed_dim"], grid["batch_size"] = 100, 8, 32
    stats = _stats()
    back = stats.assign(layer="backbone", cv=stats.cv + 0.1)
    board = join(grid, RECORDS, pd.concat([stats.assign(layer="head"), back]), _search(), 10)
    by = board.set_index("cell_id")
    assert by.loc["a", "supervised_cv"] == pytest.approx(0.25)
    assert by.loc["a", "backbone_supervised_cv"] == pytest.approx(0.35)
    assert math.isnan(by.loc["b", "backbone_supervised_cv"])  # only on contrastive cells
