"""The suite leaderboard's tables as values (:mod:`pipeline.report.suite.board`): the ``(tasks,
losses, seeds)`` score array, one row per (task, loss), one row per loss with its aggregates,
and the ranking the critical-difference diagram draws. The statistics are the engine's
(:func:`pipeline.stats.comparisons.compare.compare`,
:func:`pipeline.stats.comparisons.ranking.rank_methods`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pipeline.metrics import Metric
from pipeline.report.formatting import setting_text
from pipeline.report.grid.ranks import CrossComparison
from pipeline.report.grid.tables import cost_total
from pipeline.report.suite.values import TaskChoice
from pipeline.stats.comparisons.aggregates import AGGREGATES
from pipeline.stats.comparisons.ranking import Ranking, rank_methods
from pipeline.stats.intervals import bounded_seed_ci
from pipeline.stats.uncertainty import seed_ci

# the registry's resampled entries (rank interval, P(rank 1), optimality gap), tasks as blocks
RESAMPLED_COLUMNS = tuple(c for a in AGGREGATES if a.kind == "resampled" for c in a.columns)
PER_TASK_COLUMNS = ("task", "type", "loss", "missing", "mean", "lo", "hi", "seeds", "setting",
                    "chosen_on", "chosen_on_reported", "train_seconds_total", "cells",
                    "peak_rss_bytes_max", "rank")


@dataclass(frozen=True)
class TaskInfo:
    """What the board says about one task: ``select`` / ``report``, the columns its settings
    were chosen and reported on (equal when ``chosen_on_reported``); losses: how many have a
    score there; varying: the setting axes that take several values among the task's cells (a
    chosen setting is told by these); fixed: the others' values, in words."""

    name: str
    type: str
    labelled: bool
    select: str
    report: str
    chosen_on_reported: bool
    losses: int
    varying: tuple[str, ...] = ()
    fixed: str = ""


@dataclass(frozen=True)
class CompleteRanking:
    """The critical-difference diagram's ranking: the losses that entered every task, ranked
    over all the tasks. ranking: None with ``reason`` when there are fewer than 2 tasks or 2
    such losses; table: ``loss`` and ``mean_rank``, best first (what the diagram draws)."""

    losses: tuple[str, ...]
    ranking: Ranking | None
    reason: str
    table: pd.DataFrame


def score_array(tasks: Sequence[str], losses: Sequence[str],
                choices: Mapping[str, Mapping[str, TaskChoice]]) -> np.ndarray:
    """``(tasks, losses, seeds)``: each choice's per-seed scores; NaN where a loss misses a task
    or has fewer seeds than the most any (task, loss) has."""
    seeds = max((c.scores.size for t in tasks for c in choices[t].values()), default=0)
    arr = np.full((len(tasks), len(losses), max(seeds, 1)), np.nan)
    for i, t in enumerate(tasks):
        for j, loss in enumerate(losses):
            if loss in choices[t]:
                x = choices[t][loss].scores
                arr[i, j, : x.size] = x
    return arr


def per_task_table(infos: Sequence[TaskInfo], losses: Sequence[str],
                   choices: Mapping[str, Mapping[str, TaskChoice]], metric: Metric,
                   level: float) -> pd.DataFrame:
    """One row per (task, loss): mean over its seeds with the t-interval over seeds at ``level``
    (:func:`seed_ci`; for a % metric, a fraction, :func:`bounded_seed_ci`: on the logit scale,
    inside [0, 1]; NaN bounds with one seed), the setting, its costs over all the loss's
    cells on the task, and its rank within the task among the losses present (1 = best, ties
    averaged); a loss that misses the task: ``missing`` True and NaN values."""
    rows = []
    for info in infos:
        part = []
        for loss in losses:
            c = choices[info.name].get(loss)
            row: dict[str, Any] = {"task": info.name, "type": info.type, "loss": loss,
                                   "missing": c is None}
            if c is not None:
                ci = (bounded_seed_ci(c.scores, level, *metric.bounds) if metric.bounds
                      else seed_ci(c.scores, level))
                row |= {"mean": ci.estimate, "lo": ci.low, "hi": ci.high,
                        "seeds": int(c.scores.size),
                        "setting": setting_text({a: v for a, v in c.setting.items()
                                                 if a in info.varying}),
                        "chosen_on": c.chosen_on, "chosen_on_reported": c.chosen_on_reported,
                        "train_seconds_total": c.train_seconds_total, "cells": c.cells,
                        "peak_rss_bytes_max": c.peak_rss_bytes_max}
            part.append(row)
        frame = pd.DataFrame(part, columns=list(PER_TASK_COLUMNS))
        frame["rank"] = frame["mean"].astype(float).rank(method="average",
                                                          ascending=not metric.higher)
        rows.append(frame)
    table = pd.concat(rows, ignore_index=True)
    table["missing"] = table["missing"].astype(bool)
    table["seeds"] = table["seeds"].fillna(0).astype(int)
    table["cells"] = table["cells"].fillna(0).astype(int)
    return table


