"""The probe stage's Dask graph: the frozen-feature protocols of every cell, and of the inputs.

One task per cell loads its encoders (trained, and untrained at their seeded initialisation:
the epoch-0 control) and scores each representation (:mod:`pipeline.probe.frozen`); one task
scores the raw inputs. Where a cell has a GPU it is used (``train.device``). A cell whose task
fails gets a row with ``probe_status`` = failed and the reason; the rest goes on.

With ``probe.shots`` set, the same task runs the few-shot probes (:mod:`pipeline.probe.fewshot`)
on the trained encoder's features it has already computed: the rows of :func:`fewshot_rows`, one
per (cell, representation, shots, episode), and their summary over episodes
(:func:`fewshot_summary`). An episode that cannot be drawn or fails is a row with
``fewshot_status`` = failed and the reason.

Why a stage of its own rather than the train task: the probe's code and settings are not part of
a cell's identity, so changing them reruns this stage only and retrains nothing; re-encoding the
training split costs a forward pass, far less than storing every cell's training features.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from dask import delayed

from pipeline.config import ComputeConfig
from pipeline.datasets import Dataset
from pipeline.encoders.device import pick_device
from pipeline.grid import Cell
from pipeline.probe.fewshot import class_shortfall, draw_episode, episode_generator, episode_seed
from pipeline.probe.frozen import (
    ProbeSettings,
    encoder_features,
    evaluate_features,
    evaluate_inputs,
    fewshot_scores,
)
from pipeline.runtime.backends.scheduler import Opaque, Shared, batches, scheduler, shared
from pipeline.runtime.store import files
from pipeline.runtime.store.files import read_dataset
from pipeline.seeding import numpy_generator
from pipeline.stats import seed_ci

STATES = ("trained", "initial")  # initial: the same encoder untrained (epoch 0)


def _rows(cell_id: str, state: str, scores: Mapping[str, Mapping[str, Any]]) -> list[dict]:
    return [{"cell_id": cell_id, "state": state, "layer": layer, "probe_status": "ok",
             "probe_reason": "", **row} for layer, row in scores.items()]


def _failed_episodes(cell: Cell, settings: ProbeSettings, reason: str,
                     shots: Sequence[int] | None = None) -> list[dict[str, Any]]:
    return [{"cell_id": cell.cell_id, "layer": "head", "shots": int(s), "episode": e,
             "episode_seed": episode_seed(cell.seed, cell.cell_id, s, e),
             "fewshot_status": "failed", "fewshot_reason": reason}
            for s in (settings.shots if shots is None else shots)
            for e in range(settings.episodes)]


def fewshot_rows(cell: Cell, dataset: Dataset, train: dict[str, np.ndarray],
                 test: dict[str, np.ndarray], settings: ProbeSettings,
                 device: Any = None) -> list[dict[str, Any]]:
    """The few-shot rows of one cell, from its trained encoder's features: one per
    (representation, shots, episode), keyed by ``episode_seed`` (the seed of the draw, from
    (cell seed, cell id, shots, episode)). The test split is the held-out split: as indices of
    the labelled rows (training split, then held-out split) the draw is made outside it."""
    assert dataset.y_train is not None and dataset.y_heldout is not None
    y_train, n_train = dataset.y_train, len(dataset.y_train)
    labels = np.concatenate([y_train, dataset.y_heldout])
    test_rows = np.arange(n_train, labels.size)
    out: list[dict[str, Any]] = []
    for shots in settings.shots:
        short = class_shortfall(y_train, shots, f"training rows (data.n_train = {n_train})")
        if short:  # known before any draw: every episode of this value fails alike
            out += _failed_episodes(cell, settings, f"probe.{short}", [shots])
            continue
        for episode in range(settings.episodes):
            key = {"cell_id": cell.cell_id, "shots": int(shots), "episode": episode,
                   "episode_seed": episode_seed(cell.seed, cell.cell_id, shots, episode)}
            try:
                rows = draw_episode(labels, shots, episode_generator(
                    cell.seed, cell.cell_id, shots, episode), test_rows)
                # the same folds for every representation and the raw inputs: paired
                rngs = {name: numpy_generator(key["episode_seed"], "folds")
                        for name in (*train, "input")}
                scores = fewshot_scores(train, dataset.x_train, y_train, test,
                                        dataset.x_heldout, dataset.y_heldout, rows, settings,
                                        rngs, device)
                out += [key | {"layer": layer, "fewshot_status": "ok", "fewshot_reason": "",
                               **row} for layer, row in scores.items()]
            except Exception as err:  # noqa: BLE001 — one episode's failure is recorded
                out.append(key | {"layer": "head", "fewshot_status": "failed",
                                  "fewshot_reason": f"{type(err).__name__}: {err}"})
    return out


def probe_cell(cell: Cell, dataset: Dataset, folder: str,
               settings: ProbeSettings) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(probe rows (cell, state, layer), few-shot rows) of one cell; a failure becomes one
    failed probe row and every episode failed."""
    from pipeline.runtime.cells.evaluate import load_encoders

    try:
        assert dataset.y_train is not None and dataset.y_heldout is not None
        device = pick_device("cpu" if cell.train.device == "cpu" else "auto")
        encoders = load_encoders(cell, dataset, files.location(folder))
        rows: list[dict[str, Any]] = []
        fewshot: list[dict[str, Any]] = []
        for state in STATES:  # the same splits for both: trained and untrained are paired
            rng = numpy_generator(cell.seed, cell.cell_id, "probe")
            train, test = encoder_features(cell.arch, encoders[state].to(device),
                                           dataset.x_train, dataset.x_heldout, device)
            scores = evaluate_features(train, dataset.y_train, test, dataset.y_heldout,
                                       settings, rng, device)
            rows += _rows(cell.cell_id, state, scores)
            if state == "trained" and settings.shots:
                fewshot = fewshot_rows(cell, dataset, train, test, settings, device)
            del train, test
        return rows, fewshot
    except Exception as err:  # noqa: BLE001 — one cell's failure is recorded, not raised
        reason = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=2)}"
        return ([{"cell_id": cell.cell_id, "state": "trained", "layer": "head",
                  "probe_status": "failed", "probe_reason": reason}],
                _failed_episodes(cell, settings, reason))


