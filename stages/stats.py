"""Distribution statistics of every cell's held-out embeddings, one Dask graph per layer.

Writes ``data/stats.parquet`` (one row per cell, checkpoint epoch, layer and representation,
SPEC.md §2 columns and the grid values; the final encoder's rows have epoch = train.epochs) and
``data/stats_detail.parquet`` (one row per coordinate). ``layer``: ``head`` for the encoder's
output (embeddings.parquet), ``backbone`` for the features its head reads (backbone.parquet,
written only by encoders that have both; pipeline.encoders.features.split_encoder).
"""

from __future__ import annotations

import sys

import pandas as pd

from pipeline.encoders.features import BACKBONE, HEAD
from pipeline.grid import GRID_AXES
from pipeline.runtime import layout, storage
from pipeline.runtime.context import (
    STATS,
    STATS_DETAIL,
    cell_folders,
    read_grid,
    resolved_params,
    trained_rows,
    usage_error,
)
from pipeline.runtime.dask_ops import compute_stats


def _paths(cells: pd.Series, folders: dict, epochs: list[int], final: int,
           layer: str) -> dict[tuple[str, int], storage.Location]:
    """The held-out views of each (cell, epoch) of ``layer``; a cell without a backbone file
    (an encoder without a head) has no backbone rows."""
    final_name, snapshot = ((layout.EMBEDDINGS, layout.snapshot) if layer == HEAD
                            else (layout.BACKBONE, layout.backbone_snapshot))
    paths = {}
    for c in cells:
        if layer == BACKBONE and not storage.exists(folders[c] / layout.BACKBONE):
            continue
        paths[(c, final)] = folders[c] / final_name
        for epoch in epochs:  # snapshots: 0 is the untrained control
            if epoch != final:
                paths[(c, epoch)] = folders[c] / snapshot(epoch)
    return paths


def main(argv: list[str] | None = None) -> int:
    if argv:
        return usage_error("stats", argv)
    params = resolved_params()
    grid = read_grid()
    ok = trained_rows(grid)
    final = params.train.epochs
    folders = cell_folders(ok)
    summaries, details, counts = [], [], {}
    for layer in (HEAD, BACKBONE):
        paths = _paths(ok.cell_id, folders, list(params.stats.epochs), final, layer)
        counts[layer] = len({c for c, _ in paths})
        if not paths and layer == BACKBONE:
            continue
        # intervals at the level the report reads them back with (report.level)
        summary, detail = compute_stats(paths, params.stats, params.compute,
                                        level=params.report.level)
        summaries.append(summary.assign(layer=layer))
        details.append(detail.assign(layer=layer) if len(detail) else detail)
    summary = pd.concat(summaries, ignore_index=True)
    table = grid[["cell_id", *GRID_AXES]].merge(summary, on="cell_id", how="inner")
    storage.write_frame(table, STATS)
    storage.write_frame(pd.concat(details, ignore_index=True), STATS_DETAIL)
    n_failed = int((summary.status != "ok").sum()) if len(summary) else 0
    reps = summary.representation.nunique() if len(summary) else 0
    print(f"stats: {counts[HEAD]} cells (with a backbone: {counts[BACKBONE]}) x "
          f"{1 + sum(e != final for e in params.stats.epochs)} checkpoints x {reps} "
          f"representations, one Dask graph per layer, {n_failed} failed -> {STATS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
