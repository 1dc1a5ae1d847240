"""Linear probe and weighted kNN on every cell's frozen features, and on the raw inputs.

Writes ``data/probe.parquet``: one row per (cell, state, layer) — state ``trained`` or
``initial`` (the same encoder untrained: the control), layer ``head`` (the encoder's output) or
``backbone`` (the features before its head, where it has one) — and one row of the raw inputs
(cell_id '', state ``raw``). A dataset without labels gets an empty table, said once.

With ``probe.shots`` set (label efficiency), also ``data/probe_fewshot.parquet``: one row per
(cell, layer, shots, episode) of the trained encoder — ``episode_seed`` (the draw's seed, from
the cell's seed, its id, shots and the episode), ``fewshot_status``/``fewshot_reason``,
``n_train`` (shots × classes drawn rows), ``n_test`` (the held-out split, never drawn),
``linear_probe`` (top-1 accuracy, a fraction), ``linear_probe_c`` (C chosen on the drawn rows,
see :func:`pipeline.probe.fewshot.fewshot_linear_probe`), ``weighted_knn_<k>`` (the drawn rows
as the bank) and the same of the raw inputs on the same draw (``raw_...``); and
``data/probe_fewshot_summary.parquet``: per (cell, layer, shots) the mean over episodes and its
t-interval over episodes (``<score>_mean``, ``_lo``, ``_hi``,
:func:`pipeline.runtime.backends.probe_ops.fewshot_summary`). Both are empty with ``probe.shots:
[]``.
"""

from __future__ import annotations

import sys

import pandas as pd

from pipeline.datasets import DATASETS
from pipeline.probe.fewshot import class_shortfall
from pipeline.probe.frozen import ProbeSettings
from pipeline.runtime.backends.probe_ops import FEWSHOT_KEY, compute_probe, fewshot_summary
from pipeline.runtime.context import (
    PROBE,
    PROBE_FEWSHOT,
    PROBE_FEWSHOT_SUMMARY,
    cell_folders,
    resolved_params,
    shared_dataset,
    trained_cells,
    usage_error,
)
from pipeline.runtime.store import files

COLUMNS = ["cell_id", "state", "layer", "probe_status", "probe_reason"]
FEWSHOT_COLUMNS = [*FEWSHOT_KEY, "episode", "episode_seed", "fewshot_status", "fewshot_reason"]


def _write_fewshot(table: pd.DataFrame, level: float) -> None:
    files.write_frame(table if len(table) else pd.DataFrame(columns=FEWSHOT_COLUMNS),
                        PROBE_FEWSHOT)
    files.write_frame(fewshot_summary(table, level), PROBE_FEWSHOT_SUMMARY)


def main(argv: list[str] | None = None) -> int:
    if argv:
        return usage_error("probe", argv)
    params = resolved_params()
    if DATASETS[params.data.name].labels != "class":
        files.write_frame(pd.DataFrame(columns=COLUMNS), PROBE)
        _write_fewshot(pd.DataFrame(), params.report.level)
        print(f"probe: data.name = {params.data.name!r} has no class labels: no linear probe or "
              "kNN accuracy for this grid")
        return 0
    p = params.probe
    settings = ProbeSettings(p.c_grid, p.val_fraction, p.knn_k, p.knn_temperature,
                             params.report.level, tuple(p.shots), p.episodes)
    dataset = shared_dataset(params)
    if p.shots:  # the labels are known now, before any cell's work: say which shots cannot run
        labels = files.read_training_labels(dataset)
        for i, shots in enumerate(p.shots):
            short = class_shortfall(labels, shots) if labels is not None else ""
            if short:
                print(f"probe: probe.shots[{i}] = {shots}: {short.split(': ', 1)[1]}; its "
                      f"{p.episodes} episodes per cell are recorded as failed", file=sys.stderr)
    cells = trained_cells(params)
    table, fewshot = compute_probe(cells, dataset, cell_folders(), settings, params.data.seed,
                                   params.compute, params.stats.n_workers)
    files.write_frame(table, PROBE)
    _write_fewshot(fewshot, params.report.level)
    failed = int((table.probe_status != "ok").sum())
    print(f"probe: {len(cells)} cells and the raw inputs, {len(table)} rows ({failed} failed) "
          f"-> {PROBE}")
    if p.shots:
        bad = int((fewshot.fewshot_status != "ok").sum()) if len(fewshot) else 0
        print(f"probe: few-shot {list(p.shots)} × {p.episodes} episodes, {len(fewshot)} rows "
              f"({bad} failed) -> {PROBE_FEWSHOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
