"""The probe stage's Dask graph: the frozen-feature protocols of every cell, and of the inputs.

One task per cell loads its encoders (trained, and untrained at their seeded initialisation:
the epoch-0 control) and scores each representation (:mod:`pipeline.probe.frozen`); one task
scores the raw inputs. Where a cell has a GPU it is used (``train.device``). A cell whose task
fails gets a row with ``probe_status`` = failed and the reason; the rest goes on.

Why a stage of its own rather than the train task: the probe's code and settings are not part of
a cell's identity, so changing them reruns this stage only and retrains nothing; re-encoding the
training split costs a forward pass, far less than storing every cell's training features.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from dask import delayed

from pipeline.config import ComputeConfig
from pipeline.datasets import Dataset
from pipeline.encoders.device import pick_device
from pipeline.grid import Cell
from pipeline.probe.frozen import ProbeSettings, evaluate_encoder, evaluate_inputs
from pipeline.runtime import storage
from pipeline.runtime.scheduler import batches, scheduler
from pipeline.runtime.storage import read_dataset
from pipeline.seeding import numpy_generator

STATES = ("trained", "initial")  # initial: the same encoder untrained (epoch 0)


def _rows(cell_id: str, state: str, scores: Mapping[str, Mapping[str, Any]]) -> list[dict]:
    return [{"cell_id": cell_id, "state": state, "layer": layer, "probe_status": "ok",
             "probe_reason": "", **row} for layer, row in scores.items()]


def probe_cell(cell: Cell, dataset: Dataset, folder: str,
               settings: ProbeSettings) -> list[dict[str, Any]]:
    """Rows (cell, state, layer) of one cell; a failure becomes one failed row."""
    from pipeline.runtime.evaluate import load_encoders

    try:
        assert dataset.y_train is not None and dataset.y_heldout is not None
        device = pick_device("cpu" if cell.train.device == "cpu" else "auto")
        encoders = load_encoders(cell, dataset, storage.location(folder))
        rows = []
        for state in STATES:  # the same splits for both: trained and untrained are paired
            rng = numpy_generator(cell.seed, cell.cell_id, "probe")
            scores = evaluate_encoder(cell.arch, encoders[state].to(device), dataset.x_train,
                                      dataset.y_train, dataset.x_heldout, dataset.y_heldout,
                                      settings, rng, device)
            rows += _rows(cell.cell_id, state, scores)
        return rows
    except Exception as err:  # noqa: BLE001 — one cell's failure is recorded, not raised
        reason = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=2)}"
        return [{"cell_id": cell.cell_id, "state": "trained", "layer": "head",
                 "probe_status": "failed", "probe_reason": reason}]


def probe_inputs(dataset: Dataset, settings: ProbeSettings, seed: int) -> list[dict[str, Any]]:
    """The row of the raw inputs (cell_id '', state 'raw', layer 'input')."""
    assert dataset.y_train is not None and dataset.y_heldout is not None
    scores = evaluate_inputs(dataset.x_train, dataset.y_train, dataset.x_heldout,
                             dataset.y_heldout, settings, numpy_generator(seed, "probe", "raw"))
    return _rows("", "raw", {"input": scores})


def _probe_batch(cells: Sequence[tuple[Cell, str]], dataset: Dataset,
                 settings: ProbeSettings) -> list[dict[str, Any]]:
    return [row for cell, folder in cells for row in probe_cell(cell, dataset, folder, settings)]


def compute_probe(cells: Sequence[Cell], dataset_path: storage.Location,
                  folders: Mapping[str, storage.Location], settings: ProbeSettings, seed: int,
                  compute_cfg: ComputeConfig, n_workers: int) -> pd.DataFrame:
    """Every cell's rows and the raw inputs' row, in one Dask compute (cells in batches of
    consecutive cells, :func:`pipeline.runtime.scheduler.batches`)."""
    dataset = delayed(read_dataset)(str(dataset_path), dask_key_name="dataset")
    runs = batches([(c, str(folders[c.cell_id])) for c in cells], n_workers)
    tasks = [delayed(_probe_batch)(run, dataset, settings, dask_key_name=f"probe-{i}")
             for i, run in enumerate(runs)]
    tasks.append(delayed(probe_inputs)(dataset, settings, seed, dask_key_name="probe-inputs"))
    with scheduler(compute_cfg, n_workers) as run_all:
        results = run_all(tasks, "probe", [len(r) for r in runs] + [0])
    return pd.DataFrame([row for rows in results for row in rows])
