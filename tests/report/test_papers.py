"""The Betser Table 1 side-by-side section: slopes against SciPy and closed forms, claim verdicts
(held / not held, attributable to training or not) on fixed tables."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from pipeline.report.papers import BETSER_TABLE1, log_slope, side_by_side, trends
from pipeline.report.papers_md import to_markdown


def _side_by_side(*args):
    """(paper_tables.md, paper_tables.csv, the claims) from side_by_side's values."""
    paper = side_by_side(*args)
    return to_markdown(paper), paper.table, list(paper.claims)

Z = 1.959963984540054


def test_log_slope_without_intervals_is_ols_on_logs():
    part = pd.DataFrame({"batch_size": [8, 16, 32, 64, 128],
                         "cv": [0.30, 0.26, 0.25, 0.19, 0.17]})
    b, lo, hi = log_slope(part, "batch_size", "cv")
    ref = sps.linregress(np.log2(part.batch_size), np.log2(part.cv))
    half = sps.t.ppf(0.975, len(part) - 2) * ref.stderr
    assert b == pytest.approx(ref.slope)
    assert (lo, hi) == pytest.approx((ref.slope - half, ref.slope + half))


def test_log_slope_takes_intervals_as_known_errors():
    # two points: slope = Δ log CV / Δ log B; its variance (se1/cv1)² + (se2/cv2)² over Δ log B²
    part = pd.DataFrame({"batch_size": [8, 128], "cv": [0.2, 0.1],
                         "cv_lo": [0.2 - Z * 0.01, 0.1 - Z * 0.02],
                         "cv_hi": [0.2 + Z * 0.01, 0.1 + Z * 0.02]})
    b, lo, hi = log_slope(part, "batch_size", "cv")
    assert b == pytest.approx(-0.25)
    half = Z * math.sqrt(0.05**2 + 0.2**2) / math.log(16)
    assert (lo, hi) == pytest.approx((b - half, b + half))
    part.loc[0, "cv_lo"] = np.nan  # one cell without an interval: ordinary least squares
    assert all(math.isnan(v) for v in log_slope(part, "batch_size", "cv")[1:])


def test_log_slope_uses_residual_scatter_when_larger():
    # tiny per-point errors but scattered points: the residual variance must widen the interval
    part = pd.DataFrame({"batch_size": [8, 16, 32, 64], "cv": [0.2, 0.1, 0.2, 0.1]})
    part["cv_lo"], part["cv_hi"] = part.cv - 1e-6, part.cv + 1e-6
    _, lo, hi = log_slope(part, "batch_size", "cv")
    assert lo < 0 < hi


def test_log_slope_undefined_with_one_axis_value():
    part = pd.DataFrame({"batch_size": [32, 32], "cv": [0.1, 0.2]})
    assert all(math.isnan(v) for v in log_slope(part, "batch_size", "cv"))


def _cells(cv, control, axis="batch_size", values=(8, 32, 128), half=0.002, seeds=3):
    """Cells of the given CVs; seed s moves each by (s − 1)·0.001 (a spread between trainings)."""
    rows = []
    for d, (cvs, ctrls) in enumerate(zip(cv, control, strict=True)):
        for v, c0, k in zip(values, cvs, ctrls, strict=True):
            for seed in range(seeds):
                c = c0 + (seed - 1) * 0.001 if seeds > 1 else c0
                rows.append({"objective": "contrastive", "loss": "nt_xent", "arch": "linear",
                             "embed_dim": 32 * 2**d, axis: v, "seed": seed, "status": "ok",
                             "cv": c, "cv_lo": c - half, "cv_hi": c + half, "control_cv": k,
                             "control_cv_lo": k - half, "control_cv_hi": k + half})
    return pd.DataFrame(rows)


def test_trends_verdicts_on_fixed_table():
    cells = _cells(cv=[[0.30, 0.25, 0.20], [0.20, 0.20, 0.20]],
                   control=[[0.12, 0.12, 0.12], [0.12, 0.12, 0.12]])
    table = trends(cells, "batch_size").set_index("embed_dim")
    assert bool(table.loc[32, "held"]) and bool(table.loc[32, "training"])  # falls, control flat
    assert not bool(table.loc[64, "held"]) and not bool(table.loc[64, "training"])  # flat
    assert (table.basis == "seeds").all() and (table.seeds == 3).all()
    # the fit is to the seed means with errors s/√3 from the seeds (s = 0.001 here), against
    # numpy's polyfit (weights 1/σ, σ of log2 CV by the delta method)
    means = cells[cells.embed_dim == 32].groupby("batch_size").cv.mean()
    sigma = (0.001 / math.sqrt(3)) / (means.to_numpy() * math.log(2))
    ref = np.polyfit(np.log2(means.index.to_numpy(float)), np.log2(means.to_numpy()), 1,
                     w=1 / sigma)[0]
    assert table.loc[32, "slope"] == pytest.approx(ref)


