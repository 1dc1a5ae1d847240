"""The simplex check's table on fixed cosine matrices, and its figure."""

from __future__ import annotations

import numpy as np

from pipeline.report import simplex


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


def test_plot_writes_png_and_svg(tmp_path):
    eye = np.eye(3)
    paths = simplex.plot([("supcon", (5, 5, 5), eye)], tmp_path / "s")
    assert sorted(p.suffix for p in paths) == [".png", ".svg"]
    assert all(p.stat().st_size > 0 for p in paths)
