"""Iman–Davenport's degrees of freedom, Nemenyi's q_α for 2 to 10 methods and the omnibus gate
of the Nemenyi decision (pipeline.stats.comparisons.ranking), each against a reference that does not
share the code's formula: statsmodels' repeated-measures ANOVA of the ranks, Demšar 2006's Table 5,
and scikit-posthocs' ungated Nemenyi test (issue 48, item 5)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from pipeline.stats.comparisons.ranking import (
    block_ranks,
    critical_difference,
    friedman,
    iman_davenport,
    nemenyi_q,
    rank_methods,
)

# Demšar 2006 (JMLR 7), Table 5(a): q_α for m = 2..10 methods, printed to 3 places
Q_05 = {2: 1.960, 3: 2.343, 4: 2.569, 5: 2.728, 6: 2.850, 7: 2.949, 8: 3.031, 9: 3.102, 10: 3.164}
Q_10 = {2: 1.645, 3: 2.052, 4: 2.291, 5: 2.459, 6: 2.589, 7: 2.693, 8: 2.780, 9: 2.855, 10: 2.920}


@pytest.mark.parametrize(("n", "m"), [(5, 3), (11, 4), (7, 6), (20, 8)])
def test_iman_davenport_is_the_repeated_measures_anova_of_the_ranks(n, m):
    """F_F and its p on (m − 1, (m − 1)(N − 1)) degrees of freedom: statsmodels' AnovaRM of the
    within-block ranks (blocks as subjects, methods as the within factor) gives the same F, dfs
    and p (an identity, Demšar 2006 §3.2.2)."""
    anova_rm = pytest.importorskip("statsmodels.stats.anova").AnovaRM
    x = np.random.default_rng(n * m).normal(size=(n, m)) + 0.15 * np.arange(m)
    r = block_ranks(x, higher_is_better=True)
    res = friedman(r)
    long = pd.DataFrame({"block": np.repeat(np.arange(n), m), "method": np.tile(np.arange(m), n),
                         "rank": r.ravel()})
    ref = anova_rm(long, "rank", "block", within=["method"]).fit().anova_table.iloc[0]
    assert (res.df1, res.df2) == (m - 1, (m - 1) * (n - 1))
    assert (res.df1, res.df2) == (ref["Num DF"], ref["Den DF"])
    assert res.iman_davenport == pytest.approx(ref["F Value"], rel=1e-9)
    assert res.iman_davenport_p == pytest.approx(ref["Pr > F"], rel=1e-9)
    f, p = iman_davenport(res.chi2, n, m)
    assert p == pytest.approx(sps.f.sf(f, m - 1, (m - 1) * (n - 1)), rel=1e-12)


def test_demsar_example_p_is_on_3_and_39_degrees_of_freedom():
    """Demšar §3.2.2: F_F = 3.69 from χ²_F = 9.28, N = 14, m = 4, distributed as F(3, 39)."""
    f, p = iman_davenport(9.28, 14, 4)
    assert p == pytest.approx(sps.f.sf(f, 3, 39), rel=1e-12)
    assert p == pytest.approx(0.0197, abs=5e-4)


@pytest.mark.parametrize("alpha", [0.05, 0.10])
@pytest.mark.parametrize("m", range(2, 11))
def test_nemenyi_q_matches_demsars_table_for_2_to_10_methods(m, alpha):
    q = nemenyi_q(m, alpha)
    assert q == pytest.approx((Q_05 if alpha == 0.05 else Q_10)[m], abs=1.5e-3)
    assert critical_difference(m, 12, alpha) == pytest.approx(q * math.sqrt(m * (m + 1) / 72))


def test_ranking_uses_the_q_of_its_own_method_count():
    x = np.random.default_rng(2).normal(size=(9, 7, 2))
    ranking = rank_methods(x, list("abcdefg"), higher_is_better=True)
    assert ranking.q_alpha == pytest.approx(Q_05[7], abs=1.5e-3)
    assert ranking.cd == pytest.approx(Q_05[7] * math.sqrt(7 * 8 / (6 * 9)), abs=2e-3)


# Ten methods on three blocks: a first and j last in every block, the eight others shuffled so
# that the omnibus test does not reject (Iman–Davenport p ≈ 0.099) although a and j are
# |R_a − R_j| = 9 mean ranks apart, more than CD = 7.82.
GATED = np.array([[10, 8, 5, 7, 3, 1, 2, 6, 4, 0],
                  [10, 2, 8, 3, 4, 5, 7, 1, 6, 0],
                  [10, 5, 1, 2, 8, 7, 4, 6, 3, 0]], dtype=float)


def test_nemenyi_decision_is_gated_by_the_omnibus_test():
    sp = pytest.importorskip("scikit_posthocs")
    n, m = GATED.shape
    chi2 = sps.friedmanchisquare(*GATED.T).statistic
    f = (n - 1) * chi2 / (n * (m - 1) - chi2)
    assert sps.f.sf(f, m - 1, (m - 1) * (n - 1)) > 0.05  # the omnibus test does not reject
    cd = Q_05[10] * math.sqrt(m * (m + 1) / (6 * n))
    assert cd == pytest.approx(7.82, abs=0.01) and 9.0 > cd
    assert float(sp.posthoc_nemenyi_friedman(GATED).iloc[0, 9]) < 0.05  # ungated: differs

    ranking = rank_methods(GATED, list("abcdefghij"), higher_is_better=True)
    assert not ranking.separated
    pair = ranking.pair("a", "j")
    assert pair.rank_difference == pytest.approx(-9.0) and abs(pair.rank_difference) >= ranking.cd
    assert not pair.nemenyi_differs
    assert not any(p.nemenyi_differs for p in ranking.pairs)
    assert set(ranking.tier) == {1}
