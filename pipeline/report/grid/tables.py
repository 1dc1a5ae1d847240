"""Leaderboard aggregation: one row per setting, mean and t-interval over seeds, ranks, marks.

Input is the per-cell table (``reports/cells.csv``, one row per cell). Only cells with
``status == 'ok'`` enter the statistics; failed cells are counted per group and their ids kept
in the provenance, so a group whose every seed failed still appears (with NaN statistics).
Intervals are :func:`pipeline.stats.seed_ci`, or for a bounded metric (a fraction,
``Metric.bounds``) :func:`pipeline.stats.intervals.bounded_seed_ci`, which stays in its range;
directions come from the metric registry.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pipeline.grid import GRID_AXES
from pipeline.metrics import Metric, is_metric, lookup
from pipeline.stats import seed_ci
from pipeline.stats.comparisons.inference import welch_tie
from pipeline.stats.intervals import bounded_seed_ci
from pipeline.stats.uncertainty import check_level

# per-cell provenance, one joined value per row of an aggregate
JOINED = ("code_fingerprint", "git_sha", "params_hash", "dataset_hash", "hardware", "device",
          "energy_source", "source")
# what a group of cells cost: column -> (per-cell column, how the group's values combine):
# ``sum`` over the cells that have a value (NaN when none has), ``sum_all`` NaN unless every cell
# has one (an energy total of some cells is no total), ``max`` the largest
COST_TOTALS = {"wall_seconds": ("wall_seconds", "sum"),
               "train_seconds_total": ("train_seconds", "sum"),
               "energy_joules_total": ("energy_joules", "sum_all"),
               "peak_rss_bytes_max": ("peak_rss_bytes", "max"),
               "cuda_peak_bytes_max": ("cuda_peak_bytes", "max")}
PROVENANCE = ("cell_ids", *JOINED, *COST_TOTALS)


def present(columns: Sequence[str], board: pd.DataFrame) -> list[str]:
    """The subset of ``columns`` that ``board`` has, in the given order."""
    return [c for c in columns if c in board.columns]


def metrics_in(board: pd.DataFrame) -> list[str]:
    """Every numeric column of ``board`` that the registry knows, in column order."""
    return [c for c in board.columns if is_metric(c) and pd.api.types.is_numeric_dtype(board[c])
            and not pd.api.types.is_bool_dtype(board[c])]


def axes_in(board: pd.DataFrame) -> list[str]:
    """The grid axes ``board`` has (seed included), in :data:`GRID_AXES` order."""
    return present(GRID_AXES, board)


def varying(board: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The ``columns`` that take more than one value in ``board``."""
    return [c for c in columns if c in board and board[c].nunique(dropna=False) > 1]


def rank(values: pd.Series, metric: Metric) -> pd.Series:
    """Competition rank, 1 = best: ties share the smallest rank ("1, 2, 2, 4"); NaN stays NaN."""
    return values.rank(method="min", ascending=not metric.higher, na_option="keep")


def as_columns(value: Sequence[str] | None, name: str, default: Sequence[str]) -> list[str]:
    """``value`` as a list of column names (``default`` when None); a bare string is an error."""
    if isinstance(value, str):
        raise ValueError(f"{name} = {value!r}: expected a list of column names, not a string")
    return list(default if value is None else value)


def check_columns(board: pd.DataFrame, columns: Sequence[str], name: str,
                  allowed: Sequence[str] | None = None, numeric: bool = False) -> None:
    """ValueError naming the parameter, the unknown value and the allowed ones."""
    allowed = list(allowed) if allowed is not None else list(board.columns)
    if numeric:
        allowed = [c for c in allowed if c in board and pd.api.types.is_numeric_dtype(board[c])]
    for col in columns:
        if col not in allowed:
            raise ValueError(f"{name}: unknown column {col!r}; "
                             f"allowed: {', '.join(map(str, allowed))}")


def plain(value: object) -> object:
    """A numpy scalar as the Python value (for JSON); anything else unchanged."""
    return value.item() if isinstance(value, np.generic) else value


def ok_cells(board: pd.DataFrame) -> pd.DataFrame:
    """Rows with ``status == 'ok'`` (all rows when the board has no status column)."""
    return board[board["status"] == "ok"] if "status" in board else board


def _texts(values: pd.Series) -> list[str | None]:
    """Each value as text, None where it is missing (NaN, None) or empty."""
    return [None if missing or str(v) == "" else str(v)
            for v, missing in zip(values, values.isna(), strict=True)]


