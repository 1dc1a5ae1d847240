"""Each figure writes a non-empty PNG (valid signature) and SVG; bad arguments name themselves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.report import figures
from pipeline.report.tables import aggregate


def _check(paths, stem):
    assert [p.name for p in paths] == [f"{stem.name}.png", f"{stem.name}.svg"]
    png, svg = paths
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    assert "<svg" in svg.read_text() and svg.stat().st_size > 1000


@pytest.fixture
def grid_board(board) -> pd.DataFrame:
    out = board.assign(n=np.where(board.seed == 0, 256, 1024),
                       embed_dim=np.where(board.k == 4, 8, 32))
    return out


@pytest.mark.parametrize("axis", ["n", "embed_dim"])
def test_metric_vs(grid_board, tmp_path, axis):
    stem = tmp_path / f"cv_vs_{axis}"
    _check(figures.metric_vs(grid_board, stem, axis=axis), stem)


def test_metric_vs_with_control_and_facets(grid_board, tmp_path):
    stem = tmp_path / "cv_facets"
    board = grid_board.assign(control_cv=0.9 * grid_board.cv,
                              tau=np.where(grid_board.loss == "dcl", 0.2, 0.1))
    _check(figures.metric_vs(board, stem, axis="embed_dim", control=True, facet="tau"), stem)
    with pytest.raises(ValueError, match="control metric: unknown column 'control_cv'"):
        figures.metric_vs(grid_board, stem, axis="n", control=True)
    with pytest.raises(ValueError, match="facet: unknown column 'width'"):
        figures.metric_vs(board, stem, axis="n", facet="width")


def test_metric_vs_unknown_axis(grid_board, tmp_path):
    with pytest.raises(ValueError, match="axis = 'batch_size': allowed: n, embed_dim"):
        figures.metric_vs(grid_board, tmp_path / "x", axis="batch_size")


def test_pass_rate_vs_epoch(tmp_path):
    rows = [{"cell_id": f"c{c}", "loss": loss, "epoch": e, "representation": rep,
             "status": "ok", "ad_pass_frac": 0.5 + 0.04 * e + 0.01 * c,
             "dp_pass_frac": 0.4 + 0.05 * e}
            for c, loss in enumerate(["infonce", "infonce", "dcl"]) for e in (0, 5, 10)
            for rep in ("raw", "normalized")]
    stem = tmp_path / "pass"
    _check(figures.pass_rate_vs_epoch(pd.DataFrame(rows), stem), stem)
    with pytest.raises(ValueError, match="stats columns: unknown column 'epoch'"):
        figures.pass_rate_vs_epoch(pd.DataFrame(rows).drop(columns="epoch"), stem)


def test_norm_histograms(tmp_path):
    rng = np.random.default_rng(0)
    stem = tmp_path / "norms"
    _check(figures.norm_histograms({"infonce": rng.normal(4, 0.2, 500),
                                    "dcl": rng.normal(4, 0.4, 500)}, stem), stem)
    with pytest.raises(ValueError, match="norms_by_label: empty"):
        figures.norm_histograms({}, stem)


def test_gap_vs_k(tmp_path):
    df = pd.DataFrame({"k": [4, 16, 64, 256] * 2, "loss": ["infonce"] * 4 + ["dcl"] * 4,
                       "gap": [0.5, 0.13, 0.03, 0.008, -0.4, -0.2, -0.1, -0.05],
                       "gap_se": [0.01] * 8})
    stem = tmp_path / "gap"
    _check(figures.gap_vs_k(df, stem, hue=["loss"]), stem)
    _check(figures.gap_vs_k(df.drop(columns=["gap_se", "loss"]), stem), stem)


def test_bound_terms(tmp_path):
    df = pd.DataFrame({"k": [4, 16, 64], "tau": [0.1] * 3, "term_sampling": [0.3, 0.15, 0.08],
                       "term_finite_k": [0.2, 0.05, 0.01], "term_neg": [-0.05, -0.02, 0.0],
                       "bound": [0.45, 0.18, 0.09], "gap": [0.1, 0.04, 0.02]})
    stem = tmp_path / "bound"
    _check(figures.bound_terms(df, stem), stem)
    with pytest.raises(ValueError, match="terms: no numeric term columns"):
        figures.bound_terms(df[["k", "bound"]], stem)


def test_variant_comparison(board, tmp_path):
    table = aggregate(board, ["loss", "k"], ["recall_at_1"])
    stem = tmp_path / "variants"
    _check(figures.variant_comparison(table, stem, "recall_at_1"), stem)
    with pytest.raises(ValueError, match="metric = 'cv': not in the table; allowed: recall_at_1"):
        figures.variant_comparison(table, stem, "cv")


def test_svg_is_reproducible(board, tmp_path):
    table = aggregate(board, ["loss", "k"], ["recall_at_1"])
    a = figures.variant_comparison(table, tmp_path / "a", "recall_at_1")[1].read_text()
    b = figures.variant_comparison(table, tmp_path / "b", "recall_at_1")[1].read_text()
    assert a == b
