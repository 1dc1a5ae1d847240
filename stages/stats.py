"""Distribution statistics of every cell's held-out embeddings, in one Dask graph.

Writes ``data/stats.parquet`` (one row per cell, checkpoint epoch and representation, SPEC.md
§2 columns and the grid values; the final encoder's rows have epoch = train.epochs) and ``data/stats_detail.parquet`` (one row per coordinate).
"""

from __future__ import annotations

import sys

from pipeline.grid import GRID_AXES
from pipeline.runtime import storage
from pipeline.runtime.context import STATS, STATS_DETAIL, cell_folders, read_grid, resolved_params
from pipeline.runtime.dask_ops import compute_stats


def main(argv: list[str] | None = None) -> int:
    params = resolved_params()
    grid = read_grid()
    ok = grid[grid.status == "ok"]
    final = params.train.epochs
    folders = cell_folders(ok)
    paths = {(c, final): folders[c] / "embeddings.parquet" for c in ok.cell_id}
    for epoch in params.stats.epochs:  # snapshots: 0 is the untrained control
        if epoch != final:
            paths.update({(c, epoch): folders[c] / storage.snapshot_name(epoch)
                          for c in ok.cell_id})
    # intervals at the level the report reads them back with (report.level)
    summary, detail = compute_stats(paths, params.stats, params.compute, level=params.report.level)
    table = grid[["cell_id", *GRID_AXES]].merge(summary, on="cell_id", how="inner")
    storage.write_frame(table, STATS)
    storage.write_frame(detail, STATS_DETAIL)
    n_failed = int((summary.status != "ok").sum()) if len(summary) else 0
    print(f"stats: {len(ok)} cells x {len(paths) // max(len(ok), 1)} checkpoints x "
          f"{summary.representation.nunique() if len(summary) else 0} representations in one "
          f"Dask graph, {n_failed} failed -> {STATS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
