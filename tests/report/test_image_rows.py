"""Betser's image rows: the protocol check against a cell config, the contrastive − supervised
differences and their three-valued verdicts on fixed tables (closed forms), the trained-enough
check, the section on an MNIST board."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pipeline.config import expand, from_mapping
from pipeline.report.papers.image_rows import (
    Difference,
    compare,
    image_comparison,
    protocol_rows,
    verdict,
)
from pipeline.report.papers.image_rows_md import comparison_section
from pipeline.report.papers.markdown import to_markdown
from pipeline.report.papers.side_by_side import side_by_side


def _side_by_side(*args):
    """(paper_tables.md, paper_tables.csv, the claims) from side_by_side's values."""
    paper = side_by_side(*args)
    return to_markdown(paper), paper.table, list(paper.claims)


def _comparison(board, level=0.95):
    """(Markdown lines, CSV rows) from image_comparison's values."""
    comparison = image_comparison(board, level)
    return comparison_section(comparison), comparison.table()


Z = 1.959963984540054


def _cell(objective, cell_id, values, half=0.01, prefixes=("", "backbone_")):
    row = {"cell_id": cell_id, "objective": objective, "status": "ok", "arch": "resnet18",
           "seed": 0, "linear_probe": 0.9 if objective == "contrastive" else 0.95,
           "control_linear_probe": 0.8, "backbone_linear_probe": 0.92, "raw_linear_probe": 0.5}
    for prefix in prefixes:
        for stat, v in values.items():
            for part, shift in (("", 0.0), ("control_", 0.05), ("null_", -0.5)):
                col = f"{prefix}{part}{stat}"
                row[col] = v + shift if part != "null_" else 0.1
                if part != "null_":
                    row[f"{col}_lo"], row[f"{col}_hi"] = row[col] - half, row[col] + half
    return row


GAUSSIAN = {"cv": 0.10, "ad_mean": 0.5, "ad_pass_frac": 0.9, "dp_p_mean": 0.4, "dp_pass_frac": 0.9}
SKEWED = {"cv": 0.30, "ad_mean": 3.0, "ad_pass_frac": 0.1, "dp_p_mean": 0.05, "dp_pass_frac": 0.1}


def test_difference_interval_and_sides_closed_form():
    con = pd.DataFrame([_cell("contrastive", "a", GAUSSIAN)])
    sup = pd.DataFrame([_cell("supervised", "b", SKEWED)])
    d = compare(con, "cv", sup, "cv", "cv", 0.95)
    se = 0.01 / Z  # each interval ±0.01 at 95%
    assert d.value == pytest.approx(-0.2)
    assert (d.lo, d.hi) == pytest.approx((-0.2 - Z * math.hypot(se, se),
                                          -0.2 + Z * math.hypot(se, se)))
    # one seed: the within-cell interval is shown, and no side is taken about training
    assert (d.side, d.reason, d.seeds) == ("unresolved", "too few seeds (1 < 3)", 1)


def _seeds(objective, values, cvs):
    return pd.DataFrame([{**_cell(objective, f"{objective}{s}", {**values, "cv": cv}), "seed": s}
                         for s, cv in enumerate(cvs)])


