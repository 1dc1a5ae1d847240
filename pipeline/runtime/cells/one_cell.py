"""One cell's work with its files: train, export held-out embeddings, write ``cell.json`` last.

:func:`run_cell` is what a Ray task calls, and is testable without Ray. It never raises for a
failing cell: the failure and its reason are written to ``cell.json`` and returned, so the rest
of the grid goes on.
"""

from __future__ import annotations

import contextlib
import functools
import json
import platform
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd
import torch

from pipeline.datasets import Dataset
from pipeline.encoders.device import pick_device
from pipeline.grid import Cell
from pipeline.runtime.cells import cost, failures
from pipeline.runtime.store import files, layout, weights
from pipeline.runtime.store.folders import checksums, publish
from pipeline.train import DivergedError, backbone_views, embed_heldout, train_cell


@dataclass(frozen=True)
class CellOutcome:
    """What the driver needs to record a cell (in MLflow and the logs)."""

    cell_id: str
    status: str  # 'ok' | 'failed'
    reason: str = ""
    wall_seconds: float = 0.0
    history: list[dict[str, float]] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)  # the cell.json content
    failure_class: str = ""  # failures.CELL | failures.ENVIRONMENT, for a failed cell
    reused: bool = False  # a done cell was at the path when this one was published: it stays


def _record(cell: Cell, status: str, reason: str, started: float, wall: float,
            meta: Mapping[str, Any], history: list[dict[str, float]]) -> dict[str, Any]:
    config = cell.training_config()  # what the training read: shared by cells that differ elsewhere
    return {
        "cell_id": cell.training_id, "status": status, "reason": reason, "config": config,
        "grid": {axis: None if axis in cell.unread else value
                 for axis, value in cell.grid_values().items()}, "wall_seconds": round(wall, 3),
        "started_at": round(started, 3), "finished_at": round(started + wall, 3),
        "final_loss": history[-1]["loss"] if history else None,
        "hardware": f"{platform.node()} {platform.machine()} torch {torch.__version__}",
        **meta,
    }


def _cost_record(cell: Cell, status: str, history: list[dict[str, float]],
                 meter: cost.CostMeter | None) -> dict[str, Any]:
    """What the cell cost (:mod:`pipeline.runtime.cells.cost`): ``train_seconds`` and
    ``samples_per_second`` of its training history (None for a failed cell), and the meter's
    device, peak memory and energy over training and export (for a failed cell too, up to the
    failure; None where it never started)."""
    seconds, rate = (cost.throughput([h["seconds"] for h in history], cell.n,
                                     cell.train.batch_size) if status == "ok" else (None, None))
    measured: dict[str, Any] = (meter.cost.as_record()
                                if meter is not None and meter.cost is not None
                                else {f.name: None for f in fields(cost.Cost)})
    if measured["energy_source"] is None:
        measured["energy_source"] = cost.NOT_MEASURED
    return {"train_seconds": seconds, "samples_per_second": rate, **measured}


def dead_units(z: np.ndarray) -> np.ndarray:
    """Indices of the coordinates of ``z`` ``(N, h)`` that are 0 on every row: ReLU units of a
    backbone that no held-out image switches on."""
    return np.flatnonzero(~np.any(z != 0, axis=0))


def _write_views(out: files.Dir, views: tuple[np.ndarray, np.ndarray], labels: np.ndarray | None,
                 meta: Mapping[str, str], head_name: str, backbone_name: str) -> None:
    """The head's views to ``head_name``, and the backbone's (when the encoder has one) to
    ``backbone_name``: the same Parquet contract (``files.embeddings_table``).

    The backbone's dead units (0 on every clean held-out image, view 0) are left out of both of
    its views, their indices and the backbone's width in the file's metadata (``dead_units``,
    ``width``): a constant coordinate has no Anderson-Darling or D'Agostino statistic (the stats
    engine refuses it), and leaving out zeros changes no norm, so CV and the norms are the
    backbone's own.
    """
    table = files.embeddings_table({0: views[0], 1: views[1]}, labels, meta)
    files.write_table(table, out / head_name)
    backbone = backbone_views(views)
    if backbone is None:
        return
    dead = dead_units(backbone[0])
    if dead.size == backbone[0].shape[1]:  # all dead: kept, for the stats to say so
        dead = dead[:0]
    live = np.setdiff1d(np.arange(backbone[0].shape[1]), dead)
    layer_meta = {**meta, "dead_units": json.dumps(dead.tolist()),
                  "width": str(backbone[0].shape[1])}
    table = files.embeddings_table({0: backbone[0][:, live], 1: backbone[1][:, live]}, labels,
                                     layer_meta)
    files.write_table(table, out / backbone_name)


