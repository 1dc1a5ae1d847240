"""``paper_tables.md``: Betser et al. (2026), Table 1, beside this run's cells, written from the
values of :func:`pipeline.report.papers.side_by_side`
(:class:`~pipeline.report.papers.PaperTables`). Formats only: every number and verdict comes
computed."""

from __future__ import annotations

import pandas as pd

from pipeline.grid import GRID_AXES
from pipeline.metrics import METRICS
from pipeline.report.image_rows_md import comparison_section, protocol_section
from pipeline.report.markdown import table as md_table
from pipeline.report.papers import (
    MIN_SEEDS,
    Claim,
    Gaussianity,
    ImageSection,
    PaperTables,
    Setting,
)
from pipeline.report.render import fmt_stat, fmt_value, pct
from pipeline.report.table1 import BETSER_TABLE1, STAT_LABELS, STATS


def _published(stat: str, value: float) -> str:
    """A published value as the paper prints it (its own precision)."""
    return f"{100 * value:.3g}%" if METRICS[stat].unit == "%" else fmt_value(value)


def _claim_line(c: Claim, level: float) -> str:
    claim, axis = c.claim, c.axis
    if c.verdict == "not tested":
        return f"- **{claim}**: not tested (the grid has one value of `{axis}`)."
    n = c.groups
    if c.verdict == "undecided":
        return (f"- **{claim}**: undecided — {c.seeds} seed(s) per point, and a verdict about "
                f"training needs at least {MIN_SEEDS} (the variation between seeds). The slopes "
                f"below use the cells' {pct(level)} intervals over held-out rows, which measure "
                "fixed encoders, not training runs.")
    text = (f"- **{claim}**: {c.verdict} — the log-log slope of CV against `{axis}` is below "
            f"zero ({pct(level)} interval over seeds, {c.seeds} or more per point) in "
            f"{c.held} of {n} groups of cells")
    if c.by_training is not None:
        train = c.by_training
        text += (f"; the untrained control's CV falls in {c.control_held} of {n}, and the trained "
                 f"slope is steeper than the control's in {train} of {n}, so the fall is "
                 f"attributable to training in {train} of {n} groups")
    return text + "."


def _slopes_table(axis: str, table: pd.DataFrame, level: float) -> list[str]:
    keys = [c for c in table.columns if c in GRID_AXES]
    head = [*keys, "seeds", f"trained slope [{pct(level)}, over]", f"control slope [{pct(level)}]",
            "verdict", "by training"]
    rows = []
    for r in table.itertuples(index=False):
        cells = [str(getattr(r, k)) for k in keys] + [str(r.seeds)]
        cells.append(f"{r.slope:+.3f} [{r.slope_lo:+.3f}, {r.slope_hi:+.3f}] {r.basis}")
        by_training = ("yes" if r.training else "no") if r.verdict != "undecided" else "undecided"
        if "control_slope" in table:
            cells.append(f"{r.control_slope:+.3f} [{r.control_slope_lo:+.3f}, "
                         f"{r.control_slope_hi:+.3f}]")
            cells += [r.verdict, by_training]
        else:
            cells += ["–", r.verdict, "–"]
        rows.append(cells)
    return [f"Log-log slope of CV against `{axis}` (CV ∝ {axis}^slope):", "",
            md_table(head, rows), ""]


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


def _setting_lines(s: Setting, parts: tuple[tuple[str, str], ...], level: float) -> list[str]:
    name, arch, objective = s.key
    head = ["source", *s.axes, *(STAT_LABELS[st] for st in STATS)]
    body = [["published", *[""] * len(s.axes),
             *(_published(st, s.published.values[st]) for st in STATS)]]
    for row in s.rows:
        body.append(["this run", *(str(row[a]) for a in s.axes),
                     *(" / ".join(fmt_stat(st, row[f"{prefix or 'trained_'}{st}"])
                                  for prefix, _ in parts) for st in STATS)])
    lines = [f"## {s.published.setting} (data.name = {name}, arch = {arch}, objective = "
             f"{objective})", "", md_table(head, body).rstrip("\n"), "", "Claims:", ""]
    lines += [_claim_line(c, level) for c in s.claims]
    lines += [_gaussianity_line(s.gaussianity), ""]
    for c in s.claims:
        if c.verdict != "not tested":
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
    return lines + comparison_section(image.comparison)


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
                "cross-entropy on the labels" if len(parts) == 4 else "") + ".", ""]
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

