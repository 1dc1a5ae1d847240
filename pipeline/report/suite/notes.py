"""The notes of the suite's leaderboard (:mod:`pipeline.report.suite.board`): plain sentences saying
what each number is over (tasks, seeds), which losses each aggregate leaves out and why, and
whether the omnibus test separated anything. Values in, sentences out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline.metrics import Metric
from pipeline.report.formatting import fmt_value, pct
from pipeline.report.grid.ranks import CrossComparison, gating_note, power_notes, tiers_text
from pipeline.report.suite.tables import CompleteRanking, TaskInfo


def _names(values: Sequence[str]) -> str:
    return ", ".join(values)


def _over_notes(infos: Sequence[TaskInfo], metric: Metric, level: float,
                seeds: int) -> list[str]:
    """What a task's score and the aggregates are over."""
    split = [t.name for t in infos if not t.chosen_on_reported]
    same = [t.name for t in infos if t.chosen_on_reported]
    lines = []
    if split:
        lines.append(f"Task score ({_names(split)}): {metric.label} on the report half "
                     f"({metric.name}_report) of the setting with the best mean over seeds on "
                     f"the selection half ({metric.name}_select).")
    if same:
        lines.append(f"Task score ({_names(same)}): no selection half, so the setting is chosen "
                     f"and reported on {metric.name} itself (optimistic: the best of noisy "
                     "values).")
    bounded = (f", on the logit scale since {metric.label} is a fraction: the interval stays "
               "in [0, 100]% (the t-interval cut to the range where a seed is at 0 or 100%)"
               if metric.unit == "%" else "")
    unit = (f"{pct(level)} t-interval over seeds{bounded}" if seeds > 1
            else "one seed per cell, so no interval over seeds")
    lines.append(f"A task's entry: the mean over seeds of that setting ({unit}); rank within the "
                 "task among the losses present (1 = best, ties averaged).")
    lines.append(f"Mean over tasks: the mean of the per-task means, only for a loss that entered "
                 f"all {len(infos)} tasks (an incomplete loss is not averaged); mean_<type>: "
                 "the same within the tasks of one type.")
    iqm = (f"its {pct(level)} interval a stratified bootstrap over seeds (resampled within each "
           "task)" if seeds > 1 else "no interval (one seed per cell)")
    lines.append("IQM: the interquartile mean of a loss's (task × seed) scores over the tasks it "
                 f"entered, {iqm}. Win rate: over the (task, other loss) pairs where both are "
                 "present. Mean rank, Borda, tiers and the Friedman test: over the tasks every "
                 "loss entered.")
    return lines


def _missing_notes(per_task: pd.DataFrame, cross: CrossComparison,
                   types: Sequence[str]) -> list[str]:
    """One sentence per loss that misses a task: where, and which aggregates leave it out."""
    total = per_task["task"].nunique()
    ranked = cross.result.ranking.blocks_complete if cross.result is not None else 0
    lines = []
    for loss, part in per_task.groupby("loss", sort=False):
        gone = list(part.loc[part["missing"], "task"])
        if not gone:
            continue
        kinds = [t for t in types if part.loc[part["type"] == t, "missing"].any()]
        lines.append(f"{loss} misses task{'s' if len(gone) > 1 else ''} {_names(gone)}: ranked "
                     f"over {ranked} of {total} tasks; no mean over all tasks"
                     + (f" nor over the {_names(kinds)} tasks" if len(types) > 1 else "") + ".")
    if lines:
        lines.append(f"The ranks of every loss are over the {ranked} tasks that all losses "
                     "entered; a missing entry is shown as missing, never filled in.")
    return lines


def _test_note(cross: CrossComparison) -> str:
    """Whether the omnibus test separated anything."""
    if cross.result is None:
        return f"No comparison across tasks: {cross.reason}."
    r = cross.result.ranking
    f = r.friedman
    if not np.isfinite(f.iman_davenport_p):
        return (f"Friedman test over {r.blocks_complete} complete task(s): needs 2 or more; "
                "no tiers (one tier).")
    head = (f"Friedman χ² = {fmt_value(f.chi2)} (p = {fmt_value(f.chi2_p)}), Iman–Davenport "
            f"F = {fmt_value(f.iman_davenport)} (p = {fmt_value(f.iman_davenport_p)}) over "
            f"{r.blocks_complete} tasks and {len(r.methods)} losses; Nemenyi CD = "
            f"{fmt_value(r.cd)} mean ranks")
    if r.separated:
        return (f"{head}: the omnibus test rejects at α = {r.alpha:g} (the losses do not all "
                f"rank alike); tiers by the post-hoc test: {tiers_text(cross)}.")
    return f"{head}: nothing separated at α = {r.alpha:g} (one tier)."


