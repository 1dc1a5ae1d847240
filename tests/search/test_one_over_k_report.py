"""reports/one_over_k.{csv,png} and the metrics entry, from k-sweep rows as search_cell writes
them."""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest

from pipeline.report.papers import one_over_k, one_over_k_plot
from pipeline.search import crn_gap_sweep, crn_table, fit_loglog_slope, nested_negatives
from tests.conftest import assert_drawn_png


def _rows(rng, encoder, tau=1.0, fit_k_max=None):
    n, p, m, d = 300, 4, 400, 4
    ks = [2, 4, 8, 16, 32, 64]
    w = rng.normal(size=(d, d))
    za = rng.normal(size=(n, d)) @ w
    zp = za[:, None, :] + 0.7 * rng.normal(size=(n, p, d)) @ w
    sweep = crn_gap_sweep(za, zp, rng.normal(size=(m, d)) @ w, nested_negatives(rng, n, m, 64),
                          ks, tau)
    coefs = dict(zip(("c1", "c2", "c3"), map(float, sweep.coef), strict=True))
    rows = [{"cell_id": "c0", "encoder": encoder,
             **{**asdict(r), "gap_cov": list(r.gap_cov),
                "gap_leading_cov": list(r.gap_leading_cov)},
             **coefs, "c1_se": math.sqrt(sweep.coef_cov[0, 0]), "fit_k_min": 8,
             "fit_k_max": fit_k_max} for r in crn_table(sweep, tau)]
    return rows, sweep


def _write(finite_k, grid, out, level):
    """What publish does with the law's values: its table as one_over_k.csv, its plot."""
    law = one_over_k.analyse(finite_k, grid, level)
    law.table.to_csv(out / "one_over_k.csv", index=False)
    one_over_k_plot.plot(law).write(out / "plots" / "one_over_k")
    return law.entry


