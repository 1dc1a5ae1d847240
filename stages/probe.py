"""Linear probe and weighted kNN on every cell's frozen features, and on the raw inputs.

Writes ``data/probe.parquet``: one row per (cell, state, layer) — state ``trained`` or
``initial`` (the same encoder untrained: the control), layer ``head`` (the encoder's output) or
``backbone`` (the features before its head, where it has one) — and one row of the raw inputs
(cell_id '', state ``raw``). A dataset without labels gets an empty table, said once.
"""

from __future__ import annotations

import sys

import pandas as pd

from pipeline.datasets import DATASETS
from pipeline.probe.frozen import ProbeSettings
from pipeline.runtime import storage
from pipeline.runtime.context import (
    PROBE,
    cell_folders,
    resolved_params,
    shared_dataset,
    trained_cells,
    usage_error,
)
from pipeline.runtime.probe_ops import compute_probe

COLUMNS = ["cell_id", "state", "layer", "probe_status", "probe_reason"]


def main(argv: list[str] | None = None) -> int:
    if argv:
        return usage_error("probe", argv)
    params = resolved_params()
    if DATASETS[params.data.name].labels != "class":
        storage.write_frame(pd.DataFrame(columns=COLUMNS), PROBE)
        print(f"probe: data.name = {params.data.name!r} has no class labels: no linear probe or "
              "kNN accuracy for this grid")
        return 0
    p = params.probe
    settings = ProbeSettings(p.c_grid, p.val_fraction, p.knn_k, p.knn_temperature,
                             params.report.level)
    cells = trained_cells(params)
    table = compute_probe(cells, shared_dataset(params), cell_folders(), settings,
                          params.data.seed, params.compute, params.stats.n_workers)
    storage.write_frame(table, PROBE)
    failed = int((table.probe_status != "ok").sum())
    print(f"probe: {len(cells)} cells and the raw inputs, {len(table)} rows ({failed} failed) "
          f"-> {PROBE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