def _cd_note(complete: CompleteRanking, losses: Sequence[str]) -> str:
    if complete.ranking is None:
        return f"No critical-difference diagram: {complete.reason}."
    if len(complete.losses) == len(losses):
        return ("Critical-difference diagram: every loss over every task (bars join losses "
                "that the Nemenyi test does not separate).")
    return (f"Critical-difference diagram: the {len(complete.losses)} losses that entered every "
            f"task ({_names(complete.losses)}), over all {complete.ranking.blocks_total} tasks.")


def _figure_notes(metric: Metric, level: float, pareto: Mapping[str, pd.DataFrame],
                  fewshot: Mapping[str, pd.DataFrame], labelled: Sequence[str]) -> list[str]:
    """What the Pareto and label-efficiency figures draw, or why they are absent."""
    drawn = [t for t, p in pareto.items() if len(p)]
    lines = [f"Pareto figure ({', '.join(drawn)}): one point per setting, the means over its "
             f"seeds of {metric.name} and of the training seconds; ringed: the Pareto front of "
             "cheaper and better within the task." if drawn else
             "No Pareto figure: no task recorded both training seconds and "
             f"{metric.name}."]
    if fewshot:
        lines.append(f"Label-efficiency figure ({', '.join(fewshot)}): few-shot accuracy against "
                     "labelled examples per class at each loss's chosen setting, the mean over "
                     "its seeds of the means over episodes; band: the mean over seeds of each "
                     f"seed's {pct(level)} t-interval over episodes (draws of labelled rows, "
                     "not seeds).")
    else:
        why = ("no labelled task has few-shot rows" if labelled else "no task is labelled")
        lines.append(f"No label-efficiency figure: {why}.")
    return lines


def _uncertainty_notes(cross: CrossComparison, level: float) -> list[str]:
    """What the rank interval, P(rank 1), the optimality gap and the profile are over."""
    if cross.result is None:
        return []
    r, p = cross.result.ranking, cross.profiles
    lines = [f"Rank interval and P(rank 1): a bootstrap of the mean rank over the "
             f"{r.blocks_complete} tasks every loss entered, resampling the tasks and the seeds "
             f"within each ({pct(level)} percentile interval; P(rank 1) the share of resamples "
             "where it ranks first, ties split)."]
    if p is not None:
        flat = (f"; {p.normalised.blocks_flat} task(s) where every loss's mean is equal, or "
                "with one loss, left out" if p.normalised.blocks_flat else "")
        lines.append("Optimality gap and performance profile (Agarwal et al. 2021): each "
                     "(task × seed) score min–max normalised within its task over the losses' "
                     f"seed means (1: the best loss's mean there, 0: the worst's){flat}; the gap "
                     "is the mean of max(0, 1 − score) over a loss's runs, the profile the "
                     "fraction of its runs above each τ; intervals and bands: stratified "
                     f"bootstrap over seeds within each task ({pct(level)}).")
    return lines


def notes(infos: Sequence[TaskInfo], per_task: pd.DataFrame, cross: CrossComparison,
          complete: CompleteRanking, metric: Metric, level: float, seeds: int,
          pareto: Mapping[str, pd.DataFrame],
          fewshot: Mapping[str, pd.DataFrame]) -> tuple[str, ...]:
    """Every note of the board, in reading order; seeds: the most seeds any entry has;
    pareto / fewshot: the figures' tables per task (empty: not drawn)."""
    types = list(dict.fromkeys(t.type for t in infos))
    losses = list(dict.fromkeys(per_task["loss"]))
    labelled = [t.name for t in infos if t.labelled]
    return (*_over_notes(infos, metric, level, seeds), *_missing_notes(per_task, cross, types),
            _test_note(cross), gating_note("suite_pairs.csv"), *_uncertainty_notes(cross, level),
            *power_notes(cross, "task", "suite_pairs.csv"), _cd_note(complete, losses),
            *_figure_notes(metric, level, pareto, fewshot, labelled))
