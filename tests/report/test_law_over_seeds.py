"""The O(1/k) law decided over seeds (pipeline.report.papers.one_over_k.law_over_seeds): each seed's
log-log slope of |CE − R_k| on k, the Student-t interval of the slopes of the seeds whose 1/k
expansion is in its asymptotic regime, the verdict against the 1/√k rate; checked against
np.polyfit and SciPy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from pipeline.report.papers.one_over_k import LAW_CLAIM, law_over_seeds

KS = (8, 16, 32, 64, 128)


def _sweeps(slopes, c2=0.0, taus=(0.5,)):
    """finite_k rows and grid rows: one contrastive cell per (tau, seed), |gap| = 2·k^slope."""
    rows, grid = [], []
    for tau in taus:
        for seed, slope in enumerate(slopes):
            cell = f"c{tau}{seed}"
            grid.append({"cell_id": cell, "objective": "contrastive", "tau": tau, "seed": seed})
            for k in KS:
                gap = -2.0 * k ** slope
                rows.append({"cell_id": cell, "encoder": "trained", "k": k, "gap": gap,
                             "gap_se": 1e-3 * abs(gap), "c1": -2.0, "c2": c2, "c3": 0.0,
                             "gap_expansion": -2.0 / k, "fit_k_min": 8, "fit_k_max": None})
    grid.append({"cell_id": "sup", "objective": "supervised", "tau": taus[0], "seed": 0})
    return pd.DataFrame(rows), pd.DataFrame(grid)


def test_slopes_near_minus_one_hold_with_a_t_interval_over_seeds():
    slopes = (-1.02, -0.97, -1.05, -0.99)
    (law,) = law_over_seeds(*_sweeps(slopes), 0.95)
    assert law.slopes == pytest.approx({s: v for s, v in enumerate(slopes)}, abs=1e-6)
    logk = np.log(KS)
    assert law.slopes[0] == pytest.approx(np.polyfit(logk, np.log(2.0 * np.power(KS, -1.02)),
                                                     1)[0])
    ci = sps.ttest_1samp(list(law.slopes.values()), 0.0).confidence_interval(0.95)
    assert (law.low, law.high) == pytest.approx((ci.low, ci.high), abs=1e-6)
    assert law.verdict.value == "held" and law.covers_minus_one
    claim = law.claim("mnist")
    assert claim["claim"] == LAW_CLAIM and claim["verdict"] == "held" and claim["seeds"] == 4
    assert claim["setting"] == "mnist trained encoders" and claim["tested"]


def test_a_slower_rate_is_contradicted_and_an_unclear_one_unresolved():
    (slow,) = law_over_seeds(*_sweeps((-0.30, -0.28, -0.33)), 0.95)
    assert slow.verdict.value == "contradicted" and not slow.covers_minus_one
    (unclear,) = law_over_seeds(*_sweeps((-0.2, -0.9, -0.5)), 0.95)
    assert (unclear.verdict.value, unclear.verdict.reason) == ("unresolved",
                                                               "interval covers zero")


def test_outside_the_regime_the_law_is_not_tested():
    (law,) = law_over_seeds(*_sweeps((-1.0, -1.01, -0.99), c2=-20.0), 0.95)  # |c2/c1|/8 > 0.1
    assert law.verdict.value == "unresolved" and not law.verdict.decided
    assert law.verdict.reason == ("outside the claim's conditions: the 1/k expansion is in its "
                                  "asymptotic regime in 0 of 3 seeds (pipeline.search.regime)")
    (few,) = law_over_seeds(*_sweeps((-1.0, -1.01)), 0.95)
    assert few.verdict.reason == "too few seeds (2 < 3)"


def test_one_law_per_setting_and_none_without_a_sweep():
    laws = law_over_seeds(*_sweeps((-1.0, -1.02, -0.98), taus=(0.1, 0.5)), 0.95)
    assert [law.setting for law in laws] == [{"tau": 0.1}, {"tau": 0.5}]
    assert laws[0].claim("laplace")["setting"] == "laplace trained encoders (tau = 0.1)"
    finite_k, grid = _sweeps((-1.0,))
    assert law_over_seeds(finite_k.iloc[:0], grid, 0.95) == []
    assert law_over_seeds(finite_k, grid.drop(columns="seed"), 0.95) == []


def test_one_claim_for_the_grid_by_the_majority_of_its_settings():
    from pipeline.report.papers.one_over_k import law_claim

    finite_k, grid = _sweeps((-1.0, -1.02, -0.98), taus=(0.1, 0.5))
    slow, _ = _sweeps((-0.3, -0.31, -0.29), taus=(0.9,))
    grid = pd.concat([grid, _sweeps((-0.3, -0.31, -0.29), taus=(0.9,))[1]], ignore_index=True)
    laws = law_over_seeds(pd.concat([finite_k, slow], ignore_index=True), grid, 0.95)
    claim = law_claim(laws, "laplace")
    assert (claim["verdict"], claim["held"], claim["contradicted"], claim["groups"]) == (
        "held", 2, 1, 3)  # 2 of 3 settings held: strictly more than half
    assert [s["verdict"] for s in claim["settings"]] == ["held", "held", "contradicted"]
    assert law_claim(laws[:1], "laplace") == laws[0].claim("laplace")
    assert law_claim([], "laplace") is None
    two = law_claim([laws[0], laws[2]], "laplace")  # one held, one contradicted: no majority
    assert two["verdict"] == "unresolved" and two["reason"].startswith("settings disagree")
