"""One row per cell: grid values, status, training, search and distribution statistics."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pipeline.report.controls import control_columns, supervised_columns

GRID_COLUMNS = ["objective", "loss", "arch", "k", "tau", "tau_schedule", "n", "embed_dim", "batch_size",
                "seed"]
STAT_COLUMNS = ["cv", "ad_mean", "ad_pass_frac", "dp_p_mean", "dp_pass_frac", "align", "uniform",
                "eff_rank"]
INTERVAL_COLUMNS = [f"{c}_{end}" for c in STAT_COLUMNS[:5] for end in ("lo", "hi")]
NULL_COLUMNS = [f"null_{c}" for c in STAT_COLUMNS[:5]]  # the same diagnostics for Gaussian data
REPRESENTATION_PREFIX = {"raw": "", "normalized": "norm_", "projected": "proj_"}
SEARCH_COLUMNS = ["risk_k", "risk_k_se", "risk_keval", "recall_at_1", "recall_at_5", "recall_at_10"]
# Theorem 1 (data/bounds.parquet) under the leaderboard's names
BOUND_COLUMNS = {"total": "bound", "measured_gap": "gen_gap", "tightness": "tightness",
                 "vacuous": "vacuous", "bound_status": "bound_status"}
# (column, higher is better) for ranks and for the "best" entries of metrics.json
RANKED = {"recall_at_1": True, "risk_keval": False}  # comparable across cells (same k_eval)
MARKDOWN_COLUMNS = ["rank", *GRID_COLUMNS, "status", "recall_at_1", "risk_keval", "ce", "r_k",
                    "finite_k_gap", "bound", "gen_gap", "cv", "ad_mean", "ad_pass_frac",
                    "dp_p_mean", "dp_pass_frac"]


def build(grid: pd.DataFrame, records: Mapping[str, Mapping[str, Any]], stats: pd.DataFrame,
          search: pd.DataFrame, final_epoch: int, bounds: pd.DataFrame | None = None,
          params_hash: str = "", level: float = 0.95) -> pd.DataFrame:
    """Join the stage tables into the leaderboard.

    grid: ``data/grid.json`` cells (with status and reason); records: ``cell.json`` per cell id; stats: one row per
    (cell, epoch, representation); the trained encoder's rows (epoch = ``final_epoch``) go in,
    raw columns under their names, normalised ones with ``norm_``, projections with ``proj_``.
    """
    board = grid.copy()
    board["final_loss"] = board.cell_id.map(lambda c: records.get(c, {}).get("final_loss"))
    board["wall_seconds"] = board.cell_id.map(lambda c: records.get(c, {}).get("wall_seconds"))
    board["reason"] = board["reason"].fillna("")  # grid.json: the training failure, if any
    for key in ("git_sha", "dataset_hash", "hardware"):
        board[key] = board.cell_id.map(lambda c, key=key: records.get(c, {}).get(key, ""))
    board["params_hash"] = params_hash
    final = stats[stats.epoch == final_epoch] if len(stats) else stats
    for rep, prefix in REPRESENTATION_PREFIX.items():
        part = final[final.representation == rep] if len(final) else pd.DataFrame(columns=["cell_id"])
        if rep != "raw" and part.empty:
            continue
        cols = [c for c in STAT_COLUMNS + INTERVAL_COLUMNS + NULL_COLUMNS if c in part.columns]
        part = part[["cell_id", *cols, "status", "reason"]].rename(
            columns={c: prefix + c for c in cols} | {"status": f"{prefix or 'raw_'}stats_status",
                                                      "reason": f"{prefix or 'raw_'}stats_reason"})
        board = board.merge(part, on="cell_id", how="left")
    if len(stats) and final_epoch != 0 and (stats.epoch == 0).any():  # the untrained control
        raw = stats[stats.representation == "raw"]
        board = board.merge(control_columns(raw[raw.epoch == final_epoch], raw[raw.epoch == 0],
                                            level), on="cell_id", how="left")
    board = supervised_columns(board)
    if len(search):
        board = board.merge(search, on="cell_id", how="left")
    if bounds is not None and len(bounds):
        cols = [c for c in BOUND_COLUMNS if c in bounds.columns]
        board = board.merge(bounds[["cell_id", *cols]].rename(columns=BOUND_COLUMNS),
                            on="cell_id", how="left")
    board = _mark_failures(board)
    sort_col = "recall_at_1" if "recall_at_1" in board else "final_loss"
    board = board.sort_values([sort_col, "cell_id"], ascending=[not RANKED[sort_col], True],
                              na_position="last").reset_index(drop=True)
    board.insert(0, "rank", range(1, len(board) + 1))
    return board


def _mark_failures(board: pd.DataFrame) -> pd.DataFrame:
    """A cell is failed when training, statistics or search failed; the reason says which."""
    board = board.copy()
    for col, stage in (("raw_stats_status", "stats"), ("search_status", "search")):
        if col not in board:
            continue
        bad = board[col].notna() & (board[col] != "ok") & (board.status == "ok")
        reason_col = col.replace("status", "reason")
        board.loc[bad, "reason"] = stage + ": " + board.loc[bad, reason_col].astype(str)
        board.loc[bad, "status"] = "failed"
    return board


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def to_markdown(board: pd.DataFrame, columns: Sequence[str] = MARKDOWN_COLUMNS) -> str:
    cols = [c for c in columns if c in board.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in board[cols].itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v) for v in row) + " |")
    failed = board[board.status != "ok"]
    notes = [f"- `{r.cell_id}`: {str(r.reason).splitlines()[0] if r.reason else 'failed'}"
             for r in failed.itertuples()]
    text = "\n".join(lines) + "\n"
    if notes:
        text += "\nFailed cells:\n\n" + "\n".join(notes) + "\n"
    return text


def summary_metrics(board: pd.DataFrame) -> dict[str, Any]:
    """``reports/metrics.json``: counts, means of the main metrics, and the best cell per metric."""
    ok = board[board.status == "ok"]
    out: dict[str, Any] = {"cells": int(len(board)), "failed": int((board.status != "ok").sum())}
    means = {c: float(ok[c].mean()) for c in [*RANKED, "cv", "ad_pass_frac", "dp_pass_frac"]
             if c in ok and ok[c].notna().any()}
    out["mean"] = {k: round(v, 6) for k, v in means.items()}
    best = {}
    for col, higher in RANKED.items():
        if col in ok and ok[col].notna().any():
            row = ok.loc[ok[col].idxmax() if higher else ok[col].idxmin()]
            best[col] = {"cell_id": row.cell_id, "value": round(float(row[col]), 6),
                         **{g: _plain(row[g]) for g in GRID_COLUMNS if g in row}}
    out["best"] = best
    return out


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value
