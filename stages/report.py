"""Leaderboard (Markdown, CSV), metrics.json and plots; final statistics to each cell's MLflow run."""

from __future__ import annotations

import sys

import pandas as pd

from pipeline.report import leaderboard, one_over_k, plots
from pipeline.runtime import storage
from pipeline.runtime.context import (
    BOUNDS,
    CELLS,
    FINITE_K,
    REPORTS,
    SEARCH,
    STATS,
    read_grid,
    resolved_params,
)
from pipeline.runtime.tracking import Tracker


def _histories(cell_ids: list[str]) -> pd.DataFrame:
    frames = [pd.read_parquet(storage.cell_dir(CELLS, c) / "history.parquet") for c in cell_ids
              if (storage.cell_dir(CELLS, c) / "history.parquet").exists()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _log_to_mlflow(board: pd.DataFrame, stats: pd.DataFrame, tracker: Tracker) -> None:
    runs = tracker.cell_runs()
    metric_cols = [c for c in board.columns if c not in leaderboard.GRID_COLUMNS
                   and pd.api.types.is_numeric_dtype(board[c]) and c != "rank"]
    for row in board.itertuples(index=False):
        if row.cell_id not in runs:
            continue
        values = [(c, getattr(row, c), 0) for c in metric_cols if pd.notna(getattr(row, c))]
        tracker.log(runs[row.cell_id].info.run_id, metrics=values)
    parent = tracker.latest_parent() or tracker.start_parent("report", {})
    tracker.client.log_artifacts(parent, str(REPORTS), artifact_path="reports")


def main(argv: list[str] | None = None) -> int:
    params = resolved_params()
    grid = read_grid()
    records = {c: storage.read_json(storage.cell_dir(CELLS, c) / "cell.json") for c in grid.cell_id
               if (storage.cell_dir(CELLS, c) / "cell.json").exists()}
    stats, search = pd.read_parquet(STATS), pd.read_parquet(SEARCH)
    bounds, finite_k = pd.read_parquet(BOUNDS), pd.read_parquet(FINITE_K)
    board = leaderboard.build(grid, records, stats, search, params.train.epochs, bounds)
    REPORTS.mkdir(exist_ok=True)
    (REPORTS / "leaderboard.md").write_text(leaderboard.to_markdown(board))
    board.to_csv(REPORTS / "leaderboard.csv", index=False)
    metrics = leaderboard.summary_metrics(board)
    if len(finite_k):
        metrics["one_over_k"] = one_over_k.write(finite_k, grid, REPORTS)
    storage.atomic_write_json(REPORTS / "metrics.json", metrics)
    history = _histories(list(grid.cell_id))
    history = history.rename(columns={c: f"train_{c}" for c in history.columns
                                      if c not in ("epoch", "cell_id")})
    history = history.merge(grid, on="cell_id", how="left")
    history.assign(cell=history.loss + "/" + history.arch + "/k=" + history.k.astype(str) + "/tau="
                   + history.tau.astype(str)).to_csv(REPORTS / "history.csv", index=False)
    plots.metric_vs_k(board, "risk_k", REPORTS / "plots" / "risk_vs_k.png", "held-out risk R(φ; k, τ)")
    plots.metric_vs_k(board, "recall_at_1", REPORTS / "plots" / "recall_vs_k.png", "held-out recall@1")
    _log_to_mlflow(board, stats, Tracker(params.tracking.uri, params.tracking.experiment))
    n_failed = int((board.status != "ok").sum())
    print(f"report: leaderboard of {len(board)} cells ({n_failed} failed) -> "
          f"{(REPORTS / 'leaderboard.md').resolve()}")
    if n_failed:
        print(f"report: {n_failed} of {len(board)} cells failed; reasons in the leaderboard",
              file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
