"""aggregate(): t-intervals (pipeline.stats.seed_ci), ranks from the registry, counts,
provenance and the best/tied marks, on a fixed board checked by hand and against SciPy."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from pipeline.metrics import lookup
from pipeline.report.grid.tables import aggregate, metrics_in, rank, tied_with_best

# seeds of (infonce, k=4): 1, 2, 4.  mean = 7/3 = 2.333333...
# s² = ((1−7/3)² + (2−7/3)² + (4−7/3)²)/2 = (16/9 + 1/9 + 25/9)/2 = 7/3, s = 1.5275252
# t_{0.975, 2} = 4.3026527 (tables), half = 4.3026527 · 1.5275252/√3 = 3.7945830
HALF = 3.7945830


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


@pytest.mark.parametrize("level", [0.9, 0.99])
def test_interval_width_follows_the_level(board, level):
    t = aggregate(board, ["loss", "k"], ["recall_at_1"], level)
    row = t[(t.loss == "infonce") & (t.k == 4)].iloc[0]
    half = sps.t.ppf((1 + level) / 2, 2) * math.sqrt(7 / 3) / math.sqrt(3)
    assert (row.recall_at_1_hi - row.recall_at_1_lo) / 2 == pytest.approx(half, rel=1e-9)
    assert t.attrs["level"] == level


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
    assert "cv_rank" not in t  # distribution statistics are not ranked (registry: neither)


def test_rank_competition_convention():
    s = pd.Series([0.5, 0.7, 0.7, 0.2, np.nan])
    up, down = rank(s, lookup("recall_at_1")), rank(s, lookup("risk_keval"))
    assert list(up[:4]) == [3, 1, 1, 4] and math.isnan(up[4])
    assert list(down[:4]) == [2, 3, 3, 1]


def test_provenance_columns(board):
    t = aggregate(board, ["loss"], ["recall_at_1"])
    row = t[t.loss == "infonce"].iloc[0]
    assert row.cell_ids == "inf04s0,inf04s1,inf04s2,inf16s0,inf16s1,inf16s2"
    assert row.git_sha == "abc1234" and row.params_hash == "p1" and row.hardware == "cpu"
    assert row.dataset_hash == "d1" and row.wall_seconds == pytest.approx(9.0)
    assert t[t.loss == "weince"].iloc[0].cell_ids == "wei04s0"  # failed cells stay traceable


def test_changed_counts(board):
    cells = board.assign(changed_cv=pd.array([True, False] * 6 + [pd.NA], dtype="boolean"))
    t = aggregate(cells, ["loss"], ["cv"])
    total = t.changed_cv_n.sum(), t.changed_cv_of.sum()
    ok = cells[cells.status == "ok"].changed_cv.dropna()
    assert total == (int(ok.sum()), len(ok))


def test_defaults_use_the_axes_and_the_registry(board):
    t = aggregate(board)
    assert t.attrs["group_by"] == ["loss", "k", "tau", "arch"]
    assert t.attrs["metrics"] == ["recall_at_1", "risk_keval", "cv"] == metrics_in(board)


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


def test_tied_with_best_is_welch():
    best = np.array([0.50, 0.52, 0.48, 0.51, 0.49])  # mean 0.500
    close = np.array([0.47, 0.53, 0.49, 0.50, 0.485])  # mean 0.495: within noise
    far = np.array([0.30, 0.31, 0.29, 0.30, 0.30])
    lone = np.array([0.499])
    values = [close, best, far, lone]
    means = np.array([v.mean() for v in values])
    is_best, tied = tied_with_best(values, means, lookup("recall_at_1"), 0.05)
    assert list(is_best) == [False, True, False, False]
    assert sps.ttest_ind(close, best, equal_var=False).pvalue >= 0.05  # the reference says tied
    assert list(tied) == [True, False, False, False]  # far differs; one seed cannot be told
    low = tied_with_best(values, means, lookup("risk_keval"), 0.05)[0]  # lower is better
    assert list(low) == [False, False, True, False]
    none = tied_with_best([np.array([])], np.array([np.nan]), lookup("recall_at_1"), 0.05)
    assert not none[0].any() and not none[1].any()


def test_a_fraction_near_its_bound_keeps_its_interval_inside_it():
    """R@1 is a fraction: its interval over seeds is Student-t on the logit scale, mapped back
    (computed here with SciPy), so it stays below 1 where the plain t-interval passes it; a
    difference of fractions (delta_) and an unbounded metric keep the plain t-interval."""
    seeds = [0.990, 0.996, 0.999]
    board = pd.DataFrame({"loss": "infonce", "k": 4, "seed": [0, 1, 2], "status": "ok",
                          "recall_at_1": seeds, "delta_linear_probe": seeds, "cv": seeds})
    row = aggregate(board, ["loss", "k"], ["recall_at_1", "delta_linear_probe", "cv"]).iloc[0]
    plain = sps.t.interval(0.95, 2, loc=np.mean(seeds), scale=sps.sem(seeds))
    assert plain[1] > 1.0  # the plain interval passes 100%
    z = np.log(seeds) - np.log1p(-np.asarray(seeds))
    lo, hi = (1 / (1 + np.exp(-v)) for v in sps.t.interval(0.95, 2, loc=z.mean(),
                                                              scale=sps.sem(z)))
    assert row.recall_at_1_mean == pytest.approx(np.mean(seeds))
    assert row.recall_at_1_lo == pytest.approx(min(lo, np.mean(seeds)), rel=1e-9)
    assert row.recall_at_1_hi == pytest.approx(hi, rel=1e-9) and row.recall_at_1_hi < 1.0
    for name in ("delta_linear_probe", "cv"):
        assert (row[f"{name}_lo"], row[f"{name}_hi"]) == pytest.approx(plain, rel=1e-9), name
    assert lookup("recall_at_1").bounds == (0.0, 1.0) and lookup("cv").bounds is None
    assert lookup("delta_linear_probe").bounds is None
    assert lookup("backbone_linear_probe").bounds == (0.0, 1.0)
