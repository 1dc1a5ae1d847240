"""Published tables side by side: Betser et al. (2026), Table 1, against this run's cells.

For each published setting the grid contains (dataset, encoder, objective), the report lays the
measured CV, AD Avg, AD pass, DP Avg and DP pass of the raw held-out embeddings beside the
published row, each as *trained / untrained control / Gaussian null* (the control is the same
encoder at epoch 0; the null is Gaussian data of the same n, d and covariance). It then checks the
paper's claims that CV falls as the batch size and as d grow, and says whether training is what
moved CV: the untrained control has the same weights for every batch size, but its CV also falls
with d (a random linear map of many independent coordinates is nearly Gaussian, and Gaussian
norms spread like 1/√(2d)), so only a trained slope steeper than the control's is training's.

A trend is the log-log slope of the statistic against the axis (CV ∝ axis^slope; the CLT's
1/√(2d) is a slope of −0.5 in d), fitted by weighted least squares within one group of cells that
agree on every other axis. A claim about a training procedure needs the variation between
trainings: with at least ``MIN_SEEDS`` seeds at every point the slope is fitted to the seed means
with errors from the spread between seeds, and a claim holds in a group when the slope's interval
(at ``report.level``) lies below zero, and for the grid when it holds in most groups. With fewer
seeds the verdict is *undecided*, said with the reason, and the slopes shown are fitted to the
cells with their within-cell intervals (CV: a bootstrap over held-out rows, the measurement of a
fixed encoder). Every sentence and header states the level and what the interval is over.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipeline.datasets.registry import DATASETS
from pipeline.grid import GRID_AXES
from pipeline.metrics import METRICS
from pipeline.report import image_rows
from pipeline.report.markdown import table as md_table
from pipeline.report.render import fmt_stat, fmt_value, pct
from pipeline.report.table1 import BETSER_TABLE1, STAT_LABELS, STATS
from pipeline.report.tables import ok_cells
from pipeline.search import fit_loglog_slope
from pipeline.stats.inference import normal_quantile

_FRACTIONS = tuple(s for s in STATS if METRICS[s].unit == "%")
# "CV falls as batch size and d grow" (Betser et al., §5)
CLAIMS = (("batch_size", "CV falls as the batch size grows"), ("embed_dim", "CV falls as d grows"))


def log_slope(part: pd.DataFrame, axis: str, col: str,
              level: float = 0.95) -> tuple[float, float, float]:
    """(slope, low, high) of log ``col`` against log ``axis`` by
    :func:`pipeline.search.fit_loglog_slope`, with each cell's standard error taken from its
    ``_lo``/``_hi`` interval as a known error (``se_known``); ordinary least squares when the
    intervals are absent or any of the fitted cells lacks one."""
    value = part[col].to_numpy(float)
    se = None
    if f"{col}_lo" in part and f"{col}_hi" in part:
        z = normal_quantile(level)
        se = (part[f"{col}_hi"] - part[f"{col}_lo"]).to_numpy(float) / (2 * z)
        fitted = np.isfinite(value) & (value > 0)
        if not (np.isfinite(se[fitted]).all() and (se[fitted] > 0).all()):
            se = None
    fit = fit_loglog_slope(part[axis].to_numpy(float), value, se, level, se_known=se is not None)
    return fit.slope, fit.ci_low, fit.ci_high


def _varying(cells: pd.DataFrame, exclude: Sequence[str]) -> list[str]:
    return [a for a in GRID_AXES if a in cells and a not in exclude and cells[a].nunique() > 1]


MIN_SEEDS = 3  # seeds per point a trend verdict needs (the unit of a claim about training)


def seed_points(part: pd.DataFrame, axis: str, col: str, level: float) -> pd.DataFrame:
    """Per value of ``axis``: the mean of ``col`` over the cells (seeds) there and its
    normal interval at ``level`` from their spread, mean ± z·s/√n (s with ddof = 1). The spread
    of per-seed values holds each seed's own measurement error too, so it is the total
    variation of a training run, not the within-cell part alone."""
    z = normal_quantile(level)
    g = part.groupby(axis)[col]
    mean, sd, n = g.mean(), g.std(ddof=1), g.count()
    half = z * sd / np.sqrt(n)
    return pd.DataFrame({axis: mean.index, col: mean.to_numpy(),
                         f"{col}_lo": (mean - half).to_numpy(),
                         f"{col}_hi": (mean + half).to_numpy()})


def trends(cells: pd.DataFrame, axis: str, stat: str = "cv", level: float = 0.95) -> pd.DataFrame:
    """Per group of cells equal on every other axis: the log-log slope of ``stat`` (trained) and
    of ``control_<stat>`` against ``axis``, their difference, and the verdicts.

    With at least ``MIN_SEEDS`` seeds at every point the slopes are fitted to the seed means
    with errors from the spread between seeds (``basis`` = "seeds"), and ``verdict`` is "held"
    when the trained slope's interval lies below zero, else "not held"; ``training``: the trained
    slope is below the control's (interval of the difference below zero). With fewer seeds the
    slope is fitted to the cells with their within-cell intervals (``basis`` = "held-out rows":
    the measurement of fixed encoders, not the variation between trainings) and the verdict is
    "undecided". ``held`` is ``verdict == "held"``.
    """
    others = _varying(cells, (axis, "seed"))
    groups = cells.groupby(others, dropna=False) if others else [((), cells)]
    rows = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        seeds = int(part.groupby(axis).size().min())
        by_seeds = seeds >= MIN_SEEDS
        control = f"control_{stat}"
        fit_on = seed_points(part, axis, stat, level) if by_seeds else part
        t, t_lo, t_hi = log_slope(fit_on, axis, stat, level)
        verdict = ("held" if t_hi < 0 else "not held") if by_seeds else "undecided"
        row: dict[str, Any] = dict(zip(others, key, strict=True))
        row.update(points=len(part), seeds=seeds, basis="seeds" if by_seeds else "held-out rows",
                   slope=t, slope_lo=t_lo, slope_hi=t_hi, verdict=verdict,
                   held=verdict == "held")
        if control in part:
            ctrl_on = seed_points(part, axis, control, level) if by_seeds else part
            c, c_lo, c_hi = log_slope(ctrl_on, axis, control, level)
            z = normal_quantile(level)
            se_d = math.hypot((t_hi - t_lo) / (2 * z), (c_hi - c_lo) / (2 * z))
            row.update(control_slope=c, control_slope_lo=c_lo, control_slope_hi=c_hi,
                       control_held=bool(c_hi < 0), difference=t - c,
                       training=bool(by_seeds and t - c + z * se_d < 0))
        rows.append(row)
    return pd.DataFrame(rows)


def _published(stat: str, value: float) -> str:
    """A published value as the paper prints it (its own precision)."""
    return f"{100 * value:.3g}%" if METRICS[stat].unit == "%" else fmt_value(value)


# What each measured entry lists, in order: (column prefix, name in the section's header)
PARTS = (("", "trained"), ("control_", "untrained control"), ("null_", "Gaussian null"),
         ("supervised_", "supervised"))


def _parts(cells: pd.DataFrame) -> list[tuple[str, str]]:
    """The first three always; the supervised control where the grid has supervised cells."""
    return [p for p in PARTS if p[0] != "supervised_" or f"supervised_{STATS[0]}" in cells]


def _measured(part: pd.DataFrame, stat: str, parts: list[tuple[str, str]]) -> str:
    cols = [prefix + stat for prefix, _ in parts]
    return " / ".join(fmt_stat(stat, part[c].mean() if c in part else math.nan) for c in cols)


def claim_verdict(table: pd.DataFrame) -> str:
    """held / not held in most groups of the grid, or undecided when any group is."""
    if (table.verdict == "undecided").any():
        return "undecided"
    return "held" if 2 * int(table.held.sum()) > len(table) else "not held"


def _claim_line(claim: str, axis: str, table: pd.DataFrame, level: float) -> str:
    if table.empty or table.slope.isna().all():
        return f"- **{claim}**: not tested (the grid has one value of `{axis}`)."
    n = len(table)
    verdict = claim_verdict(table)
    if verdict == "undecided":
        seeds = int(table.seeds.min())
        return (f"- **{claim}**: undecided — {seeds} seed(s) per point, and a verdict about "
                f"training needs at least {MIN_SEEDS} (the variation between seeds). The slopes "
                f"below use the cells' {pct(level)} intervals over held-out rows, which measure "
                "fixed encoders, not training runs.")
    held = int(table.held.sum())
    text = (f"- **{claim}**: {verdict} — the log-log slope of CV against `{axis}` is below zero "
            f"({pct(level)} interval over seeds, {int(table.seeds.min())} or more per point) in "
            f"{held} of {n} groups of cells")
    if "training" in table:
        ctrl, train = int(table.control_held.sum()), int(table.training.sum())
        text += (f"; the untrained control's CV falls in {ctrl} of {n}, and the trained slope is "
                 f"steeper than the control's in {train} of {n}, so the fall is attributable to "
                 f"training in {train} of {n} groups")
    return text + "."


def _slopes_table(axis: str, table: pd.DataFrame, level: float) -> list[str]:
    if table.empty or table.slope.isna().all():
        return []
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


def _gaussianity_line(cells: pd.DataFrame) -> str:
    parts = []
    for stat in (s for s in _FRACTIONS if s in cells):
        trained = cells[stat].mean()
        control = cells[f"control_{stat}"].mean() if f"control_{stat}" in cells else math.nan
        null = cells[f"null_{stat}"].mean() if f"null_{stat}" in cells else math.nan
        changed = cells[f"changed_{stat}"].dropna() if f"changed_{stat}" in cells else pd.Series()
        text = (f"{STAT_LABELS[stat]} {fmt_stat(stat, trained)} trained, {fmt_stat(stat, control)} "
                f"untrained, {fmt_stat(stat, null)} for Gaussian data")
        if len(changed):
            text += (f" (training changed it in {int(changed.astype(bool).sum())} of "
                     f"{len(changed)} cells)")
        parts.append(text)
    return ("- **Coordinates are Gaussian (AD and DP pass near 100%)**: " + "; ".join(parts)
            + ". Where the untrained encoder already passes, the Gaussianity is the central limit "
            "theorem's, not the loss's.")


def side_by_side(board: pd.DataFrame, dataset: str, level: float = 0.95,
                 records: Mapping[str, Mapping[str, Any]] | None = None,
                 ) -> tuple[str, pd.DataFrame, list[dict[str, Any]]]:
    """(Markdown section, CSV table, claims for metrics.json) for the published settings of
    Betser et al., Table 1 that this grid's cells match; and, on image data with contrastive and
    supervised cells, the protocol check (the paper's setting beside the cells' resolved configs
    from ``records``, ``cell.json`` per cell id) and contrastive vs supervised vs untrained on the
    head and the backbone (:mod:`pipeline.report.image_rows`)."""
    ok = ok_cells(board)
    parts = _parts(ok)
    lines = ["# Published tables side by side", "",
             "Betser et al. (2026), Table 1 (unnormalised embeddings), beside this run's raw "
             "held-out embeddings. Each measured entry is **"
             + " / ".join(name for _, name in parts) + "**: the control is the same encoder at "
             "epoch 0 (same weights, same held-out data); the null is Gaussian data of the same "
             "n, d and covariance"
             + ("; supervised is the same encoder from the same weights trained with "
                "cross-entropy on the labels" if len(parts) == 4 else "") + ".", ""]
    rows, claims = [], []
    for (name, arch, objective), pub in BETSER_TABLE1.items():
        cells = ok[(ok.arch == arch) & (ok.objective == objective)] if name == dataset else ok[:0]
        if cells.empty:
            continue
        axes = _varying(cells, ("seed", "objective", "arch"))
        head = ["source", *axes, *(STAT_LABELS[s] for s in STATS)]
        body = [["published", *[""] * len(axes), *(_published(s, pub.values[s]) for s in STATS)]]
        groups = cells.groupby(axes, dropna=False) if axes else [((), cells)]
        for key, part in groups:
            key = key if isinstance(key, tuple) else (key,)
            body.append(["this run", *(str(v) for v in key),
                         *(_measured(part, s, parts) for s in STATS)])
            row: dict[str, Any] = {"setting": pub.setting, **dict(zip(axes, key, strict=True)),
                                   "cells": len(part)}
            for s in STATS:
                row[f"published_{s}"] = pub.values[s]
                for prefix, _ in parts:
                    col = prefix + s
                    row[f"{prefix or 'trained_'}{s}"] = part[col].mean() if col in part else math.nan
            rows.append(row)
        lines += [f"## {pub.setting} (data.name = {name}, arch = {arch}, objective = {objective})",
                  "", md_table(head, body).rstrip("\n")]
        lines += ["", "Claims:", ""]
        slopes = {axis: trends(cells, axis, "cv", level) if axis in cells else pd.DataFrame()
                  for axis, _ in CLAIMS}
        for axis, claim in CLAIMS:
            table = slopes[axis]
            lines.append(_claim_line(claim, axis, table, level))
            has = not table.empty and not table.slope.isna().all()
            verdict = claim_verdict(table) if has else "not tested"
            tested = verdict in ("held", "not held")  # decided, on seeds
            claims.append({"setting": pub.setting, "claim": claim, "tested": tested,
                           "verdict": verdict, "seeds": int(table.seeds.min()) if has else 0,
                           "groups": int(len(table)) if tested else 0,
                           "held": int(table.held.sum()) if tested else 0,
                           "by_training": int(table.training.sum())
                           if tested and "training" in table else None})
        lines.append(_gaussianity_line(cells))
        lines.append("")
        for axis, table in slopes.items():
            lines += _slopes_table(axis, table, level)
    image_lines, image_table = _image_section(ok, dataset, level, records or {})
    lines += image_lines
    for r in image_table:
        setting = f"{dataset} contrastive vs supervised ({r['layer']})"
        rows.append({"setting": setting, **r})
        claims.append({"setting": setting, "claim": "contrastive more Gaussian than supervised",
                       "tested": r["verdict"] != "unresolved", "groups": 1,
                       "held": int(r["verdict"] == "held"), "by_training": None,
                       "verdict": r["verdict"]})
    if not rows:
        known = ", ".join(f"{n}/{a}/{o}" for n, a, o in BETSER_TABLE1)
        lines.append(f"No cell of this grid matches a published setting (data.name/arch/objective: "
                     f"{known}); `make run PROFILE=profiles/betser-synthetic.yaml` runs the "
                     "Laplace one.")
    return "\n".join(lines) + "\n", pd.DataFrame(rows), claims


def _image_section(ok: pd.DataFrame, dataset: str, level: float,
                   records: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[dict]]:
    """The protocol check and the contrastive / supervised / untrained table of an image data set
    (none elsewhere, or without both objectives)."""
    if dataset not in DATASETS or DATASETS[dataset].kind != "image":
        return [], []
    comparison, rows = image_rows.image_comparison(ok, level)
    if not comparison:
        return [], []
    contrastive = ok[ok.objective == "contrastive"].cell_id
    configs = [records[c]["config"] for c in contrastive if "config" in records.get(c, {})]
    lines = [f"# {dataset}: Betser et al.'s image rows, measured as the paper measures them", ""]
    if dataset != "cifar10":
        lines += [f"{dataset} is not in Table 1: the CIFAR-10 rows are the reference the "
                  "ordering is compared with, not numbers to match.", ""]
    if configs:
        lines += image_rows.protocol_section(configs)
    return lines + comparison, rows
