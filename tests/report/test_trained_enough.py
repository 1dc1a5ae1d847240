"""The trained-enough check (SPEC §7) on fixed probe columns, and what it does to the image
verdict: passed keeps it, failed makes a decided verdict "undertrained", absent keeps it and says
it was not checked."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline.report.papers.image_rows import image_comparison
from pipeline.report.papers.image_rows_md import comparison_section
from pipeline.report.papers.trained_enough import CRITERION, NOT_CHECKED, knn_column, trained_enough

GAUSSIAN = {"cv": 0.10, "ad_mean": 0.5, "ad_pass_frac": 0.9, "dp_p_mean": 0.4, "dp_pass_frac": 0.9}
SKEWED = {"cv": 0.30, "ad_mean": 3.0, "ad_pass_frac": 0.1, "dp_p_mean": 0.05, "dp_pass_frac": 0.1}
PROBES = {"linear_probe": 0.9, "control_linear_probe": 0.6, "weighted_knn_20": 0.85,
          "control_weighted_knn_20": 0.5, "weighted_knn_200": 0.1,
          "control_weighted_knn_200": 0.7, "raw_linear_probe": 0.4}


def _board(contrastive_probes=PROBES, supervised_probes=PROBES, seeds=3):
    """Contrastive (Gaussian) and supervised (skewed) cells, head only, three seeds: CV and AD Avg
    lower for contrastive in every seed (the claim held), with the given probe columns."""
    rows = []
    for objective, values, probes in (("contrastive", GAUSSIAN, contrastive_probes),
                                      ("supervised", SKEWED, supervised_probes)):
        for seed in range(seeds):
            row = {"objective": objective, "status": "ok", "seed": seed, **probes}
            for stat, v in values.items():
                row[stat] = v + 0.01 * seed
                row[f"control_{stat}"] = v + 0.05
                row[f"null_{stat}"] = 0.1
            rows.append(row)
    return pd.DataFrame(rows)


def test_the_check_compares_linear_probe_and_the_smallest_k_with_untrained_and_raw():
    cells = _board()
    part = cells[cells.objective == "contrastive"].assign(
        linear_probe=[0.8, 0.9, 1.0])  # means over seeds
    assert knn_column(part, "") == "weighted_knn_20"  # k = 20, not 200 (which would fail)
    got = trained_enough({"contrastive": part}, "", 0.4)
    assert got.criterion == CRITERION and got.missing == ()
    assert [(c.score, c.against, c.value, c.reference) for c in got.checks] == [
        ("linear probe", "untrained", pytest.approx(0.9), 0.6),
        ("weighted kNN (k = 20)", "untrained", 0.85, 0.5),
        ("linear probe", "raw inputs", pytest.approx(0.9), 0.4)]
    assert got.passed is True


def test_the_mean_is_over_seeds_not_cells():
    # seed 0 has three cells at 0.1, seeds 1 and 2 one each at 0.9: seed means 0.1, 0.9, 0.9
    part = pd.DataFrame({"seed": [0, 0, 0, 1, 2], "linear_probe": [0.1, 0.1, 0.1, 0.9, 0.9],
                         "control_linear_probe": 0.6})
    (check,) = trained_enough({"contrastive": part}, "", None).checks
    assert check.value == pytest.approx((0.1 + 0.9 + 0.9) / 3)  # not 0.42, the cells' mean


def test_passed_keeps_the_verdict_and_prints_the_check():
    comparison = image_comparison(_board())
    (head,) = comparison.layers
    assert head.verdict == "held" and head.trained_enough.passed is True
    text = "\n".join(comparison_section(comparison))
    assert ("Trained enough: yes (contrastive linear probe 90.0% > untrained 60.0%; contrastive "
            "weighted kNN (k = 20) 85.0% > untrained 50.0%; contrastive linear probe 90.0% > raw "
            "inputs 40.0%; supervised linear probe 90.0% > untrained 60.0%") in text
    assert CRITERION in text


@pytest.mark.parametrize("who", ["contrastive", "supervised"])
def test_a_failed_check_makes_a_decided_verdict_undertrained(who):
    weak = {**PROBES, "linear_probe": 0.55}  # below the untrained 60%, above the raw inputs' 40%
    board = _board(**{f"{who}_probes": weak})
    (head,) = image_comparison(board).layers
    assert head.verdict == "undertrained" and head.trained_enough.passed is False
    assert head.reason == f"{who} linear probe 55.0% ≤ untrained 60.0%"
    assert head.row()["trained_enough"] is False
    # contrastive − untrained reads the contrastive encoder's check alone
    assert head.untrained_verdict == ("undertrained" if who == "contrastive" else "held")
    text = "\n".join(comparison_section(image_comparison(board)))
    assert "- **head**: undertrained: " in text and "Trained enough: no (" in text


def test_an_unresolved_verdict_stays_unresolved_when_the_check_fails():
    weak = {**PROBES, "weighted_knn_20": 0.4}  # below the untrained 50%
    (head,) = image_comparison(_board(contrastive_probes=weak, seeds=2)).layers
    assert head.trained_enough.passed is False
    assert head.verdict == "unresolved" and head.reason == "too few seeds (2 < 3)"


def test_without_probe_columns_the_verdict_is_kept_and_not_checked():
    board = _board(contrastive_probes={}, supervised_probes={})
    comparison = image_comparison(board)
    (head,) = comparison.layers
    assert head.verdict == "held" and head.trained_enough.passed is None
    assert head.row()["trained_enough"] is None
    text = "\n".join(comparison_section(comparison))
    assert f"{NOT_CHECKED[:1].upper()}{NOT_CHECKED[1:]}." in text
