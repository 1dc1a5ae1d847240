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
1/√(2d) is a slope of −0.5 in d) within one group of cells that agree on every other axis. A
claim about a training procedure needs the variation between trainings (SPEC §7): per seed, the
least-squares slope of log CV on log axis value; then the Student-t interval (at
``report.level``) of the S seeds' slopes, S − 1 degrees of freedom. A normal quantile with the
standard error of 3 seeds is anti-conservative: under no trend it said "held" 6% of the time at a
nominal 2.5% (``tests/report/test_verdict_size.py``). A group's verdict is *held* when the
interval lies below zero, *contradicted* when above, else *unresolved* with the reason ("interval
covers zero"; "too few seeds (S < 3)", when the slopes shown are fitted to the cells with their
within-cell intervals: CV's bootstrap over held-out rows, the measurement of a fixed encoder).
The grid's verdict: held when strictly more than half its groups are held, contradicted when
strictly more than half are contradicted, else unresolved ("groups disagree", or the groups'
common reason); a grid with one value of the axis is outside the claim's conditions. Every
sentence and header states the level and what the interval is over. Where the cells depart from
the published protocol (d, n, epochs, loss, negatives, ...) is stated beside the published row.

:func:`side_by_side` returns all of it as values (:class:`PaperTables`);
:mod:`pipeline.report.papers.markdown` writes ``paper_tables.md`` from them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from pipeline.datasets.registry import DATASETS
from pipeline.grid import GRID_AXES
from pipeline.metrics import METRICS
from pipeline.report.grid.tables import ok_cells
from pipeline.report.papers import epoch_gap, image_rows
from pipeline.report.papers.table1 import (
    BETSER_TABLE1,
    STATS,
    ProtocolPoint,
    Published,
    differs_text,
    protocol_points,
)
from pipeline.search import fit_loglog_slope
from pipeline.stats.comparisons.inference import (
    CONTRADICTED,
    HELD,
    MIN_SEEDS,
    NO_VALUES,
    UNRESOLVED,
    Verdict,
    majority,
    normal_quantile,
    seed_slopes,
    side_verdict,
    too_few_seeds,
)
from pipeline.stats.uncertainty import seed_ci

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


def _seeds_of(part: pd.DataFrame) -> np.ndarray:
    """Each cell's seed (one seed for all without a ``seed`` column)."""
    return part["seed"].to_numpy() if "seed" in part else np.zeros(len(part), dtype=int)


def _slopes(part: pd.DataFrame, axis: str, col: str) -> dict[object, float]:
    """Per seed, the log-log slope of ``col`` against ``axis`` (:func:`seed_slopes`)."""
    if col not in part:
        return {}
    return seed_slopes(part[axis].to_numpy(float), part[col].to_numpy(float), _seeds_of(part))


def _over_seeds(slopes: Mapping[object, float], level: float) -> tuple[float, float, float]:
    """(mean, low, high): the Student-t interval of per-seed values, S − 1 degrees of freedom."""
    ci = seed_ci(list(slopes.values()), level)
    return ci.estimate, ci.low, ci.high


def _by_seeds(part: pd.DataFrame, axis: str, stat: str, level: float,
              trained: Mapping[object, float]) -> dict[str, Any]:
    """The trend over seeds: per seed the trained (``trained``: :func:`_slopes`) and the control
    slope and their difference, each with its t-interval over the seeds, and the verdicts
    (SPEC §7)."""
    t, t_lo, t_hi = _over_seeds(trained, level)
    verdict = side_verdict(t_lo, t_hi, -1, len(trained))
    row: dict[str, Any] = dict(seeds=len(trained), basis="seeds", slope=t, slope_lo=t_lo,
                               slope_hi=t_hi, verdict=verdict.value, reason=verdict.reason)
    control = _slopes(part, axis, f"control_{stat}")
    if control:
        c, c_lo, c_hi = _over_seeds(control, level)
        both = [s for s in trained if s in control]
        d, d_lo, d_hi = _over_seeds({s: trained[s] - control[s] for s in both}, level)
        training = side_verdict(d_lo, d_hi, -1, len(both))
        row.update(control_slope=c, control_slope_lo=c_lo, control_slope_hi=c_hi,
                   control_held=bool(c_hi < 0), difference=d, difference_lo=d_lo,
                   difference_hi=d_hi, training_verdict=training.value,
                   training_reason=training.reason)
    return row


def _by_rows(part: pd.DataFrame, axis: str, stat: str, level: float,
             seeds: int) -> dict[str, Any]:
    """Too few seeds: the slopes fitted to the cells with their within-cell intervals (the
    measurement of fixed encoders, not the variation between trainings), shown but unresolved."""
    reason = too_few_seeds(seeds)
    t, t_lo, t_hi = log_slope(part, axis, stat, level)
    row: dict[str, Any] = dict(seeds=seeds, basis="held-out rows", slope=t, slope_lo=t_lo,
                               slope_hi=t_hi, verdict=UNRESOLVED, reason=reason)
    control = f"control_{stat}"
    if control in part:
        c, c_lo, c_hi = log_slope(part, axis, control, level)
        z = normal_quantile(level)
        half = z * math.hypot((t_hi - t_lo) / (2 * z), (c_hi - c_lo) / (2 * z))
        row.update(control_slope=c, control_slope_lo=c_lo, control_slope_hi=c_hi,
                   control_held=bool(c_hi < 0), difference=t - c, difference_lo=t - c - half,
                   difference_hi=t - c + half, training_verdict=UNRESOLVED,
                   training_reason=reason)
    return row


def trends(cells: pd.DataFrame, axis: str, stat: str = "cv", level: float = 0.95) -> pd.DataFrame:
    """Per group of cells equal on every other axis: the log-log slope of ``stat`` (trained) and
    of ``control_<stat>`` against ``axis``, their difference, and the verdicts (SPEC §7).

    Per seed (the ``seed`` column), the least-squares slope of log ``stat`` on log ``axis``
    (:func:`seed_slopes`; a seed with values at fewer than two axis points gives none); the
    slope shown is their mean and its interval the Student-t interval over the S seeds with
    S − 1 degrees of freedom (``basis`` = "seeds"). ``verdict``: "held" when the interval lies
    below zero (the claim: ``stat`` falls as ``axis`` grows), "contradicted" when above, else
    "unresolved" with ``reason`` (:func:`side_verdict`). The attribution to training: per seed,
    trained slope − control slope, its t-interval over the seeds, ``training_verdict`` /
    ``training_reason`` the same way ("held": the trained slope is the steeper); ``training``
    is ``training_verdict == "held"``. With fewer than ``MIN_SEEDS`` seeds the slopes are fitted
    to the cells with their within-cell intervals (:func:`log_slope`; ``basis`` = "held-out
    rows") and both verdicts are unresolved, "too few seeds (S < 3)". ``held`` is
    ``verdict == "held"``; ``seeds`` the number of seeds with a slope.
    """
    others = _varying(cells, (axis, "seed"))
    groups = cells.groupby(others, dropna=False) if others else [((), cells)]
    rows = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(others, key, strict=True))
        row["points"] = len(part)
        slopes = _slopes(part, axis, stat)
        row.update(_by_seeds(part, axis, stat, level, slopes) if len(slopes) >= MIN_SEEDS
                   else _by_rows(part, axis, stat, level, len(slopes)))
        row["held"] = row["verdict"] == HELD
        if "training_verdict" in row:
            row["training"] = row["training_verdict"] == HELD
        rows.append(row)
    return pd.DataFrame(rows)


