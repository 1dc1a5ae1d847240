"""The leaderboard across the tasks of a suite, as values (SPEC §6 with blocks = tasks).

Each task is one pipeline run with its own ``reports/cells.csv``. On each task every loss gets
one score per seed: its best setting (the ``group_by`` axes but the seed) is chosen on the
selection half ``<primary>_select`` and reported on the report half ``<primary>_report``
(:mod:`pipeline.report.grid.selection`; a task without halves is chosen and reported on
``<primary>`` itself, and says so). The ``(tasks, losses, seeds)`` array of those scores (NaN
where a loss misses a task or has fewer seeds) goes to
:func:`pipeline.stats.comparisons.compare.compare`; this module only shapes it and names what each
number is over.

Rules (MTEB's for incomplete entries): a loss that misses a task has no mean over all tasks (nor
over the tasks of a type it misses); it is shown missing there, never filled in. Ranks, Borda
and the Friedman test use the tasks every loss entered (the engine's complete blocks); the win
rate the (task, other loss) pairs where both are present; the IQM the tasks a loss entered.

Pure: no file is read or written here (:mod:`pipeline.report.suite.publish` writes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pipeline.grid import GRID_AXES
from pipeline.metrics import Metric, lookup
from pipeline.report.formatting import setting_text
from pipeline.report.grid.ranks import CrossComparison, pairs_table, settle_pairs
from pipeline.report.grid.selection import has_halves
from pipeline.report.grid.tables import cost_total, ok_cells, varying
from pipeline.report.suite.notes import notes
from pipeline.report.suite.points import fewshot_lines, pareto_points
from pipeline.report.suite.tables import (
    CompleteRanking,
    TaskInfo,
    aggregate_table,
    complete_ranking,
    per_task_table,
    score_array,
)
from pipeline.report.suite.values import COST, TaskChoice, TaskInput
from pipeline.seeding import numpy_generator
from pipeline.stats.comparisons.compare import Comparison, compare
from pipeline.stats.comparisons.profiles import performance_profiles
from pipeline.stats.comparisons.ranking import Friedman, Ranking
from pipeline.stats.uncertainty import check_level


def contrastive(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells that train a contrastive loss (all of them without an ``objective`` column)."""
    return cells[cells["objective"] == "contrastive"] if "objective" in cells else cells


def columns_of(cells: pd.DataFrame, metric: Metric) -> tuple[str, str, bool]:
    """(the column a setting is chosen on, the column it is reported on, chosen_on_reported)."""
    if has_halves(cells, metric):
        return f"{metric.name}_select", f"{metric.name}_report", False
    return metric.name, metric.name, True


def setting_axes(cells: pd.DataFrame, group_by: Sequence[str]) -> list[str]:
    """The ``group_by`` axes the cells have, without the loss and the seed."""
    return [a for a in group_by if a in cells and a not in ("loss", "seed")]


def _cost(part: pd.DataFrame, column: str, how: str) -> float:
    return cost_total(part[column], how) if column in part else float("nan")


def _choose(ok: pd.DataFrame, axes: list[str], select: str,
            higher: bool) -> tuple[tuple[Any, ...], float] | None:
    """The setting (values of ``axes``) with the best mean over seeds of ``select`` and that
    mean; ties: the first in sorted setting order; None when no setting has a value."""
    if not axes:
        value = float(ok[select].mean())
        return ((), value) if np.isfinite(value) else None
    means = ok.groupby(axes, dropna=False, sort=True)[select].mean().reset_index()
    means = means[means[select].notna()].reset_index(drop=True)
    if not len(means):
        return None
    pos = int(means[select].idxmax() if higher else means[select].idxmin())  # first of ties
    return tuple(means[a].iloc[pos] for a in axes), float(means[select].iloc[pos])


def _at(ok: pd.DataFrame, axes: list[str], key: tuple[Any, ...]) -> pd.DataFrame:
    """The rows of ``ok`` at setting ``key`` (NaN keys match NaN)."""
    mask = pd.Series(True, index=ok.index)
    for a, v in zip(axes, key, strict=True):
        mask &= ok[a].isna() if pd.isna(v) else ok[a] == v
    return ok[mask]


def _one_cell_per_seed(rows: pd.DataFrame, axes: list[str], loss: str,
                       group_by: Sequence[str]) -> None:
    """ValueError when a chosen setting holds two cells of one seed: an axis that varies among
    them is missing from ``group_by`` (its seeds would be counted twice)."""
    if "seed" not in rows or not rows["seed"].duplicated().any():
        return
    vary = [a for a in GRID_AXES if a in rows and a not in (*axes, "loss", "seed")
            and rows[a].nunique(dropna=False) > 1]
    raise ValueError(f"group_by = {list(group_by)}: the chosen setting of {loss!r} holds several "
                     f"cells of one seed; add the axes that vary among them "
                     f"({', '.join(vary) or 'none of the grid axes'}) to group_by")


