"""``paper_tables.md``: Betser et al. (2026), Table 1, beside this run's cells, written from the
values of :func:`pipeline.report.papers.side_by_side.side_by_side`
(:class:`~pipeline.report.papers.side_by_side.PaperTables`). Formats only: every number and
verdict comes computed."""

from __future__ import annotations

import pandas as pd

from pipeline.grid import GRID_AXES
from pipeline.metrics import METRICS
from pipeline.report.formatting import fmt_stat, fmt_value, pct
from pipeline.report.papers.image_rows_md import comparison_section, protocol_section
from pipeline.report.papers.side_by_side import (
    HELD,
    MIN_SEEDS,
    Claim,
    Gaussianity,
    ImageSection,
    PaperTables,
    Setting,
)
from pipeline.report.papers.table1 import (
    BETSER_TABLE1,
    STAT_LABELS,
    STATS,
    ProtocolPoint,
    differs_text,
)
from pipeline.report.render.markdown import table as md_table


def _published(stat: str, value: float) -> str:
    """A published value as the paper prints it (its own precision)."""
    return f"{100 * value:.3g}%" if METRICS[stat].unit == "%" else fmt_value(value)


def _claim_line(c: Claim, level: float) -> str:
    claim, axis = c.claim, c.axis
    if not c.tested:
        text = f"- **{claim}**: {c.verdict} — {c.reason}"
        if c.seeds and c.seeds < MIN_SEEDS:
            text += (f"; a verdict about training needs at least {MIN_SEEDS} seeds (the "
                     f"variation between trainings). The slopes below use the cells' "
                     f"{pct(level)} intervals over held-out rows, which measure fixed encoders, "
                     "not training runs")
        elif c.seeds:
            text += (f" (per seed the log-log slope of CV against `{axis}`, then the "
                     f"{pct(level)} Student-t interval over the seeds, {c.seeds} or more per "
                     f"group: below zero in {c.held} of {c.groups} groups, above in "
                     f"{c.contradicted})")
        return text + "."
    n = c.groups
    side = "below" if c.verdict == HELD else "above"
    text = (f"- **{claim}**: {c.verdict} — per seed the log-log slope of CV against `{axis}`, "
            f"then the {pct(level)} Student-t interval over the seeds ({c.seeds} or more per "
            f"group, S − 1 degrees of freedom): {side} zero in "
            f"{c.held if c.verdict == HELD else c.contradicted} of {n} groups of cells")
    if c.by_training is not None:
        train = c.by_training
        why = f" ({c.training_reason})" if c.training_reason else ""
        text += (f"; the untrained control's CV falls in {c.control_held} of {n}, and the trained "
                 f"slope is steeper than the control's (per-seed difference, t-interval below "
                 f"zero) in {train} of {n}, so the fall is attributable to training: "
                 f"{c.training_verdict}{why}")
    return text + "."


def _slopes_table(axis: str, table: pd.DataFrame, level: float) -> list[str]:
    keys = [c for c in table.columns if c in GRID_AXES]
    head = [*keys, "seeds", f"trained slope [{pct(level)}, over]", f"control slope [{pct(level)}]",
            "verdict", "by training"]
    rows = []
    for r in table.itertuples(index=False):
        cells = [str(getattr(r, k)) for k in keys] + [str(r.seeds)]
        cells.append(f"{r.slope:+.3f} [{r.slope_lo:+.3f}, {r.slope_hi:+.3f}] {r.basis}")
        verdict = r.verdict + (f" ({r.reason})" if r.reason else "")
        if "control_slope" in table:
            cells.append(f"{r.control_slope:+.3f} [{r.control_slope_lo:+.3f}, "
                         f"{r.control_slope_hi:+.3f}]")
            reason = r.training_reason if isinstance(r.training_reason, str) else ""
            cells += [verdict, r.training_verdict + (f" ({reason})" if reason else "")]
        else:
            cells += ["–", verdict, "–"]
        rows.append(cells)
    return [f"Log-log slope of CV against `{axis}` (CV ∝ {axis}^slope); over seeds: the mean of "
            "the seeds' slopes and its Student-t interval (S − 1 df); by training: the same for "
            "each seed's trained − control slope:", "", md_table(head, rows), ""]


def _gaussianity_line(stats: tuple[Gaussianity, ...]) -> str:
    parts = []
    for g in stats:
        stat = g.stat
        text = (f"{STAT_LABELS[stat]} {fmt_stat(stat, g.trained)} trained, "
                f"{fmt_stat(stat, g.control)} untrained, {fmt_stat(stat, g.null)} for Gaussian "
                "data")
        if g.of:
            text += f" (training changed it in {g.changed} of {g.of} cells)"
        parts.append(text)
    return ("- **Coordinates are Gaussian (AD and DP pass near 100%)**: " + "; ".join(parts)
            + ". Where the untrained encoder already passes, the Gaussianity is the central limit "
            "theorem's, not the loss's.")


def _this_run(points: tuple[ProtocolPoint, ...]) -> str:
    """A row's departures from the published protocol, this run's values only (the published
    row above shows the paper's); the points it cannot tell after them."""
    off = ", ".join(p.this_run for p in points if p.differs) or "as published"
    unknown = [p.name for p in points if not p.seen]
    return off + (f" (not known: {', '.join(unknown)})" if unknown else "")


