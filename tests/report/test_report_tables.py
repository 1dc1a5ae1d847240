"""aggregate(): t-intervals, ranks, counts and provenance on a fixed board, checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline.report.tables import aggregate, direction, rank, t_interval

# seeds of (infonce, k=4): 1, 2, 4.  mean = 7/3 = 2.333333...
# s² = ((1−7/3)² + (2−7/3)² + (4−7/3)²)/2 = (16/9 + 1/9 + 25/9)/2 = 7/3, s = 1.5275252
# t_{0.975, 2} = 4.3026527 (tables), half = 4.3026527 · 1.5275252/√3 = 3.7945830
HALF = 3.7945830


def test_t_interval_by_hand():
    mean, lo, hi = t_interval([1.0, 2.0, 4.0])
    assert mean == pytest.approx(7 / 3)
    assert (hi - lo) / 2 == pytest.approx(HALF, rel=1e-6)
    assert lo == pytest.approx(7 / 3 - HALF, rel=1e-6)


def test_t_interval_level_and_small_samples():
    # 90%: t_{0.95, 2} = 2.9199856; half = 2.9199856 · 1.5275252/√3 = 2.5751852
    _, lo, hi = t_interval([1.0, 2.0, 4.0], level=0.90)
    assert (hi - lo) / 2 == pytest.approx(2.5751852, rel=1e-6)
    mean, lo, hi = t_interval([3.0, np.nan])
    assert mean == 3.0 and math.isnan(lo) and math.isnan(hi)
    assert all(math.isnan(v) for v in t_interval([np.nan]))


def test_aggregate_means_intervals_counts(board):
    t = aggregate(board, ["loss", "k"], ["recall_at_1", "cv"])
    assert list(t.loss) == ["dcl", "dcl", "infonce", "infonce", "weince"]  # sorted by group
    row = t[(t.loss == "infonce") & (t.k == 4)].iloc[0]
    assert row.recall_at_1_mean == pytest.approx(7 / 3)
    assert row.recall_at_1_hi - row.recall_at_1_mean == pytest.approx(HALF, rel=1e-6)
    assert row.n_seeds == 3 and row.failed == 0
    # cv over seeds 0.20, 0.21, 0.22: mean 0.21, s = 0.01, half = 4.3026527 · 0.01/√3
    assert row.cv_mean == pytest.approx(0.21)
    assert row.cv_hi - row.cv_mean == pytest.approx(4.3026527 * 0.01 / math.sqrt(3), rel=1e-6)
    failed = t[t.loss == "weince"].iloc[0]
    assert failed.n_seeds == 0 and failed.failed == 1 and math.isnan(failed.recall_at_1_mean)


def test_one_seed_gives_nan_bounds(board):
    t = aggregate(board[board.seed == 0], ["loss", "k"], ["recall_at_1"])
    assert t.recall_at_1_lo.isna().all() and t.recall_at_1_hi.isna().all()
    assert t.recall_at_1_mean.notna().sum() == 4


def test_ranks_with_ties_and_direction(board):
    t = aggregate(board, ["loss", "k"], ["recall_at_1", "risk_keval", "cv"])
    by = {(r.loss, r.k): r for r in t.itertuples()}
    # means: dcl4 = 7.2/3 = 2.4, inf4 = 2.3333, dcl16 = inf16 = 0.5, weince NaN
    assert by["dcl", 4].recall_at_1_rank == 1
    assert by["infonce", 4].recall_at_1_rank == 2
    assert by["dcl", 16].recall_at_1_rank == by["infonce", 16].recall_at_1_rank == 3  # tie: 3, 3
    assert math.isnan(by["weince", 4].recall_at_1_rank)
    # risk = −recall, lower is better: the same order
    assert by["dcl", 4].risk_keval_rank == 1 and by["infonce", 16].risk_keval_rank == 3
    assert "cv_rank" not in t  # distribution statistics are not ranked


def test_rank_competition_convention():
    s = pd.Series([0.5, 0.7, 0.7, 0.2, np.nan])
    assert list(rank(s, True)[:4]) == [3, 1, 1, 4] and math.isnan(rank(s, True)[4])
    assert list(rank(s, False)[:4]) == [2, 3, 3, 1]


def test_direction_prefixes():
    assert direction("recall_at_5") is True and direction("risk_keval") is False
    assert direction("norm_uniform") is False and direction("proj_eff_rank") is True
    assert direction("control_recall_at_1") is None and direction("ad_pass_frac") is None
    assert direction("cv", {"cv": False}) is False


def test_provenance_columns(board):
    t = aggregate(board, ["loss"], ["recall_at_1"])
    row = t[t.loss == "infonce"].iloc[0]
    assert row.cell_ids == "inf04s0,inf04s1,inf04s2,inf16s0,inf16s1,inf16s2"
    assert row.git_sha == "abc1234" and row.params_hash == "p1" and row.hardware == "cpu"
    assert row.dataset_hash == "d1" and row.wall_seconds == pytest.approx(9.0)
    assert t[t.loss == "weince"].iloc[0].cell_ids == "wei04s0"  # failed cells stay traceable


def test_missing_optional_columns(board):
    slim = board.drop(columns=["params_hash", "dataset_hash", "hardware", "status"])
    t = aggregate(slim, ["loss"], ["recall_at_1"])
    assert (t.params_hash == "").all() and (t.failed == 0).all()


def test_defaults_use_present_columns(board):
    t = aggregate(board)
    assert t.attrs["group_by"] == ["loss", "arch", "k", "tau"]
    assert t.attrs["metrics"] == ["recall_at_1", "risk_keval", "cv"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"group_by": ["loss", "batch"]}, "group_by: unknown column 'batch'; allowed: loss"),
    ({"metrics": ["recall"]}, "metrics: unknown column 'recall'; allowed:"),
    ({"metrics": ["arch"]}, "metrics: unknown column 'arch'"),
    ({"level": 1.5}, "level = 1.5"),
    ({"group_by": "loss"}, "group_by = 'loss': expected a list"),
])
def test_errors_name_parameter_and_allowed(board, kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        aggregate(board, **({"group_by": ["loss"], "metrics": ["recall_at_1"]} | kwargs))
