"""Train every cell of the grid that the cell store does not hold yet, one Ray task per cell.

Cells are reused from the store (shared by every workspace, branch and experiment of the
project) when their config and the code that trains them are unchanged; a cell trained by other
code is stale and ``train.on_code_change`` decides (retrain | keep | fail). Drivers sharing the
store claim the cells they train. Each finished cell is logged to its single MLflow run. Writes
``data/grid.json``: the grid's cells with their version, folder, status and failure reason. A
failing cell does not stop the grid: the report stage lists it and exits non-zero.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from pipeline import __version__
from pipeline.config import expand
from pipeline.fingerprint import code_fingerprint
from pipeline.runtime import layout, storage
from pipeline.runtime.cells import CellOutcome
from pipeline.runtime.claims import Claims
from pipeline.runtime.context import (
    GRID,
    cells_root,
    dataset_path,
    git_sha,
    resolved_params,
    tracking_uri,
    usage_error,
)
from pipeline.runtime.executor import resolve_auto_modes, run_cells
from pipeline.runtime.grid_run import (
    Entry,
    first_per_training,
    manifest_row,
    plan,
    stale_summary,
    train,
)
from pipeline.runtime.store import inspect, store_root
from pipeline.runtime.tracking import Tracker, record_cell, run_key


def main(argv: list[str] | None = None) -> int:
    if argv:
        return usage_error("train", argv)
    params = resolved_params()
    dataset = storage.read_dataset(dataset_path(params.data.name))
    root, snaps, policy = cells_root(params), params.stats.epochs, params.train.on_code_change
    cells, measured = resolve_auto_modes(expand(params), dataset.input_shape, params.compute,
                                         params.train.threads, params.plugins)
    entries = plan(cells, root, dataset.content_hash(), snaps, policy)
    count = {a: sum(e.action == a for e in entries) for a in ("done", "failed", "stale", "train")}
    if count["stale"] and policy == "fail":
        print(f"train: {stale_summary(entries)}; train.on_code_change = fail: retrain them "
              "(retrain) or use them marked stale (keep)", file=sys.stderr)
        return 2
    todo = first_per_training(
        e for e in entries if e.action == "train" or (e.action == "stale" and policy != "keep"))
    trainings = len({e.key for e in entries})
    print(f"train: {len(entries)} cells in the grid: {count['done']} already done (skipped), "
          f"{len(todo)} to train" + (f" ({len(entries)} cells, {trainings} distinct trainings)"
                                     if trainings < len(entries) else "") + (f", {count['failed']} failed before (not retried)"
                                     if count["failed"] else "")
          + (f"; {stale_summary(entries)}: " + ("kept, marked stale" if policy == "keep"
                                                 else "retrained") if count["stale"] else ""))
    tracker = Tracker(tracking_uri(params), params.tracking.experiment)
    parent = tracker.start_parent("train", {"git_sha": git_sha(), "n_cells": str(len(entries))})
    meta = {"git_sha": git_sha(), "dataset_hash": dataset.content_hash(),
            "code_version": __version__}
    runs = tracker.cell_runs()

    def on_done(entry: Entry, outcome: CellOutcome) -> None:
        if outcome.record:
            record_cell(tracker, parent, outcome.record, outcome.history, runs)
        if outcome.status != "ok":
            print(f"\ntrain: cell {outcome.cell_id} failed: {outcome.reason.splitlines()[0]}",
                  file=sys.stderr)

    def run(batch: Sequence[Entry], done: Callable[[Entry, CellOutcome], None]) -> list[CellOutcome]:
        by_id = {e.cell.cell_id: e for e in batch}
        metas = {e.cell.cell_id: {**meta, "version": e.version,
                                  "code_fingerprint": code_fingerprint(e.cell).as_record(),
                                  **({"compute_auto": measured[e.cell.cell_id]}
                                     if e.cell.cell_id in measured else {})}
                 for e in batch}
        return run_cells([e.cell for e in batch], dataset, {c: str(e.folder) for c, e in by_id.items()},
                         metas, params.compute, params.train.threads, snaps,
                         lambda o: done(by_id[o.cell_id], o), params.plugins)

    with Claims(store_root(params.compute.storage)) as claims:
        trained, reused = train(todo, claims, run, on_done, lambda e: inspect(e.folder, snaps))
        by_cell = {**reused, **trained}  # keyed by the cell that ran each training
        outcomes = {e.key: by_cell[e.cell.cell_id] for e in todo if e.cell.cell_id in by_cell}
        synced = _sync_runs(tracker, parent, entries, outcomes, runs, claims)
    if synced:
        print(f"train: logged {synced} done cells that had no finished MLflow run")
    rows = _manifest(entries, outcomes)
    storage.atomic_write_json(GRID, {"cells": rows})
    failed = sum(r["status"] != "ok" for r in rows)
    tracker.log(parent, metrics=[("cells", len(rows), 0), ("cells_failed", failed, 0),
                                 ("cells_trained", len(trained), 0)])
    tracker.end(parent)  # the invocation succeeded, whatever some cells did
    print(f"train: trained {sum(o.status == 'ok' for o in trained.values())}, failed "
          f"{failed} in all, reused {count['done']} (and {len(reused)} another driver trained "
          f"meanwhile); cells in {root}/")
    if failed:  # the grid goes on; the report lists them and its exit status says how many
        print(f"train: {failed} cell(s) failed; their reasons are in the leaderboard",
              file=sys.stderr)
    return 0


def _manifest(entries: Sequence[Entry], outcomes: dict[str, CellOutcome]) -> list[dict]:
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


def _sync_runs(tracker: Tracker, parent: str, entries: Sequence[Entry],
               outcomes: dict[str, CellOutcome], runs: dict, claims: Claims) -> int:
    """Log reused cells whose run is missing or unfinished (e.g. a driver died after the cell),
    under the cell's claim so that no other driver logs it at the same time."""
    synced = 0
    for e in first_per_training(entries):  # one run per training
        if e.key in outcomes or e.action not in ("done", "failed", "stale"):
            continue
        key = run_key(e.cell.training_id, e.used_version)
        if key in runs and runs[key].info.status in ("FINISHED", "FAILED"):
            continue
        if not claims.try_claim(key):
            continue  # another driver holds it: it logs it
        try:
            found = tracker.find(key)  # again, now that no other driver can log it
            if found is None or found.info.status not in ("FINISHED", "FAILED"):
                history = []
                if e.record.get("status") == "ok":
                    history = storage.read_frame(e.folder / layout.HISTORY).to_dict("records")
                record_cell(tracker, parent, e.record, history)
                synced += 1
        finally:
            claims.release(key)
    return synced


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
