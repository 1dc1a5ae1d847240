"""Paired comparisons of loss variants against a baseline variant, seed by seed.

For a variant v and the baseline b, cells are matched on the setting (``pair_on``: the other grid
axes) and the seed, so each pair shares data, initial draws and every axis but the variant. The
per-pair difference is v − b; its mean gets a Student-t interval, a paired t-test
(``scipy.stats.ttest_rel``) and a Wilcoxon signed-rank test (``scipy.stats.wilcoxon``). No
correction for multiple comparisons is applied: with many settings × metrics some p < 0.05 are
expected by chance, which the report notes say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import pandas as pd

from pipeline.report.grid.tables import (
    as_columns,
    axes_in,
    check_columns,
    metrics_in,
    ok_cells,
)
from pipeline.stats.comparisons.inference import PairedResult, paired, paired_many
from pipeline.stats.uncertainty import check_level

__all__ = ["RESULT_COLUMNS", "PairedResult", "compare_to_baseline", "default_pair_on",
           "mark_significant", "paired"]

RESULT_COLUMNS = ("baseline", "metric", "n_pairs", "baseline_mean", "variant_mean", "diff_mean",
                  "diff_lo", "diff_hi", "t_stat", "p_value", "wilcoxon_p", "significant")


def default_pair_on(board: pd.DataFrame, axis: str) -> list[str]:
    """The grid axes present in ``board`` other than ``axis`` and ``seed``."""
    return [c for c in axes_in(board) if c not in (axis, "seed")]


def _check_unique(cells: pd.DataFrame, keys: list[str], side: str) -> None:
    dup = cells.duplicated(keys, keep=False)
    if dup.any():
        first = cells.loc[dup, keys].iloc[0].to_dict()
        raise ValueError(f"pair_on = {keys[:-1]}: several {side} cells share the key {first}; "
                         "add the axis that tells them apart to pair_on")


def _matched(ok: pd.DataFrame, axis: str, variant: object, baseline: str, keys: list[str],
             metrics: list[str]) -> pd.DataFrame:
    var = ok.loc[ok[axis] == variant, keys + metrics]
    base = ok.loc[ok[axis] == baseline, keys + metrics]
    _check_unique(var, keys, f"{axis}={variant}")
    _check_unique(base, keys, f"{axis}={baseline}")
    return var.merge(base, on=keys, suffixes=("__v", "__b"))


def compare_to_baseline(board: pd.DataFrame, baseline: str = "infonce", axis: str = "loss",
                        pair_on: Sequence[str] | None = None,
                        metrics: Sequence[str] | None = None, level: float = 0.95,
                        alpha: float = 0.05, by_setting: bool = True) -> pd.DataFrame:
    """One row per (variant ≠ baseline, setting, metric) with the ``RESULT_COLUMNS``.

    pair_on: the setting columns (None: ``default_pair_on``); cells pair on pair_on + seed.
    metrics: None means every registered metric the board has.
    by_setting=False pools the pairs of all settings into one row per (variant, metric).
    Settings without both variants are left out; only ``status == 'ok'`` cells count.
    """
    check_level(level)
    check_columns(board, [axis], "axis")
    if "seed" not in board:
        raise ValueError("board: no 'seed' column; paired differences match cells by seed")
    values = sorted(board[axis].dropna().unique(), key=str)
    if baseline not in values:
        raise ValueError(f"baseline = {baseline!r}: not a value of {axis!r}; "
                         f"allowed: {', '.join(map(str, values))}")
    pair_on = as_columns(pair_on, "pair_on", default_pair_on(board, axis))
    metrics = as_columns(metrics, "metrics", metrics_in(board))
    check_columns(board, pair_on, "pair_on", allowed=[c for c in board if c not in (axis, "seed")])
    check_columns(board, metrics, "metrics", numeric=True)
    ok, keys, heads, pairs = ok_cells(board), [*pair_on, "seed"], [], []
    for variant in (v for v in values if v != baseline):
        matched = _matched(ok, axis, variant, baseline, keys, metrics)
        setting_cols = pair_on if by_setting else []
        groups = (matched.groupby(setting_cols, dropna=False, sort=True) if setting_cols
                  else [((), matched)] if len(matched) else [])
        for key, part in groups:
            key = key if isinstance(key, tuple) else (key,)
            head = {axis: variant, **dict(zip(setting_cols, key, strict=True)),
                    "baseline": baseline}
            for m in metrics:
                heads.append(head | {"metric": m})
                pairs.append((part[f"{m}__v"].to_numpy(float), part[f"{m}__b"].to_numpy(float)))
    rows = [h | asdict(r) for h, r in zip(heads, paired_many(pairs, level, alpha), strict=True)]
    columns = [axis, *(pair_on if by_setting else []), *RESULT_COLUMNS]
    return pd.DataFrame(rows, columns=columns)


def mark_significant(table: pd.DataFrame, comparison: pd.DataFrame,
                     axis: str = "loss") -> pd.DataFrame:
    """Copy of an ``aggregate`` table with ``<m>_sig`` (bool) and ``<m>_p`` per compared metric.

    Rows match the comparison on ``axis`` and its setting columns, which must all be group
    columns of ``table``; baseline rows and unmatched rows get False / NaN.
    """
    settings = [c for c in comparison.columns if c not in (*RESULT_COLUMNS, axis)]
    missing = [c for c in [axis, *settings] if c not in table.columns]
    if missing:
        raise ValueError(f"table: missing group columns {missing} needed to match the "
                         f"comparison; aggregate with group_by including {[axis, *settings]}")
    out = table.copy()
    for m, part in comparison.groupby("metric", sort=False):
        cols = part[[axis, *settings, "significant", "p_value"]].rename(
            columns={"significant": f"{m}_sig", "p_value": f"{m}_p"})
        out = out.drop(columns=[f"{m}_sig", f"{m}_p"], errors="ignore").merge(
            cols, on=[axis, *settings], how="left")
        out[f"{m}_sig"] = out[f"{m}_sig"].astype("boolean").fillna(False).astype(bool)
    out.attrs = dict(table.attrs)
    return out