def task_scores(cells: pd.DataFrame, primary: str,
                group_by: Sequence[str]) -> dict[str, TaskChoice]:
    """Per loss (its contrastive ok cells; a loss without a value of the column it is chosen on
    is absent), the chosen setting and its per-seed reported scores (see :class:`TaskChoice`).

    The setting is the combination of the ``group_by`` axes present (seed excluded) with the best
    mean over seeds of ``<primary>_select`` when the cells have both halves, else of ``<primary>``
    (then ``chosen_on_reported``); its scores are ``<primary>_report`` (else ``<primary>``).
    """
    metric = lookup(primary)
    if metric.higher is None:
        raise ValueError(f"primary = {primary!r}: {metric.label} is not ranked (neither higher "
                         "nor lower is better); choose a ranked metric")
    if "loss" not in cells:
        raise ValueError(f"cells: no 'loss' column (columns {', '.join(map(str, cells.columns))}); "
                         "expected a reports/cells.csv table")
    train = contrastive(cells)
    select, report, same = columns_of(ok_cells(train), metric)
    axes = setting_axes(train, group_by)
    out: dict[str, TaskChoice] = {}
    for loss, every in train.groupby("loss", sort=True):
        ok = ok_cells(every)
        if select not in ok or not ok[select].notna().any():
            continue
        best = _choose(ok, axes, select, bool(metric.higher))
        if best is None:
            continue
        key, chosen_on = best
        rows = _at(ok, axes, key)
        rows = rows[rows[report].notna()]
        rows = rows.sort_values("seed", kind="stable") if "seed" in rows else rows
        _one_cell_per_seed(rows, axes, str(loss), group_by)
        seeds = tuple(rows["seed"]) if "seed" in rows else tuple(range(len(rows)))
        ids = tuple(str(c) for c in rows["cell_id"]) if "cell_id" in rows else ()
        out[str(loss)] = TaskChoice(
            str(loss), dict(zip(axes, key, strict=True)), rows[report].to_numpy(float), seeds,
            chosen_on, same, _cost(every, COST, "sum"), int(len(every)),
            _cost(every, "peak_rss_bytes", "max"), ids)
    return out


@dataclass(frozen=True)
class SuiteBoard:
    """The leaderboard across tasks.

    scores: ``(tasks, losses, seeds)``, NaN where missing; choices: task → loss → its
    :class:`TaskChoice`; per_task: one row per (task, loss) (:data:`PER_TASK_COLUMNS`; a missing
    loss is a row with ``missing`` and NaN values); aggregate: one row per loss, best mean rank
    first (see :func:`aggregate_table`); cross: the engine's comparison of every loss over the
    tasks (``cross.result`` None with ``cross.reason`` under 2 losses); pairs: as
    ``ranks.pairs_table``; complete: the CD diagram's ranking; notes: what each number is over;
    pareto: task → one point per setting (``figure_plan.cost_points``); fewshot: task → the
    label-efficiency lines (:data:`FEWSHOT_COLUMNS`), labelled tasks with few-shot rows only.
    """

    name: str
    primary: Metric
    group_by: tuple[str, ...]
    level: float
    alpha: float
    tasks: tuple[TaskInfo, ...]
    losses: tuple[str, ...]
    scores: np.ndarray
    choices: Mapping[str, Mapping[str, TaskChoice]]
    per_task: pd.DataFrame
    aggregate: pd.DataFrame
    cross: CrossComparison
    pairs: pd.DataFrame
    complete: CompleteRanking
    notes: tuple[str, ...]
    pareto: Mapping[str, pd.DataFrame]
    fewshot: Mapping[str, pd.DataFrame]

    @property
    def comparison(self) -> Comparison | None:
        return self.cross.result

    @property
    def ranking(self) -> Ranking | None:
        return self.cross.result.ranking if self.cross.result is not None else None

    @property
    def friedman(self) -> Friedman | None:
        """The Friedman / Iman–Davenport test over the tasks every loss entered."""
        return self.ranking.friedman if self.ranking is not None else None

    @property
    def cd(self) -> float:
        """Nemenyi's critical difference of mean ranks over those tasks (NaN without one)."""
        return self.ranking.cd if self.ranking is not None else float("nan")

    @property
    def groups(self) -> tuple[tuple[str, ...], ...]:
        """The maximal runs of losses, in rank order, that the tests do not separate."""
        return self.ranking.groups if self.ranking is not None else ()

    @property
    def types(self) -> tuple[str, ...]:
        """The task types, in the order they first appear."""
        return tuple(dict.fromkeys(t.type for t in self.tasks))


