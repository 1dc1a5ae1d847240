"""pipeline.stats.inference: the normal quantile, the paired test and Welch ties, against SciPy
and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from pipeline.stats.inference import normal_quantile, paired, welch_tie


def test_normal_quantile_closed_forms():
    assert normal_quantile(0.95) == pytest.approx(1.959963984540054, rel=1e-12)
    # Φ(z) − Φ(−z) = erf(z/√2) = level
    for level in (0.5, 0.9, 0.99):
        assert math.erf(normal_quantile(level) / math.sqrt(2)) == pytest.approx(level, rel=1e-12)
    with pytest.raises(ValueError, match="level = 1.5"):
        normal_quantile(1.5)


def test_paired_matches_scipy():
    rng = np.random.default_rng(0)
    b = rng.normal(size=8)
    v = b + 0.5 + rng.normal(scale=0.3, size=8)
    res = paired(v, b, 0.95, 0.05)
    assert res.p_value == pytest.approx(sps.ttest_rel(v, b).pvalue, rel=1e-12)
    assert res.wilcoxon_p == pytest.approx(sps.wilcoxon(v, b).pvalue, rel=1e-12)
    assert res.significant and res.n_pairs == 8


def test_welch_tie_matches_scipy_and_needs_two_seeds():
    rng = np.random.default_rng(1)
    x, ref = rng.normal(0.0, 1.0, 5), rng.normal(0.3, 1.0, 6)
    p = sps.ttest_ind(x, ref, equal_var=False).pvalue
    tie = welch_tie(x, ref, 0.05)
    assert tie.p == pytest.approx(p, rel=1e-12) and tie.tied == (p >= 0.05)
    assert not welch_tie(x[:1], ref, 0.05).tied  # one seed: never a tie
    assert welch_tie(np.ones(3), np.ones(2), 0.05).tied
