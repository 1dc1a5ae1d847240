"""Each figure draws what its data say (axes, series, their values, as the matplotlib figure
holds them) and writes a PNG that is not blank and an SVG; bad arguments name themselves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import BarContainer, ErrorbarContainer

from pipeline.report.grid import figure_plan
from pipeline.report.grid.tables import aggregate
from pipeline.report.render import figures
from tests.conftest import assert_drawn_png


@pytest.fixture
def drawn(capture):
    return capture(figures)


def _check(paths, stem):
    assert [p.name for p in paths] == [f"{stem.name}.png", f"{stem.name}.svg"]
    png, svg = paths
    assert_drawn_png(png)
    assert "<svg" in svg.read_text() and svg.read_text().count("<path") > 10


def _series(ax):
    """{label: (x, y)} of the error-bar series of ``ax``."""
    out = {}
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            line = c.lines[0]
            out[c.get_label()] = (list(line.get_xdata()), list(line.get_ydata()))
    return out


@pytest.fixture
def grid_board(board) -> pd.DataFrame:
    out = board.assign(n=np.where(board.seed == 0, 256, 1024),
                       embed_dim=np.where(board.k == 4, 8, 32))
    return out


@pytest.mark.parametrize("axis, xs, cv", [
    ("n", [256, 1024], [0.2, 0.215]),  # n: 256 for seed 0, 1024 for seeds 1, 2 (cv 0.21, 0.22)
    ("embed_dim", [8, 32], [0.21, 0.21]),  # d: 8 at k = 4, 32 at k = 16, all three seeds each
])
def test_metric_vs(grid_board, tmp_path, drawn, axis, xs, cv):
    stem = tmp_path / f"cv_vs_{axis}"
    bars = figure_plan.metric_panels(grid_board, axis=axis)
    _check(figures.metric_vs(bars, axis=axis).write(stem), stem)
    (ax,) = drawn[0].axes
    series = _series(ax)
    assert set(series) == {"infonce", "dcl"}  # one line per loss; the failed weince cell dropped
    for x, y in series.values():
        assert x == xs and y == pytest.approx(cv, abs=1e-12)
    assert ax.get_xscale() == "log" and ax.get_ylabel() == "CV" and axis in ax.get_xlabel()


def test_metric_vs_with_control_and_facets(grid_board, tmp_path, drawn):
    stem = tmp_path / "cv_facets"
    board = grid_board.assign(control_cv=0.9 * grid_board.cv,
                              tau=np.where(grid_board.loss == "dcl", 0.2, 0.1))
    bars = figure_plan.metric_panels(board, axis="embed_dim", control=True, facet="tau")
    drawing = figures.metric_vs(bars, axis="embed_dim", facet="tau")
    _check(drawing.write(stem), stem)
    axes = drawn[0].axes
    assert [ax.get_title() for ax in axes] == ["τ = 0.1", "τ = 0.2"]  # one panel per τ
    for ax, loss in zip(axes, ("infonce", "dcl"), strict=True):
        series = _series(ax)
        assert set(series) == {loss, f"{loss} (untrained)"}
        trained, control = series[loss][1], series[f"{loss} (untrained)"][1]
        assert control == pytest.approx([0.9 * v for v in trained])
        styles = {c.get_label(): c.lines[0].get_linestyle() for c in ax.containers}
        assert styles == {loss: "-", f"{loss} (untrained)": "--"}
    with pytest.raises(ValueError, match="control metric: unknown column 'control_cv'"):
        figure_plan.metric_panels(grid_board, axis="n", control=True)
    with pytest.raises(ValueError, match="facet: unknown column 'width'"):
        figure_plan.metric_panels(board, axis="n", facet="width")


def test_metric_vs_unknown_axis(grid_board, tmp_path):
    with pytest.raises(ValueError, match="axis = 'batch_size': allowed: k, n, embed_dim"):
        figure_plan.metric_panels(grid_board, axis="batch_size")


def test_pass_rate_vs_epoch(tmp_path, drawn):
    rows = [{"cell_id": f"c{c}", "loss": loss, "epoch": e, "representation": rep,
             "status": "ok", "ad_pass_frac": 0.5 + 0.04 * e + 0.01 * c,
             "dp_pass_frac": 0.4 + 0.05 * e}
            for c, loss in enumerate(["infonce", "infonce", "dcl"]) for e in (0, 5, 10)
            for rep in ("raw", "normalized")]
    stem = tmp_path / "pass"
    bars = figure_plan.pass_rate_panels(pd.DataFrame(rows))
    _check(figures.pass_rate_vs_epoch(bars).write(stem), stem)
    ad, dp = drawn[0].axes
    assert ad.get_ylim() == (-2, 102) and "Anderson" in ad.get_title()
    assert set(_series(ad)) == {f"{loss} ({rep})" for loss in ("infonce", "dcl")
                               for rep in ("normalized", "raw")}
    x, y = _series(ad)["dcl (raw)"]  # one cell (c = 2): 100·(0.5 + 0.04·e + 0.02)
    assert x == [0, 5, 10] and y == pytest.approx([52.0, 72.0, 92.0])
    assert _series(dp)["infonce (raw)"][1] == pytest.approx([40.0, 65.0, 90.0])
    with pytest.raises(ValueError, match="stats columns: unknown column 'epoch'"):
        figure_plan.pass_rate_panels(pd.DataFrame(rows).drop(columns="epoch"))


def test_norm_histograms(tmp_path, drawn):
    rng = np.random.default_rng(0)
    stem = tmp_path / "norms"
    _check(figures.norm_histograms({"infonce": rng.normal(4, 0.2, 500),
                                    "dcl": rng.normal(4, 0.4, 500)}).write(stem), stem)
    (ax,) = drawn[0].axes
    assert [p.get_label() for p in ax.patches] == ["infonce", "dcl"]  # one outline each
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["infonce", "dcl"]
    # densities: the narrower distribution peaks about twice as high
    peak = {p.get_label(): p.get_path().vertices[:, 1].max() for p in ax.patches}
    assert 1.5 < peak["infonce"] / peak["dcl"] < 2.7
    with pytest.raises(ValueError, match="norms_by_label: empty"):
        figures.norm_histograms({})


def test_gap_vs_k(tmp_path, drawn):
    df = pd.DataFrame({"k": [4, 16, 64, 256] * 2, "loss": ["infonce"] * 4 + ["dcl"] * 4,
                       "gap": [0.5, 0.13, 0.03, 0.008, -0.4, -0.2, -0.1, -0.05],
                       "gap_se": [0.01] * 8})
    stem = tmp_path / "gap"
    _check(figures.gap_vs_k(df, hue=["loss"]).write(stem), stem)
    _check(figures.gap_vs_k(df.drop(columns=["gap_se", "loss"])).write(stem), stem)
    ax = drawn[0].axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    series = _series(ax)
    assert series["infonce"] == ([4, 16, 64, 256], pytest.approx([0.5, 0.13, 0.03, 0.008]))
    assert series["dcl"][1] == pytest.approx([0.4, 0.2, 0.1, 0.05])  # |gap|
    refs = {ln.get_label(): ln for ln in ax.get_lines() if ln.get_label().startswith("∝")}
    mean_first = (0.5 + 0.4) / 2  # both through the smallest k's mean |gap|
    assert refs["∝ 1/k"].get_ydata() == pytest.approx([mean_first * 4 / k
                                                       for k in (4, 16, 64, 256)])
    assert refs["∝ 1/√k"].get_ydata()[-1] == pytest.approx(mean_first * (4 / 256) ** 0.5)
    assert set(_series(drawn[1].axes[0])) == {"|CE − R_k|"}  # without hue: one series


def test_bound_terms(tmp_path, drawn):
    df = pd.DataFrame({"k": [4, 16, 64], "tau": [0.1] * 3, "term_sampling": [0.3, 0.15, 0.08],
                       "term_finite_k": [0.2, 0.05, 0.01], "term_neg": [-0.05, -0.02, 0.0],
                       "bound": [0.45, 0.18, 0.09], "gap": [0.1, 0.04, 0.02]})
    stem = tmp_path / "bound"
    _check(figures.bound_terms(df).write(stem), stem)
    (ax,) = drawn[0].axes
    bars = {c.get_label(): c for c in ax.containers if isinstance(c, BarContainer)}
    assert list(bars) == ["term_sampling", "term_finite_k", "term_neg"]  # stacked, in order
    assert [b.get_height() for b in bars["term_finite_k"]] == pytest.approx([0.2, 0.05, 0.01])
    # the positive terms stack upwards, the negative one hangs below zero
    assert [b.get_y() for b in bars["term_finite_k"]] == pytest.approx([0.3, 0.15, 0.08])
    # (a zero counts as non-negative: it sits on top of the positive stack)
    assert [b.get_y() for b in bars["term_neg"]] == pytest.approx([0.0, 0.0, 0.09])
    markers = {ln.get_label(): list(ln.get_ydata()) for ln in ax.get_lines()
               if ln.get_label() in ("bound", "gap")}
    assert markers == {"bound": [0.45, 0.18, 0.09], "gap": [0.1, 0.04, 0.02]}
    with pytest.raises(ValueError, match="terms: no numeric term columns"):
        figures.bound_terms(df[["k", "bound"]])


def test_variant_comparison(board, tmp_path, drawn):
    table = aggregate(board, ["loss", "k"], ["recall_at_1"])
    stem = tmp_path / "variants"
    _check(figures.variant_comparison(table, "recall_at_1").write(stem), stem)
    (ax,) = drawn[0].axes
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    heights = [b.get_height() for b in bars]
    np.testing.assert_allclose(heights, table["recall_at_1_mean"], equal_nan=True)
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        f"{loss} · k={k}" for loss, k in zip(table.loss, table.k, strict=True)]
    colours = {}
    for b, loss in zip(bars, table.loss, strict=True):  # one colour per loss variant
        colours.setdefault(loss, set()).add(b.get_facecolor())
    assert all(len(c) == 1 for c in colours.values()) and len(
        {next(iter(c)) for c in colours.values()}) == len(colours)
    with pytest.raises(ValueError, match="metric = 'cv': not in the table; allowed: recall_at_1"):
        figures.variant_comparison(table, "cv").write(stem)


def test_svg_is_reproducible(board, tmp_path):
    table = aggregate(board, ["loss", "k"], ["recall_at_1"])
    a = figures.variant_comparison(table, "recall_at_1").write(tmp_path / "a")[1].read_text()
    b = figures.variant_comparison(table, "recall_at_1").write(tmp_path / "b")[1].read_text()
    assert a == b


@pytest.mark.parametrize("profile", [None, "grid-1000.yaml"])
def test_plan_is_bounded_whatever_the_grid_size(profile, tmp_path):
    """The same figures for 36 or 1000 cells, each with at most MAX_LINES series."""
    from pipeline.config import load
    from pipeline.report.grid.board import make_board
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
            for panel in spec.data.panels:
                lines = sum(len(s.lines) for s in panel.sets)
                assert lines <= figures.MAX_LINES, (spec.name, spec.data.hue)
        if spec.kind == "variant_comparison":
            assert len(spec.data) == cells.loss.nunique()  # one bar per loss
    spec = next(s for s in specs if s.name == "recall_vs_k")
    paths = figures.draw(spec).write(tmp_path / spec.name)
    assert paths[0].stat().st_size > 1000


def test_hue_axes_stop_at_the_limit(board):
    cells = board.assign(embed_dim=board.seed * 8 + 8)  # 3 values
    assert figures.hue_axes(cells, ("loss", "k", "embed_dim"), 8) == ("loss", "k")  # 3·2 = 6
    assert figures.hue_axes(cells, ("loss", "k", "embed_dim"), 2) == ("loss",)  # the first always
    assert figures.hue_axes(cells, ("tau", "arch")) == ()  # nothing varies


def test_error_bars_are_seed_intervals_computed_before_drawing(grid_board):
    """The analysis layer computes each point's mean and t interval over its cells (infonce at
    n = 1024: seeds 1 and 2 at each k, CV 0.21 and 0.22); the drawing gets them."""
    from scipy import stats

    bars = figure_plan.metric_panels(grid_board, axis="n", level=0.9)
    (panel,) = bars.panels
    (trained,) = panel.sets
    line = next(ln for ln in trained.lines if ln.key == ("infonce",))
    point = line.points.set_index("n").loc[1024]
    cells = grid_board[(grid_board.loss == "infonce") & (grid_board.n == 1024)
                       & (grid_board.status == "ok")].cv.to_numpy(float)
    assert len(cells) >= 2 and cells.mean() == pytest.approx(0.215)
    half = stats.t.ppf(0.95, len(cells) - 1) * np.std(cells, ddof=1) / np.sqrt(len(cells))
    assert point["mean"] == pytest.approx(0.215)
    assert (point["lo"], point["hi"]) == pytest.approx((0.215 - half, 0.215 + half))
