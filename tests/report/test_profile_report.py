"""The performance profile and the optimality gap in the report: ranks.csv's gap columns and
the profile figure's table follow pipeline.stats.comparisons.profiles on the cells' score array; the
figure draws (reports/plots/performance_profile.png)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline.report.grid.ranks import cross_compare, profile_table, ranks_table, score_array
from pipeline.report.render.profile_plot import performance_profile
from pipeline.seeding import numpy_generator
from pipeline.stats.comparisons.profiles import performance_profiles


def _cells(offsets: dict[str, float], seeds: int = 4, noise: float = 0.02) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for loss, off in offsets.items():
        for k in (4, 16, 64):
            for tau in (0.1, 0.5):
                for seed in range(seeds):
                    rows.append({"cell_id": f"{loss}-{k}-{tau}-{seed}", "status": "ok",
                                 "objective": "contrastive", "loss": loss, "k": k, "tau": tau,
                                 "arch": "linear", "seed": seed,
                                 "recall_at_1": 0.3 + 0.001 * k + off + rng.normal(0, noise)})
    return pd.DataFrame(rows)


def test_ranks_csv_has_the_gap_of_the_normalised_scores(report_cfg):
    cells = _cells({"infonce": 0.0, "dcl": 0.01, "weince": -0.05})
    cfg = report_cfg(compare="loss", bootstrap=300)
    cc = cross_compare(cells, cfg)
    ranks = ranks_table(cc).set_index("loss")
    scores, methods, _ = score_array(cells, "loss", "recall_at_1", ["k", "tau"])
    ref = performance_profiles(scores, methods, True, 300, np.random.default_rng(0))
    for name in methods:
        assert ranks.loc[name, "optimality_gap"] == pytest.approx(ref.gap(name).gap.estimate,
                                                                  abs=1e-12)
        assert ranks.loc[name, "optimality_gap_lo"] <= ranks.loc[name, "optimality_gap"]
        assert ranks.loc[name, "optimality_gap"] <= ranks.loc[name, "optimality_gap_hi"]
    assert ranks.loc["weince", "optimality_gap"] > ranks.loc["dcl", "optimality_gap"]


def test_profile_table_follows_the_engine_in_rank_order(report_cfg):
    cells = _cells({"dcl": -0.05, "infonce": 0.0, "weince": 0.05})
    cfg = report_cfg(compare="loss", bootstrap=300)
    cc = cross_compare(cells, cfg)
    table = profile_table(cc)
    order = list(ranks_table(cc).loss)
    assert order == ["weince", "infonce", "dcl"]  # not the methods' (sorted) order
    assert list(dict.fromkeys(table.loss)) == order
    scores, methods, _ = score_array(cells, "loss", "recall_at_1", ["k", "tau"])
    ref = performance_profiles(scores, methods, True, 300,
                               numpy_generator("report.profile", "loss", "recall_at_1"),
                               cfg.level)
    for p in ref.profiles:
        part = table[table.loss == p.method]
        np.testing.assert_allclose(part.fraction, p.fraction, atol=1e-12)
        np.testing.assert_allclose(part[["low", "high"]].to_numpy(), np.c_[p.low, p.high],
                                   atol=1e-12)
        assert part.gap.iloc[0] == pytest.approx(ref.gap(p.method).gap.estimate)


def test_no_comparison_no_profile(report_cfg):
    cells = _cells({"infonce": 0.0})
    cc = cross_compare(cells, report_cfg(compare="loss"))
    assert cc.profiles is None and profile_table(cc).empty


def test_the_profile_figure_draws(report_cfg):
    cells = _cells({"infonce": 0.0, "dcl": 0.01, "weince": -0.05, "supcon": 0.005})
    cc = cross_compare(cells, report_cfg(compare="loss", bootstrap=500))
    drawing = performance_profile(profile_table(cc), name="loss", blocks="setting",
                                  title="recall@1, min–max normalised per setting")
    assert drawing.png.startswith(b"\x89PNG") and b"<svg" in drawing.svg
    out = os.environ.get("CBENCH_PROFILE_PNG")  # to look at it: a path to write the PNG to
    if out:
        Path(out).write_bytes(drawing.png)
