"""Leaderboard (Markdown, CSV), metrics.json and plots; final statistics to each cell's MLflow run."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from pipeline.config import ReportConfig
from pipeline.report import figures, leaderboard, one_over_k, papers
from pipeline.report.compare import compare_to_baseline, mark_significant
from pipeline.report.controls import control_summary
from pipeline.report.publish import write_tables
from pipeline.report.render import failure_notes, notes_for
from pipeline.report.tables import aggregate
from pipeline.runtime import storage
from pipeline.runtime.context import (
    BOUNDS,
    FINITE_K,
    REPORTS,
    RESOLVED,
    SEARCH,
    STATS,
    cell_folders,
    read_grid,
    resolved_params,
    tracking_uri,
)
from pipeline.runtime.tracking import Tracker, run_key


def _histories(folders: dict[str, storage.Dir]) -> pd.DataFrame:
    frames = [storage.read_frame(f / "history.parquet") for f in folders.values()
              if (f / "history.parquet").exists()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _log_to_mlflow(board: pd.DataFrame, tracker: Tracker) -> None:
    """Final statistics to each cell's run; every report file to the invocation's parent run."""
    runs = tracker.cell_runs()
    metric_cols = [c for c in board.columns if c not in leaderboard.GRID_COLUMNS
                   and pd.api.types.is_numeric_dtype(board[c]) and c != "rank"]
    for row in board.itertuples(index=False):
        run = runs.get(run_key(row.cell_id, row.version))
        if run is None:
            continue
        values = [(c, getattr(row, c), 0) for c in metric_cols if pd.notna(getattr(row, c))]
        tracker.log(run.info.run_id, metrics=values)
    parent = tracker.latest_parent() or tracker.start_parent("report", {})
    tracker.client.log_artifacts(parent, str(REPORTS), artifact_path="reports")


def publish(board: pd.DataFrame, stats: pd.DataFrame, bounds: pd.DataFrame,
            cfg: ReportConfig, folders: dict[str, storage.Dir]) -> None:
    """The publishable leaderboard (md, tex, csv, html: mean ± CI over seeds, ranks, provenance,
    paired comparisons against the baseline) and the figures."""
    metrics = [m for m in cfg.metrics if m in board.columns]
    table = aggregate(board, cfg.group_by, metrics, cfg.level)
    notes = notes_for(table, cfg.baseline) + failure_notes(board)
    if "stale" in board and board.stale.fillna(False).astype(bool).any():
        stale = board[board.stale.fillna(False).astype(bool)]
        notes.append(f"{len(stale)} cells are stale: trained by other code or data "
                     f"(train.on_code_change = keep; changed: "
                     f"{', '.join(sorted(set(stale.stale_because)))}): {', '.join(stale.cell_id)}")
    if "changed_cv" in board:
        notes.append("Trained vs untrained (control_*: the same encoder at epoch 0, same seed and "
                     "data). " + " ".join(control_summary(board)))
    comparison = pd.DataFrame()
    if cfg.baseline in set(board.loss):
        comparison = compare_to_baseline(board, cfg.baseline, "loss", metrics=metrics,
                                         level=cfg.level, alpha=cfg.alpha)
        table = mark_significant(table, comparison, "loss")
    comparison.to_csv(REPORTS / "comparison.csv", index=False)
    write_tables(table, REPORTS / "leaderboard", "contrastive-bench leaderboard", "tab:leaderboard",
                 notes)
    plots_dir = REPORTS / "plots"
    for axis in ("n", "embed_dim", "batch_size", "k"):
        if board[axis].nunique() > 1:  # Betser's claims: CV against batch size and d, per the other
            other = {"embed_dim": "batch_size", "batch_size": "embed_dim"}.get(axis)
            hue = ("loss", other) if other and board[other].nunique() > 1 else ("loss",)
            figures.metric_vs(board, plots_dir / f"cv_vs_{axis}", axis=axis, hue=hue,
                              control="control_cv" in board,
                              facet="tau" if board.tau.nunique() > 1 else None)
    if board.k.nunique() > 1 and "recall_at_1" in board:
        figures.metric_vs(board, plots_dir / "recall_vs_k", axis="k", metric="recall_at_1",
                      hue=("loss", "arch", "tau"))
    if stats.epoch.nunique() > 1:
        raw = stats[stats.representation == "raw"].merge(board[["cell_id", "loss"]], on="cell_id")
        figures.pass_rate_vs_epoch(raw, plots_dir / "pass_rate_vs_epoch")
    if "recall_at_1_mean" in table:
        figures.variant_comparison(table, plots_dir / "variant_recall_at_1", "recall_at_1")
    if "bound_status" in bounds:
        usable = bounds[bounds.bound_status.astype(str).str.startswith(("ok", "partial"))]
        terms = usable.drop(columns=["k", "tau"], errors="ignore").merge(
            board[["cell_id", "loss", "arch", "k", "tau"]], on="cell_id")
        if len(terms):
            figures.bound_terms(terms.head(12).rename(columns={"total": "bound",
                                                                 "measured_gap": "gap"}),
                                plots_dir / "bound_terms", label_cols=["loss", "arch", "k", "tau"])
    figures.norm_histograms(_norms(board, folders), plots_dir / "norm_histograms")


def _norms(board: pd.DataFrame, folders: dict[str, storage.Dir]) -> dict[str, np.ndarray]:
    """Held-out embedding norms of the best cell of each loss variant (by recall@1)."""
    out = {}
    ok = board[board.status == "ok"]
    for loss, part in ok.groupby("loss"):
        best = part.sort_values("recall_at_1", ascending=False).iloc[0] if "recall_at_1" in part \
            else part.iloc[0]
        z = storage.read_embeddings(folders[best.cell_id] / "embeddings.parquet", 0)
        out[f"{loss} ({best.arch}, k={best.k}, τ={best.tau:g})"] = np.linalg.norm(z, axis=1)
    return out


def main(argv: list[str] | None = None) -> int:
    params = resolved_params()
    grid = read_grid()
    folders = cell_folders(grid)
    records = {c: storage.read_json(f / "cell.json") for c, f in folders.items()
               if (f / "cell.json").exists()}
    stats, search = pd.read_parquet(STATS), pd.read_parquet(SEARCH)
    bounds, finite_k = pd.read_parquet(BOUNDS), pd.read_parquet(FINITE_K)
    board = leaderboard.build(grid, records, stats, search, params.train.epochs, bounds,
                              storage.file_sha256(RESOLVED)[:12], params.report.level)
    REPORTS.mkdir(exist_ok=True)
    (REPORTS / "cells.md").write_text(leaderboard.to_markdown(board))
    board.to_csv(REPORTS / "cells.csv", index=False)
    publish(board, stats, bounds, params.report, folders)
    metrics = leaderboard.summary_metrics(board)
    metrics["controls"] = control_summary(board)
    section, paper_rows, metrics["paper_claims"] = papers.side_by_side(board, params.data.name,
                                                                       params.report.level)
    (REPORTS / "paper_tables.md").write_text(section)
    paper_rows.to_csv(REPORTS / "paper_tables.csv", index=False)
    if len(finite_k):
        metrics["one_over_k"] = one_over_k.write(finite_k, grid, REPORTS)
    else:  # a grid without contrastive cells: an empty table keeps the DVC outputs complete
        pd.DataFrame(columns=["encoder", *one_over_k.CSV_COLUMNS]).to_csv(
            REPORTS / "one_over_k.csv", index=False)
    storage.atomic_write_json(REPORTS / "metrics.json", metrics)
    history = _histories(folders)
    history = history.rename(columns={c: f"train_{c}" for c in history.columns
                                      if c not in ("epoch", "cell_id")})
    history = history.merge(grid, on="cell_id", how="left")
    history.assign(cell=history.loss + "/" + history.arch + "/k=" + history.k.astype(str) + "/tau="
                   + history.tau.astype(str)).to_csv(REPORTS / "history.csv", index=False)
    _log_to_mlflow(board, Tracker(tracking_uri(params), params.tracking.experiment))
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
