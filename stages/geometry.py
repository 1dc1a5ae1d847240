"""SupCon / Soft SupCon geometry on free embeddings (Vock et al. 2026): the simplex check.

Writes ``reports/geometry.csv`` (largest deviation of the class-mean cosines from −1/(C−1) per
loss and class balance) and ``reports/simplex.{png,svg}``.
"""

from __future__ import annotations

import sys

import torch

from pipeline.losses.geometry_check import optimise_free_embeddings, simplex_eps
from pipeline.report import simplex
from pipeline.runtime.context import REPORTS, resolved_params, usage_error

# The problems are tiny (a few dozen points in d = 8): with more than one intra-op thread, torch
# spends most of each step waking threads (40 s instead of 8 s for the default geometry here).
THREADS = 1


def main(argv: list[str] | None = None) -> int:
    if argv:
        return usage_error("geometry", argv)
    g = resolved_params().geometry
    results = []
    torch.set_num_threads(THREADS)  # this process does nothing else
    for loss in g.losses:
        for counts in g.class_counts:
            cos = optimise_free_embeddings(loss, counts, g.d, g.tau, g.steps, g.seed,
                                           eps=simplex_eps(len(counts), g.tau))
            results.append((loss, counts, cos.numpy()))
    REPORTS.mkdir(exist_ok=True)
    table = simplex.table(results, g.tolerance)
    table.to_csv(REPORTS / "geometry.csv", index=False)
    simplex.plot(results, REPORTS / "simplex")
    print("geometry:\n" + table.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
