"""The comparison across settings as report tables (pipeline.report.grid.ranks): the score array the
cells make, ranks.csv / pairs.csv against the engine's values, tiers in the board, the CD
diagram."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.report.grid.board import make_board
from pipeline.report.grid.ranks import (
    cross_compare,
    display,
    notes,
    pairs_table,
    ranks_table,
    score_array,
    tier_of,
)
from pipeline.report.render.cd_diagram import critical_difference
from pipeline.report.render.markdown import to_markdown


def _cells(offsets: dict[str, float], seeds: int = 3, noise: float = 0.01) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for loss, off in offsets.items():
        for k in (4, 16, 64):
            for tau in (0.1, 0.5):
                for seed in range(seeds):
                    base = 0.3 + 0.001 * k + 0.1 * tau  # the setting moves every loss alike
                    rows.append({"cell_id": f"{loss}-{k}-{tau}-{seed}", "status": "ok",
                                 "objective": "contrastive", "loss": loss, "k": k, "tau": tau,
                                 "arch": "linear", "seed": seed,
                                 "recall_at_1": base + off + rng.normal(0, noise)})
    return pd.DataFrame(rows)


def test_score_array_blocks_are_the_other_varying_axes(report_cfg):
    cells = _cells({"a": 0.0, "b": 0.1})
    scores, methods, blocks = score_array(cells, "loss", "recall_at_1", ["k", "tau"])
    assert scores.shape == (6, 2, 3) and methods == ["a", "b"]
    assert blocks[0] == (4, 0.1)
    part = cells[(cells.k == 4) & (cells.tau == 0.1) & (cells.loss == "b")]
    np.testing.assert_allclose(scores[0, 1], part.recall_at_1.to_numpy())
    cc = cross_compare(cells, report_cfg(compare="loss"))
    assert cc.block_axes == ("k", "tau")  # arch is constant, seed is averaged


def test_tables_follow_the_engine_and_tiers_reach_the_board(report_cfg):
    cells = _cells({"infonce": 0.0, "dcl": 0.001, "weince": -0.2})
    cfg = report_cfg(compare="loss", bootstrap=200, group_by=["loss", "k", "tau"])
    cc = cross_compare(cells, cfg)
    ranks, pairs = ranks_table(cc), pairs_table(cc)
    assert list(ranks.loss)[-1] == "weince" and list(ranks.tier)[-1] > 1
    assert ranks.blocks.tolist() == [6, 6, 6] and (ranks.blocks_missing == 0).all()
    r = cc.result.ranking
    assert ranks.mean_rank.tolist() == pytest.approx(sorted(r.mean_rank.tolist()))
    assert len(pairs) == 3
    np.testing.assert_allclose(pairs.cd, r.cd, rtol=1e-12)
    worst = pairs[pairs.b == "weince"]
    assert (worst.p_a_better == 1.0).all()  # every seed of the others beats every seed of it
    assert (worst.p_a_better_lo <= worst.p_a_better).all()
    board = make_board(cells, cfg, tiers=(cc.axis, tier_of(cc), notes(cc)))
    assert set(board.table.tier) == set(tier_of(cc).values())
    text = to_markdown(board)
    assert "| Tier |" in text and "Nemenyi CD" in text and "stratified bootstrap over seeds" in text


def test_one_tier_when_the_grid_cannot_separate(report_cfg):
    cells = _cells({"a": 0.0, "b": 0.0, "c": 0.0}, seeds=2, noise=0.05)
    cc = cross_compare(cells, report_cfg(compare="loss", bootstrap=100))
    assert set(ranks_table(cc).tier) == {1}
    assert "cannot be separated" in " ".join(notes(cc))


def test_missing_cells_are_counted_and_one_seed_has_no_interval(report_cfg):
    cells = _cells({"a": 0.0, "b": 0.1}, seeds=1)
    cells.loc[(cells.loss == "a") & (cells.k == 4), "status"] = "failed"
    cc = cross_compare(cells, report_cfg(compare="loss", bootstrap=50))
    ranks = ranks_table(cc).set_index("loss")
    assert ranks.loc["a", "blocks_missing"] == 2 and ranks.loc["a", "blocks_ranked"] == 4
    assert ranks.iqm_lo.isna().all()
    assert "1 seed: no interval" in display(cc)[1][3]
    assert any("Left out, not filled in" in n for n in notes(cc))


def test_no_comparison_says_why(report_cfg):
    cells = _cells({"a": 0.0})
    cc = cross_compare(cells, report_cfg(compare="loss"))
    assert cc.result is None and "fewer than 2 values" in cc.reason
    assert ranks_table(cc).empty and pairs_table(cc).empty


def test_cd_diagram_is_drawn(tmp_path):
    ranks = pd.DataFrame({"loss": ["a", "b", "c", "d"], "mean_rank": [1.2, 1.9, 3.1, 3.8]})
    png, svg = critical_difference(ranks, 1.1, [("a", "b"), ("c", "d")], "loss").write(
        tmp_path / "cd")
    assert png.stat().st_size > 5000 and "CD = 1.10" in svg.read_text()
