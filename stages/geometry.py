"""SupCon / Soft SupCon geometry on free embeddings (Vock et al. 2026): the simplex check.

Writes ``reports/geometry.csv`` (largest deviation of the class-mean cosines from −1/(C−1) per
loss and class balance) and ``reports/simplex.{png,svg}``.
"""

from __future__ import annotations

import sys

import torch

from pipeline.losses.geometry_check import simplex_check
from pipeline.report.papers import simplex
from pipeline.runtime.context import REPORTS, resolved_params, usage_error

# The problems are tiny (a few dozen points in d = 8): with more than one intra-op thread, torch
# spends most of each step waking threads, several times the step's own compute.
THREADS = 1


def main(argv: list[str] | None = None) -> int:
    if argv:
        return usage_error("geometry", argv)
    g = resolved_params().geometry
    torch.set_num_threads(THREADS)  # this process does nothing else
    results = [(loss, counts, cos.numpy()) for loss, counts, cos in
               simplex_check(g.losses, g.class_counts, g.d, g.tau, g.steps, g.seed)]
    REPORTS.mkdir(exist_ok=True)
    table = simplex.table(results, g.tolerance)
    table.to_csv(REPORTS / "geometry.csv", index=False)
    simplex.plot(results, REPORTS / "simplex")
    print("geometry:\n" + table.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
