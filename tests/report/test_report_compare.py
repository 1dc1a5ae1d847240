"""Paired comparisons against a baseline: hand arithmetic and scipy.stats.ttest_rel."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pipeline.report.grid.compare import compare_to_baseline, mark_significant, paired
from pipeline.report.grid.tables import aggregate

# dcl − infonce at k=4, seeds 0, 1, 2: 0.05, 0.12, 0.03 (rows are shuffled: pairing is by seed)
# mean d = 0.2/3 = 0.0666667; s_d² = (0.0166667² + 0.0533333² + 0.0366667²)/2 = 0.00223333
# s_d = 0.0472582; t = 0.0666667/(0.0472582/√3) = 2.4433888; df = 2, two-sided p = 0.1344...
# half-width = t_{0.975,2} · s_d/√3 = 4.3026527 · 0.0272845 = 0.1173956
D = np.array([0.05, 0.12, 0.03])


def test_paired_differences_by_hand(board):
    cmp = compare_to_baseline(board, "infonce", "loss", ["k", "tau", "arch"], ["recall_at_1"])
    row = cmp[(cmp.loss == "dcl") & (cmp.k == 4)].iloc[0]
    assert row.n_pairs == 3 and row.baseline == "infonce"
    assert row.diff_mean == pytest.approx(0.2 / 3)
    assert row.t_stat == pytest.approx(2.4433888, rel=1e-6)
    assert row.p_value == pytest.approx(2 * stats.t.sf(2.4433888, 2), rel=1e-6)
    assert row.diff_hi - row.diff_mean == pytest.approx(0.1173956, rel=1e-5)
    assert row.baseline_mean == pytest.approx(7 / 3) and row.variant_mean == pytest.approx(2.4)
    assert not row.significant


def test_paired_matches_scipy_ttest_rel():
    rng = np.random.default_rng(0)
    base = rng.normal(size=8)
    var = base + 0.8 + rng.normal(scale=0.3, size=8)
    res = paired(var, base)
    ref = stats.ttest_rel(var, base)
    assert res.t_stat == pytest.approx(ref.statistic) and res.p_value == pytest.approx(ref.pvalue)
    assert res.wilcoxon_p == pytest.approx(stats.wilcoxon(var, base).pvalue)
    assert res.significant and res.p_value < 0.05


def test_paired_edge_cases():
    one = paired(np.array([1.0]), np.array([0.5]))
    assert one.n_pairs == 1 and one.diff_mean == 0.5 and math.isnan(one.p_value)
    assert not one.significant
    same = paired(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]))
    assert same.diff_mean == 0 and math.isnan(same.wilcoxon_p)
    dropped = paired(np.array([1.0, np.nan, 3.0]), np.array([0.0, 1.0, 2.0]))
    assert dropped.n_pairs == 2


def test_identical_variants_not_significant(board):
    cmp = compare_to_baseline(board, "infonce", pair_on=["k", "tau", "arch"],
                              metrics=["recall_at_1"])
    row = cmp[(cmp.loss == "dcl") & (cmp.k == 16)].iloc[0]
    assert row.diff_mean == pytest.approx(0) and not row.significant


def test_failed_variant_has_no_pairs(board):
    cmp = compare_to_baseline(board, "infonce", pair_on=["k", "tau", "arch"],
                              metrics=["recall_at_1"])
    assert set(cmp.loss) == {"dcl"}  # weince's only cell failed: nothing to pair


def test_pooled_over_settings(board):
    cmp = compare_to_baseline(board, "infonce", pair_on=["k", "tau", "arch"],
                              metrics=["recall_at_1"], by_setting=False)
    assert len(cmp) == 1 and cmp.n_pairs.iloc[0] == 6
    assert cmp.diff_mean.iloc[0] == pytest.approx(D.sum() / 6)
    assert cmp.p_value.iloc[0] == pytest.approx(
        stats.ttest_rel(np.r_[D, 0, 0, 0], np.zeros(6)).pvalue)


def test_mark_significant(board):
    shifted = board.copy()
    dcl16 = (shifted.loss == "dcl") & (shifted.k == 16)
    shifted.loc[dcl16, "recall_at_1"] += [0.10, 0.11, 0.12]  # clearly better, tiny spread
    cmp = compare_to_baseline(shifted, "infonce", pair_on=["k", "tau", "arch"],
                              metrics=["recall_at_1"])
    table = mark_significant(aggregate(shifted, ["loss", "k", "tau", "arch"], ["recall_at_1"]), cmp)
    sig = {(r.loss, r.k): r.recall_at_1_sig for r in table.itertuples()}
    assert sig == {("dcl", 4): False, ("dcl", 16): True, ("infonce", 4): False,
                   ("infonce", 16): False, ("weince", 4): False}
    assert table.attrs["metrics"] == ["recall_at_1"]


def test_mark_significant_needs_group_columns(board):
    cmp = compare_to_baseline(board, "infonce", pair_on=["k", "tau", "arch"], metrics=["cv"])
    with pytest.raises(ValueError, match=r"missing group columns \['tau', 'arch'\]"):
        mark_significant(aggregate(board, ["loss", "k"], ["cv"]), cmp)


def test_errors(board):
    with pytest.raises(ValueError, match="baseline = 'simclr': not a value of 'loss'; "
                                         "allowed: dcl, infonce, weince"):
        compare_to_baseline(board, "simclr")
    with pytest.raises(ValueError, match="axis: unknown column 'variant'"):
        compare_to_baseline(board, axis="variant")
    with pytest.raises(ValueError, match="add the axis that tells them apart"):
        compare_to_baseline(board, pair_on=["tau"], metrics=["cv"])  # k is missing from pair_on
    with pytest.raises(ValueError, match="no 'seed' column"):
        compare_to_baseline(board.drop(columns="seed"))
