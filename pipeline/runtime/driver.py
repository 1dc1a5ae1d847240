"""What one train driver does: the grid against the cell store, trained, logged to MLflow.

:func:`train_grid` measures the ``auto`` settings, plans every cell against the store
(:func:`pipeline.runtime.grid_run.plan`), claims and trains what is to train
(:func:`pipeline.runtime.grid_run.train`) on worker processes forked from the stage or as Ray
tasks (:func:`pipeline.runtime.backends.cell_workers.run_cells` says which), logs the
finished cells to their single MLflow runs in batches (``grid_run.LOG_BATCH`` cells or
``LOG_SECONDS``; one transaction a batch on a local SQLite store:
:func:`pipeline.runtime.tracking.runs.record_cells`), and then logs the reused cells whose run is
missing or unfinished (:func:`sync_runs`: e.g. a driver died after the cell), each under the cell's
claim. The invocation's parent run is created with the first cell it logs: a rerun with every cell
done and logged creates no MLflow run.
It returns the manifest rows (``data/grid.json``) with what was done; the train stage writes
them. A failing cell does not stop the grid.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pipeline import __version__
from pipeline.config import Params, expand
from pipeline.fingerprint import code_fingerprint
from pipeline.runtime.backends.cell_workers import run_cells
from pipeline.runtime.backends.executor import resolve_auto_modes
from pipeline.runtime.cells.one_cell import CellOutcome
from pipeline.runtime.context import cells_root, dataset_path, git_sha, tracking_uri
from pipeline.runtime.grid_run import (
    Entry,
    first_per_training,
    manifest_row,
    plan,
    stale_summary,
    train,
)
from pipeline.runtime.store import files, layout
from pipeline.runtime.store.claims import Claims
from pipeline.runtime.store.files import Dir
from pipeline.runtime.store.folders import inspect, store_root
from pipeline.runtime.tracking.runs import (
    Invocation,
    RunRef,
    Tracker,
    record_cells,
    run_key,
)

ACTIONS = ("done", "failed", "stale", "train")  # what grid_run.plan decides for a cell


class StaleCellsError(Exception):
    """Cells were trained by other code and ``train.on_code_change`` is ``fail``: the message
    says which and what to set instead."""


@dataclass(frozen=True)
class TrainedGrid:
    """What :func:`train_grid` did. rows: the manifest's cells (``data/grid.json``); trained:
    the cells this driver trained and reused: those another driver trained meanwhile (by the
    cell that ran each training); done: cells already done before (skipped); synced: done cells
    logged to MLflow because they had no finished run; root: the cell store's ``cells/``."""

    rows: list[dict[str, Any]]
    trained: Mapping[str, CellOutcome]
    reused: Mapping[str, CellOutcome]
    done: int
    synced: int
    root: Dir

    @property
    def failed(self) -> int:
        return sum(r["status"] != "ok" for r in self.rows)


def train_grid(params: Params) -> TrainedGrid:
    """Train every cell of ``params``' grid that the store does not hold yet (see the module
    docstring); raises :class:`StaleCellsError` before any work when cells are stale and
    ``train.on_code_change`` is ``fail``."""
    dataset = files.read_dataset(dataset_path(params.data.name))
    root, snaps, policy = cells_root(params), params.stats.epochs, params.train.on_code_change
    cells, measured = resolve_auto_modes(expand(params), dataset.input_shape, params.compute,
                                         params.train.threads, params.plugins)
    entries = plan(cells, root, dataset.content_hash(), snaps, policy)
    count = {a: sum(e.action == a for e in entries) for a in ACTIONS}
    if count["stale"] and policy == "fail":
        raise StaleCellsError(f"{stale_summary(entries)}; train.on_code_change = fail: retrain "
                              "them (retrain) or use them marked stale (keep)")
    todo = first_per_training(
        e for e in entries if e.action == "train" or (e.action == "stale" and policy != "keep"))
    print(_plan_line(entries, todo, count, policy))
    sha = git_sha()
    # MLflow's store opens (about 1 s on a new SQLite file) in a thread while this one claims
    # the cells (and starts Ray, where they run on it); the cells wait for it (run_cells'
    # ``ready``), so that a store that cannot be opened stops the stage before any cell starts
    opener = ThreadPoolExecutor(1, thread_name_prefix="train-tracking")
    tracking = opener.submit(_open_tracking, params, sha, len(entries)).result
    opener.shutdown(wait=False)  # its thread ends with this one task
    meta = {"git_sha": sha, "dataset_hash": dataset.content_hash(), "code_version": __version__}

    def on_done(finished: Sequence[tuple[Entry, CellOutcome]]) -> None:
        """A batch of finished cells into MLflow (one transaction on a local store)."""
        logged = [(o.record, o.history) for _, o in finished if o.record]
        if logged:
            tracker, parent, runs = tracking()
            record_cells(tracker, parent.run_id, logged, runs)
        for _, outcome in finished:
            if outcome.status != "ok":
                print(f"\ntrain: cell {outcome.cell_id} failed: "
                      f"{outcome.reason.splitlines()[0]}", file=sys.stderr)

    def run(batch: Sequence[Entry],
            done: Callable[[Entry, CellOutcome], None]) -> list[CellOutcome]:
        by_id = {e.cell.cell_id: e for e in batch}
        metas = {e.cell.cell_id: {**meta, "version": e.version,
                                  "code_fingerprint": code_fingerprint(e.cell).as_record(),
                                  **({"compute_auto": measured[e.cell.cell_id]}
                                     if e.cell.cell_id in measured else {})}
                 for e in batch}
        folders = {c: str(e.folder) for c, e in by_id.items()}
        return run_cells([e.cell for e in batch], dataset, folders, metas, params.compute,
                         params.train.threads, snaps, lambda o: done(by_id[o.cell_id], o),
                         params.plugins, ready=tracking)

    with Claims(store_root(params.compute.storage)) as claims:
        trained, reused = train(todo, claims, run, on_done, lambda e: inspect(e.folder, snaps))
        by_cell = {**reused, **trained}  # keyed by the cell that ran each training
        outcomes = {e.key: by_cell[e.cell.cell_id] for e in todo if e.cell.cell_id in by_cell}
        tracker, parent, runs = tracking()
        synced = sync_runs(tracker, parent, entries, outcomes, runs, claims)
    if synced:
        print(f"train: logged {synced} done cells that had no finished MLflow run")
    got = TrainedGrid(manifest(entries, outcomes), trained, reused, count["done"], synced, root)
    if todo or parent.started:  # work was done: the invocation has its run
        tracker.log(parent.run_id, metrics=[("cells", len(got.rows), 0),
                                            ("cells_failed", got.failed, 0),
                                            ("cells_trained", len(trained), 0)])
        tracker.end(parent.run_id)  # the invocation succeeded, whatever some cells did
    return got