def _write_outputs(out: files.Dir, cell: Cell, dataset: Dataset, meta: Mapping[str, Any],
                   snapshot_epochs: Sequence[int]) -> tuple[list[dict[str, float]], Any]:
    result = train_cell(cell, dataset, snapshot_epochs)
    files.atomic_write_bytes(out / layout.MODEL, weights.to_bytes(result.model, cell))
    file_meta = {"cell_id": cell.training_id,
                 "config": json.dumps(cell.training_config(), sort_keys=True),
                 **{k: str(v) for k, v in meta.items() if isinstance(v, str)}}
    views = embed_heldout(result.model, dataset, cell)
    for epoch, snap in sorted(result.snapshots.items()):
        _write_views(out, snap, dataset.y_heldout, {**file_meta, "epoch": str(epoch)},
                     layout.snapshot(epoch), layout.backbone_snapshot(epoch))
    _write_views(out, views, dataset.y_heldout, {**file_meta, "epoch": str(cell.train.epochs)},
                 layout.EMBEDDINGS, layout.BACKBONE)
    history = [asdict(h) for h in result.history]
    compute = result.compute.as_record() if result.compute is not None else None
    files.write_frame(pd.DataFrame(history).assign(cell_id=cell.training_id),
                        out / layout.HISTORY)
    return history, compute


def run_cell(cell: Cell, dataset: Dataset, folder: files.Location, meta: Mapping[str, Any],
             threads: int = 1, snapshot_epochs: Sequence[int] = (),
             policy: failures.RetryPolicy = failures.NO_RETRY) -> CellOutcome:
    """Train ``cell`` and write its files to ``folder`` (its version's folder in the store).

    meta: what the record carries besides the run (git_sha, dataset_hash, version,
    code_fingerprint...). ``snapshot_epochs``: epochs (0 = the untrained control) whose held-out
    embeddings are also written, as ``embeddings_e<epoch>.parquet``. An encoder with a backbone
    and a head (:func:`pipeline.encoders.features.split_encoder`) also gets its backbone's views,
    ``backbone.parquet`` and ``backbone_e<epoch>.parquet``, same contract, without its dead
    units (see :func:`_write_views`). Every file is written to a
    staging folder of this writer's own beside ``folder``, published at the end (on object
    stores: file by file, ``cell.json`` last), so a reader never sees a half-written cell, and
    the record lists each file's size and SHA-256 so that later damage is seen, and what the
    cell cost (:func:`_cost_record`: training seconds and rate, peak memory, device, energy:
    outputs, like ``wall_seconds``, never part of the cell's id or version). Publishing is
    first-writer-wins (:func:`pipeline.runtime.store.folders.publish`): if a done cell is already at
    ``folder``, it stays and the outcome is its record, ``reused``.

    ``policy``: an attempt that fails by its environment (:func:`pipeline.runtime.cells.failures.
    classify`) or runs past ``policy.timeout_s`` is thrown away and run again, after a back-off,
    up to ``policy.max_retries`` times; the record lists the earlier attempts' reasons
    (``retried``) and counts them all (``attempts``). A cell's own failure is not retried.
    """
    with torch_threads(threads):
        return _run(cell, dataset, files.location(folder), meta, snapshot_epochs, policy)