def test_one_seed_is_undecided_and_uses_the_cells_intervals():
    cells = _cells(cv=[[0.30, 0.25, 0.20]], control=[[0.12, 0.12, 0.12]], seeds=1)
    (row,) = trends(cells, "batch_size").itertuples()
    assert row.verdict == "undecided" and not row.held and not row.training
    assert row.basis == "held-out rows" and row.seeds == 1
    part = cells[cells.embed_dim == 32]
    sigma = (0.002 / Z) / (part.cv * math.log(2))
    ref = np.polyfit(np.log2(part.batch_size), np.log2(part.cv), 1, w=1 / sigma)[0]
    assert row.slope == pytest.approx(ref)
    assert log_slope(part, "batch_size", "cv")[0] == pytest.approx(ref)
    text, _, claims = _side_by_side(cells, "laplace")
    assert "**CV falls as the batch size grows**: undecided — 1 seed(s) per point" in text
    assert claims[0]["verdict"] == "undecided" and not claims[0]["tested"]


def test_fall_shared_with_the_control_is_not_training():
    # CV falls with d, but the untrained encoder's CV falls just as fast (the CLT's 1/√(2d))
    rows = []
    for d in (32, 64, 128, 256):
        for seed in range(3):
            c = 1 / math.sqrt(2 * d) * (1 + 0.01 * (seed - 1))
            rows.append({"objective": "contrastive", "loss": "nt_xent", "arch": "linear",
                         "seed": seed, "status": "ok", "embed_dim": d, "batch_size": 32, "cv": c,
                         "cv_lo": c - 0.002, "cv_hi": c + 0.002, "control_cv": c,
                         "control_cv_lo": c - 0.002, "control_cv_hi": c + 0.002})
    (row,) = trends(pd.DataFrame(rows), "embed_dim").itertuples()
    assert row.held and row.control_held and not row.training


def test_side_by_side_section():
    cells = _cells(cv=[[0.30, 0.25, 0.20]], control=[[0.12, 0.12, 0.12]])
    for s in ("ad_mean", "ad_pass_frac", "dp_p_mean", "dp_pass_frac"):
        cells[s] = 0.5
        cells[f"control_{s}"] = 0.5
        cells[f"null_{s}"] = 0.5
    cells["null_cv"] = 0.05
    text, table, claims = _side_by_side(cells, "laplace")
    flat = re.sub(r" +", " ", text)  # the Markdown writer pads columns
    assert "| published | | 0.08 | 0.38 | 100% | 0.49 | 100% |" in flat
    assert "| this run | 8 | 0.300 / 0.120 / 0.050 |" in flat
    assert "**CV falls as the batch size grows**: held — " in text
    assert "interval over seeds, 3 or more per point" in text
    assert "not tested (the grid has one value of `embed_dim`)" in text
    assert len(table) == 3 and table.published_cv.eq(0.08).all()
    by_claim = {c["claim"]: c for c in claims}
    assert by_claim["CV falls as the batch size grows"] == {
        "setting": "Laplace, linear encoder", "claim": "CV falls as the batch size grows",
        "tested": True, "verdict": "held", "seeds": 3, "groups": 1, "held": 1,
        "by_training": 1}
    assert not by_claim["CV falls as d grows"]["tested"]


def test_side_by_side_without_a_matching_setting():
    cells = _cells(cv=[[0.3, 0.2, 0.1]], control=[[0.1, 0.1, 0.1]])
    text, table, claims = _side_by_side(cells, "sparse_binary")
    assert "No cell of this grid matches a published setting" in text
    assert table.empty and claims == []
    assert ("laplace", "linear", "contrastive") in BETSER_TABLE1


def test_side_by_side_adds_the_supervised_control_where_it_exists():
    cells = _cells(cv=[[0.30, 0.25, 0.20]], control=[[0.12, 0.12, 0.12]])
    cells["supervised_cv"] = 0.5
    text, table, _ = _side_by_side(cells, "laplace")
    assert "**trained / untrained control / Gaussian null / supervised**" in text
    assert "| this run | 8 | 0.300 / 0.120 / – / 0.500 |" in re.sub(r" +", " ", text)
    assert table.supervised_cv.eq(0.5).all()
