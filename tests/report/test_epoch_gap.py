"""The contrastive − supervised gap per epoch, against a loop over seeds and SciPy's paired
t-interval."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from pipeline.report.papers.epoch_gap import COLUMNS, gap_by_epoch


def _stats(seeds=(0, 1, 2, 3), epochs=(0, 4, 9), ks=(8, 32)) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for seed in seeds:
        for epoch in epochs:
            start = {"cv": 0.2 + 0.01 * seed, "ad_mean": 2.0 + seed}  # shared initial weights
            for objective in ("contrastive", "supervised"):
                for layer in ("head", "backbone"):
                    for k in ks:
                        drift = 0 if epoch == 0 else epoch * (0.01 if objective == "contrastive"
                                                              else 0.03)
                        for rep in ("raw", "normalized"):
                            rows.append({"cell_id": f"{seed}{objective}{k}", "seed": seed,
                                         "objective": objective, "k": k, "layer": layer,
                                         "epoch": epoch, "representation": rep, "status": "ok",
                                         "cv": start["cv"] + drift + (rng.normal(0, 0.01)
                                                                      if epoch else 0),
                                         "ad_mean": start["ad_mean"] + 10 * drift
                                         + (rng.normal(0, 0.3) if epoch else 0)})
    return pd.DataFrame(rows)


def test_the_gap_is_paired_by_seed_with_a_t_interval():
    stats = _stats()
    got = gap_by_epoch(stats, level=0.9)
    assert list(got.columns) == list(COLUMNS) and len(got) == 2 * 3 * 2
    raw = stats[stats.representation == "raw"]
    for row in got.itertuples():
        part = raw[(raw.layer == row.layer) & (raw.epoch == row.epoch)]
        con, sup = ([part[(part.objective == o) & (part.seed == s)][row.stat].mean()
                     for s in sorted(part.seed.unique())] for o in ("contrastive", "supervised"))
        assert row.seeds == 4 and row.difference == pytest.approx(np.mean(np.subtract(con, sup)))
        assert row.contrastive == pytest.approx(np.mean(con))
        if row.epoch == 0:  # the same initial weights: no gap at all
            assert row.difference == 0 and row.difference_lo == 0 == row.difference_hi
            continue
        ci = sps.ttest_rel(con, sup).confidence_interval(0.9)
        assert (row.difference_lo, row.difference_hi) == pytest.approx((ci.low, ci.high))
    late = got[(got.epoch == 9) & (got.stat == "cv")]
    assert (late.difference_hi < 0).all()  # supervised drifts faster here, so the gap is < 0


def test_failed_cells_and_other_representations_are_left_out():
    stats = _stats(seeds=(0, 1, 2))
    broken = stats.index[(stats.seed == 2) & (stats.objective == "supervised")]
    stats.loc[broken, "status"] = "failed"
    got = gap_by_epoch(stats)
    assert set(got.seeds) == {2}


def test_without_both_objectives_there_is_no_gap():
    stats = _stats()
    assert gap_by_epoch(stats[stats.objective == "contrastive"]).empty
    assert gap_by_epoch(stats.drop(columns="seed")).empty


def test_the_paper_tables_print_the_gap_and_the_report_draws_it(tmp_path):
    from pipeline.report.papers import markdown as papers_md
    from pipeline.report.papers.side_by_side import side_by_side
    from pipeline.report.render.figures import DRAW

    stats = _stats(seeds=(0, 1, 2))
    board = (stats[(stats.epoch == 9) & (stats.representation == "raw")
                   & (stats.layer == "head")]
             .groupby(["cell_id", "seed", "objective"], as_index=False)[["cv", "ad_mean"]].mean()
             .assign(status="ok", loss="nt_xent", arch="resnet18", k=8, control_cv=0.2))
    paper = side_by_side(board, "mnist", 0.95, {}, stats)
    assert paper.image is not None and len(paper.image.gaps) == 12
    text = papers_md.to_markdown(paper)
    assert "## The gap over training" in text
    assert "| head     | 9     | CV        | 3     |" in text
    assert side_by_side(board, "mnist", 0.95, {}).image.gaps.empty  # no stats: no gap
    drawing = DRAW["gap_vs_epoch"](paper.image.gaps)
    assert drawing.write(tmp_path / "gap")  # a PNG and an SVG