def test_with_three_seeds_the_difference_is_decided_over_seeds():
    from scipy import stats as sps

    con = _seeds("contrastive", GAUSSIAN, [0.10, 0.12, 0.11])
    sup = _seeds("supervised", SKEWED, [0.30, 0.25, 0.35])
    got = compare(con, "cv", sup, "cv", "cv", 0.95)
    d = con.cv.to_numpy() - sup.cv.to_numpy()  # paired by seed
    half = sps.t.ppf(0.975, 2) * d.std(ddof=1) / 3 ** 0.5  # the t interval, written out
    assert got.value == pytest.approx(d.mean())
    assert (got.lo, got.hi) == pytest.approx((d.mean() - half, d.mean() + half))
    ci = sps.ttest_rel(con.cv, sup.cv).confidence_interval(0.95)
    assert (got.lo, got.hi) == pytest.approx((ci.low, ci.high), rel=1e-10)  # SciPy's
    assert got.side == "more Gaussian"  # lower CV in every seed, the interval below zero
    assert compare(sup, "cv", con, "cv", "cv", 0.95).side == "less Gaussian"
    # the seeds disagree: the interval over seeds covers zero, however tight each cell's is
    noisy = _seeds("supervised", SKEWED, [0.05, 0.25, 0.02])
    got = compare(con, "cv", noisy, "cv", "cv", 0.95)
    assert (got.side, got.reason) == ("unresolved", "interval covers zero")
    # only the seeds both sides have count: two in common is too few
    got = compare(con, "cv", sup[sup.seed != 2], "cv", "cv", 0.95)
    assert (got.side, got.reason) == ("unresolved", "too few seeds (2 < 3)")


def _d(side, reason=""):
    return Difference(-0.1, -0.2, 0.0, side, reason, 3)


@pytest.mark.parametrize(("sides", "value", "reason"), [
    ({"cv": "more Gaussian", "ad_mean": "more Gaussian", "ad_pass_frac": "less Gaussian"},
     "held", ""),  # CV and AD Avg decide; the pass rates do not
    ({"cv": "less Gaussian", "ad_mean": "less Gaussian"}, "contradicted", ""),
    ({"cv": "more Gaussian", "ad_mean": "less Gaussian"}, "unresolved",
     "statistics disagree: CV more Gaussian, AD Avg less Gaussian"),
    ({"cv": ("unresolved", "interval covers zero"), "ad_mean": "more Gaussian"}, "unresolved",
     "CV: interval covers zero"),
    ({"cv": ("unresolved", "too few seeds (2 < 3)"), "ad_mean": "less Gaussian"}, "unresolved",
     "too few seeds (2 < 3)"),  # never decided, either way
])
def test_verdict_needs_cv_and_ad_both(sides, value, reason):
    got = verdict({s: _d(*v) if isinstance(v, tuple) else _d(v) for s, v in sides.items()})
    assert (got.value, got.reason) == (value, reason)


def test_comparison_table_head_and_backbone():
    board = pd.DataFrame([_cell("contrastive", "a", GAUSSIAN),
                          _cell("supervised", "b", {**SKEWED, "cv": 0.05}, prefixes=("",)),
                          ])
    board.loc[1, [c for c in board.columns if c.startswith("backbone_")]] = float("nan")
    board.loc[1, "backbone_cv"] = 0.6  # the supervised backbone, without intervals
    lines, rows = _comparison(board, 0.95)
    text = "\n".join(lines)
    assert "| head      | contrastive          | 1     | 0.100 [0.090, 0.110] |" in text
    assert "| backbone  | untrained (epoch 0)  | 1     | 0.150 [0.140, 0.160] |" in text
    assert "| published | CIFAR-10 contrastive |       | 0.090                | 0.430 " in text
    # the probe stage's accuracy per layer and encoder, the raw pixels' in the text
    probe = {tuple(c.strip() for c in line.split("|")[1:3]): line.split("|")[-2].strip()
             for line in text.splitlines() if line.startswith(("| head", "| backbone"))}
    assert probe[("head", "contrastive")] == "90.0%" and probe[("head", "supervised")] == "95.0%"
    assert probe[("head", "untrained (epoch 0)")] == "80.0%"
    assert probe[("backbone", "contrastive")] == "92.0%"
    assert probe[("backbone", "supervised")] == "–"  # its backbone columns are missing here
    assert probe[("head", "Gaussian null")] == ""
    assert "the raw pixels: 50.0%" in text
    by = {r["layer"]: r for r in rows}
    # one seed: CV higher than supervised (0.10 vs 0.05) but no verdict about training
    assert by["head"]["cv_side"] == "unresolved" and by["head"]["verdict"] == "unresolved"
    assert by["head"]["reason"] == "too few seeds (1 < 3)"
    assert by["head"]["cv_difference"] == pytest.approx(0.05) and by["head"]["seeds"] == 1
    assert by["backbone"]["verdict"] == "unresolved"
    assert ("- **head**: unresolved: too few seeds (1 < 3) (1 seed(s) with both encoders; "
            "intervals within the cells' held-out data) — contrastive − supervised: "
            "CV +0.05 [") in text
    assert "contrastive − untrained: CV -0.05" in text
    assert image_comparison(board[board.objective == "contrastive"]) is None


