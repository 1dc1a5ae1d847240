"""Distribution statistics of every cell's held-out embeddings, one Dask graph per layer.

Writes ``data/stats.parquet`` (one row per cell, checkpoint epoch, layer and representation,
SPEC.md §2 columns and the grid values; the final encoder's rows have epoch = train.epochs) and
``data/stats_detail.parquet`` (one row per coordinate). ``layer``: ``head`` for the encoder's
output (embeddings.parquet), ``backbone`` for the features its head reads (backbone.parquet,
written only by encoders that have both; pipeline.encoders.features.split_encoder).
"""

from __future__ import annotations

import sys

from pipeline.encoders.features import BACKBONE, HEAD
from pipeline.runtime.backends.dask_ops import compute_layer_stats
from pipeline.runtime.context import STATS, STATS_DETAIL, read_grid, resolved_params, usage_error
from pipeline.runtime.store import files


def main(argv: list[str] | None = None) -> int:
    if argv:
        return usage_error("stats", argv)
    params = resolved_params()
    got = compute_layer_stats(read_grid(), params)
    files.write_frame(got.summary, STATS)
    files.write_frame(got.detail, STATS_DETAIL)
    summary, final = got.summary, params.train.epochs
    n_failed = int((summary.status != "ok").sum()) if len(summary) else 0
    reps = summary.representation.nunique() if len(summary) else 0
    print(f"stats: {got.cells[HEAD]} cells (with a backbone: {got.cells[BACKBONE]}) x "
          f"{1 + sum(e != final for e in params.stats.epochs)} checkpoints x {reps} "
          f"representations, one Dask graph per layer, {n_failed} failed -> {STATS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