# What each measured entry lists, in order: (column prefix, name in the section's header)
PARTS = (("", "trained"), ("control_", "untrained control"), ("null_", "Gaussian null"),
         ("supervised_", "supervised"))


def _parts(cells: pd.DataFrame) -> list[tuple[str, str]]:
    """The first three always; the supervised control where the grid has supervised cells."""
    return [p for p in PARTS if p[0] != "supervised_" or f"supervised_{STATS[0]}" in cells]


def claim_verdict(table: pd.DataFrame, column: str = "verdict") -> Verdict:
    """The grid's verdict from its groups' (:func:`trends`; ``column``: ``verdict`` or
    ``training_verdict``, the reason in the matching ``reason`` column) by
    :func:`~pipeline.stats.comparisons.inference.majority`: held when strictly more than half the
    groups are held, contradicted when strictly more than half are contradicted, else unresolved
    with the groups' common reason or "groups disagree: ..."."""
    reason = column.replace("verdict", "reason")
    return majority([Verdict(v, r if isinstance(r, str) else "") if isinstance(v, str)
                     else Verdict(UNRESOLVED, NO_VALUES)
                     for v, r in zip(table[column], table[reason], strict=True)])


def outside(axis: str) -> str:
    """The reason of a trend claim the grid cannot test: one value of its axis."""
    return f"outside the claim's conditions: the grid has one value of `{axis}`"


