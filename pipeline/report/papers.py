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

:func:`side_by_side` returns all of it as values (:class:`PaperTables`);
:mod:`pipeline.report.papers_md` writes ``paper_tables.md`` from them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pipeline.datasets.registry import DATASETS
from pipeline.grid import GRID_AXES
from pipeline.metrics import METRICS
from pipeline.report import image_rows
from pipeline.report.table1 import BETSER_TABLE1, STATS, Published
from pipeline.report.tables import ok_cells
from pipeline.search import fit_loglog_slope
from pipeline.stats.inference import MIN_SEEDS, normal_quantile

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


# What each measured entry lists, in order: (column prefix, name in the section's header)
PARTS = (("", "trained"), ("control_", "untrained control"), ("null_", "Gaussian null"),
         ("supervised_", "supervised"))


def _parts(cells: pd.DataFrame) -> list[tuple[str, str]]:
    """The first three always; the supervised control where the grid has supervised cells."""
    return [p for p in PARTS if p[0] != "supervised_" or f"supervised_{STATS[0]}" in cells]


def claim_verdict(table: pd.DataFrame) -> str:
    """held / not held in most groups of the grid, or undecided when any group is."""
    if (table.verdict == "undecided").any():
        return "undecided"
    return "held" if 2 * int(table.held.sum()) > len(table) else "not held"


@dataclass(frozen=True)
class Claim:
    """One of the paper's trend claims (``CLAIMS``) in one published setting: the slopes per
    group of cells (:func:`trends`; empty without the axis) and what they say. ``verdict``:
    held / not held (decided on seeds), undecided, or "not tested" (one value of the axis)."""

    setting: str
    claim: str
    axis: str
    slopes: pd.DataFrame = field(repr=False)
    verdict: str
    seeds: int  # the fewest seeds at a point (0: not tested)
    groups: int  # groups of cells, len(slopes)
    held: int  # groups where the claim held
    control_held: int | None  # groups where the untrained control's CV falls (None: no control)
    by_training: int | None  # groups where the trained slope is the steeper (None: no control)

    @property
    def tested(self) -> bool:
        """Decided, on seeds."""
        return self.verdict in ("held", "not held")

    def to_json(self) -> dict[str, Any]:
        """The claim as ``summary.json`` and ``metrics.json`` list it."""
        tested = self.tested
        return {"setting": self.setting, "claim": self.claim, "tested": tested,
                "verdict": self.verdict, "seeds": self.seeds,
                "groups": self.groups if tested else 0, "held": self.held if tested else 0,
                "by_training": self.by_training if tested else None}


def _claim(setting: str, claim: str, axis: str, table: pd.DataFrame) -> Claim:
    has = not table.empty and not table.slope.isna().all()
    control = has and "training" in table
    return Claim(setting, claim, axis, table,
                 verdict=claim_verdict(table) if has else "not tested",
                 seeds=int(table.seeds.min()) if has else 0, groups=int(len(table)),
                 held=int(table.held.sum()) if has else 0,
                 control_held=int(table.control_held.sum()) if control else None,
                 by_training=int(table.training.sum()) if control else None)


@dataclass(frozen=True)
class Gaussianity:
    """A pass rate's mean over the setting's cells: trained, untrained, Gaussian data; and in how
    many of the cells with a verdict training changed it (``of`` = 0: no verdicts)."""

    stat: str
    trained: float
    control: float
    null: float
    changed: int
    of: int


def _gaussianity(cells: pd.DataFrame) -> tuple[Gaussianity, ...]:
    out = []
    for stat in (s for s in _FRACTIONS if s in cells):
        control = cells[f"control_{stat}"].mean() if f"control_{stat}" in cells else math.nan
        null = cells[f"null_{stat}"].mean() if f"null_{stat}" in cells else math.nan
        changed = cells[f"changed_{stat}"].dropna() if f"changed_{stat}" in cells else pd.Series()
        out.append(Gaussianity(stat, cells[stat].mean(), control, null,
                               int(changed.astype(bool).sum()) if len(changed) else 0,
                               len(changed)))
    return tuple(out)


@dataclass(frozen=True)
class Setting:
    """One published setting of Table 1 that the grid's cells match. ``rows``: per group of
    cells equal on ``axes`` (the varying axes), its ``paper_tables.csv`` row: the axes' values,
    ``cells``, ``published_<stat>`` and ``<part>_<stat>``, the means of each measured part
    (``trained_``, ``control_``, ``null_``, ``supervised_``; NaN where the cells lack it)."""

    key: tuple[str, str, str]  # (data.name, arch, objective)
    published: Published
    axes: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]
    claims: tuple[Claim, ...]  # in CLAIMS order
    gaussianity: tuple[Gaussianity, ...]