@functools.cache
def prepare_worker() -> None:
    """Pay here, once per process, what the first cell a fresh worker trains would otherwise pay
    inside its timed run: the first ``torch.optim`` optimizer a process builds imports
    ``torch._dynamo`` (seconds of CPU). It belongs to the
    worker's start, like importing this module, not to that cell's ``wall_seconds``, which the
    cost tables read. Once per process (cached)."""
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op threads set to ``threads`` (``train.threads``), restored afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@dataclass
class _Attempt:
    """One try at a cell's files, in its own staging folder ``work``."""

    work: files.Dir
    started: float
    status: str = "ok"
    reason: str = ""
    kind: str = ""  # failures.CELL | failures.ENVIRONMENT for a failed attempt
    history: list[dict[str, float]] = field(default_factory=list)
    compute: Any = None
    meter: cost.CostMeter | None = None
    wall: float = 0.0


def _attempt(cell: Cell, dataset: Dataset, final: files.Location, meta: Mapping[str, Any],
             snapshot_epochs: Sequence[int], timeout_s: float | None) -> _Attempt:
    at = _Attempt(files.staging_dir(final), time.time())
    start = time.perf_counter()
    try:
        at.meter = cost.CostMeter(pick_device(cell.train.device))
        with failures.deadline(timeout_s), at.meter:
            at.history, at.compute = _write_outputs(at.work, cell, dataset, meta,
                                                    snapshot_epochs)
    except DivergedError as err:
        at.status, at.reason, at.kind = "failed", f"diverged: {err}", failures.CELL
    except Exception as err:  # noqa: BLE001 — any cell failure is recorded, never fatal to the grid
        at.status, at.kind = "failed", failures.classify(err)
        at.reason = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}"
    at.wall = time.perf_counter() - start
    return at


def _run(cell: Cell, dataset: Dataset, final: files.Dir, meta: Mapping[str, Any],
         snapshot_epochs: Sequence[int], policy: failures.RetryPolicy) -> CellOutcome:
    retried: list[dict[str, Any]] = []
    while True:
        at = _attempt(cell, dataset, final, meta, snapshot_epochs, policy.timeout_s)
        if at.kind != failures.ENVIRONMENT or len(retried) >= policy.max_retries:
            break
        retried.append({"reason": at.reason.splitlines()[0][:500],
                        "wall_seconds": round(at.wall, 3)})
        files.remove_tree(at.work)
        time.sleep(policy.wait_before(len(retried)))
    work, status, reason, kind, history = at.work, at.status, at.reason, at.kind, at.history
    compute, meter, started = at.compute, at.meter, at.started
    wall = at.wall
    record = _record(cell, status, reason, started, wall, meta, history)
    record["attempts"] = len(retried) + 1
    if retried:  # the environment failures retried before this attempt
        record["retried"] = retried
    record["compute"] = compute  # the precision and memory format that trained it (auto: measured)
    record |= _cost_record(cell, status, history, meter)
    if kind:
        record["failure_class"] = kind  # environment: retried again next run (folders.inspect)
    if status == "ok":
        names = sorted(n for n in files.list_dir(work) if not n.startswith("."))
        record["files"] = checksums(work, names)
        record["embeddings_sha256"] = record["files"][layout.EMBEDDINGS]["sha256"]
    else:  # keep only the record of a failure
        files.remove_tree(work)
        work = files.staging_dir(final)
    files.atomic_write_json(work / layout.RECORD, record)
    published = publish(work, final)
    if published.kept:  # another writer's done cell was there first: it stays, reused
        kept = dict(published.record)
        if kept.get("status") == "ok":
            history = files.read_frame(final / layout.HISTORY).drop(
                columns="cell_id").to_dict("records")
        return CellOutcome(cell.cell_id, str(kept.get("status")), str(kept.get("reason", "")),
                           wall, history, kept, reused=True,
                           failure_class=str(kept.get("failure_class", "")))
    return CellOutcome(cell.cell_id, status, reason, wall, history, record, kind)