@dataclass(frozen=True)
class Claim:
    """One of the paper's trend claims (``CLAIMS``) in one published setting: the slopes per
    group of cells (:func:`trends`; empty without the axis) and what they say. ``verdict``:
    held / contradicted / unresolved over the groups (:func:`claim_verdict`), ``reason`` why
    unresolved (too few seeds, the interval covers zero, groups disagree, or outside the claim's
    conditions: one value of the axis); ``training_verdict`` / ``training_reason`` the same for
    "the trained slope is steeper than the untrained control's" (None: no control)."""

    setting: str
    claim: str
    axis: str
    slopes: pd.DataFrame = field(repr=False)
    verdict: str
    reason: str
    seeds: int  # the fewest seeds with a slope in a group (0: not tested)
    groups: int  # groups of cells, len(slopes)
    held: int  # groups where the claim held
    contradicted: int  # groups where it was contradicted
    control_held: int | None  # groups where the untrained control's CV falls (None: no control)
    by_training: int | None  # groups where the trained slope is the steeper (None: no control)
    training_verdict: str | None = None
    training_reason: str = ""

    @property
    def tested(self) -> bool:
        """Decided, on seeds: held or contradicted."""
        return self.verdict in (HELD, CONTRADICTED)

    def to_json(self) -> dict[str, Any]:
        """The claim as ``summary.json`` and ``metrics.json`` list it."""
        tested = self.tested
        return {"setting": self.setting, "claim": self.claim, "tested": tested,
                "verdict": self.verdict, "reason": self.reason, "seeds": self.seeds,
                "groups": self.groups if tested else 0, "held": self.held if tested else 0,
                "contradicted": self.contradicted if tested else 0,
                "by_training": self.by_training if tested else None,
                "training_verdict": self.training_verdict}


def _claim(setting: str, claim: str, axis: str, cells: pd.DataFrame, level: float) -> Claim:
    """The claim that ``stat`` falls along ``axis`` on the setting's cells."""
    varies = axis in cells and cells[axis].nunique() > 1
    table = trends(cells, axis, "cv", level) if varies else pd.DataFrame()
    if table.empty or table.slope.isna().all():
        return Claim(setting, claim, axis, table, UNRESOLVED,
                     NO_VALUES if varies else outside(axis), 0, int(len(table)), 0, 0, None, None)
    verdict = claim_verdict(table)
    control = "training_verdict" in table
    training = claim_verdict(table, "training_verdict") if control else None
    return Claim(setting, claim, axis, table, verdict.value, verdict.reason,
                 seeds=int(table.seeds.min()), groups=int(len(table)),
                 held=int((table.verdict == HELD).sum()),
                 contradicted=int((table.verdict == CONTRADICTED).sum()),
                 control_held=int(table.control_held.sum()) if control else None,
                 by_training=int(table.training.sum()) if control else None,
                 training_verdict=training.value if training else None,
                 training_reason=training.reason if training else "")


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
    (``trained_``, ``control_``, ``null_``, ``supervised_``; NaN where the cells lack it) and
    ``protocol_differs``, where the row's cells depart from the published protocol
    (:func:`~pipeline.report.papers.table1.differs_text`). ``protocol``: the published protocol
    against all the setting's cells, point by point (empty: the setting has none typed)."""

    key: tuple[str, str, str]  # (data.name, arch, objective)
    published: Published
    axes: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]
    claims: tuple[Claim, ...]  # in CLAIMS order
    gaussianity: tuple[Gaussianity, ...]
    protocol: tuple[ProtocolPoint, ...] = ()
    row_protocols: tuple[tuple[ProtocolPoint, ...], ...] = ()  # per row; empty: none typed