def _setting_lines(s: Setting, parts: tuple[tuple[str, str], ...], level: float) -> list[str]:
    name, arch, objective = s.key
    protocol = bool(s.row_protocols)
    head = ["source", *s.axes, *(STAT_LABELS[st] for st in STATS),
            *(["protocol (where this run differs)"] if protocol else [])]
    body = [["published", *[""] * len(s.axes),
             *(_published(st, s.published.values[st]) for st in STATS),
             *([", ".join(p.published for p in s.protocol)] if protocol else [])]]
    for i, row in enumerate(s.rows):
        body.append(["this run", *(str(row[a]) for a in s.axes),
                     *(" / ".join(fmt_stat(st, row[f"{prefix or 'trained_'}{st}"])
                                  for prefix, _ in parts) for st in STATS),
                     *([_this_run(s.row_protocols[i])] if protocol else [])])
    lines = [f"## {s.published.setting} (data.name = {name}, arch = {arch}, objective = "
             f"{objective})", "", md_table(head, body).rstrip("\n"), ""]
    differs = differs_text(s.protocol)
    if differs:
        lines += [f"Protocol — {differs}. The published numbers come from that protocol; "
                  "where this grid departs from it, a gap is not a failed replication.", ""]
    lines += ["Claims:", ""]
    lines += [_claim_line(c, level) for c in s.claims]
    lines += [_gaussianity_line(s.gaussianity), ""]
    for c in s.claims:
        if not c.slopes.empty:
            lines += _slopes_table(c.axis, c.slopes, level)
    return lines


def _image_lines(image: ImageSection) -> list[str]:
    dataset = image.dataset
    lines = [f"# {dataset}: Betser et al.'s image rows, measured as the paper measures them", ""]
    if dataset != "cifar10":
        lines += [f"{dataset} is not in Table 1: the CIFAR-10 rows are the reference the "
                  "ordering is compared with, not numbers to match.", ""]
    if image.protocol:
        lines += protocol_section(image.protocol)
    return lines + comparison_section(image.comparison) + _gap_lines(image.gaps)


def _gap_lines(gaps: pd.DataFrame) -> list[str]:
    """The contrastive − supervised gap at each analysed epoch (:mod:`epoch_gap`); nothing with
    one epoch or none."""
    if gaps.empty or gaps.epoch.nunique() < 2:
        return []
    head = ["layer", "epoch", "statistic", "seeds", "contrastive", "supervised",
            "contrastive − supervised [interval over seeds]"]
    body = [[r.layer, str(r.epoch), METRICS[r.stat].label, str(r.seeds),
             fmt_stat(r.stat, r.contrastive), fmt_stat(r.stat, r.supervised),
             f"{fmt_stat(r.stat, r.difference)} [{fmt_stat(r.stat, r.difference_lo)}, "
             f"{fmt_stat(r.stat, r.difference_hi)}]"] for r in gaps.itertuples()]
    return ["## The gap over training", "",
            "Contrastive − supervised at every epoch the stats stage analysed (epoch 0: the "
            "same initial weights, so no gap), raw held-out embeddings; paired by seed, the mean "
            "over seeds and its Student-t interval (S − 1 degrees of freedom). Whether the gap "
            "grows or shrinks as the encoders train (figure: plots/gap_vs_epoch.png).", "",
            md_table(head, body).rstrip("\n"), ""]


def to_markdown(p: PaperTables) -> str:
    """The whole ``paper_tables.md``."""
    parts = p.parts
    lines = ["# Published tables side by side", "",
             "Betser et al. (2026), Table 1 (unnormalised embeddings), beside this run's raw "
             "held-out embeddings. Each measured entry is **"
             + " / ".join(name for _, name in parts) + "**: the control is the same encoder at "
             "epoch 0 (same weights, same held-out data); the null is Gaussian data of the same "
             "n, d and covariance"
             + ("; supervised is the same encoder from the same weights trained with "
                "cross-entropy on the labels" if len(parts) == 4 else "") + ".", "",
             "Each claim's verdict is **held** (its interval excludes zero on the claimed side), "
             "**contradicted** (it excludes zero on the other side) or **unresolved**, with the "
             "reason: too few seeds (fewer than " + str(MIN_SEEDS) + "), the interval covers "
             "zero, the groups of cells disagree (a grid's verdict is held or contradicted only "
             "when strictly more than half its groups are), or the run is outside the claim's "
             "conditions. Intervals about training are over seeds: Student-t with S − 1 degrees "
             "of freedom for S seeds.", ""]
    for s in p.settings:
        lines += _setting_lines(s, parts, p.level)
    if p.image is not None:
        lines += _image_lines(p.image)
    if p.table.empty:
        known = ", ".join(f"{n}/{a}/{o}" for n, a, o in BETSER_TABLE1)
        lines.append(f"No cell of this grid matches a published setting (data.name/arch/objective: "
                     f"{known}); `make run PROFILE=profiles/betser-synthetic.yaml` runs the "
                     "Laplace one.")
    return "\n".join(lines) + "\n"

