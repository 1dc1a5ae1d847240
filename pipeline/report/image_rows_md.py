"""Betser et al.'s image rows as Markdown: the protocol check and the contrastive / supervised /
untrained table with its verdict lines, from the values of :mod:`pipeline.report.image_rows`.
Formats only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from pipeline.metrics import METRICS
from pipeline.report.image_rows import (
    MIN_SEEDS,
    NULL,
    PUBLISHED,
    UNDECIDED,
    Difference,
    Estimate,
    ImageComparison,
)
from pipeline.report.markdown import table as md_table
from pipeline.report.render import fmt_stat, pct
from pipeline.report.table1 import STATS


def protocol_section(rows: Sequence[Mapping[str, str]]) -> list[str]:
    """The protocol check (:func:`~pipeline.report.image_rows.protocol_rows`) as lines."""
    body = [[r["point"], r["paper"], r["source"], r["this_run"], r["note"] or "as the paper"]
            for r in rows]
    return ["## Protocol check: Betser et al.'s CIFAR-10 rows against this run", "",
            "\"stated\": in what this project has of the paper (abstract, project page, SPEC.md "
            "§2, Table 1); \"assumed\": not stated there, taken from SimCLR's CIFAR-10 recipe "
            "(Chen et al. 2020, Appendix B.9).", "",
            md_table(["point", "paper", "source", "this run", "note"], body).rstrip("\n"), ""]


def _estimate(stat: str, e: Estimate) -> str:
    """``value [lo, hi]``, or the value alone without an interval."""
    text = fmt_stat(stat, e.value)
    if e.lo is None or e.hi is None:
        return text
    return f"{text} [{fmt_stat(stat, e.lo)}, {fmt_stat(stat, e.hi)}]"


def _probe(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def comparison_section(c: ImageComparison) -> list[str]:
    """The table of contrastive vs supervised vs untrained vs the Gaussian null, the claim and
    one verdict line per layer and comparison."""
    head = ["layer", "encoder", "cells", *(METRICS[s].label for s in STATS), "linear probe"]
    body = [["published", f"CIFAR-10 {obj}", "",
             *(fmt_stat(s, PUBLISHED[obj][s]) for s in STATS), ""]
            for obj in ("contrastive", "supervised")]
    for r in c.rows:
        body.append([r.layer, r.encoder, str(r.cells),
                     *(_estimate(s, r.stats[s]) for s in STATS),
                     "" if r.encoder == NULL else _probe(r.probe)])
    verdicts = []
    for v in c.layers:
        verdicts.append(_verdict_line(v.layer, "contrastive − supervised", v.verdict,
                                      v.vs_supervised, v.seeds))
        moved = {"held": "more Gaussian than at epoch 0", UNDECIDED: UNDECIDED}.get(
            v.untrained_verdict, "not more Gaussian than at epoch 0")
        verdicts.append(_verdict_line(v.layer, "contrastive − untrained", moved, v.vs_untrained,
                                      v.untrained_seeds))
    level = c.level
    return ["## Contrastive vs supervised vs untrained (Betser et al.'s CIFAR-10 claim)", "",
            f"Raw held-out embeddings; value [{pct(level)} interval] (bootstrap for CV, over "
            "coordinates for AD/DP; within the cells' held-out data, not over training seeds); "
            "the untrained row is the same encoder at epoch 0 — the same initial weights as "
            "the supervised cell. Linear probe: top-1 accuracy of a logistic regression on "
            "the frozen layer (the probe stage; the raw pixels: "
            + _probe(c.raw_probe) + ").",
            "",
            md_table(head, body).rstrip("\n"), "",
            f"Claim: **contrastive training makes the representation more Gaussian than "
            f"supervised training** (lower CV and AD Avg). A claim about training, decided over "
            f"seeds: each seed's contrastive − supervised, and the {pct(level)} paired t "
            "interval over the seeds; held when CV and AD Avg both lie on the paper's side of "
            "zero, not held when either lies on the other side, else unresolved. With fewer "
            f"than {MIN_SEEDS} seeds it is undecided, and the interval shown is the one within "
            "the cells' held-out data. The same test against the untrained encoder says whether "
            "contrastive training itself moved them.", "", *verdicts, ""]


def _verdict_line(layer: str, what: str, outcome: str, diffs: Mapping[str, Difference],
                  seeds: int) -> str:
    """``- **layer**: outcome (over what) — what: <stat> diff [lo, hi] (side); ...``"""
    parts = []
    for s, (d, lo, hi, side) in diffs.items():
        if not np.isfinite(d):
            parts.append(f"{METRICS[s].label} – ({side})")
            continue
        scale = 100 if METRICS[s].unit == "%" else 1
        unit = " pts" if scale == 100 else ""
        shown = "" if side == UNDECIDED else f" ({side})"
        parts.append(f"{METRICS[s].label} {scale * d:+.3g}{unit} [{scale * lo:+.3g}, "
                     f"{scale * hi:+.3g}]{shown}")
    if seeds >= MIN_SEEDS:
        over = f"over {seeds} seeds, paired t"
    else:
        over = (f"{seeds} seed(s) with both encoders, a verdict about training needs "
                f"{MIN_SEEDS}; intervals within the cells' held-out data")
    return f"- **{layer}**: {outcome} ({over}) — {what}: " + "; ".join(parts) + "."
