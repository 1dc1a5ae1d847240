"""A bounded metric's interval over seeds stays in its range (pipeline.stats.intervals.
bounded_seed_ci), and the suite board uses it for a % metric (issue 48: sparse_binary's R@1 was
printed 99.9 [99.6, 100.2])."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from pipeline.metrics import lookup
from pipeline.report.suite.tables import TaskInfo, per_task_table
from pipeline.report.suite.values import TaskChoice
from pipeline.stats.intervals import bounded_seed_ci
from pipeline.stats.uncertainty import seed_ci


def test_near_the_bound_the_interval_stays_inside():
    near = [0.999, 0.9995, 0.997]  # inside (0, 1): the logit-scale t-interval
    assert seed_ci(near).high > 1.0  # the plain t-interval leaves the range
    ci = bounded_seed_ci(near)
    assert 0.0 < ci.low < ci.estimate < ci.high < 1.0
    assert ci.estimate == pytest.approx(np.mean(near))
    z = np.log(near) - np.log1p(-np.asarray(near))  # the formula, written out
    half = sps.t.ppf(0.975, 2) * z.std(ddof=1) / math.sqrt(3)
    expit = [1 / (1 + math.exp(-v)) for v in (z.mean() - half, z.mean() + half)]
    assert [ci.low, ci.high] == pytest.approx(expit, rel=1e-12)


def test_a_seed_on_the_bound_cuts_the_t_interval_to_the_range():
    on = [1.0, 0.999, 0.998]  # the suite board's 99.9 [99.6, 100.2]
    plain, ci = seed_ci(on), bounded_seed_ci(on)
    assert plain.high > 1.0 and ci.high == 1.0 and ci.low == plain.low
    low = bounded_seed_ci([0.002, 0.0, 0.001])
    assert low.low == 0.0 and low.high == pytest.approx(seed_ci([0.002, 0.0, 0.001]).high)


def test_other_ranges_one_seed_and_bad_values():
    ci = bounded_seed_ci([99.9, 99.95, 99.7], 0.9, 0.0, 100.0)
    assert 0.0 < ci.low and ci.high < 100.0
    assert math.isnan(bounded_seed_ci([0.5]).low)
    far = bounded_seed_ci([0.5, 0.6, 0.55])  # far from the bounds: close to the t-interval
    assert far.low == pytest.approx(seed_ci([0.5, 0.6, 0.55]).low, abs=0.01)
    outside = bounded_seed_ci([0.5, 1.2])  # not a fraction after all: the plain t-interval
    assert (outside.low, outside.high) == (seed_ci([0.5, 1.2]).low, seed_ci([0.5, 1.2]).high)
    with pytest.raises(ValueError, match="expected finite low < high"):
        bounded_seed_ci([0.5, 0.6], low=1.0, high=0.0)


def test_the_suite_board_interval_of_a_percent_metric_stays_in_range():
    info = TaskInfo("sparse_binary", "vectors", True, "recall_at_1", "recall_at_1", True, 1)
    choice = TaskChoice("infonce", {}, np.array([1.0, 0.999, 0.998]), (0, 1, 2), 0.999, True,
                        float("nan"), 3, float("nan"))
    table = per_task_table([info], ["infonce"], {"sparse_binary": {"infonce": choice}},
                           lookup("recall_at_1"), 0.95)
    row = table.iloc[0]
    assert row["hi"] <= 1.0 and row["lo"] < row["mean"]
    # a metric that is not a fraction keeps the plain t-interval
    risk = per_task_table([info], ["infonce"], {"sparse_binary": {"infonce": choice}},
                          lookup("risk_keval"), 0.95)
    assert risk.iloc[0]["hi"] == pytest.approx(seed_ci([1.0, 0.999, 0.998]).high)
