"""Report stage: build the report from the stage tables, write it under reports/, log to MLflow."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
import pandas as pd

from pipeline.config import Params
from pipeline.grid import GRID_AXES
from pipeline.report.build import Inputs, build
from pipeline.report.figure_plan import norm_cells
from pipeline.report.publish import write
from pipeline.runtime import context as ctx
from pipeline.runtime import layout, storage
from pipeline.runtime.store import read_verify_checks, store_root
from pipeline.runtime.tracking import Tracker, run_key


def read_inputs(params: Params, grid: pd.DataFrame) -> Inputs:
    """The stage tables and the cells' records as :class:`Inputs`."""
    checks = read_verify_checks(store_root(params.compute.storage), grid.to_dict("records"))
    grid = grid.assign(reproduced=grid.cell_id.map(  # cbench verify's result, where it ran
        lambda c: bool(checks[c]["reproduced"]) if c in checks else None))
    folders = ctx.cell_folders(grid)
    records = {c: storage.read_json(f / layout.RECORD) for c, f in folders.items()
               if (f / layout.RECORD).exists()}
    # a shared training's history is each of its cells' (their folders are one)
    histories = [storage.read_frame(f / layout.HISTORY).assign(cell_id=c)
                 for c, f in folders.items() if (f / layout.HISTORY).exists()]
    return Inputs(grid, records, pd.read_parquet(ctx.STATS), pd.read_parquet(ctx.SEARCH),
                  pd.read_parquet(ctx.BOUNDS), pd.read_parquet(ctx.FINITE_K),
                  pd.concat(histories, ignore_index=True) if histories else pd.DataFrame(),
                  params, storage.file_sha256(ctx.RESOLVED)[:12], pd.read_parquet(ctx.PROBE),
                  pd.read_parquet(ctx.PROBE_FEWSHOT_SUMMARY)
                  if ctx.PROBE_FEWSHOT_SUMMARY.exists() else pd.DataFrame())


def read_norms(grid: pd.DataFrame, cell_ids: Sequence[str]) -> dict[str, np.ndarray]:
    """Cell id → the norms of its held-out embeddings (the norm histograms' data), for
    ``cell_ids``."""
    folders = ctx.cell_folders(grid)
    return {c: np.linalg.norm(storage.read_embeddings(folders[c] / layout.EMBEDDINGS, 0),
                              axis=1) for c in cell_ids}


def _run_metrics(runs: dict, grid: pd.DataFrame,
                 values: dict[str, list[tuple[str, float]]]) -> dict[str, list]:
    """Each cell's final metrics for its training's MLflow run. Cells that share a training (they
    differ only in keys it does not read, such as k for a loss without negatives) share its run,
    so their metrics carry the grid values that tell them apart (``recall_at_1/k_16``: MLflow
    allows no ``=`` or ``,`` in a metric name)."""
    training = dict(zip(grid.cell_id, grid.get("training_id", grid.cell_id), strict=True))
    version = dict(zip(grid.cell_id, grid.version, strict=True))
    sharing = grid.groupby(grid.get("training_id", grid.cell_id)).cell_id.transform("size")
    shared = dict(zip(grid.cell_id, sharing > 1, strict=True))
    axes = [a for a in GRID_AXES if a in grid]
    out: dict[str, list] = {}
    for cell_id, metrics in values.items():
        run = runs.get(run_key(training.get(cell_id, cell_id), version.get(cell_id, "")))
        if run is None:
            continue
        suffix = ""
        if shared.get(cell_id):
            same = grid[grid.get("training_id", grid.cell_id) == training[cell_id]]
            row = grid[grid.cell_id == cell_id].iloc[0]
            suffix = "".join(f"/{a}_{row[a]}" for a in axes if same[a].nunique() > 1)
        out.setdefault(run.info.run_id, []).extend((k + suffix, v, 0) for k, v in metrics)
    return out


def main(argv: list[str] | None = None) -> int:
    if argv:
        return ctx.usage_error("report", argv)
    params, grid = ctx.resolved_params(), ctx.read_grid()
    report = build(read_inputs(params, grid))
    write(report, ctx.REPORTS, read_norms(grid, norm_cells(report.figures)))
    tracker = Tracker(ctx.tracking_uri(params), params.tracking.experiment)
    for run_id, metrics in _run_metrics(tracker.cell_runs(), grid, report.mlflow).items():
        tracker.log(run_id, metrics=metrics)
    parent = tracker.invocation_parent() or tracker.start_parent("report", {})
    tracker.client.log_artifacts(parent, str(ctx.REPORTS), artifact_path="reports")
    print(f"report: leaderboard of {len(report.cells)} cells ({report.failed} failed) -> "
          f"{(ctx.REPORTS / 'leaderboard.md').resolve()}")
    if report.failed:
        print(f"report: {report.failed} of {len(report.cells)} cells failed; reasons in the "
              "leaderboard", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