def _complete_mean(part: pd.DataFrame) -> float:
    """The mean over ``part``'s tasks of a loss's per-task means; NaN when it misses any."""
    return float(part["mean"].mean()) if len(part) and not part["missing"].any() else np.nan


def aggregate_table(per_task: pd.DataFrame, cross: CrossComparison,
                    types: Sequence[str]) -> pd.DataFrame:
    """One row per loss, best mean rank first (losses without one last).

    tasks / tasks_total: the tasks it entered, of all; mean: over all tasks of its per-task
    means, NaN unless it entered every task; mean_<type>: likewise over the tasks of that type;
    mean_rank / tasks_ranked, borda / borda_rank (1 = best, ties share the smallest), tier: the
    engine's, over the tasks every loss entered; win_rate / win_rate_tasks: the engine's, over
    the (task, other loss) pairs where both are present, and how many tasks that spans; iqm,
    iqm_lo, iqm_hi / iqm_tasks, iqm_scores: the engine's IQM of its (task × seed) scores over
    the tasks it entered, stratified bootstrap over seeds; :data:`RESAMPLED_COLUMNS` (rank_lo,
    rank_hi, p_rank1, optimality_gap, optimality_gap_lo, optimality_gap_hi): the registry's
    entries with the tasks as blocks; train_seconds_total, cells: over all its cells on all
    tasks (NaN seconds when no task recorded any).
    """
    result = cross.result
    losses = list(dict.fromkeys(per_task["loss"]))
    present = per_task[~per_task["missing"]]
    shared = present.groupby("task")["loss"].transform("size") > 1
    rows = []
    for j, loss in enumerate(losses):
        mine = per_task[per_task["loss"] == loss]
        row: dict[str, Any] = {"loss": loss, "tasks": int((~mine["missing"]).sum()),
                               "tasks_total": int(len(mine)), "mean": _complete_mean(mine)}
        for t in types:
            row[f"mean_{t}"] = _complete_mean(mine[mine["type"] == t])
        row["win_rate_tasks"] = int((present["loss"].eq(loss) & shared).sum())
        if result is not None:
            r, agg = result.ranking, result.methods[j]
            row |= {"tier": r.tier[j], "mean_rank": float(r.mean_rank[j]),
                    "tasks_ranked": r.blocks_complete, "borda": agg.borda,
                    "win_rate": agg.win_rate, "iqm": agg.iqm.estimate, "iqm_lo": agg.iqm.low,
                    "iqm_hi": agg.iqm.high, "iqm_tasks": agg.blocks, "iqm_scores": agg.scores,
                    **{c: agg.values[c] for c in RESAMPLED_COLUMNS}}
        row |= {"train_seconds_total": cost_total(mine["train_seconds_total"], "sum"),
                "cells": int(mine["cells"].sum())}
        rows.append(row)
    table = pd.DataFrame(rows)
    for col in ("tier", "mean_rank", "tasks_ranked", "borda", "win_rate", "iqm", "iqm_lo",
                "iqm_hi", "iqm_tasks", "iqm_scores", *RESAMPLED_COLUMNS):
        if col not in table:
            table[col] = np.nan
    table["borda_rank"] = table["borda"].rank(method="min", ascending=False)
    order = list(result.ranking.order) if result is not None else list(range(len(losses)))
    columns = ["loss", "tier", "tasks", "tasks_total", "mean", *(f"mean_{t}" for t in types),
               "mean_rank", "tasks_ranked", "borda", "borda_rank", "win_rate", "win_rate_tasks",
               "iqm", "iqm_lo", "iqm_hi", "iqm_tasks", "iqm_scores", *RESAMPLED_COLUMNS,
               "train_seconds_total", "cells"]
    return table.iloc[order][columns].reset_index(drop=True)


def complete_ranking(scores: np.ndarray, tasks: Sequence[str], losses: Sequence[str],
                     metric: Metric, alpha: float) -> CompleteRanking:
    """The losses with a score on every task, ranked over all tasks (the CD diagram)."""
    full = np.isfinite(scores).any(axis=2).all(axis=0)
    names = tuple(name for name, f in zip(losses, full, strict=True) if f)
    empty = pd.DataFrame(columns=["loss", "mean_rank"])
    if len(tasks) < 2:
        return CompleteRanking(names, None, f"{len(tasks)} task: a critical difference needs "
                               "2 or more tasks", empty)
    if len(names) < 2:
        return CompleteRanking(names, None, f"{len(names)} loss entered every task: a critical "
                               "difference needs 2 or more", empty)
    r = rank_methods(scores[:, full], names, bool(metric.higher), alpha)
    table = pd.DataFrame({"loss": [names[j] for j in r.order],
                          "mean_rank": [float(r.mean_rank[j]) for j in r.order]})
    return CompleteRanking(names, r, "", table)
