"""The values a suite's board is made of: a task's input (:class:`TaskInput`), one loss's choice
on one task (:class:`TaskChoice`) and the cost column the board sums (:data:`COST`). Imported by
the orchestrator (:mod:`pipeline.report.suite.board`) and by the modules that shape its tables and
figure points (:mod:`pipeline.report.suite.tables`, :mod:`pipeline.report.suite.points`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

COST = "train_seconds"  # the cost a suite's board totals and draws its Pareto points against


@dataclass(frozen=True)
class TaskInput:
    """One task of the suite: its name, type (``vectors``, ``images``: the groups of the
    per-type means), whether it has class labels, its ``cells.csv`` and its few-shot summary
    (``data/probe_fewshot_summary.parquet``; empty when absent or unlabelled)."""

    name: str
    type: str
    labelled: bool
    cells: pd.DataFrame
    fewshot: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass(frozen=True)
class TaskChoice:
    """One loss on one task.

    setting: the chosen values of the ``group_by`` axes (seed and loss excluded); scores: the
    per-seed values (seed order) of the reported column at that setting; seeds: their seeds;
    chosen_on: the mean over seeds of the column it was chosen on; chosen_on_reported: True when
    the task has no selection half (chosen and reported on the same values: optimistic);
    train_seconds_total / cells / peak_rss_bytes_max: over ALL of the loss's contrastive cells on
    the task (every setting and seed, failed ones too: they ran), NaN where not recorded;
    cell_ids: the cells behind ``scores`` (empty without a ``cell_id`` column).
    """

    loss: str
    setting: Mapping[str, Any]
    scores: np.ndarray
    seeds: tuple[Any, ...]
    chosen_on: float
    chosen_on_reported: bool
    train_seconds_total: float
    cells: int
    peak_rss_bytes_max: float
    cell_ids: tuple[str, ...] = ()
