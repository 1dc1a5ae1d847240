"""The rank interval, P(rank 1) and what would settle a pair, as the report shows them
(pipeline.report.grid.ranks, rank_interval_plot): ranks.csv, pairs.csv, the notes, metrics.json's
flat keys and the figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.report.grid.ranks import (
    cross_compare,
    display,
    notes,
    pairs_table,
    ranks_table,
    summary,
)
from pipeline.report.render.rank_interval_plot import rank_intervals
from tests.report.test_ranks import _cells

OFFSETS = {"infonce": 0.0, "dcl": 0.004, "weince": -0.2, "x": 0.002}


def test_ranks_csv_has_the_rank_interval_and_first_place_shares(report_cfg):
    cc = cross_compare(_cells(OFFSETS), report_cfg(compare="loss", bootstrap=300))
    ranks = ranks_table(cc)
    assert (ranks.rank_lo <= ranks.mean_rank + 1e-12).all()
    assert (ranks.mean_rank <= ranks.rank_hi + 1e-12).all()
    assert ranks.p_rank1.sum() == pytest.approx(1.0)
    assert ranks.set_index("loss").loc["weince", ["rank_lo", "rank_hi", "p_rank1"]].tolist() \
        == [4.0, 4.0, 0.0]  # 20 points behind everywhere: last in every resample
    title, header, rows = display(cc)
    assert "Mean rank interval [95%]" in header and "P(rank 1)" in header
    weince = next(r for r in rows if r[0] == "weince")
    assert "[4.00, 4.00]" in weince and "0.00" in weince
    flat = summary(cc)
    assert {name: flat[name]["p_rank1"] for name in OFFSETS} == \
        dict(zip(ranks.loss, ranks.p_rank1, strict=True))
    assert any("Rank interval, P(rank 1)" in line for line in notes(cc))


def test_pairs_csv_asks_for_compute_only_where_the_ranking_does_not_separate(report_cfg):
    cc = cross_compare(_cells(OFFSETS), report_cfg(compare="loss", bootstrap=100, rope=0.0))
    pairs = pairs_table(cc)
    for c in ("delta", "delta_lo", "delta_hi", "practically_equivalent", "seeds_to_separate",
              "blocks_to_separate"):
        assert c in pairs
    sep = pairs.nemenyi == "differs"
    assert sep.any() and (~sep).any()
    assert pairs.loc[sep, "seeds_to_separate"].isna().all()
    assert pairs.loc[sep, "blocks_to_separate"].isna().all()
    assert pairs.loc[~sep, "blocks_to_separate"].notna().all()
    assert not pairs.practically_equivalent.any()  # rope = 0: no region
    one = pairs[(pairs.a == "dcl") & (pairs.b == "infonce")].iloc[0]
    cells = _cells(OFFSETS)
    means = cells.groupby(["loss", "k", "tau"]).recall_at_1.mean()
    assert one.delta == pytest.approx((means["dcl"] - means["infonce"]).mean(), abs=1e-12)
    text = " ".join(notes(cc))
    assert "What would settle it" in text and "To separate" in text


def test_a_wide_rope_says_practically_equivalent_and_asks_nothing(report_cfg):
    cells = _cells({"infonce": 0.0, "dcl": 0.001, "x": -0.001})
    cc = cross_compare(cells, report_cfg(compare="loss", bootstrap=100, rope=0.05))
    pairs = pairs_table(cc)
    assert pairs.practically_equivalent.all()
    assert pairs.seeds_to_separate.isna().all() and pairs.blocks_to_separate.isna().all()
    text = " ".join(notes(cc))
    assert "practically equivalent" in text and "To separate" not in text
    csv = pairs.to_csv(index=False)  # integers as integers, missing as empty
    assert ",True,," in csv


def test_rank_interval_figure_is_drawn():
    ranks = pd.DataFrame({"loss": ["a", "b", "c"], "mean_rank": [1.2, 2.0, 2.8],
                          "rank_lo": [1.0, 1.5, 2.0], "rank_hi": [1.8, 2.6, 3.0],
                          "p_rank1": [0.8, 0.2, 0.0]})
    d = rank_intervals(ranks, "loss", 0.9, "title")
    assert d.png.startswith(b"\x89PNG") and b"<svg" in d.svg
    nan = ranks.assign(rank_lo=np.nan, rank_hi=np.nan, p_rank1=np.nan)
    assert rank_intervals(nan, "loss").png.startswith(b"\x89PNG")
