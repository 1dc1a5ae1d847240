"""Retrieval, held-out InfoNCE risk and the similarity-search cross-entropy of every cell.

Writes ``data/search.parquet`` (one row per cell: recall@{1,5,10}, the leave-one-out kNN
accuracy, R at the cell's k and at search.k_eval, CE, CE_m, the finite-k gap CE − R_k and the
fitted log-log slope of |CE − R_k| against k) and ``data/finite_k.parquet`` (one row per cell,
encoder and k).
"""

from __future__ import annotations

import sys

from pipeline.runtime import context as ctx
from pipeline.runtime.backends.dask_ops import compute_search
from pipeline.runtime.store import files


def main(argv: list[str] | None = None) -> int:
    if argv:
        return ctx.usage_error("search", argv)
    params = ctx.resolved_params()
    rows, sweep = compute_search(ctx.trained_cells(params), ctx.shared_dataset(params),
                                 ctx.cell_folders(), params.search, params.compute,
                                 params.stats.n_workers)
    files.write_frame(rows, ctx.SEARCH)
    files.write_frame(sweep, ctx.FINITE_K)
    failed = int((rows.search_status != "ok").sum()) if len(rows) else 0
    print(f"search: {len(rows)} cells ({failed} failed), {len(sweep)} k-sweep rows -> {ctx.SEARCH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
