"""Ranks, Friedman / Iman–Davenport, Nemenyi, Wilcoxon–Holm and tiers
(pipeline.stats.comparisons.ranking) against independent references: Demšar 2006's worked example,
SciPy, statsmodels, scikit-posthocs, the two-way ANOVA on ranks, and loops from the formulas."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from pipeline.stats.comparisons.ranking import (
    block_ranks,
    critical_difference,
    friedman,
    friedman_chi2,
    holm,
    iman_davenport,
    nemenyi_q,
    rank_methods,
    tiers,
    wilcoxon_pair,
)

# Demšar 2006 (JMLR 7), Table 2: AUC of C4.5 and C4.5 with m tuned, 14 UCI data sets.
C45 = [0.763, 0.599, 0.954, 0.628, 0.882, 0.936, 0.661, 0.583, 0.775, 1.000, 0.940, 0.619,
       0.972, 0.957]
C45_M = [0.768, 0.591, 0.971, 0.661, 0.888, 0.931, 0.668, 0.583, 0.838, 1.000, 0.962, 0.666,
         0.981, 0.978]


def test_demsar_wilcoxon_example():
    """§3.1.3: R+ = 93, R− = 12 (the zero difference split), so T = 12 < 21, the critical
    value at α = 0.05 for N = 14: C4.5+m is better."""
    t, p = wilcoxon_pair(np.array(C45_M), np.array(C45))
    assert t == pytest.approx(12.0)
    assert p < 0.05


def test_demsar_friedman_example():
    """§3.2.2: mean ranks 3.143, 2.000, 2.893, 1.964 over N = 14 give χ²_F = 9.28, F_F = 3.69;
    F(3, 39) at α = 0.05 is 2.85; CD = 1.25 at α = 0.05 (q = 2.569) and 1.12 at α = 0.10."""
    chi2 = friedman_chi2(np.array([3.143, 2.000, 2.893, 1.964]), 14)
    assert chi2 == pytest.approx(9.28, abs=0.01)
    f, p = iman_davenport(9.28, 14, 4)
    assert f == pytest.approx(3.69, abs=0.01)
    assert sps.f.ppf(0.95, 3, 39) == pytest.approx(2.85, abs=0.01)
    assert p < 0.05
    assert critical_difference(4, 14, 0.05) == pytest.approx(1.25, abs=0.005)
    assert critical_difference(4, 14, 0.10) == pytest.approx(1.12, abs=0.005)


@pytest.mark.parametrize(("m", "q"), [(3, 2.343), (4, 2.569), (5, 2.728)])
def test_nemenyi_q_matches_demsar_table(m, q):
    assert nemenyi_q(m, 0.05) == pytest.approx(q, abs=1e-3)  # printed to 3 places


@pytest.mark.parametrize("rounding", [None, 0])
def test_friedman_matches_scipy_and_anova_on_ranks(rounding):
    """χ² equals SciPy's friedmanchisquare (tie-corrected); F_F equals the two-way ANOVA F of
    the ranks (an identity, with or without ties), computed here from sums of squares."""
    x = np.random.default_rng(3).normal(size=(11, 4)) + np.array([0.0, 0.3, 0.6, 0.9])
    if rounding is not None:
        x = np.round(x, rounding)  # many ties
    r = block_ranks(x, higher_is_better=True)
    res = friedman(r)
    ref = sps.friedmanchisquare(*x.T)
    assert res.chi2 == pytest.approx(ref.statistic, rel=1e-10)
    assert res.chi2_p == pytest.approx(ref.pvalue, rel=1e-8)
    n, m = r.shape
    g = r.mean()
    ss_t = n * np.sum((r.mean(0) - g) ** 2)
    ss_e = np.sum((r - g) ** 2) - ss_t - m * np.sum((r.mean(1) - g) ** 2)
    anova_f = (ss_t / (m - 1)) / (ss_e / ((m - 1) * (n - 1)))
    assert res.iman_davenport == pytest.approx(anova_f, rel=1e-10)
    if rounding is None:
        assert res.chi2_uncorrected == pytest.approx(res.chi2, rel=1e-12)
    else:
        assert res.chi2 > res.chi2_uncorrected


def test_block_ranks_average_ties_and_direction():
    x = np.array([[0.9, 0.5, 0.5, 0.1]])
    assert block_ranks(x, True).tolist() == [[1.0, 2.5, 2.5, 4.0]]
    assert block_ranks(x, False).tolist() == [[4.0, 2.5, 2.5, 1.0]]


def test_holm_matches_statsmodels():
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    p = np.random.default_rng(0).uniform(0, 0.2, size=10)
    p[3] = np.nan
    ours = holm(p)
    ok = np.isfinite(p)
    assert np.isnan(ours[3])
    np.testing.assert_allclose(ours[ok], multipletests(p[ok], method="holm")[1], rtol=1e-12)


def test_nemenyi_decisions_match_scikit_posthocs():
    sp = pytest.importorskip("scikit_posthocs")
    rng = np.random.default_rng(5)
    x = rng.normal(size=(30, 5)) + np.array([0.0, 0.1, 0.5, 0.9, 1.4])
    ranking = rank_methods(x, list("abcde"), higher_is_better=True)
    assert ranking.separated
    p = sp.posthoc_nemenyi_friedman(x)  # p-values of the same studentized-range test
    for pair in ranking.pairs:
        i, j = "abcde".index(pair.a), "abcde".index(pair.b)
        assert pair.nemenyi_differs == (float(p.iloc[i, j]) < 0.05), pair


def test_wilcoxon_and_blocks_per_pair_with_a_missing_cell():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(12, 3, 2)) + np.array([0.0, 0.5, 1.0])[None, :, None]
    x[4, 2, :] = np.nan  # method c has no seed on block 4
    ranking = rank_methods(x, ["a", "b", "c"], higher_is_better=True)
    assert ranking.blocks_total == 12
    assert ranking.blocks_complete == 11  # block 4 left out of the ranks
    means = x.mean(axis=2)  # NaN where a cell has no seed
    for pair in ranking.pairs:
        i, j = "abc".index(pair.a), "abc".index(pair.b)
        both = np.isfinite(means[:, i]) & np.isfinite(means[:, j])
        assert pair.blocks == both.sum()
        ref = sps.wilcoxon(means[both, i], means[both, j], zero_method="zsplit")
        assert pair.wilcoxon_p == pytest.approx(ref.pvalue, rel=1e-10)
    expected = [r.mean() for r in block_ranks(np.delete(means, 4, axis=0), True).T]
    np.testing.assert_allclose(ranking.mean_rank, expected, rtol=1e-12)


def test_tiers_collapse_when_friedman_cannot_separate():
    """Five methods drawn from one distribution on 8 blocks: the omnibus test does not reject,
    so no pair differs, one tier and one bar, whatever the mean ranks."""
    x = np.random.default_rng(11).normal(size=(8, 5, 3))
    ranking = rank_methods(x, list("abcde"), higher_is_better=True)
    assert ranking.friedman.iman_davenport_p > 0.05
    assert not ranking.separated
    assert ranking.tier == (1, 1, 1, 1, 1)
    assert len(ranking.groups) == 1 and set(ranking.groups[0]) == set("abcde")
    assert not any(p.nemenyi_differs for p in ranking.pairs)


def test_tiers_separate_when_friedman_can():
    """Offsets far above the noise on 30 blocks (CD = 0.86 < 1, the gap of adjacent ranks): three
    tiers {a, b}, {c}, {d} in rank order."""
    rng = np.random.default_rng(12)
    x = rng.normal(scale=0.1, size=(30, 4, 3)) + np.array([5.0, 4.98, 3.0, 1.0])[None, :, None]
    ranking = rank_methods(x, list("abcd"), higher_is_better=True)
    assert ranking.separated
    assert ranking.tier == (1, 1, 2, 3)
    assert ranking.groups == (("a", "b"), ("c",), ("d",)) or ranking.groups == (
        ("b", "a"), ("c",), ("d",))
    lower = rank_methods(-x, list("abcd"), higher_is_better=False)  # same order, flipped
    assert lower.tier == ranking.tier


def test_tier_rule_on_a_chain():
    """a ~ b, b ~ c, a ≠ c: tiers {a, b}, {c}; the CD bars {a, b} and {b, c} overlap."""
    differs = np.zeros((3, 3), dtype=bool)
    differs[0, 2] = differs[2, 0] = True
    tier, groups = tiers([0, 1, 2], differs)
    assert tier == [1, 1, 2]
    assert groups == [(0, 1), (1, 2)]


def test_wilcoxon_posthoc_tiers_use_holm():
    rng = np.random.default_rng(12)
    x = rng.normal(scale=0.1, size=(20, 3)) + np.array([3.0, 2.0, 1.0])
    ranking = rank_methods(x, list("abc"), higher_is_better=True, posthoc="wilcoxon")
    assert all(p.wilcoxon_differs for p in ranking.pairs)
    assert ranking.tier == (1, 2, 3)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="at least 2 methods"):
        rank_methods(np.zeros((3, 1, 2)), ["a"], True)
    with pytest.raises(ValueError, match=r"scores.shape\[1\] = 3 but 2 methods"):
        rank_methods(np.zeros((3, 3, 2)), ["a", "b"], True)
    with pytest.raises(ValueError, match="alpha = 1.5"):
        rank_methods(np.zeros((3, 2, 2)), ["a", "b"], True, alpha=1.5)


def test_no_complete_block_gives_nan_ranks_and_one_tier():
    x = np.array([[[1.0], [np.nan]], [[np.nan], [2.0]]])
    ranking = rank_methods(x, ["a", "b"], True)
    assert ranking.blocks_complete == 0
    assert np.all(np.isnan(ranking.mean_rank))
    assert ranking.tier == (1, 1)
