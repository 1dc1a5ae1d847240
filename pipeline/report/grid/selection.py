"""The best setting of each loss, chosen apart from where it is reported.

Choosing a loss's best setting on a held-out number and then printing that same number is
optimistic (the maximum of noisy values), more so for a loss with more settings. The search
stage therefore writes the retrieval metrics on two fixed disjoint halves of the held-out
anchors (:func:`pipeline.search.selection_split`): ``<metric>_select`` chooses, and
``<metric>_report`` is what the leaderboard shows for the chosen setting, with an interval from
a hierarchical bootstrap over seeds, then the report half's anchors
(:func:`pipeline.stats.hierarchical_bootstrap`). A metric without halves (a probe accuracy, a
statistic) is chosen and shown on the same data, and :class:`Selection` says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipeline.metrics import Metric
from pipeline.report.formatting import axis_header, fmt_bounds, pct, setting_text
from pipeline.report.grid.tables import groups, ok_cells
from pipeline.seeding import numpy_generator
from pipeline.stats import ConfidenceInterval, hierarchical_bootstrap

ANCHORS = "recall_report_anchors"  # the report half's size, per cell (search stage)


@dataclass(frozen=True)
class Choice:
    """One variant's chosen setting: ``row`` of the board's table; ``chosen_on``: the mean over
    seeds it was chosen by; ``reported``: its value on the report half (None without halves);
    ``seeds``: the ok cells behind it."""

    value: str
    row: int
    chosen_on: float
    reported: ConfidenceInterval | None
    seeds: int


@dataclass(frozen=True)
class Selection:
    """The best setting of each value of ``axis`` on ``metric``.

    split: True when chosen on ``<metric>_select`` and reported on ``<metric>_report``; False
    when the cells have no halves of ``metric`` (chosen on the value the row shows).
    """

    axis: str
    metric: Metric
    split: bool
    choices: tuple[Choice, ...]

    @property
    def rows(self) -> tuple[int, ...]:
        return tuple(c.row for c in self.choices)


def has_halves(cells: pd.DataFrame, metric: Metric) -> bool:
    """Whether the cells carry ``metric`` on both halves of the held-out anchors."""
    return all(f"{metric.name}_{h}" in cells and cells[f"{metric.name}_{h}"].notna().any()
               for h in ("select", "report"))


def _key(values: Sequence[object]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


def _hits(p: float, m: int) -> np.ndarray:
    """The report half's per-anchor hits of one cell, from its recall p over m anchors (a
    recall is a fraction of 0/1 hits, so this is that cell's rows, up to their order)."""
    ones = int(round(p * m))
    return np.r_[np.ones(ones), np.zeros(m - ones)]


def _reported(part: pd.DataFrame, metric: Metric, level: float, n_boot: int,
              key: tuple[str, ...]) -> ConfidenceInterval:
    col = f"{metric.name}_report"
    ok = part[part[col].notna()]
    if ANCHORS in ok and ok[ANCHORS].notna().all() and len(ok):
        rows = [_hits(float(p), int(m)) for p, m in zip(ok[col], ok[ANCHORS], strict=True)]
        return hierarchical_bootstrap(rows, n_boot, numpy_generator("selection", *key), level)
    mean = float(ok[col].mean()) if len(ok) else float("nan")
    return ConfidenceInterval(mean, float("nan"), float("nan"), level)


def choose(table: pd.DataFrame, cells: pd.DataFrame, group_by: Sequence[str], axis: str,
           metric: Metric, level: float = 0.95, n_boot: int = 2000) -> Selection:
    """The best row of ``table`` (one row per ``group_by`` setting, an aggregate of ``cells``)
    for each value of ``axis``, on ``metric``'s selection half when the cells have one.

    The chosen row has the best mean over ok seeds of ``<metric>_select`` (ties: the first in
    ``table``'s order); without halves, the best ``<metric>_mean`` of ``table``. A value whose
    settings all lack the metric (failed cells) keeps its first row, chosen on nothing.
    """
    split = has_halves(cells, metric)
    column = f"{metric.name}_select" if split else metric.name
    by_key = {_key(k): ok_cells(part) for k, part in groups(cells, list(group_by))}
    best: dict[str, tuple[float, int, tuple[str, ...]]] = {}
    first: dict[str, int] = {}
    for i, row in enumerate(table.itertuples(index=False)):
        first.setdefault(str(getattr(row, axis)), i)
        key = _key([getattr(row, g) for g in group_by])
        part = by_key.get(key)
        if part is None or not len(part):
            continue
        value = float(part[column].mean()) if column in part else float("nan")
        if not np.isfinite(value):
            continue
        name = str(getattr(row, axis))
        score = value if metric.higher else -value
        if name not in best or score > best[name][0]:
            best[name] = (score, i, key)
    choices = []
    for name, (score, i, key) in best.items():
        part = by_key[key]
        reported = _reported(part, metric, level, n_boot, key) if split else None
        choices.append(Choice(name, i, score if metric.higher else -score, reported,
                              int(part[column].notna().sum())))
    choices += [Choice(name, i, float("nan"), None, 0) for name, i in first.items()
                if name not in best]
    choices.sort(key=lambda c: c.row)
    return Selection(axis, metric, split, tuple(choices))


def display(selection: Selection, table: pd.DataFrame, axes: Sequence[str]
            ) -> tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """The board's table of the chosen settings (title, header, rows as text), in table order;
    empty without halves (the section's rows then show the values they were chosen on)."""
    if not selection.split or not selection.choices:
        return ("", (), ())
    m = selection.metric
    unit = " (%)" if m.unit == "%" else ""
    level = next((c.reported.level for c in selection.choices if c.reported is not None), 0.95)
    others = [a for a in axes if a != selection.axis]
    header = (axis_header(selection.axis), "Setting", f"{m.label}{unit}, selection half",
              f"{m.label}{unit}, report half [{pct(level)}: seeds, then anchors]", "Seeds")
    rows = []
    for c in selection.choices:
        row = table.iloc[c.row]
        setting = setting_text({a: row[a] for a in others})
        shown = (fmt_bounds(c.reported.estimate, c.reported.low, c.reported.high, m)
                 if c.reported is not None else "–")
        rows.append((c.value, setting, fmt_bounds(c.chosen_on, metric=m), shown, str(c.seeds)))
    title = (f"Best setting of each {selection.axis}: chosen on {m.label} over one half of the "
             "held-out anchors, reported on the other half")
    return (title, header, tuple(rows))
