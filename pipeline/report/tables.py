"""Leaderboard aggregation: one row per group of cells, mean and t-interval over seeds, ranks.

Input is the per-cell leaderboard (``reports/leaderboard.csv``, one row per cell). Only cells with
``status == 'ok'`` enter the statistics; failed cells are counted per group and their ids kept in
the provenance, so a group whose every seed failed still appears (with NaN statistics).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

GRID_AXES = ("objective", "loss", "k", "tau", "tau_schedule", "n", "arch", "embed_dim",
             "batch_size", "seed")
# Used by stages/cli only when params give no `report:` section (params.yaml is the source).
DEFAULT_GROUP_BY = ("loss", "objective", "arch", "k", "tau", "tau_schedule", "n", "embed_dim",
                    "batch_size")
DEFAULT_METRICS = ("recall_at_1", "risk_keval", "risk_k", "align", "uniform", "eff_rank", "cv",
                   "ad_pass_frac", "dp_pass_frac")
DEFAULT_BASELINE = "infonce"
PROVENANCE = ("cell_ids", "git_sha", "params_hash", "dataset_hash", "hardware", "wall_seconds")

# Direction of "better" for the metrics whose order means something across cells. Distribution
# statistics (cv, ad_*, dp_*), bound terms, gaps and training losses get no rank on purpose: a
# thinner shell or a more Gaussian coordinate is a property to report, not a score, and training
# losses of different variants are on different scales. `norm_`/`proj_` prefixes share the base
# metric's direction; `control_` (untrained encoder) columns are never ranked.
HIGHER_IS_BETTER: dict[str, bool] = {
    "recall_at_1": True, "recall_at_5": True, "recall_at_10": True,
    "risk_keval": False,  # risk_k is not ranked: it is measured at each cell's own training k
    "align": False,      # mean squared distance of positive pairs (Wang & Isola): lower is better
    "uniform": False,    # log mean Gaussian potential: lower is more uniform
    "eff_rank": True,    # effective rank of the embedding covariance: higher is less collapsed
}
_SHARED_PREFIXES = ("norm_", "proj_")


def direction(metric: str, overrides: Mapping[str, bool] | None = None) -> bool | None:
    """True when higher is better, False when lower is, None when the metric is not ranked."""
    table = {**HIGHER_IS_BETTER, **(overrides or {})}
    if metric in table:
        return table[metric]
    if metric.startswith("control_"):
        return None
    for prefix in _SHARED_PREFIXES:
        if metric.startswith(prefix):
            return table.get(metric[len(prefix):])
    return None


def present(columns: Iterable[str], board: pd.DataFrame) -> list[str]:
    """The subset of ``columns`` that ``board`` has, in the given order."""
    return [c for c in columns if c in board.columns]


def t_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """``(mean, lo, hi)``: Student-t interval mean ± t_{(1+level)/2, n−1} · s/√n (s with ddof=1).

    NaN values are dropped first; bounds are NaN with fewer than two values, all NaN with none.
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return (np.nan, np.nan, np.nan)
    mean = float(x.mean())
    if x.size < 2:
        return (mean, np.nan, np.nan)
    half = float(sps.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))
    return (mean, mean - half, mean + half)


def rank(values: pd.Series, higher_is_better: bool) -> pd.Series:
    """Competition rank, 1 = best: ties share the smallest rank ("1, 2, 2, 4"); NaN stays NaN."""
    return values.rank(method="min", ascending=not higher_is_better, na_option="keep")


def check_level(level: float, name: str = "level") -> None:
    """ValueError unless 0 < level < 1."""
    if not 0 < level < 1:
        raise ValueError(f"{name} = {level!r}: confidence level must be strictly between 0 and 1")


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
            raise ValueError(f"{name}: unknown column {col!r}; allowed: {', '.join(map(str, allowed))}")


def ok_cells(board: pd.DataFrame) -> pd.DataFrame:
    """Rows with ``status == 'ok'`` (all rows when the board has no status column)."""
    return board[board["status"] == "ok"] if "status" in board else board


def _join_unique(values: pd.Series) -> str:
    seen = [str(v) for v in dict.fromkeys(values.dropna()) if str(v) != ""]
    return ",".join(sorted(seen))


def _provenance(cells: pd.DataFrame) -> dict[str, object]:
    out: dict[str, object] = {}
    for col in PROVENANCE:
        if col == "cell_ids":
            out[col] = _join_unique(cells["cell_id"]) if "cell_id" in cells else ""
        elif col == "wall_seconds":
            out[col] = (float(cells[col].sum(min_count=1)) if col in cells else np.nan)
        else:
            out[col] = _join_unique(cells[col]) if col in cells else ""
    return out


def _group_row(cells: pd.DataFrame, metrics: Sequence[str], level: float) -> dict[str, object]:
    good = ok_cells(cells)
    row: dict[str, object] = {"n_seeds": int(len(good)), "failed": int(len(cells) - len(good))}
    for m in metrics:
        mean, lo, hi = t_interval(good[m].to_numpy(dtype=float), level)
        row |= {f"{m}_mean": mean, f"{m}_lo": lo, f"{m}_hi": hi}
    return row | _provenance(cells)


def aggregate(board: pd.DataFrame, group_by: Sequence[str] | None = None,
              metrics: Sequence[str] | None = None, level: float = 0.95,
              higher_is_better: Mapping[str, bool] | None = None) -> pd.DataFrame:
    """One row per group of cells: ``<m>_mean/_lo/_hi`` (t-interval over the group's ok cells,
    normally its seeds), ``<m>_rank`` for ranked metrics (see ``HIGHER_IS_BETTER``), ``n_seeds``
    (ok cells), ``failed`` (other cells) and the provenance columns of ``PROVENANCE``.

    group_by / metrics: None means the defaults present in ``board``. Each metric's interval uses
    its non-NaN values, so a metric missing for one seed has a wider interval, not a wrong mean.
    Rows are sorted by the group columns; the table's ``attrs`` record group_by, metrics, level.
    """
    check_level(level)
    group_by = as_columns(group_by, "group_by", present(DEFAULT_GROUP_BY, board))
    metrics = as_columns(metrics, "metrics", present(DEFAULT_METRICS, board))
    check_columns(board, group_by, "group_by")
    check_columns(board, metrics, "metrics", numeric=True)
    if not len(board):
        raise ValueError("board: no cells to aggregate (empty table)")
    rows = []
    groups = board.groupby(group_by, dropna=False, sort=True) if group_by else [((), board)]
    for key, cells in groups:
        key = key if isinstance(key, tuple) else (key,)
        rows.append(dict(zip(group_by, key, strict=True)) | _group_row(cells, metrics, level))
    table = pd.DataFrame(rows)
    for m in metrics:
        better = direction(m, higher_is_better)
        if better is not None:
            pos = table.columns.get_loc(f"{m}_hi") + 1
            table.insert(pos, f"{m}_rank", rank(table[f"{m}_mean"], better))
    table.attrs.update(group_by=group_by, metrics=metrics, level=level)
    return table
