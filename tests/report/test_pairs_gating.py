"""pairs.csv's two decisions (pipeline.report.grid.ranks.pairs_table): ``nemenyi`` is gated by the
omnibus test, ``wilcoxon_holm`` is not, and the notes of the leaderboard and the suite say so
(issue 48, items 4 and 5)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.metrics import lookup
from pipeline.report.grid.ranks import CrossComparison, gating_note, notes, pairs_table
from pipeline.stats.comparisons.compare import compare
from tests.report.test_latex_symbols import suite
from tests.stats.test_omnibus_and_posthoc import GATED


def comparison(scores: np.ndarray) -> CrossComparison:
    """The comparison of the methods a, b, c, ... of ``(N, m)`` seed means over N blocks."""
    n, m = scores.shape
    methods = [chr(ord("a") + j) for j in range(m)]
    result = compare(scores[:, :, None], methods, True, np.random.default_rng(0), n_boot=20)
    return CrossComparison("loss", lookup("recall_at_1"), ("k",), tuple((i,) for i in range(n)),
                           result, "", 0.05, 0.95)


def row(table, a, b):
    return table[(table.a == a) & (table.b == b)].iloc[0]


def test_nemenyi_column_is_gated():
    """|R_a − R_j| = 9 ≥ CD = 7.82, but the omnibus test does not reject: "not separated"
    (tests/stats/test_omnibus_and_posthoc.py checks the case against scikit-posthocs)."""
    cc = comparison(GATED)
    assert cc.result is not None and not cc.result.ranking.separated
    r = row(pairs_table(cc), "a", "j")
    assert abs(r.rank_difference) >= r.cd
    assert r.nemenyi == "not separated"


def test_wilcoxon_holm_column_is_not_gated():
    """Ten methods on 20 blocks, a just above b in every block and the rest noise: the omnibus
    test does not reject, yet the signed-rank test of a − b (20 of 20 positive) survives Holm's
    correction over the 45 pairs, and pairs.csv says so."""
    x = np.random.default_rng(0).normal(size=(20, 10))
    x[:, 0] = x[:, 1] + 0.001
    cc = comparison(x)
    assert cc.result is not None and not cc.result.ranking.separated
    r = row(pairs_table(cc), *sorted(("a", "b"), key=cc.result.ranking.methods.index))
    assert r.wilcoxon_holm_p < 0.05 and r.wilcoxon_holm == "differs"
    assert r.nemenyi == "not separated"
    assert set(cc.result.ranking.tier) == {1}  # the tiers are gated


def test_notes_say_which_decision_is_gated_and_why():
    note = gating_note()
    assert note.startswith("In pairs.csv, nemenyi is gated by the omnibus test")
    assert "wilcoxon_holm is not (Holm's step-down already controls the family-wise error" in note
    assert note in notes(comparison(GATED))
    assert gating_note("suite_pairs.csv") in suite().notes


@pytest.mark.parametrize("csv", ["pairs.csv", "suite_pairs.csv"])
def test_the_note_names_its_file(csv):
    assert gating_note(csv).startswith(f"In {csv}, ")
