"""Theorem 1 of Whiteley (2026) for every contrastive cell -> ``data/bounds.parquet``.

Each term (complexity, sample variability, the two finite-k terms), their sum, the measured
generalisation gap (R on fresh tuples − R̂_n on training tuples), tightness and `vacuous`.
"""

from __future__ import annotations

import sys

from pipeline.runtime import context as ctx
from pipeline.runtime.backends.dask_ops import compute_bounds
from pipeline.runtime.store import files


def main(argv: list[str] | None = None) -> int:
    if argv:
        return ctx.usage_error("bounds", argv)
    params = ctx.resolved_params()
    table = compute_bounds(ctx.trained_cells(params), ctx.shared_dataset(params),
                           ctx.cell_folders(), params.bounds, params.compute,
                           params.stats.n_workers)
    files.write_frame(table, ctx.BOUNDS)
    print(f"bounds: {len(table)} cells -> {ctx.BOUNDS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