def _joined(texts: Sequence[str | None]) -> str:
    """The distinct texts, sorted, joined by commas (missing ones left out)."""
    return ",".join(sorted({t for t in texts if t is not None}))


def _numbers(values: pd.Series) -> np.ndarray:
    """The values as floats, NaN where one is missing or not a number."""
    return pd.to_numeric(values, errors="coerce").astype(float).to_numpy()


def cost_total(values: pd.Series, how: str) -> float:
    """One group's cost from its cells' values, as :data:`COST_TOTALS` says (``sum``,
    ``sum_all``, ``max``); NaN when there is nothing to combine."""
    return _combine(_numbers(values), how)


def _combine(x: np.ndarray, how: str) -> float:
    known = ~np.isnan(x)
    if how == "max":
        return float(x[known].max()) if known.any() else np.nan
    if how == "sum_all" and (not known.all() or not len(x)):
        return np.nan
    if how in ("sum", "sum_all"):  # as pandas' sum(min_count=1): NaN taken as 0
        return float(np.where(known, x, 0.0).sum()) if known.any() else np.nan
    raise ValueError(f"how = {how!r}: allowed: sum, sum_all, max")


class _ColumnsOf:
    """A board's provenance and cost columns, converted once (texts, floats), so that each
    group's values are an index into arrays instead of a slice of the frame."""

    def __init__(self, board: pd.DataFrame):
        self.texts = {col: _texts(board[col]) for col in ("cell_id", *JOINED) if col in board}
        self.costs = {col: (_numbers(board[source]), how)
                      for col, (source, how) in COST_TOTALS.items() if source in board}

    def provenance(self, rows: np.ndarray) -> dict[str, object]:
        """The provenance of the cells at positions ``rows``: :data:`PROVENANCE`'s columns."""
        out: dict[str, object] = {}
        for col in ("cell_ids", *JOINED):
            texts = self.texts.get("cell_id" if col == "cell_ids" else col)
            out[col] = _joined([texts[i] for i in rows]) if texts is not None else ""
        for col in COST_TOTALS:
            if col in self.costs:
                x, how = self.costs[col]
                out[col] = _combine(x[rows], how)
            elif col == "wall_seconds":
                out[col] = np.nan
        return out


