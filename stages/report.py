"""Report stage: build the report from the stage tables, write it under reports/, log to MLflow."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from pipeline.report.build import Inputs, build
from pipeline.report.publish import write
from pipeline.runtime import context as ctx
from pipeline.runtime import storage
from pipeline.runtime.tracking import Tracker


def main(argv: list[str] | None = None) -> int:
    params, grid = ctx.resolved_params(), ctx.read_grid()
    root = ctx.cells_root(params)

    def cell_file(cell_id: str, name: str) -> storage.Location:
        return storage.cell_dir(root, cell_id) / name

    records = {c: storage.read_json(cell_file(c, "cell.json")) for c in grid.cell_id
               if cell_file(c, "cell.json").exists()}
    histories = [storage.read_frame(cell_file(c, "history.parquet")) for c in grid.cell_id
                 if cell_file(c, "history.parquet").exists()]
    finite_k = pd.read_parquet(ctx.FINITE_K)
    report = build(Inputs(grid, records, pd.read_parquet(ctx.STATS), pd.read_parquet(ctx.SEARCH),
                          pd.read_parquet(ctx.BOUNDS), finite_k,
                          pd.concat(histories, ignore_index=True) if histories else pd.DataFrame(),
                          params, storage.file_sha256(ctx.RESOLVED)[:12]))

    def norms(cell_id: str) -> np.ndarray:
        z = storage.read_embeddings(cell_file(cell_id, "embeddings.parquet"), 0)
        return np.linalg.norm(z, axis=1)

    write(report, ctx.REPORTS, norms, finite_k, grid)
    tracker = Tracker(params.tracking.uri, params.tracking.experiment)
    runs = tracker.cell_runs()
    for cell_id, values in report.mlflow.items():  # final metrics to each cell's run
        if cell_id in runs:
            tracker.log(runs[cell_id].info.run_id, metrics=[(k, v, 0) for k, v in values])
    parent = tracker.latest_parent() or tracker.start_parent("report", {})
    tracker.client.log_artifacts(parent, str(ctx.REPORTS), artifact_path="reports")
    print(f"report: leaderboard of {len(report.cells)} cells ({report.failed} failed) -> "
          f"{(ctx.REPORTS / 'leaderboard.md').resolve()}")
    if report.failed:
        print(f"report: {report.failed} of {len(report.cells)} cells failed; reasons in the "
              "leaderboard", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
