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
    with pytest.raises(ValueError, match="axis = 'batch_size': allowed: k, n, embed_dim"):
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


@pytest.mark.parametrize("profile", [None, "grid-1000.yaml"])
def test_plan_is_bounded_whatever_the_grid_size(profile, tmp_path):
    """The same figures for 36 or 1000 cells, each with at most MAX_LINES series."""
    from pipeline.config import load
    from pipeline.report.board import make_board
    from tests.report.synthetic import ROOT, synthetic_cells

    params = load(ROOT / "params.yaml", ROOT / "profiles" / profile if profile else None)
    cells = synthetic_cells(params)
    b = make_board(cells, params.report)
    best = b.table.iloc[list(b.sections[0].rows)]
    specs = figures.plan(cells, pd.DataFrame(columns=["epoch"]), pd.DataFrame(), best,
                         "recall_at_1", 0.95)
    names = [s.name for s in specs]
    assert len(names) <= 8 and "recall_vs_k" in names and "variant_recall_at_1" in names
    for spec in specs:
        if spec.kind == "metric_vs":
            lines = int(np.prod([cells[h].nunique() for h in spec.options["hue"]] or [1]))
            lines *= 2 if spec.options.get("control") else 1
            assert lines <= figures.MAX_LINES, (spec.name, spec.options["hue"])
        if spec.kind == "variant_comparison":
            assert len(spec.data) == cells.loss.nunique()  # one bar per loss
    spec = next(s for s in specs if s.name == "recall_vs_k")
    paths = figures.draw(spec, tmp_path)
    assert paths[0].stat().st_size > 1000


def test_hue_axes_stop_at_the_limit(board):
    cells = board.assign(embed_dim=board.seed * 8 + 8)  # 3 values
    assert figures.hue_axes(cells, ("loss", "k", "embed_dim"), 8) == ("loss", "k")  # 3·2 = 6
    assert figures.hue_axes(cells, ("loss", "k", "embed_dim"), 2) == ("loss",)  # the first always
    assert figures.hue_axes(cells, ("tau", "arch")) == ()  # nothing varies
