"""The Betser Table 1 side-by-side section: per-seed slopes against numpy's polyfit, their
t-interval against SciPy and R, claim verdicts (held / contradicted / unresolved with a reason,
attributable to training or not) on fixed tables, and the published protocol beside the run's."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from pipeline.config import expand, from_mapping, read_yaml
from pipeline.report.papers.markdown import to_markdown
from pipeline.report.papers.side_by_side import BETSER_TABLE1, log_slope, side_by_side, trends


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


def _seed_slopes(cells, col, axis="batch_size"):
    """Each seed's slope of log col on log axis by numpy's polyfit (the independent check)."""
    return np.array([np.polyfit(np.log(part[axis].to_numpy(float)),
                                np.log(part[col].to_numpy(float)), 1)[0]
                     for _, part in cells.groupby("seed")])


def test_trends_verdicts_on_fixed_table():
    cells = _cells(cv=[[0.30, 0.25, 0.20], [0.20, 0.20, 0.20]],
                   control=[[0.12, 0.12, 0.12], [0.12, 0.12, 0.12]])
    table = trends(cells, "batch_size").set_index("embed_dim")
    assert table.loc[32, "verdict"] == "held" and table.loc[32, "reason"] == ""
    assert bool(table.loc[32, "training"]) and table.loc[32, "training_verdict"] == "held"
    # flat in every seed: each slope is 0, the interval [0, 0] covers zero
    assert table.loc[64, "verdict"] == "unresolved"
    assert table.loc[64, "reason"] == "interval covers zero" and not bool(table.loc[64, "held"])
    assert not bool(table.loc[64, "training"])
    assert (table.basis == "seeds").all() and (table.seeds == 3).all()
    # per seed the OLS slope of log CV on log B (numpy), then the t-interval over seeds (SciPy)
    group = cells[cells.embed_dim == 32]
    slopes = _seed_slopes(group, "cv")
    ci = sps.ttest_1samp(slopes, 0.0).confidence_interval(0.95)
    assert table.loc[32, "slope"] == pytest.approx(slopes.mean(), rel=1e-12)
    assert (table.loc[32, "slope_lo"], table.loc[32, "slope_hi"]) == pytest.approx(
        (ci.low, ci.high), rel=1e-10)
    # trained − control per seed, the same interval
    diff = slopes - _seed_slopes(group, "control_cv")
    ci = sps.ttest_1samp(diff, 0.0).confidence_interval(0.95)
    assert (table.loc[32, "difference_lo"], table.loc[32, "difference_hi"]) == pytest.approx(
        (ci.low, ci.high), rel=1e-10)


def test_seed_slopes_interval_against_scipy_at_another_level():
    rng = np.random.default_rng(7)
    rows = [{"batch_size": b, "seed": s, "cv": 0.3 * b ** -0.1 * math.exp(rng.normal(0, 0.05)),
             "control_cv": 0.1 * math.exp(rng.normal(0, 0.05))}
            for s in range(4) for b in (8, 16, 32, 64)]
    cells = pd.DataFrame(rows)
    (row,) = trends(cells, "batch_size", level=0.9).itertuples()
    slopes = _seed_slopes(cells, "cv")
    ci = sps.ttest_1samp(slopes, 0.0).confidence_interval(0.9)
    assert row.seeds == 4 and row.slope == pytest.approx(slopes.mean(), rel=1e-12)
    assert (row.slope_lo, row.slope_hi) == pytest.approx((ci.low, ci.high), rel=1e-10)
    ci = sps.ttest_rel(slopes, _seed_slopes(cells, "control_cv")).confidence_interval(0.9)
    assert (row.difference_lo, row.difference_hi) == pytest.approx((ci.low, ci.high), rel=1e-10)


def test_seed_slopes_interval_matches_r():
    # five seeds whose slopes are exactly 1, 2, 3, 4, 5 (CV ∝ B^s between B = 8 and 16);
    # R: t.test(c(1, 2, 3, 4, 5))$conf.int = 1.036757 4.963243 (mean 3, t_{.975,4}·√2.5/√5)
    rows = [{"batch_size": b, "seed": s, "cv": 0.01 * b ** s} for s in range(1, 6)
            for b in (8, 16)]
    (row,) = trends(pd.DataFrame(rows), "batch_size").itertuples()
    assert row.slope == pytest.approx(3.0, rel=1e-12)
    assert (row.slope_lo, row.slope_hi) == pytest.approx((1.036757, 4.963243), abs=5e-7)
    assert row.verdict == "contradicted" and row.reason == ""  # CV rises: the other side


def test_a_seed_needs_two_axis_points():
    cells = _cells(cv=[[0.30, 0.25, 0.20]], control=[[0.12, 0.12, 0.12]], seeds=4)
    # seed 3 keeps one point only: no slope, so three seeds decide
    cells = cells[(cells.seed != 3) | (cells.batch_size == 8)]
    (row,) = trends(cells, "batch_size").itertuples()
    assert row.seeds == 3 and row.basis == "seeds" and row.verdict == "held"
    # and with two seeds of slopes left: too few
    (row,) = trends(cells[cells.seed != 2], "batch_size").itertuples()
    assert row.seeds == 2 and row.verdict == "unresolved"
    assert row.reason == "too few seeds (2 < 3)" and row.basis == "held-out rows"


def test_one_seed_is_unresolved_and_uses_the_cells_intervals():
    cells = _cells(cv=[[0.30, 0.25, 0.20]], control=[[0.12, 0.12, 0.12]], seeds=1)
    (row,) = trends(cells, "batch_size").itertuples()
    assert row.verdict == "unresolved" and not row.held and not row.training
    assert row.reason == "too few seeds (1 < 3)" and row.training_reason == row.reason
    assert row.basis == "held-out rows" and row.seeds == 1
    part = cells[cells.embed_dim == 32]
    sigma = (0.002 / Z) / (part.cv * math.log(2))
    ref = np.polyfit(np.log2(part.batch_size), np.log2(part.cv), 1, w=1 / sigma)[0]
    assert row.slope == pytest.approx(ref)
    assert log_slope(part, "batch_size", "cv")[0] == pytest.approx(ref)
    text, _, claims = _side_by_side(cells, "laplace")
    assert ("**CV falls as the batch size grows**: unresolved — too few seeds (1 < 3); a verdict "
            "about training needs at least 3 seeds") in text
    assert claims[0]["verdict"] == "unresolved" and not claims[0]["tested"]
    assert claims[0]["reason"] == "too few seeds (1 < 3)"


def _groups(slopes_per_group, seeds=3, spread=0.01):
    """Cells of groups (embed_dim 32, 64, ...) whose CV ∝ B^slope; seed s adds (s − 1)·spread to
    the slope (a spread between trainings, so each interval is ± a few spreads)."""
    rows = []
    for g, slope in enumerate(slopes_per_group):
        for seed in range(seeds):
            for b in (8, 32, 128):
                rows.append({"objective": "contrastive", "loss": "nt_xent", "arch": "linear",
                             "embed_dim": 32 * 2**g, "batch_size": b, "seed": seed,
                             "status": "ok", "cv": 0.2 * b ** (slope + (seed - 1) * spread)})
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("slopes", "verdict", "reason"), [
    ((-0.2, -0.2, 0.0), "held", ""),  # 2 of 3 held: most
    ((-0.2, 0.0, 0.0), "unresolved", "groups disagree: 1 held, 0 contradicted, 2 unresolved of 3"),
    ((-0.2, -0.2, 0.0, 0.0), "unresolved",  # 2 of 4 is half, not most
     "groups disagree: 2 held, 0 contradicted, 2 unresolved of 4"),
    ((0.2, 0.2, -0.2), "contradicted", ""),
    ((0.2, -0.2), "unresolved", "groups disagree: 1 held, 1 contradicted, 0 unresolved of 2"),
    ((0.0, 0.0), "unresolved", "interval covers zero"),  # the groups' common reason
])
def test_the_grid_verdict_is_the_strict_majority_of_its_groups(slopes, verdict, reason):
    _, _, claims = _side_by_side(_groups(slopes), "laplace")
    claim = next(c for c in claims if c["claim"] == "CV falls as the batch size grows")
    assert (claim["verdict"], claim["reason"]) == (verdict, reason)
    assert claim["tested"] == (verdict in ("held", "contradicted"))


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
    assert row.training_verdict == "unresolved" and row.training_reason == "interval covers zero"


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
    assert ("95% Student-t interval over the seeds (3 or more per group, S − 1 degrees of "
            "freedom): below zero in 1 of 1 groups") in text
    assert ("**CV falls as d grows**: unresolved — outside the claim's conditions: the grid has "
            "one value of `embed_dim`.") in text
    assert len(table) == 3 and table.published_cv.eq(0.08).all()
    by_claim = {c["claim"]: c for c in claims}
    assert by_claim["CV falls as the batch size grows"] == {
        "setting": "Laplace, linear encoder", "claim": "CV falls as the batch size grows",
        "tested": True, "verdict": "held", "reason": "", "seeds": 3, "groups": 1, "held": 1,
        "contradicted": 0, "by_training": 1, "training_verdict": "held"}
    assert not by_claim["CV falls as d grows"]["tested"]
    assert by_claim["CV falls as d grows"]["verdict"] == "unresolved"


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


def _default_run():
    """The default params.yaml's linear cells as a board (grid axes, cell ids, a CV) and their
    resolved configs as the records the report reads."""
    root = Path(__file__).resolve().parents[2]
    cells = [c for c in expand(from_mapping(read_yaml(root / "params.yaml")))
             if c.arch == "linear"]
    board = pd.DataFrame([{**c.grid_values(), "cell_id": c.cell_id, "status": "ok",
                           "cv": 0.2, "control_cv": 0.1} for c in cells])
    return board, {c.cell_id: {"config": c.config()} for c in cells}


def test_the_default_run_states_where_it_departs_from_the_published_protocol():
    board, records = _default_run()
    paper = side_by_side(board, "laplace", 0.95, records)
    text = to_markdown(paper)
    (setting,) = paper.settings
    off = {p.name: p for p in setting.protocol if p.differs}
    assert set(off) == {"d", "n", "test n", "input dim", "epochs", "tau", "loss", "negatives"}
    assert (off["d"].published, off["d"].this_run) == ("d 32–256", "d 16")
    assert (off["n"].published, off["n"].this_run) == ("n 20 000", "n 2000")
    assert (off["epochs"].published, off["epochs"].this_run) == ("150 epochs", "10 epochs")
    assert off["loss"].this_run == "dcl/infonce/weince" and off["tau"].this_run == "τ 0.1/0.5"
    assert not {p.name: p for p in setting.protocol}["batch size"].differs  # 128: in 8–128
    assert ("Protocol — published: d 32–256, n 20 000, test n 5000, input dim 1024, 150 epochs, "
            "τ 0.1/0.2, nt_xent, in_batch negatives; this run: d 16, n 2000, test n 1000, input "
            "dim 64, 10 epochs, τ 0.1/0.5, dcl/infonce/weince, independent negatives.") in text
    # per row of paper_tables.csv (here one per loss × k × tau) and in the Markdown table
    row = paper.table[(paper.table.loss == "infonce") & (paper.table.tau == 0.1)].iloc[0]
    assert row.protocol_differs == (
        "published: d 32–256, n 20 000, test n 5000, input dim 1024, 150 epochs, nt_xent, "
        "in_batch negatives; this run: d 16, n 2000, test n 1000, input dim 64, 10 epochs, "
        "infonce, independent negatives")
    assert "| protocol (where this run differs)" in text
    assert ("| d 16, n 2000, test n 1000, input dim 64, 10 epochs, τ 0.5, dcl, independent "
            "negatives |") in re.sub(r" +", " ", text)
    assert "d 32–256, n 20 000, test n 5000, input dim 1024, 150 epochs, batch 8–128" in text


def test_a_cell_on_the_published_protocol_differs_in_nothing():
    board, records = _default_run()
    for config in records.values():
        config["config"]["train"].update(epochs=150, negatives="in_batch")
        config["config"]["data"].update(n_heldout=5000, options={"input_dim": 1024})
    # batch 32: inside the published span 8–128, though not one of its ends
    board = board.assign(embed_dim=64, n=20000, loss="nt_xent", tau=0.2, batch_size=32)
    paper = side_by_side(board, "laplace", 0.95, records)
    assert not any(p.differs for p in paper.settings[0].protocol)
    assert paper.table.protocol_differs.eq("").all()
    assert "| as published" in to_markdown(paper)
    # without configs, the points only they hold are named as not known
    paper = side_by_side(board, "laplace", 0.95)
    assert paper.table.protocol_differs.iloc[0] == (
        "not known for this run: test n, input dim, epochs, negatives, optimiser, lr")


def test_metrics_count_held_and_contradicted_claims():
    from pipeline.report.grid.build import Summary

    claims = [c for slopes, name in (((-0.2, -0.2, 0.0), "laplace"), ((0.2, 0.2), "laplace"),
                                     ((-0.2, 0.0), "gaussian_mixture"))
              for c in _side_by_side(_groups(slopes), name)[2]
              if c["claim"] == "CV falls as the batch size grows"]
    assert [c["verdict"] for c in claims] == ["held", "contradicted", "unresolved"]
    flat = Summary(1, 0, {}, {}, {}, [], claims).flat()
    assert flat["paper_claims_tested"] == 2
    assert (flat["paper_claims_held"], flat["paper_claims_contradicted"]) == (1, 1)