def test_comparison_verdicts_over_three_seeds():
    con = _seeds("contrastive", GAUSSIAN, [0.10, 0.12, 0.11])
    sup = _seeds("supervised", SKEWED, [0.30, 0.25, 0.35])
    lines, rows = _comparison(pd.concat([con, sup], ignore_index=True))
    text = "\n".join(lines)
    by = {r["layer"]: r for r in rows}
    assert by["head"]["verdict"] == "held" and by["head"]["seeds"] == 3
    assert by["head"]["reason"] == "" and by["head"]["trained_enough"] is True
    assert ("- **head**: held (over 3 seeds, paired t with 2 df) — contrastive − supervised: "
            "CV -0.19") in text
    assert "(more Gaussian)" in text
    flipped = pd.concat([_seeds("contrastive", SKEWED, [0.30, 0.25, 0.35]),
                         _seeds("supervised", GAUSSIAN, [0.10, 0.12, 0.11])], ignore_index=True)
    assert {r["verdict"] for r in _comparison(flipped)[1]} == {"contradicted"}


def _mnist_params(tiny_params):
    tiny_params["data"].update(name="mnist", augment={"crop_scale": [0.2, 1.0]})
    tiny_params["data"]["options"] = {}
    tiny_params["grid"].update(objective=["contrastive", "supervised"], arch=["resnet18"],
                               loss=["infonce"], k=[7], tau=[0.5], batch_size=[8], n=[256])
    tiny_params["arch_options"] = {"resnet18": {"small_stem": True}}
    return from_mapping(tiny_params)


def test_protocol_rows_read_the_cells_config(tiny_params):
    cell = next(c for c in expand(_mnist_params(tiny_params)) if c.objective == "contrastive")
    rows = {r["point"]: r for r in protocol_rows([cell.config()])}
    assert rows["training length"]["this_run"] == f"{cell.train.epochs} epochs = " \
        f"{cell.train.epochs * (256 // 8)} steps"
    assert rows["training length"]["note"] == "far shorter (CPU-sized)"
    aug = rows["augmentations"]
    assert aug["this_run"].startswith("crop scale 0.2–1; flip off; jitter p 0.8 (brightness 0.4")
    assert aug["note"] == ("differs in crop_scale, hflip; grey images: saturation, hue and "
                           "greyscale do nothing")
    assert rows["temperature"]["note"] == "" and rows["batch size"]["note"] == "differs"
    assert rows["representation"]["source"] == "assumed"
    assert rows["loss"]["note"] == "independent negatives"
    assert rows["normalisation"]["paper"] == "unnormalised embeddings (Table 1)"


def test_protocol_rows_of_a_narrow_nt_xent_cell_on_fashion_mnist(tiny_params):
    params = _mnist_params(tiny_params)
    cell = next(c for c in expand(params) if c.objective == "contrastive")
    config = cell.config()
    config.update(loss="nt_xent", k=None, arch_options={"small_stem": True, "width": 16})
    config["train"] = {**config["train"], "negatives": None}
    config["data"] = {**config["data"], "name": "fashion_mnist"}
    rows = {r["point"]: r for r in protocol_rows([config])}
    assert rows["encoder"]["this_run"] == "resnet18 at width 16, linear head 128 → 8"
    assert rows["encoder"]["note"].endswith("; width 16: stages of 16–128 channels, not 64–512")
    assert rows["loss"]["this_run"] == "nt_xent, all 2B − 2 other views of the batch"
    assert rows["loss"]["note"] == ""
    assert rows["augmentations"]["note"].endswith("grey images: saturation, hue and greyscale "
                                                  "do nothing")