def _open_tracking(params: Params, sha: str, n_cells: int
                   ) -> tuple[Tracker, Invocation, Mapping[str, RunRef]]:
    """The tracker, this invocation's parent run (created with the first cell it logs) and the
    cell runs the store holds."""
    tracker = Tracker(tracking_uri(params), params.tracking.experiment)
    parent = Invocation(tracker, "train", {"git_sha": sha, "n_cells": str(n_cells)})
    return tracker, parent, tracker.cell_run_refs()


def _plan_line(entries: Sequence[Entry], todo: Sequence[Entry], count: Mapping[str, int],
               policy: str) -> str:
    """'train: N cells in the grid: ...', before any work."""
    trainings = len({e.key for e in entries})
    shared = (f" ({len(entries)} cells, {trainings} distinct trainings)"
              if trainings < len(entries) else "")
    failed = f", {count['failed']} failed before (not retried)" if count["failed"] else ""
    stale = ""
    if count["stale"]:
        stale = f"; {stale_summary(entries)}: " + ("kept, marked stale" if policy == "keep"
                                                   else "retrained")
    return (f"train: {len(entries)} cells in the grid: {count['done']} already done (skipped), "
            f"{len(todo)} to train" + shared + failed + stale)


def manifest(entries: Sequence[Entry], outcomes: Mapping[str, CellOutcome]) -> list[dict]:
    """One row per grid cell; ``outcomes`` by training (:attr:`Entry.key`)."""
    rows = []
    for e in entries:
        got = outcomes.get(e.key)
        if got is not None:
            rows.append(manifest_row(e, got.status, got.reason, got.record, got.failure_class))
        elif e.action == "failed":
            rows.append(manifest_row(e, "failed", str(e.record.get("reason", "")), e.record))
        else:  # done, or stale and kept
            rows.append(manifest_row(e, "ok", "", e.record))
    return rows


SYNC_BATCH = 500  # reused cells logged per claim round in sync_runs (one transaction each)


def sync_runs(tracker: Tracker, parent: Invocation, entries: Sequence[Entry],
              outcomes: Mapping[str, CellOutcome], runs: Mapping[str, RunRef],
              claims: Claims) -> int:
    """Log reused cells whose run is missing or unfinished (e.g. a driver died after the cell,
    or the tracking database was deleted), under the cells' claims so that no other driver logs
    them at the same time, as children of ``parent`` (created with the first of them), up to
    :data:`SYNC_BATCH` at a time (:func:`record_cells`); how many."""
    todo = []
    for e in first_per_training(entries):  # one run per training
        if e.key in outcomes or e.action not in ("done", "failed", "stale"):
            continue
        key = run_key(e.cell.training_id, e.used_version)
        if key in runs and runs[key].status in ("FINISHED", "FAILED"):
            continue
        todo.append((key, e))
    synced = 0
    for start in range(0, len(todo), SYNC_BATCH):
        mine = [(key, e) for key, e in todo[start:start + SYNC_BATCH] if claims.try_claim(key)]
        if not mine:
            continue  # another driver holds them: it logs them
        try:
            now = tracker.cell_run_refs()  # again, now that no other driver can log them
            cells = []
            for key, e in mine:
                found = now.get(key)
                if found is None or found.status not in ("FINISHED", "FAILED"):
                    history = []
                    if e.record.get("status") == "ok":
                        history = files.read_frame(e.folder / layout.HISTORY).to_dict("records")
                    cells.append((e.record, history))
            if cells:
                record_cells(tracker, parent.run_id, cells, now)
            synced += len(cells)
        finally:
            claims.release_many([key for key, _ in mine])
    return synced
