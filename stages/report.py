"""Report stage: build the report from the stage tables, write it under reports/, log to MLflow.

MLflow (:func:`pipeline.runtime.tracking.report_metrics.track`) gets each cell's report metrics in
its training's run, only those whose value changed, and reports/ as the artifacts of the
workspace's train run, or of a report run of its own; a rerun that writes the same reports logs
nothing and creates no run. The logging runs in a second process started first
(:class:`~pipeline.runtime.tracking.report_logger.ReportLogger`): it imports MLflow and reads the
cell runs while this one builds the report, and logs the metrics while this one writes the files.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pipeline.config import Params
from pipeline.runtime import context as ctx
from pipeline.runtime.store import files, layout
from pipeline.runtime.store.folders import read_verify_checks, store_root
from pipeline.runtime.tracking.report_logger import ReportLogger

if TYPE_CHECKING:
    from pipeline.report.grid.build import Inputs


def read_inputs(params: Params, grid: pd.DataFrame) -> Inputs:
    """The stage tables and the cells' records as :class:`Inputs`."""
    from pipeline.report.grid.build import Inputs

    checks = read_verify_checks(store_root(params.compute.storage), grid.to_dict("records"))
    grid = grid.assign(reproduced=grid.cell_id.map(  # cbench verify's result, where it ran
        lambda c: bool(checks[c]["reproduced"]) if c in checks else None))
    folders = ctx.cell_folders(grid)
    records = {c: files.read_json(f / layout.RECORD) for c, f in folders.items()
               if (f / layout.RECORD).exists()}
    # a shared training's history is each of its cells' (their folders are one)
    histories = files.read_frames({c: f / layout.HISTORY for c, f in folders.items()
                                     if (f / layout.HISTORY).exists()}, "cell_id")
    return Inputs(grid, records, pd.read_parquet(ctx.STATS), pd.read_parquet(ctx.SEARCH),
                  pd.read_parquet(ctx.BOUNDS), pd.read_parquet(ctx.FINITE_K),
                  histories,
                  params, files.file_sha256(ctx.RESOLVED)[:12], pd.read_parquet(ctx.PROBE),
                  pd.read_parquet(ctx.PROBE_FEWSHOT_SUMMARY)
                  if ctx.PROBE_FEWSHOT_SUMMARY.exists() else pd.DataFrame())


def read_norms(grid: pd.DataFrame, cell_ids: Sequence[str]) -> dict[str, np.ndarray]:
    """Cell id → the norms of its held-out embeddings (the norm histograms' data), for
    ``cell_ids``."""
    folders = ctx.cell_folders(grid)
    return {c: np.linalg.norm(files.read_embeddings(folders[c] / layout.EMBEDDINGS, 0),
                              axis=1) for c in cell_ids}


def main(argv: list[str] | None = None) -> int:
    if argv:
        return ctx.usage_error("report", argv)
    params, grid = ctx.resolved_params(), ctx.read_grid()
    with ReportLogger(ctx.tracking_uri(params), params.tracking.experiment, grid) as mlflow:
        # imported once the logger has forked: these imports run beside its MLflow import
        from pipeline.report.grid.build import build
        from pipeline.report.grid.figure_plan import norm_cells
        from pipeline.report.render.publish import write

        report = build(read_inputs(params, grid))
        mlflow.metrics(report.mlflow)
        write(report, ctx.REPORTS, read_norms(grid, norm_cells(report.figures)))
        mlflow.reports(ctx.REPORTS)
    print(f"report: leaderboard of {len(report.cells)} cells ({report.failed} failed) -> "
          f"{(ctx.REPORTS / 'leaderboard.md').resolve()}")
    if report.failed:
        print(f"report: {report.failed} of {len(report.cells)} cells failed; reasons in the "
              "leaderboard", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