@dataclass(frozen=True)
class ImageSection:
    """The image data set's section: the protocol check (:func:`image_rows.protocol_rows` over
    the contrastive cells' configs; empty without configs) and the comparison."""

    dataset: str
    protocol: tuple[dict[str, str], ...]
    comparison: image_rows.ImageComparison
    gaps: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)  # epoch_gap.gap_by_epoch


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


def _configs(part: pd.DataFrame,
             records: Mapping[str, Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The resolved configs of the cells in ``part`` that have one in ``records``."""
    ids = part.cell_id if "cell_id" in part else []
    return [records[c]["config"] for c in ids if "config" in records.get(c, {})]


def _setting(ok: pd.DataFrame, name: str, arch: str, objective: str, pub: Published,
             parts: list[tuple[str, str]], level: float,
             records: Mapping[str, Mapping[str, Any]]) -> Setting:
    cells = ok[(ok.arch == arch) & (ok.objective == objective)]
    axes = _varying(cells, ("seed", "objective", "arch"))
    groups = cells.groupby(axes, dropna=False) if axes else [((), cells)]
    rows, row_protocols = [], []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = {"setting": pub.setting, **dict(zip(axes, key, strict=True)),
                               "cells": len(part)}
        for s in STATS:
            row[f"published_{s}"] = pub.values[s]
            for prefix, _ in parts:
                col = prefix + s
                row[f"{prefix or 'trained_'}{s}"] = part[col].mean() if col in part else math.nan
        if pub.protocol:
            points = protocol_points(pub.protocol, part, _configs(part, records))
            row["protocol_differs"] = differs_text(points)
            row_protocols.append(points)
        rows.append(row)
    claims = tuple(_claim(pub.setting, claim, axis, cells, level) for axis, claim in CLAIMS)
    protocol = protocol_points(pub.protocol, cells, _configs(cells, records))
    return Setting((name, arch, objective), pub, tuple(axes), tuple(rows), claims,
                   _gaussianity(cells), protocol, tuple(row_protocols))


def side_by_side(board: pd.DataFrame, dataset: str, level: float = 0.95,
                 records: Mapping[str, Mapping[str, Any]] | None = None,
                 stats: pd.DataFrame | None = None) -> PaperTables:
    """The published settings of Betser et al., Table 1 that this grid's cells match, with
    their claims and where the cells depart from the published protocol (the board's grid
    axes, and the cells' resolved configs from ``records``, ``cell.json`` per cell id: epochs,
    negatives, optimiser); and, on image data with contrastive and supervised cells, the
    protocol check (the paper's setting beside the cells' resolved configs) and contrastive vs
    supervised vs untrained on the head and the backbone (:mod:`pipeline.report.papers.image_rows`),
    with the gap at every analysed epoch from ``stats`` (the stats stage's table;
    :mod:`pipeline.report.papers.epoch_gap`)."""
    ok = ok_cells(board)
    parts = _parts(ok)
    records = records or {}
    settings = tuple(_setting(ok, name, arch, objective, pub, parts, level, records)
                     for (name, arch, objective), pub in BETSER_TABLE1.items()
                     if name == dataset and not ok[(ok.arch == arch)
                                                   & (ok.objective == objective)].empty)
    rows = [r for s in settings for r in s.rows]
    claims = [c.to_json() for s in settings for c in s.claims]
    image = _image_section(ok, dataset, level, records)
    if image is not None and stats is not None:
        image = replace(image, gaps=epoch_gap.gap_by_epoch(stats, level))
    for r in image.comparison.table() if image else []:
        setting = f"{dataset} contrastive vs supervised ({r['layer']})"
        rows.append({"setting": setting, **r})
        tested = r["verdict"] in (HELD, CONTRADICTED)
        claims.append({"setting": setting, "claim": "contrastive more Gaussian than supervised",
                       "tested": tested, "groups": 1, "held": int(r["verdict"] == HELD),
                       "contradicted": int(r["verdict"] == CONTRADICTED), "by_training": None,
                       "verdict": r["verdict"], "reason": r["reason"], "seeds": r["seeds"],
                       "trained_enough": r["trained_enough"]})
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
