"""The metric registry: entries, derived columns, errors that name the allowed metrics."""

from __future__ import annotations

import pytest

from pipeline.metrics import (
    COST_METRICS,
    METRICS,
    SOURCES,
    Metric,
    is_metric,
    lookup,
    metric_columns,
)


def test_every_entry_is_complete():
    for name, m in METRICS.items():
        assert m.name == name and m.label and m.description and m.reference
        assert m.better in ("higher", "lower", "neither")
        format(1.0, m.format)  # a valid format spec
        assert m.unit in ("", "%", "nats", "s", "1/s", "bytes", "J")
        assert m.source in SOURCES  # tests/test_metric_sources.py: the stage emits it


def test_directions_of_the_ranked_metrics():
    assert lookup("recall_at_1").higher is True and lookup("risk_keval").higher is False
    assert lookup("eff_rank").higher is True and lookup("align").higher is False
    for name in ("cv", "ad_mean", "ad_pass_frac", "dp_pass_frac", "risk_k", "bound", "ce"):
        assert not lookup(name).ranked, name  # properties to report, or not comparable
    for name in COST_METRICS:  # depend on the machine and its load: reported, never ranked
        assert not lookup(name).ranked, name


@pytest.mark.parametrize(("name", "base", "label", "better"), [
    ("norm_uniform", "uniform", "Uniform (normalised)", "lower"),
    ("proj_eff_rank", "eff_rank", "Eff. rank (projected)", "higher"),
    ("control_cv", "cv", "CV (untrained)", "neither"),
    ("null_ad_mean", "ad_mean", "AD Avg (Gaussian null)", "neither"),
    ("supervised_dp_pass_frac", "dp_pass_frac", "DP pass (supervised)", "neither"),
    ("delta_cv", "cv", "Δ CV", "neither"),
    ("norm_null_cv", "cv", "CV (normalised, Gaussian null)", "neither"),
    ("initial_ce", "ce", "CE (untrained)", "neither"),
    ("backbone_cv", "cv", "CV (backbone)", "neither"),
    ("backbone_norm_uniform", "uniform", "Uniform (backbone, normalised)", "lower"),
    ("backbone_control_ad_mean", "ad_mean", "AD Avg (backbone, untrained)", "neither"),
    ("backbone_supervised_cv", "cv", "CV (backbone, supervised)", "neither"),
    ("backbone_norm_null_cv", "cv", "CV (backbone, normalised, Gaussian null)", "neither"),
])
def test_derived_columns(name, base, label, better):
    m = lookup(name)
    assert (m.name, m.label, m.better) == (name, label, better)
    assert (m.format, m.unit, m.reference) == (METRICS[base].format, METRICS[base].unit,
                                               METRICS[base].reference)
    assert m.description.startswith(METRICS[base].description)


def test_derived_families_are_per_metric():
    for name in ("control_recall_at_1", "null_align", "norm_initial_ce", "delta_risk_keval",
                 "cv_lo", "changed_cv", "norm_", "recall", "initial_cv", "backbone_recall_at_1",
                 "norm_backbone_cv", "backbone_initial_ce", "backbone_"):
        assert not is_metric(name), name
    assert metric_columns(["loss", "cv", "cv_lo", "control_cv", "status"]) == ["cv", "control_cv"]


def test_lookup_error_names_the_metric_and_the_allowed_ones():
    with pytest.raises(ValueError, match=r"metric 'recal': not in the registry .*allowed: "
                                         r"recall_at_1, recall_at_5"):
        lookup("recal")


def test_header_tooltip_and_text():
    r1 = lookup("recall_at_1")
    assert r1.header == "R@1 (%) ↑" and r1.text(0.4412) == "44.1" and r1.text(None) == "–"
    assert lookup("cv").header == "CV" and lookup("risk_keval").header == "Risk (nats) ↓"
    assert r1.tooltip.endswith("Higher is better. Source: SPEC §3 (retrieval).")
    assert "Not ranked." in lookup("cv").tooltip


def test_adding_a_metric_is_one_entry(monkeypatch):
    monkeypatch.setitem(METRICS, "toy", Metric("toy", "Toy", "A toy score", "higher",
                                               families=frozenset({"control_"}), source="stats"))
    assert lookup("toy").ranked and lookup("control_toy").label == "Toy (untrained)"