def _cross(scores: np.ndarray, tasks: Sequence[str], losses: Sequence[str], metric: Metric,
           level: float, alpha: float, n_boot: int, seed_key: str) -> CrossComparison:
    """The engine's comparison of ``losses`` with the tasks as blocks (None under 2 losses)."""
    if len(losses) < 2:
        return CrossComparison("loss", metric, ("task",), tuple((t,) for t in tasks), None,
                               f"{len(losses)} loss with a score on any task: a comparison "
                               "needs 2 or more", alpha, level)
    rng = numpy_generator(seed_key, "suite.compare", metric.name)
    result = compare(scores, list(losses), bool(metric.higher), rng, alpha=alpha, level=level,
                     n_boot=n_boot)
    profiles = performance_profiles(scores, list(losses), bool(metric.higher), n_boot,
                                    numpy_generator(seed_key, "suite.profile", metric.name), level)
    return CrossComparison("loss", metric, ("task",), tuple((t,) for t in tasks), result, "",
                           alpha, level, profiles=profiles,
                           settled=settle_pairs(scores, list(losses), result, 0.0))


def _info(task: TaskInput, metric: Metric, n: int, group_by: Sequence[str]) -> TaskInfo:
    train = contrastive(task.cells)
    select, report, same = columns_of(ok_cells(train), metric)
    axes = setting_axes(train, group_by)
    fixed = {a: train[a].iloc[0] for a in axes if a not in varying(train, axes) and len(train)}
    return TaskInfo(task.name, task.type, task.labelled, select, report, same, n,
                    tuple(varying(train, axes)), setting_text(fixed))


def _check(tasks: Sequence[TaskInput], n_boot: int, alpha: float) -> None:
    if not tasks:
        raise ValueError("tasks: empty; a suite board needs at least one task")
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise ValueError(f"tasks: names {names} repeat; each task needs its own name")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot = {n_boot!r}: number of bootstrap resamples must be an "
                         "integer >= 1")
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise ValueError(f"alpha = {alpha!r}: significance level must be in (0, 1)")


def _scores(tasks: Sequence[TaskInput], primary: str,
            group_by: Sequence[str]) -> dict[str, dict[str, TaskChoice]]:
    """Every task's choices; ValueError naming the task, or the primary when no task has it."""
    choices = {}
    for t in tasks:
        try:
            choices[t.name] = task_scores(t.cells, primary, group_by)
        except ValueError as err:
            raise ValueError(f"task {t.name!r}: {err}") from err
    if not any(choices.values()):
        raise ValueError(f"primary = {primary!r}: no contrastive ok cell of any task has a value "
                         f"of it (tasks {', '.join(choices)}); check the metric's name")
    return choices


def suite_board(tasks: Sequence[TaskInput], primary: str, group_by: Sequence[str],
                level: float = 0.95, alpha: float = 0.05, n_boot: int = 2000,
                seed_key: str = "suite", name: str = "") -> SuiteBoard:
    """The leaderboard across ``tasks`` on ``primary`` (see the module docstring).

    group_by: the axes a loss's setting is chosen over (those a task lacks are skipped; loss and
    seed never count); level: the intervals' confidence level (t over seeds, bootstrap over
    seeds); alpha: the tests' significance level; n_boot: bootstrap resamples; seed_key: the
    bootstrap's generator is ``numpy_generator(seed_key, "suite.compare", primary)``; name: the
    board's title (default ``seed_key``).
    """
    check_level(level)
    _check(tasks, n_boot, alpha)
    metric = lookup(primary)
    choices = _scores(tasks, primary, group_by)
    names = [t.name for t in tasks]
    losses = tuple(sorted({loss for c in choices.values() for loss in c}))
    infos = tuple(_info(t, metric, len(choices[t.name]), group_by) for t in tasks)
    scores = score_array(names, losses, choices)
    cross = _cross(scores, names, losses, metric, level, alpha, n_boot, seed_key)
    per_task = per_task_table(infos, losses, choices, metric, level)
    types = tuple(dict.fromkeys(t.type for t in tasks))
    complete = complete_ranking(scores, names, losses, metric, alpha)
    seeds = int(np.isfinite(scores).sum(axis=2).max()) if scores.size else 0
    pareto = {t.name: pareto_points(contrastive(t.cells), primary,
                                    setting_axes(t.cells, group_by)) for t in tasks}
    lines = {t.name: fewshot_lines(t.fewshot, choices[t.name]) for t in tasks if t.labelled}
    fewshot = {k: v for k, v in lines.items() if len(v)}
    return SuiteBoard(
        name or seed_key, metric, tuple(group_by), level, alpha, infos, losses, scores, choices,
        per_task, aggregate_table(per_task, cross, types), cross, pairs_table(cross), complete,
        notes(infos, per_task, cross, complete, metric, level, seeds, pareto, fewshot), pareto,
        fewshot)
