"""The report as values: :func:`build` turns the stage tables into every table, figure spec and
metric the report stage writes (:mod:`pipeline.report.render.publish`) and logs. Pure: no file
is read or written here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from pipeline.config import Params
from pipeline.datasets import DATASETS
from pipeline.report.grid import figure_plan, leaderboard, ranks
from pipeline.report.grid.board import Board, best_rows, full_table, make_board
from pipeline.report.grid.compare import RESULT_COLUMNS, compare_to_baseline
from pipeline.report.grid.controls import control_summary
from pipeline.report.grid.probe import probe_columns
from pipeline.report.grid.tables import axes_in, metrics_in, ok_cells, plain
from pipeline.report.papers import one_over_k
from pipeline.report.papers.side_by_side import PaperTables, side_by_side


@dataclass(frozen=True)
class Inputs:
    """What the stages before the report produced (see :mod:`pipeline.runtime.context`)."""

    grid: pd.DataFrame  # data/grid.json
    records: Mapping[str, Mapping[str, Any]]  # cell.json per cell id
    stats: pd.DataFrame
    search: pd.DataFrame
    bounds: pd.DataFrame
    finite_k: pd.DataFrame
    history: pd.DataFrame  # every cell's history.parquet, concatenated
    params: Params
    params_hash: str
    probe: pd.DataFrame = field(default_factory=pd.DataFrame)  # data/probe.parquet
    fewshot: pd.DataFrame = field(default_factory=pd.DataFrame)  # data/probe_fewshot_summary


@dataclass(frozen=True)
class Summary:
    """``reports/summary.json``, and flat in ``metrics.json`` / ``metrics_detail.json``
    (:meth:`dvc_metrics`): counts, the headline metrics' means over ok cells and their best
    cells, the control sentences and the paper claims; ``extra``: the comparison across
    settings (``compare``) and the O(1/k) law's fits (``one_over_k``)."""

    cells: int
    failed: int
    mean: dict[str, float]
    best: dict[str, dict[str, Any]]
    best_setting: dict[str, dict[str, Any]]
    controls: list[str]
    paper_claims: list[dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Everything, nested: ``reports/summary.json``."""
        out = asdict(self)
        return out | out.pop("extra")

    def flat(self) -> dict[str, float | int]:
        """Every number of the summary, flat (``a_b_c`` keys): what :meth:`dvc_metrics` splits
        into ``reports/metrics.json`` and ``reports/metrics_detail.json``."""
        out: dict[str, float | int] = {"cells": self.cells, "failed": self.failed}
        out |= {f"mean_{name}": value for name, value in self.mean.items()}
        out |= {f"best_{name}": entry["value"] for name, entry in self.best.items()}
        tested = [c for c in self.paper_claims if c.get("tested")]
        if tested:  # decided: held or contradicted (reports/paper_tables.md says why not)
            out["paper_claims_tested"] = len(tested)
            out["paper_claims_held"] = sum(c["verdict"] == "held" for c in tested)
            out["paper_claims_contradicted"] = sum(c["verdict"] == "contradicted" for c in tested)
        out |= _numbers(self.extra)  # e.g. one_over_k_initial_slope
        return out

    def dvc_metrics(self) -> tuple[dict[str, float | int], dict[str, float | int]]:
        """(``reports/metrics.json``, ``reports/metrics_detail.json``): :meth:`flat` in two.

        The first is the stage's DVC metrics, what `dvc exp show` prints by default, one column
        a key: the counts, the mean and the best cell of each ranked headline metric, the paper
        claims decided, and each compared method's chance of ranking first (``compare_<method>
        _p_rank1``). The second holds every other number (the unranked metrics' means, the rest
        of the comparison, the O(1/k) fits); it is a plain output, not a DVC metric, so it
        stays out of the default table: `dvc metrics show reports/metrics_detail.json` prints
        it and `dvc metrics diff --targets reports/metrics_detail.json` compares it.
        """
        flat = self.flat()
        ranked = {f"{end}_{name}" for name in self.best for end in ("mean", "best")}
        head = {k: v for k, v in flat.items()
                if k in ("cells", "failed") or k in ranked or k.startswith("paper_claims_")
                or (k.startswith("compare_") and k.endswith(HEADLINE_COMPARE))}
        return head, {k: v for k, v in flat.items() if k not in head}


INTERNAL = "internal_check"  # summary.json only: checks of the code itself are not evidence
HEADLINE_COMPARE = "_p_rank1"  # of the comparison's numbers, the one metrics.json holds


def _numbers(tree: Any, prefix: str = "") -> dict[str, float | int]:
    """The numeric leaves of nested dicts under ``a_b_c`` keys (booleans, text and the
    ``internal_check`` subtrees left out)."""
    if isinstance(tree, dict):
        out: dict[str, float | int] = {}
        for key, value in tree.items():
            if key == INTERNAL:
                continue
            out |= _numbers(value, f"{prefix}_{key}" if prefix else str(key))
        return out
    if isinstance(tree, int | float) and not isinstance(tree, bool) and math.isfinite(tree):
        return {prefix: tree}
    return {}


@dataclass(frozen=True)
class Report:
    """Everything the report stage writes and logs."""

    cells: pd.DataFrame  # cells.csv: one row per cell, every column
    cells_columns: tuple[str, ...]  # what cells.md shows
    board: Board  # leaderboard.{md,tex,html,csv}
    full: pd.DataFrame  # leaderboard_full.csv
    comparison: pd.DataFrame  # comparison.csv
    ranks: pd.DataFrame  # ranks.csv: one row per report.compare value
    pairs: pd.DataFrame  # pairs.csv: one row per pair of them
    papers: PaperTables  # paper_tables.{md,csv}
    history: pd.DataFrame  # history.csv (DVC plots)
    figures: tuple[figure_plan.FigureSpec, ...]
    one_over_k: one_over_k.OneOverK  # one_over_k.csv and its plot
    summary: Summary
    mlflow: dict[str, list[tuple[str, float]]]  # cell id -> (registry name, value)

    level: float = 0.95  # of every interval (report.level)

    @property
    def failed(self) -> int:
        return self.summary.failed


def _comparison(cells: pd.DataFrame, params: Params) -> pd.DataFrame:
    cfg = params.report
    empty = pd.DataFrame(columns=["loss", *RESULT_COLUMNS])
    if "loss" not in cells or cfg.baseline not in set(cells.loss) or "seed" not in cells:
        return empty
    pair_on = [a for a in cfg.group_by if a in cells and a != "loss"]
    metrics = [m for m in cfg.metrics if m in metrics_in(cells)]
    try:
        return compare_to_baseline(cells, cfg.baseline, "loss", pair_on, metrics, cfg.level,
                                   cfg.alpha)
    except ValueError:  # cells of a setting cannot be paired (an axis outside group_by varies)
        return empty


def _summary(cells: pd.DataFrame, board: Board, claims: list[dict[str, Any]],
             level: float) -> Summary:
    ok = ok_cells(cells)
    mean, best = {}, {}
    for m in board.columns:
        if ok[m.name].notna().any():
            mean[m.name] = round(float(ok[m.name].mean()), 6)
            if m.ranked:
                row = ok.loc[ok[m.name].idxmax() if m.higher else ok[m.name].idxmin()]
                best[m.name] = {"cell_id": row.cell_id, "value": round(float(row[m.name]), 6),
                                **{a: plain(row[a]) for a in axes_in(cells)}}
    return Summary(cells=int(len(cells)), failed=int((cells.status != "ok").sum()), mean=mean,
                   best=best, best_setting=best_rows(board),
                   controls=control_summary(cells, level), paper_claims=claims)


def _mlflow(cells: pd.DataFrame) -> dict[str, list[tuple[str, float]]]:
    """Per cell, its registry metrics and their interval bounds under their registry names."""
    cols = metrics_in(cells)
    cols += [f"{c}_{end}" for c in cols for end in ("lo", "hi") if f"{c}_{end}" in cells]
    values = cells[cols].to_numpy(dtype=float)  # a column at a time, not a Series per row
    keep = ~np.isnan(values)
    return {str(cell_id): [(c, float(v)) for c, v, k in zip(cols, row, ok, strict=True) if k]
            for cell_id, row, ok in zip(cells.cell_id, values.tolist(), keep.tolist(),
                                        strict=True)}


def _history(history: pd.DataFrame, grid: pd.DataFrame) -> pd.DataFrame:
    """history.csv (a DVC plot): per loss variant (``series``) and epoch, the median over its
    cells of each ``train_<column>``, and how many cells that is."""
    columns = ["series", "epoch", "train_loss", "cells"]
    if history.empty:
        return pd.DataFrame(columns=columns)
    out = history.rename(columns={c: f"train_{c}" for c in history.columns
                                  if c not in ("epoch", "cell_id")}).merge(grid, on="cell_id",
                                                                          how="left")
    series = out.loss.where(out.get("objective", "contrastive") != "supervised", "supervised")
    values = [c for c in out.columns if c.startswith("train_")]
    grouped = out.assign(series=series).groupby(["series", "epoch"], sort=True)
    return grouped[values].median().join(grouped.size().rename("cells")).reset_index()


def _asks_for_probe(cfg: Any) -> bool:
    names = [*cfg.columns, *cfg.metrics]
    return any(n.endswith("linear_probe") or "weighted_knn_" in n for n in names)


def build(inputs: Inputs) -> Report:
    """Every table, figure spec and metric of the report, from the stage tables."""
    params = inputs.params
    cfg = params.report
    cells = leaderboard.join(inputs.grid, inputs.records, inputs.stats, inputs.search,
                             params.train.epochs, inputs.bounds, inputs.params_hash, cfg.level)
    cells = leaderboard.ranked(probe_columns(cells, inputs.probe), cfg.primary)  # ranked once
    comparison = _comparison(cells, params)
    across = ranks.cross_compare(cells, cfg)
    board = make_board(cells, cfg, params.data.name, comparison=comparison,
                       tiers=(across.axis, ranks.tier_of(across), ranks.notes(across)))
    across_table = ranks.display(across)
    if across_table[1]:
        board = replace(board, tables=(across_table, *board.tables))
    board = replace(board, tables=(*board.tables, *leaderboard.cost_tables(cells)))
    if DATASETS[params.data.name].labels != "class" and _asks_for_probe(cfg):
        board = replace(board, notes=(*board.notes, f"Linear probe and weighted kNN: not "
                                      f"computed, {params.data.name} has no class labels."))
    paper = side_by_side(cells, params.data.name, cfg.level, inputs.records, inputs.stats)
    first = board.sections[0].rows if len(board.sections) > 1 else range(len(board.table))
    best = board.table.iloc[list(first)]
    primary = board.primary.name if board.primary is not None else None
    specs = figure_plan.plan(cells, leaderboard.layer_rows(inputs.stats), inputs.bounds, best,
                             primary, cfg.level)
    specs += figure_plan.fewshot_specs(inputs.fewshot, cells, cfg.level)
    if paper.image is not None and paper.image.gaps.epoch.nunique() > 1:
        specs.append(figure_plan.FigureSpec(
            "gap_vs_epoch", "Contrastive − supervised against epoch (raw held-out embeddings; "
            "bars: the interval over seeds)", "gap_vs_epoch", paper.image.gaps))
    ranked = ranks.ranks_table(across)
    if across.result is not None and len(ranked) > 1:
        r = across.result.ranking
        specs.insert(0, figure_plan.FigureSpec(
            "critical_difference", f"Critical-difference diagram: mean rank of each "
            f"{across.axis} over {r.blocks_complete} settings; bars join values not separated "
            f"(Nemenyi, α = {r.alpha:g})", "critical_difference", ranked,
            {"cd": r.cd, "groups": r.groups, "name": across.axis}))
        specs.insert(1, figure_plan.FigureSpec(
            "rank_intervals", f"Mean rank of each {across.axis} over {r.blocks_complete} "
            f"settings with its {round(cfg.level * 100):g}% bootstrap interval (settings and "
            "seeds resampled) and P(rank 1)", "rank_intervals", ranked,
            {"name": across.axis, "level": cfg.level}))
        specs.insert(2, figure_plan.FigureSpec(
            "performance_profile", f"Performance profile: the fraction of each {across.axis}'s "
            "(setting × seed) runs above τ, the score min–max normalised per setting (band: "
            "bootstrap over seeds; legend: optimality gap)",
            "performance_profile", ranks.profile_table(across),
            {"name": across.axis, "blocks": "setting"}))
    laws = one_over_k.law_over_seeds(inputs.finite_k, inputs.grid, cfg.level)
    law_entry = one_over_k.law_claim(laws, params.data.name)
    claims = [*paper.claims, *([law_entry] if law_entry else [])]
    summary = _summary(cells, board, claims, cfg.level)
    compared = ranks.summary(across)
    if compared:
        summary = replace(summary, extra={**summary.extra, "compare": compared})
    law = one_over_k.analyse(inputs.finite_k, inputs.grid, cfg.level)
    if law.entry is not None:
        summary = replace(summary, extra={**summary.extra, "one_over_k": law.entry})
    shown = ["rank", *board.axes, "seed", "status", *(m.name for m in board.columns)]
    return Report(cells=cells, cells_columns=tuple(dict.fromkeys(shown)), board=board,
                  full=full_table(cells, cfg), comparison=comparison, ranks=ranked,
                  pairs=ranks.pairs_table(across), papers=paper,
                  history=_history(inputs.history, inputs.grid),
                  figures=tuple(specs), one_over_k=law, summary=summary,
                  level=cfg.level,
                  mlflow=_mlflow(cells))

