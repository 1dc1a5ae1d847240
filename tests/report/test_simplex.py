"""The simplex check's table on fixed cosine matrices, and its figure."""

from __future__ import annotations

import numpy as np

from pipeline.report.papers import simplex
from tests.conftest import assert_drawn_png


def test_deviation_from_the_regular_simplex():
    regular = np.full((4, 4), -1 / 3)
    np.fill_diagonal(regular, 1.0)
    skewed = regular.copy()
    skewed[0, 1] = skewed[1, 0] = -0.57
    table = simplex.table([("soft_supcon", (10, 10, 10, 10), regular),
                           ("supcon", (40, 10, 5, 5), skewed)], tol=0.02)
    assert table.max_deviation.tolist() == [0.0, abs(-0.57 + 1 / 3)]
    assert table.simplex.tolist() == [True, False]
    assert table.class_counts.tolist() == ["10/10/10/10", "40/10/5/5"]


def test_plot_draws_one_heatmap_per_loss_and_balance(tmp_path, capture):
    figs = capture(simplex)
    regular = np.full((3, 3), -0.5)
    np.fill_diagonal(regular, 1.0)
    results = [("supcon", (5, 5, 5), np.eye(3)), ("soft_supcon", (5, 5, 5), regular),
               ("supcon", (9, 3, 3), regular)]
    paths = simplex.plot(results, tmp_path / "s")
    assert [p.name for p in paths] == ["s.png", "s.svg"]
    assert_drawn_png(paths[0])
    heatmaps = [ax for ax in figs[0].axes if ax.get_visible() and ax.get_images()]
    # a row per loss, a column per balance: soft_supcon was not run on 9/3/3, so 3 of 4 panels
    assert [ax.get_title() for ax in heatmaps] == ["supcon\nclasses 5/5/5",
                                                   "supcon\nclasses 9/3/3",
                                                   "soft_supcon\nclasses 5/5/5"]
    for ax, (_, _, cos) in zip(heatmaps, [results[0], results[2], results[1]], strict=True):
        np.testing.assert_array_equal(ax.get_images()[0].get_array(), cos)
        assert sorted(t.get_text() for t in ax.texts) == sorted(f"{v:.2f}" for v in cos.ravel())
    assert any(ax.get_ylabel() == "class-mean cosine" for ax in figs[0].axes)  # the colour bar
