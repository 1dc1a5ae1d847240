"""Betser et al.'s image rows as Markdown: the protocol check and the contrastive / supervised /
untrained table with its verdict lines, from the values of :mod:`pipeline.report.papers.image_rows`.
Formats only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from pipeline.metrics import METRICS
from pipeline.report.formatting import fmt_stat, pct
from pipeline.report.papers.image_rows import (
    CONTRADICTED,
    HELD,
    MIN_SEEDS,
    NULL,
    PUBLISHED,
    UNDERTRAINED,
    Difference,
    Estimate,
    ImageComparison,
)
from pipeline.report.papers.table1 import STATS
from pipeline.report.papers.trained_enough import CRITERION, NOT_CHECKED, TrainedEnough
from pipeline.report.render.markdown import table as md_table


def protocol_section(rows: Sequence[Mapping[str, str]]) -> list[str]:
    """The protocol check (:func:`~pipeline.report.papers.image_rows.protocol_rows`) as lines."""
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


def _trained_enough(t: TrainedEnough) -> str:
    """``trained enough: yes (contrastive linear probe 90.0% > untrained 80.0%, ...)``, or
    not checked without a probe."""
    if t.passed is None:
        return NOT_CHECKED
    shown = "; ".join(f"{c.encoder} {c.score} {_probe(c.value)} {'>' if c.passed else '≤'} "
                      f"{c.against} {_probe(c.reference)}" for c in t.checks)
    missing = f"; not checked: {', '.join(t.missing)}" if t.missing else ""
    return f"trained enough: {'yes' if t.passed else 'no'} ({shown}{missing})"


MOVED = {HELD: "more Gaussian than at epoch 0", CONTRADICTED: "less Gaussian than at epoch 0"}


def comparison_section(c: ImageComparison) -> list[str]:
    """The table of contrastive vs supervised vs untrained vs the Gaussian null, the claim and
    one verdict line per layer and comparison, each with its trained-enough check."""
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
        verdicts.append(_verdict_line(v.layer, "contrastive − supervised", v.verdict, v.reason,
                                      v.vs_supervised, v.seeds, v.trained_enough))
        verdicts.append(_verdict_line(v.layer, "contrastive − untrained",
                                      MOVED.get(v.untrained_verdict, v.untrained_verdict),
                                      v.untrained_reason, v.vs_untrained, v.untrained_seeds,
                                      v.trained_enough.of("contrastive")))
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
            f"seeds: each seed's contrastive − supervised, and the {pct(level)} paired Student-t "
            "interval over the S seeds (S − 1 degrees of freedom). Held when the intervals of CV "
            "and AD Avg both exclude zero on the paper's side; contradicted when both exclude it "
            "on the other side; otherwise unresolved, with the reason: too few seeds (fewer than "
            f"{MIN_SEEDS}; the interval shown is then the one within the cells' held-out data), "
            "an interval covers zero, or the statistics disagree (one each way). The same test "
            "against the untrained encoder says whether contrastive training itself moved them.",
            "",
            f"A verdict about training is reported only for encoders that learned — {CRITERION}. "
            "Both encoders must pass for the contrastive − supervised verdict, the contrastive "
            "one for contrastive − untrained; a decided verdict that fails it reads "
            f"**{UNDERTRAINED}**, and without probe columns the line says "
            f"\"{NOT_CHECKED}\" and keeps the verdict.", "", *verdicts, ""]


def _verdict_line(layer: str, what: str, outcome: str, reason: str,
                  diffs: Mapping[str, Difference], seeds: int, enough: TrainedEnough) -> str:
    """``- **layer**: outcome: reason (over what) — what: <stat> diff [lo, hi] (side); ...
    trained enough: ...``"""
    parts = []
    for s, d in diffs.items():
        if not np.isfinite(d.value):
            parts.append(f"{METRICS[s].label} – ({d.reason or d.side})")
            continue
        scale = 100 if METRICS[s].unit == "%" else 1
        unit = " pts" if scale == 100 else ""
        shown = "" if d.seeds < MIN_SEEDS else f" ({d.side})"
        parts.append(f"{METRICS[s].label} {scale * d.value:+.3g}{unit} [{scale * d.lo:+.3g}, "
                     f"{scale * d.hi:+.3g}]{shown}")
    if seeds >= MIN_SEEDS:
        over = f"over {seeds} seeds, paired t with {seeds - 1} df"
    else:
        over = (f"{seeds} seed(s) with both encoders; intervals within the cells' held-out "
                "data")
    because = f": {reason}" if reason else ""
    check = _trained_enough(enough)
    return (f"- **{layer}**: {outcome}{because} ({over}) — {what}: " + "; ".join(parts)
            + f". {check[:1].upper()}{check[1:]}.")