@dataclass(frozen=True)
class ImageSection:
    """The image data set's section: the protocol check (:func:`image_rows.protocol_rows` over
    the contrastive cells' configs; empty without configs) and the comparison."""

    dataset: str
    protocol: tuple[dict[str, str], ...]
    comparison: image_rows.ImageComparison


@dataclass(frozen=True)
class PaperTables:
    """Published tables side by side, as values: ``parts`` (prefix, name) of each measured entry,
    the matched settings, the image section (None: not image data, or not both objectives);
    ``table``: ``paper_tables.csv``; ``claims``: for ``metrics.json`` and ``summary.json``."""

    dataset: str
    level: float
    parts: tuple[tuple[str, str], ...]
    settings: tuple[Setting, ...]
    image: ImageSection | None
    table: pd.DataFrame = field(repr=False)
    claims: tuple[dict[str, Any], ...]


def _setting(ok: pd.DataFrame, name: str, arch: str, objective: str, pub: Published,
             parts: list[tuple[str, str]], level: float) -> Setting:
    cells = ok[(ok.arch == arch) & (ok.objective == objective)]
    axes = _varying(cells, ("seed", "objective", "arch"))
    groups = cells.groupby(axes, dropna=False) if axes else [((), cells)]
    rows = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = {"setting": pub.setting, **dict(zip(axes, key, strict=True)),
                               "cells": len(part)}
        for s in STATS:
            row[f"published_{s}"] = pub.values[s]
            for prefix, _ in parts:
                col = prefix + s
                row[f"{prefix or 'trained_'}{s}"] = part[col].mean() if col in part else math.nan
        rows.append(row)
    claims = tuple(_claim(pub.setting, claim, axis, trends(cells, axis, "cv", level)
                          if axis in cells else pd.DataFrame()) for axis, claim in CLAIMS)
    return Setting((name, arch, objective), pub, tuple(axes), tuple(rows), claims,
                   _gaussianity(cells))


def side_by_side(board: pd.DataFrame, dataset: str, level: float = 0.95,
                 records: Mapping[str, Mapping[str, Any]] | None = None) -> PaperTables:
    """The published settings of Betser et al., Table 1 that this grid's cells match, with
    their claims; and, on image data with contrastive and supervised cells, the protocol check
    (the paper's setting beside the cells' resolved configs from ``records``, ``cell.json`` per
    cell id) and contrastive vs supervised vs untrained on the head and the backbone
    (:mod:`pipeline.report.image_rows`)."""
    ok = ok_cells(board)
    parts = _parts(ok)
    settings = tuple(_setting(ok, name, arch, objective, pub, parts, level)
                     for (name, arch, objective), pub in BETSER_TABLE1.items()
                     if name == dataset and not ok[(ok.arch == arch)
                                                   & (ok.objective == objective)].empty)
    rows = [r for s in settings for r in s.rows]
    claims = [c.to_json() for s in settings for c in s.claims]
    image = _image_section(ok, dataset, level, records or {})
    for r in image.comparison.table() if image else []:
        setting = f"{dataset} contrastive vs supervised ({r['layer']})"
        rows.append({"setting": setting, **r})
        claims.append({"setting": setting, "claim": "contrastive more Gaussian than supervised",
                       "tested": r["verdict"] in ("held", "not held"), "groups": 1,
                       "held": int(r["verdict"] == "held"), "by_training": None,
                       "verdict": r["verdict"], "seeds": r["seeds"]})
    return PaperTables(dataset, level, tuple(parts), settings, image, pd.DataFrame(rows),
                       tuple(claims))


def _image_section(ok: pd.DataFrame, dataset: str, level: float,
                   records: Mapping[str, Mapping[str, Any]]) -> ImageSection | None:
    """The protocol check and the contrastive / supervised / untrained comparison of an image
    data set (None elsewhere, or without both objectives)."""
    if dataset not in DATASETS or DATASETS[dataset].kind != "image":
        return None
    comparison = image_rows.image_comparison(ok, level)
    if comparison is None:
        return None
    contrastive = ok[ok.objective == "contrastive"].cell_id
    configs = [records[c]["config"] for c in contrastive if "config" in records.get(c, {})]
    protocol = tuple(image_rows.protocol_rows(configs)) if configs else ()
    return ImageSection(dataset, protocol, comparison)