def cost_totals(board: pd.DataFrame, by: str = "loss") -> pd.DataFrame:
    """What the cells cost per value of ``by`` (every value of the column, and an ``all`` row
    last): ``cells`` and ``ok``; :data:`COST_TOTALS` over each group's cells (failed cells
    included: they ran too); ``samples_per_second_median`` over its ok cells. A board without
    ``by`` gets the ``all`` row only. Columns the board lacks are left out."""
    parts = list(board.groupby(by, sort=True)) if by in board else []
    rows = []
    for key, part in [*parts, ("all", board)]:
        row: dict[str, object] = {by: key, "cells": int(len(part)),
                                  "ok": int(len(ok_cells(part)))}
        for col, (source, how) in COST_TOTALS.items():
            if source in part:
                row[col] = cost_total(part[source], how)
        if "samples_per_second" in part:
            rate = pd.to_numeric(ok_cells(part)["samples_per_second"], errors="coerce")
            row["samples_per_second_median"] = (float(rate.median()) if rate.notna().any()
                                                else np.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def groups(board: pd.DataFrame, group_by: Sequence[str]) -> list[tuple[tuple, pd.DataFrame]]:
    """(key, cells) per combination of ``group_by`` values, sorted by key."""
    if not group_by:
        return [((), board)]
    return [(k if isinstance(k, tuple) else (k,), part)
            for k, part in board.groupby(list(group_by), dropna=False, sort=True)]


def group_rows(board: pd.DataFrame, group_by: Sequence[str]
               ) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """The groups of ``board`` by ``group_by``, sorted by key (missing values are a key too):
    (one row per group: its ``group_by`` values, with the board's dtypes; each group's row
    positions in ``board``, in the board's order)."""
    if not group_by:
        return pd.DataFrame(index=range(1)), [np.arange(len(board))]
    if not len(board):
        return board[list(group_by)].iloc[:0], []
    codes = board.groupby(list(group_by), dropna=False, sort=True).ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    starts = np.flatnonzero(np.diff(codes[order], prepend=-1))
    rows = np.split(order, starts[1:])
    keys = board[list(group_by)].iloc[[r[0] for r in rows]].reset_index(drop=True)
    return keys, rows


def ok_mask(board: pd.DataFrame) -> np.ndarray:
    """Per row, whether its ``status`` is ``'ok'`` (every row when there is no status)."""
    return ((board["status"] == "ok").to_numpy() if "status" in board
            else np.ones(len(board), dtype=bool))


def _changed(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(known, true) per row of a ``changed_<s>`` column: a value is there; it is truthy."""
    known = values.notna().to_numpy()
    return known, np.array([k and bool(v) for v, k in zip(values, known, strict=True)],
                           dtype=bool)


def aggregate(board: pd.DataFrame, group_by: Sequence[str] | None = None,
              metrics: Sequence[str] | None = None, level: float = 0.95) -> pd.DataFrame:
    """One row per group of cells: ``<m>_mean/_lo/_hi`` (:func:`pipeline.stats.seed_ci` over the
    group's ok cells, normally its seeds; for a bounded metric, a fraction,
    :func:`pipeline.stats.intervals.bounded_seed_ci`: on the logit scale, inside its range),
    ``<m>_rank`` for ranked metrics (registry), ``n_seeds`` (ok cells), ``failed`` (other
    cells), ``changed_<s>_n/_of`` (cells where training changed a statistic, of those where it
    is known) and the provenance columns of ``PROVENANCE``.

    group_by: None means the grid axes present but the seed; metrics: None means every registered
    metric present. Each metric's interval uses its non-NaN values. Rows are sorted by the group
    columns; the table's ``attrs`` record group_by, metrics and level.
    """
    check_level(level)
    group_by = as_columns(group_by, "group_by", [a for a in axes_in(board) if a != "seed"])
    metrics = as_columns(metrics, "metrics", metrics_in(board))
    check_columns(board, group_by, "group_by")
    check_columns(board, metrics, "metrics", numeric=True)
    if not len(board):
        raise ValueError("board: no cells to aggregate (empty table)")
    keys, rows = group_rows(board, group_by)
    ok = ok_mask(board)
    good = [r[ok[r]] for r in rows]
    columns: dict[str, list[object]] = {c: list(keys[c]) for c in group_by}
    columns["n_seeds"] = [len(g) for g in good]
    columns["failed"] = [len(r) - len(g) for r, g in zip(rows, good, strict=True)]
    for m in metrics:
        values = board[m].to_numpy(dtype=float)
        bounds = lookup(m).bounds if is_metric(m) else None
        cis = [seed_ci(x[~np.isnan(x)], level) if bounds is None
               else bounded_seed_ci(x[~np.isnan(x)], level, *bounds)
               for x in (values[g] for g in good)]
        columns |= {f"{m}_mean": [ci.estimate for ci in cis], f"{m}_lo": [ci.low for ci in cis],
                    f"{m}_hi": [ci.high for ci in cis]}
    for col in (c for c in board.columns if c.startswith("changed_")):
        known, true = _changed(board[col])
        columns[f"{col}_n"] = [int(true[g].sum()) for g in good]
        columns[f"{col}_of"] = [int(known[g].sum()) for g in good]
    each = _ColumnsOf(board)
    provenance = [each.provenance(r) for r in rows]
    columns |= {c: [p[c] for p in provenance] for c in provenance[0]}
    table = pd.DataFrame(columns)
    for m in metrics:
        metric = lookup(m) if is_metric(m) else None
        if metric is not None and metric.ranked:
            pos = table.columns.get_loc(f"{m}_hi") + 1
            table.insert(pos, f"{m}_rank", rank(table[f"{m}_mean"], metric))
    table.attrs.update(group_by=group_by, metrics=metrics, level=level)
    return table


def tied_with_best(values: Sequence[np.ndarray], means: np.ndarray, metric: Metric,
                   alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(best, tied) booleans per row for one ranked metric.

    best: the row(s) with the best mean. tied: another row whose seeds do not differ from the
    best row's by Welch's t-test at ``alpha`` (``p >= alpha``); only where both rows have two
    or more seeds, so a single seed never marks a tie.
    """
    best = np.zeros(len(means), dtype=bool)
    tied = np.zeros(len(means), dtype=bool)
    finite = np.isfinite(means)
    if not finite.any():
        return best, tied
    target = np.nanmax(means) if metric.higher else np.nanmin(means)
    best = finite & (means == target)
    ref = values[int(np.flatnonzero(best)[0])]
    for i, x in enumerate(values):
        if not best[i] and finite[i]:
            tied[i] = welch_tie(x, ref, alpha).tied
    return best, tied
