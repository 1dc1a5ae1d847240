"""The suite board across tasks gets the rank intervals, the power notes, the optimality gap and
the performance profile with the tasks as blocks (pipeline.report.suite: board, tables,
render, notes, publish), each against the engine's function on the board's
(tasks × losses × seeds) scores."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline.report.suite.board import TaskInput, suite_board
from pipeline.report.suite.publish import render
from pipeline.report.suite.render import aggregate_rows
from pipeline.seeding import numpy_generator
from pipeline.stats.comparisons.profiles import performance_profiles
from tests.oracles.profile_oracles import normalise_loop, optimality_gap_loop

GROUP_BY = ["loss", "k", "tau", "arch"]


def _board(means: dict[str, dict[str, float]], seeds: int = 4, n_boot: int = 300):
    rng = np.random.default_rng(5)
    tasks = []
    for name, by_loss in means.items():
        rows = [{"objective": "contrastive", "loss": loss, "k": 16, "tau": 0.1,
                 "arch": "linear", "seed": s, "status": "ok", "cell_id": f"{loss}-{s}",
                 "train_seconds": 2.0, "peak_rss_bytes": 1e8,
                 "recall_at_1": mu + rng.normal(0, 0.03)}
                for loss, mu in by_loss.items() for s in range(seeds)]
        tasks.append(TaskInput(name, "vectors", False, pd.DataFrame(rows)))
    return suite_board(tasks, "recall_at_1", GROUP_BY, n_boot=n_boot)


MEANS = {f"t{i}": {"a": 0.30 + 0.1 * i, "b": 0.32 + 0.1 * i, "c": 0.45 + 0.05 * i}
         for i in range(5)}


def test_the_aggregate_has_the_gap_and_the_rank_interval_over_tasks():
    means = {t: dict(v) for t, v in MEANS.items()}
    del means["t3"]["b"]  # b misses a task: its gap is over the 4 tasks it entered
    board = _board(means)
    agg = board.aggregate.set_index("loss")
    ref = normalise_loop(board.scores.tolist(), True)
    for j, loss in enumerate(board.losses):
        assert agg.loc[loss, "optimality_gap"] == pytest.approx(optimality_gap_loop(ref, j),
                                                                abs=1e-12)
        assert agg.loc[loss, "optimality_gap_lo"] <= agg.loc[loss, "optimality_gap"]
        assert agg.loc[loss, "optimality_gap"] <= agg.loc[loss, "optimality_gap_hi"]
        assert agg.loc[loss, "rank_lo"] <= agg.loc[loss, "mean_rank"] <= agg.loc[loss, "rank_hi"]
    assert agg.p_rank1.sum() == pytest.approx(1.0)
    assert agg.loc["c", "optimality_gap"] < agg.loc["a", "optimality_gap"]


def test_the_profile_is_the_engines_with_tasks_as_blocks():
    board = _board(MEANS)
    p = board.cross.profiles
    ref = performance_profiles(board.scores, list(board.losses), True, 300,
                               numpy_generator("", "suite.profile", "recall_at_1"), 0.95)
    assert p is not None and p.normalised.blocks_used == len(MEANS)
    for got, want in zip(p.profiles, ref.profiles, strict=True):
        np.testing.assert_allclose(got.fraction, want.fraction, atol=1e-12)


def test_the_page_shows_them_and_draws_the_profile():
    board = _board(MEANS)
    files = render(board)
    md = files["suite.md"].decode()
    assert "Optimality gap [95%]" in md and "Rank interval [95%]" in md and "P(rank 1)" in md
    assert "min–max normalised within its task" in md
    assert "What would settle it (suite_pairs.csv)" in md and "seeds per task" in md
    assert "plots/performance_profile.png" in md
    _, header, rows = aggregate_rows(board)
    k = header.index("Optimality gap [95%]")
    for r in board.aggregate.itertuples():
        row = next(x for x in rows if x[0] == r.loss)
        lo, hi = sorted((r.optimality_gap_lo, r.optimality_gap_hi))
        assert row[k] == f"{r.optimality_gap:.2f} [{r.optimality_gap_lo:.2f}, " \
            f"{r.optimality_gap_hi:.2f}]" and lo == r.optimality_gap_lo
        assert row[header.index("Rank interval [95%]")] == f"[{r.rank_lo:.2f}, {r.rank_hi:.2f}]"
    png = files["plots/performance_profile.png"]
    assert png.startswith(b"\x89PNG")
    assert {"delta", "seeds_to_separate"} <= set(board.pairs.columns)
    out = os.environ.get("CBENCH_PROFILE_PNG")  # to look at it: a path to write the PNG to
    if out:
        Path(out).write_bytes(png)