def test_write(rng, tmp_path, capture):
    figs = capture(one_over_k_plot)
    (tmp_path / "plots").mkdir()
    trained, sweep = _rows(rng, "trained")
    initial, _ = _rows(rng, "initial")
    frame = pd.DataFrame(trained + initial + [{**r, "cell_id": "c1"} for r in trained])
    frame.to_parquet(tmp_path / "finite_k.parquet")  # the list column survives Parquet
    frame = pd.read_parquet(tmp_path / "finite_k.parquet")
    entry = _write(frame, pd.DataFrame({"cell_id": ["c9", "c0", "c1"]}), tmp_path, 0.95)
    csv = pd.read_csv(tmp_path / "one_over_k.csv")
    assert list(csv.columns) == ["encoder", *one_over_k.CSV_COLUMNS, "series"]
    assert set(csv.series) == {"trained", "fixed φ (untrained)"}  # DVC's plot series
    np.testing.assert_array_equal(csv.abs_gap, csv.gap.abs())
    assert len(csv) == 12 and set(csv.encoder) == {"trained", "initial"}  # cell c0 only
    np.testing.assert_allclose(csv.k_gap, csv.k * csv.gap, rtol=1e-12)
    assert entry["cell_id"] == "c0" and entry["fit_k_min"] == 8 and entry["fit_k_max"] is None
    want = fit_loglog_slope(sweep.ks, sweep.gap, gap_cov=sweep.gap_cov, k_min=8)
    got = entry["trained"]
    assert got["slope"] == pytest.approx(want.slope, abs=1e-5) and got["n_points"] == 4
    assert got["ci_low"] == pytest.approx(want.ci_low, abs=1e-5)
    assert got["covers_minus_one"] == (want.ci_low <= -1 <= want.ci_high)
    assert got["resolved_all"] == bool(np.all(np.abs(sweep.gap) >= 3 * sweep.gap_se))
    assert got["c1"] == pytest.approx(sweep.coef[0], abs=1e-5)
    assert got["k_gap_at_k_max"] == pytest.approx(64 * sweep.gap[-1], abs=1e-5)
    assert got["method"] == "wls_sandwich" and got["slope_expansion"] is not None
    value, cov = sweep.leading()
    lead = fit_loglog_slope(sweep.ks, value, gap_cov=cov, k_min=8)
    assert got["regime"] == "in the asymptotic regime"  # τ = 1: small corrections at k ≥ 8
    check = got["internal_check"]  # the −1-by-construction slope, labelled, not evidence
    assert "by construction" in check["what"]
    assert check["slope_leading"] == pytest.approx(lead.slope, abs=1e-5)
    assert check["ci_high"] == pytest.approx(lead.ci_high, abs=1e-5)
    assert check["covers_minus_one"] == (lead.ci_low <= -1 <= lead.ci_high)
    expansion = fit_loglog_slope(sweep.ks, sweep.expansion(sweep.ks), gap_cov=sweep.gap_cov,
                                 k_min=8)
    assert got["slope_expansion"] == pytest.approx(expansion.slope, abs=1e-5)
    assert got["slope_minus_expansion"] == pytest.approx(want.slope - expansion.slope, abs=2e-5)
    assert got["c1_ci_low"] < got["c1"] < got["c1_ci_high"]
    assert_drawn_png(tmp_path / "plots" / "one_over_k.png")
    full, zoom = figs[0].axes
    for ax in (full, zoom):  # each encoder's k·(CE − R_k) of the first cell, c0
        by_label = {ln.get_label(): ln for ln in ax.get_lines()}
        for encoder, rows in (("trained", trained), ("initial", initial)):
            name = one_over_k.LABELS[encoder]
            (line,) = [ln for label, ln in by_label.items() if label.startswith(f"{name}: ")
                       and ln.get_marker() == "o"]
            np.testing.assert_allclose(line.get_xdata(), [r["k"] for r in rows])
            np.testing.assert_allclose(line.get_ydata(), [r["k"] * r["gap"] for r in rows])
    assert any(f"slope {entry['trained']['slope']:.4f}" in ln.get_label()
               for ln in full.get_lines())
    assert full.get_xscale() == "log" and "Proposition 1" in full.get_title()


def test_outside_the_regime_only_the_raw_slope(rng, tmp_path):
    """τ = 0.1: |c₂/c₁|/8 or |c₃/c₁|/64 is far above 0.1, so no expansion number is published."""
    (tmp_path / "plots").mkdir()
    rows, sweep = _rows(rng, "trained", tau=0.1)
    c1, c2, c3 = map(float, sweep.coef)
    assert abs(c2 / c1) / 8 > 0.1 or abs(c3 / c1) / 64 > 0.1
    entry = _write(pd.DataFrame(rows), pd.DataFrame({"cell_id": ["c0"]}), tmp_path, 0.95)
    got = entry["trained"]
    assert got["regime"].startswith("outside the asymptotic regime")
    assert got["slope"] is not None
    assert not {"c1", "c2", "c3", "slope_expansion", "internal_check"} & set(got)


def test_write_with_an_upper_end_and_old_rows(rng, tmp_path):
    """fit_k_max is honoured; rows without the CRN columns still give a table and a fit."""
    (tmp_path / "plots").mkdir()
    rows, sweep = _rows(rng, "trained", fit_k_max=32)
    entry = _write(pd.DataFrame(rows), pd.DataFrame({"cell_id": ["c0"]}), tmp_path, 0.95)
    assert entry["fit_k_max"] == 32 and entry["trained"]["n_points"] == 3
    old = pd.DataFrame(rows)[["cell_id", "encoder", "k", "risk", "ce", "gap", "gap_se",
                              "window_low", "window_high"]]
    entry = _write(old, pd.DataFrame({"cell_id": ["c0"]}), tmp_path, 0.95)
    assert entry["trained"]["method"] == "wls_known_se" and entry["fit_k_min"] is None
    assert "k_gap" in pd.read_csv(tmp_path / "one_over_k.csv")
