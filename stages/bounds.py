"""Theorem 1 of Whiteley (2026) for every contrastive cell -> ``data/bounds.parquet``.

Each term (complexity, sample variability, the two finite-k terms), their sum, the measured
generalisation gap (R on fresh tuples − R̂_n on training tuples), tightness and `vacuous`.
"""

from __future__ import annotations

import sys

from pipeline.runtime import storage
from pipeline.runtime.context import (
    BOUNDS,
    cell_folders,
    resolved_params,
    shared_dataset,
    trained_cells,
)
from pipeline.runtime.dask_ops import compute_bounds


def main(argv: list[str] | None = None) -> int:
    params = resolved_params()
    cells = trained_cells(params)
    table = compute_bounds(cells, shared_dataset(params), cell_folders(), params.bounds,
                           params.compute, params.stats.n_workers)
    storage.write_frame(table, BOUNDS)
    print(f"bounds: {len(table)} cells -> {BOUNDS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
