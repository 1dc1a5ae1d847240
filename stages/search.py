"""Held-out InfoNCE risk and retrieval for every cell -> ``data/search.parquet``."""

from __future__ import annotations

import sys

from pipeline.runtime import storage
from pipeline.runtime.context import CELLS, SEARCH, read_grid, resolved_params
from pipeline.runtime.dask_ops import compute_search


def main(argv: list[str] | None = None) -> int:
    params = resolved_params()
    grid = read_grid()
    ok = grid[grid.status == "ok"]
    table = compute_search(ok, CELLS, params.search.k_eval, params.compute, params.stats.n_workers)
    storage.write_frame(table, SEARCH)
    print(f"search: {len(table)} cells -> {SEARCH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