def test_side_by_side_prints_the_mnist_section(tiny_params):
    params = _mnist_params(tiny_params)
    cells = [c for c in expand(params)]
    con = next(c for c in cells if c.objective == "contrastive")
    sup = next(c for c in cells if c.objective == "supervised")
    board = pd.DataFrame([{**_cell("contrastive", con.cell_id, GAUSSIAN), "loss": "infonce"},
                          {**_cell("supervised", sup.cell_id, SKEWED), "loss": "cross_entropy"}])
    records = {c.cell_id: {"config": c.config()} for c in cells}
    text, table, claims = _side_by_side(board, "mnist", 0.95, records)
    assert "# mnist: Betser et al.'s image rows, measured as the paper measures them" in text
    assert "## Protocol check" in text and "| training length " in text
    # one seed per encoder: the section is printed, the verdict is unresolved with its reason
    assert "- **head**: unresolved: too few seeds (1 < 3) (1 seed(s)" in text
    assert "- **backbone**: unresolved: too few seeds" in text
    assert "No cell of this grid matches" not in text
    assert set(table.setting) == {"mnist contrastive vs supervised (head)",
                                  "mnist contrastive vs supervised (backbone)"}
    assert [(c["verdict"], c["reason"], c["held"], c["tested"], c["seeds"]) for c in claims] == \
        [("unresolved", "too few seeds (1 < 3)", 0, False, 1)] * 2
    # not an image data set: no such section
    assert "image rows" not in _side_by_side(board, "laplace", 0.95, records)[0]


def test_interval_of_one_cell_is_its_own_and_of_several_clipped():
    one = pd.DataFrame([_cell("contrastive", "a", {**GAUSSIAN, "ad_pass_frac": 0.995})])
    one.loc[0, "ad_pass_frac_lo"] = 0.97  # an asymmetric interval is shown as it is
    lines, _ = _comparison(pd.concat([one, pd.DataFrame([_cell("supervised", "b", SKEWED)])]))
    assert "| 100% [97%, 100%]" in "\n".join(lines)  # 99.5% and 100.5% print as 100%
    two = pd.concat([one, one.assign(cell_id="c")], ignore_index=True)
    lines, _ = _comparison(pd.concat([two, pd.DataFrame([_cell("supervised", "b", SKEWED)])]))
    row = next(line for line in "\n".join(lines).splitlines()
               if line.startswith("| head      | contrastive"))
    assert row.split("|")[6].strip().endswith("100%]")  # mean ± z·se, clipped at 100%


def test_the_untrained_line_counts_the_contrastive_seeds():
    """contrastive − untrained pairs each contrastive cell with its own epoch 0: its seed count
    is the contrastive seeds', not those both objectives have."""
    con = _seeds("contrastive", GAUSSIAN, [0.10, 0.12, 0.11])
    sup = _seeds("supervised", SKEWED, [0.30, 0.25])
    comparison = image_comparison(pd.concat([con, sup], ignore_index=True))
    head = next(v for v in comparison.layers if v.layer == "head")
    assert (head.seeds, head.untrained_seeds) == (2, 3)
    assert head.verdict == "unresolved" and head.reason == "too few seeds (2 < 3)"
    assert head.untrained_verdict == "held"  # over its own three seeds
    text = "\n".join(comparison_section(comparison))
    assert "- **head**: unresolved: too few seeds (2 < 3) (2 seed(s) with both encoders" in text
    assert ("- **head**: more Gaussian than at epoch 0 (over 3 seeds, paired t with 2 df) — "
            "contrastive − untrained") in text
