"""Distribution statistics of every cell's held-out embeddings, in one Dask graph.

Writes ``data/stats.parquet`` (one row per cell and representation, SPEC.md §2 columns and the
grid values) and ``data/stats_detail.parquet`` (one row per coordinate).
"""

from __future__ import annotations

import sys

import pandas as pd

from pipeline.runtime import storage
from pipeline.runtime.context import CELLS, GRID, STATS, STATS_DETAIL, resolved_params
from pipeline.runtime.dask_ops import compute_stats


def main(argv: list[str] | None = None) -> int:
    params = resolved_params()
    grid = pd.DataFrame(storage.read_json(GRID)["cells"])
    ok = grid[grid.status == "ok"]
    paths = {c: storage.cell_dir(CELLS, c) / "embeddings.parquet" for c in ok.cell_id}
    summary, detail = compute_stats(paths, params.stats.block_cols, params.compute,
                                    params.stats.n_workers)
    table = grid.drop(columns="status").merge(summary, on="cell_id", how="inner")
    storage.write_frame(table, STATS)
    storage.write_frame(detail, STATS_DETAIL)
    n_failed = int((summary.status != "ok").sum()) if len(summary) else 0
    print(f"stats: {len(paths)} cells x {summary.representation.nunique() if len(summary) else 0} "
          f"representations, {n_failed} failed -> {STATS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
