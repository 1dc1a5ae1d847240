"""The publishable board: rows, constant axes in the caption, sections, marks, notes, levels."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from pipeline.report.grid.board import csv_table, full_table, make_board
from pipeline.report.grid.compare import compare_to_baseline
from pipeline.report.grid.controls import control_summary
from pipeline.report.papers import markdown as papers_md
from pipeline.report.papers.side_by_side import side_by_side
from pipeline.report.render.markdown import MAX_COLUMNS, to_markdown


@pytest.fixture
def cells(board) -> pd.DataFrame:
    """The conftest board with the constant axes of a real grid and a control for cv."""
    return board.assign(objective="contrastive", n=2000, embed_dim=16, batch_size=128,
                        tau_schedule="constant", control_cv=0.25, delta_cv=board.cv - 0.25,
                        changed_cv=pd.array([False] * len(board), dtype="boolean"))


def test_constant_axes_move_to_the_caption(cells, report_cfg):
    b = make_board(cells, report_cfg(), "laplace")
    assert b.axes == ("loss", "k")  # tau and arch are constant in this grid
    assert b.setting == ("laplace data, contrastive, τ = 0.1, constant τ schedule, n = 2000, "
                         "linear encoder, d = 16, B = 128")
    assert b.caption.startswith(b.setting + "; 3 seeds. Ranked by R@1 (higher is better).")
    md = to_markdown(b)
    header = next(line for line in md.splitlines() if line.startswith("| "))
    assert [c.strip() for c in header.strip("|").split("|")][:3] == ["#", "loss", "k"]
    assert "| arch" not in md and "τ = 0.1" in md
    assert b.provenance_text == "git abc1234, params p1, data d1, hardware cpu"  # once, for the run


def test_rows_ranked_by_the_primary_with_failures_marked(cells, report_cfg):
    b = make_board(cells, report_cfg(columns=["recall_at_1", "risk_keval", "cv"]))
    t = b.table
    # recall means: dcl4 2.4, inf4 2.333, dcl16 = inf16 0.5 (tie), weince NaN (failed)
    assert list(zip(t.loss, t.k, strict=True)) == [("dcl", 4), ("infonce", 4), ("dcl", 16),
                                                   ("infonce", 16), ("weince", 4)]
    assert list(t["rank"].iloc[:4]) == [1, 2, 3, 3] and pd.isna(t["rank"].iloc[4])
    assert b.rank_text(4).endswith("‡") and "1 cell(s) failed" in " ".join(b.notes)
    assert "wei04s0 (weince, k = 4, seed = 0): train: NaN loss" in " ".join(b.notes)
    assert b.seeds == "3 seeds"
    by_risk = make_board(cells, report_cfg(primary="risk_keval"))
    assert by_risk.primary.name == "risk_keval" and by_risk.table.loss.iloc[0] == "dcl"


def test_best_and_not_significantly_different(cells, report_cfg):
    b = make_board(cells, report_cfg(columns=["recall_at_1", "cv"]))
    t = b.table.set_index(["loss", "k"])
    assert bool(t.loc[("dcl", 4), "recall_at_1_best"])
    p = sps.ttest_ind([1.0, 2.0, 4.0], [1.05, 2.12, 4.03], equal_var=False).pvalue
    assert bool(t.loc[("infonce", 4), "recall_at_1_tied"]) == (p >= 0.05)
    p16 = sps.ttest_ind([0.4, 0.5, 0.6], [1.05, 2.12, 4.03], equal_var=False).pvalue
    assert bool(t.loc[("dcl", 16), "recall_at_1_tied"]) == (p16 >= 0.05)
    assert not t.loc[("weince", 4), "recall_at_1_tied"]  # no ok seed
    assert "cv_best" not in t  # cv is not a score
    md = to_markdown(b)
    assert "**240 ± 380**" in md and "*230 ± 380*" in md  # R@1 in %


def test_baseline_mark_and_one_seed_notes(cells, report_cfg):
    shifted = cells.copy()
    dcl16 = (shifted.loss == "dcl") & (shifted.k == 16)
    shifted.loc[dcl16, "recall_at_1"] += [0.10, 0.11, 0.12]
    cmp = compare_to_baseline(shifted, "infonce", pair_on=["k", "tau", "arch"],
                              metrics=["recall_at_1"])
    b = make_board(shifted, report_cfg(), comparison=cmp)
    row = b.table[(b.table.loss == "dcl") & (b.table.k == 16)].iloc[0]
    assert bool(row.recall_at_1_sig) and "†" in b.entry(int(row.name), b.primary).text
    assert any(n.startswith("†: differs from infonce") for n in b.notes)
    one = make_board(cells[cells.seed == 0], report_cfg())
    assert one.seeds == "1 seed" and one.notes[0].startswith("Values: one seed")
    assert not any(n.startswith("†") for n in one.notes)


def e_metric(b):
    return next(m for m in b.columns if m.name == "cv")


def test_controls_compact_delta_and_unchanged_mark(cells, report_cfg):
    b = make_board(cells, report_cfg(columns=["recall_at_1", "cv"]))
    i = int(b.table.index[(b.table.loss == "infonce") & (b.table.k == 4)][0])
    e = b.entry(i, next(m for m in b.columns if m.name == "cv"))
    # Δ over seeds −0.05, −0.04, −0.03: its t-interval over seeds excludes 0, so no °, even
    # though no cell's own interval moved (changed_cv False): ° is decided on seeds
    assert e.value == "0.210" and e.delta == "−0.040" and not e.unchanged
    assert e.control == "Δ −0.040"
    flat = cells.assign(control_cv=0.21 + 0.02 * (cells.seed == 1),
                        delta_cv=lambda c: c.cv - c.control_cv)
    e = make_board(flat, report_cfg(columns=["recall_at_1", "cv"])).entry(i, e_metric(b))
    assert e.unchanged and e.control.endswith("°")  # −0.01, −0.02, +0.01 over seeds covers 0
    one = make_board(cells[cells.seed == 0], report_cfg(columns=["recall_at_1", "cv"]))
    j = int(one.table.index[(one.table.loss == "infonce") & (one.table.k == 4)][0])
    assert not one.entry(j, e_metric(one)).unchanged  # one seed: unresolved, no °
    assert any("with one seed that is unresolved (too few seeds)" in n for n in one.notes)
    assert "control_cv_mean" not in [c for c in csv_table(b).columns if c.startswith("cv")]
    assert {"control_cv_mean", "delta_cv_mean", "changed_cv_n"} <= set(csv_table(b).columns)
    header = next(line for line in to_markdown(b).splitlines() if line.startswith("|"))
    assert header.count("CV") == 1  # one column per statistic, not three


def test_sections_top_n_and_best_of_each_loss(cells, report_cfg):
    b = make_board(cells, report_cfg(top=2))
    assert [s.title for s in b.sections] == ["Best setting of each loss",
                                             "Top 2 of 5 settings by R@1"]
    assert [b.table.loss.iloc[i] for i in b.sections[0].rows] == ["dcl", "infonce", "weince"]
    assert b.sections[1].rows == (0, 1)
    assert any("Every setting in leaderboard.html" in n for n in b.notes)
    assert [s.title for s in make_board(cells, report_cfg(top=10)).sections] == ["All 5 settings"]


def test_markdown_has_at_most_twelve_columns(cells, report_cfg):
    wide = cells.assign(embed_dim=np.where(cells.seed == 0, 8, 16), n=cells.k * 100,
                        batch_size=np.where(cells.k == 4, 64, 128))  # 5 varying axes
    extra = {"ad_mean": 0.4, "ad_pass_frac": 0.9, "dp_p_mean": 0.5, "dp_pass_frac": 0.9,
             "ce": -3.0, "align": 0.6, "uniform": -3.0, "eff_rank": 15.0}
    wide = wide.assign(**extra)
    cols = ["recall_at_1", "risk_keval", "ce", "cv", "ad_mean", "ad_pass_frac", "dp_pass_frac",
            "eff_rank"]
    b = make_board(wide, report_cfg(columns=cols, group_by=["loss", "k", "n", "embed_dim",
                                                            "batch_size"]))
    md = to_markdown(b)
    header = next(line for line in md.splitlines() if line.startswith("|"))
    assert header.count("|") - 1 == MAX_COLUMNS
    assert "Not shown here (at most 12 columns)" in md


def test_full_table_has_every_registered_metric(cells, report_cfg):
    full = full_table(cells, report_cfg())
    assert {"recall_at_1_mean", "risk_keval_mean", "cv_mean", "control_cv_mean",
            "delta_cv_mean", "cell_ids"} <= set(full.columns)
    assert len(full) == 5


@pytest.mark.parametrize("level", [0.9, 0.99])
def test_widths_and_texts_follow_the_level(cells, report_cfg, level):
    b = make_board(cells, report_cfg(level=level))
    row = b.table[(b.table.loss == "infonce") & (b.table.k == 4)].iloc[0]
    half = sps.t.ppf((1 + level) / 2, 2) * math.sqrt(7 / 3) / math.sqrt(3)
    assert (row.recall_at_1_hi - row.recall_at_1_lo) / 2 == pytest.approx(half)
    text = " ".join(b.notes)
    assert f"{level:.0%}" in text and "95%" not in text
    shown = round(100 * half, -1 if 100 * half >= 100 else 0)  # R@1 in %, 2 significant digits
    assert f"± {shown:.0f}" in to_markdown(b)
    lines = control_summary(cells.assign(changed_cv=True), level)
    assert f"({level:.0%} interval of trained − untrained" in lines[0] and "95%" not in lines[0]


@pytest.mark.parametrize("level", [0.9, 0.99])
def test_paper_section_states_the_level(level):
    rows = [{"objective": "contrastive", "loss": "nt_xent", "arch": "linear", "embed_dim": 32,
             "batch_size": b, "seed": 0, "status": "ok", "cv": c, "cv_lo": c - 0.002,
             "cv_hi": c + 0.002} for b, c in ((8, 0.3), (32, 0.25), (128, 0.2))]
    text = papers_md.to_markdown(side_by_side(pd.DataFrame(rows), "laplace", level))
    assert f"cells' {level:.0%} intervals over held-out rows" in text  # one seed: unresolved
    assert f"trained slope [{level:.0%}, over]" in text
    assert "95%" not in text