def probe_inputs(dataset: Dataset, settings: ProbeSettings, seed: int) -> list[dict[str, Any]]:
    """The row of the raw inputs (cell_id '', state 'raw', layer 'input')."""
    assert dataset.y_train is not None and dataset.y_heldout is not None
    scores = evaluate_inputs(dataset.x_train, dataset.y_train, dataset.x_heldout,
                             dataset.y_heldout, settings, numpy_generator(seed, "probe", "raw"))
    return _rows("", "raw", {"input": scores})


def _probe_batch(cells: Opaque, dataset: Dataset | Shared,
                 settings: ProbeSettings) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every (cell, folder) of ``cells.value``'s rows and few-shot rows."""
    data = shared(dataset)
    rows: list[dict[str, Any]] = []
    fewshot: list[dict[str, Any]] = []
    for cell, folder in cells.value:
        r, f = probe_cell(cell, data, folder, settings)
        rows += r
        fewshot += f
    return rows, fewshot


def _inputs_task(dataset: Dataset | Shared, settings: ProbeSettings,
                 seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return probe_inputs(shared(dataset), settings, seed), []


FEWSHOT_KEY = ["cell_id", "layer", "shots"]


def fewshot_summary(table: pd.DataFrame, level: float) -> pd.DataFrame:
    """One row per (cell, representation, shots) of the ok episodes: ``episodes`` (how many),
    and for each score column m of :func:`fewshot_rows` (``linear_probe``, ``weighted_knn_<k>``
    and their ``raw_`` twins, fractions) ``m_mean``, ``m_lo``, ``m_hi``: the mean over the
    episodes and its t-interval over the episodes at ``level`` (:func:`pipeline.stats.seed_ci`:
    mean ± t · s/√episodes; NaN bounds with a single episode). The interval is the spread of
    the draws of labelled rows for one trained encoder, not over seeds."""
    if table.empty or "fewshot_status" not in table:
        return pd.DataFrame(columns=[*FEWSHOT_KEY, "episodes"])
    ok = table[table.fewshot_status == "ok"]
    scores = [c for c in ok.columns if (c.removeprefix("raw_") == "linear_probe"
                                        or c.removeprefix("raw_").startswith("weighted_knn_"))]
    rows = []
    for key, part in ok.groupby(FEWSHOT_KEY, sort=True):
        row: dict[str, Any] = dict(zip(FEWSHOT_KEY, key, strict=True)) | {"episodes": len(part)}
        for c in scores:
            ci = seed_ci(part[c].dropna().to_numpy(float), level)
            row |= {f"{c}_mean": ci.estimate, f"{c}_lo": ci.low, f"{c}_hi": ci.high}
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else [*FEWSHOT_KEY, "episodes"])


def compute_probe(cells: Sequence[Cell], dataset_path: files.Location,
                  folders: Mapping[str, files.Location], settings: ProbeSettings, seed: int,
                  compute_cfg: ComputeConfig,
                  n_workers: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(every cell's rows and the raw inputs' row, the few-shot rows), in one Dask compute
    (cells in batches of consecutive cells, :func:`pipeline.runtime.backends.scheduler.batches`)."""
    runs = batches([(c, str(folders[c.cell_id])) for c in cells], n_workers)
    with scheduler(compute_cfg, n_workers) as run_all:
        dataset = run_all.share("dataset", read_dataset, str(dataset_path))
        tasks = [delayed(_probe_batch)(Opaque(run), dataset, settings, dask_key_name=f"probe-{i}")
                 for i, run in enumerate(runs)]
        tasks.append(delayed(_inputs_task)(dataset, settings, seed,
                                           dask_key_name="probe-inputs"))
        results = run_all(tasks, "probe", [len(r) for r in runs] + [0])
    return (pd.DataFrame([row for rows, _ in results for row in rows]),
            pd.DataFrame([row for _, rows in results for row in rows]))
