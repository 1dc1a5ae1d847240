"""Train every cell of the grid that is not done yet, one Ray task per cell.

Done cells (``cell.json`` with status ok) are skipped, so growing the grid trains only the new
cells. Each finished cell is logged to its single MLflow run by the driver. Writes
``data/grid.json``: the current grid's cells with their status and failure reason, read by the
later stages. A failing cell does not stop the grid (nor this stage): the report stage lists it
and exits non-zero.
"""

from __future__ import annotations

import sys

from pipeline import __version__
from pipeline.config import expand
from pipeline.runtime import storage
from pipeline.runtime.cells import CellOutcome
from pipeline.runtime.context import CELLS, GRID, cells_root, dataset_path, git_sha, resolved_params
from pipeline.runtime.executor import run_cells
from pipeline.runtime.tracking import Tracker, record_cell


def _sync_done(tracker: Tracker, parent: str, done: list[str], runs: dict,
               root: storage.Location) -> int:
    """Log done cells whose run is missing or unfinished (e.g. the driver died after the cell)."""
    missing = [c for c in done if c not in runs or runs[c].info.status != "FINISHED"]
    for cell_id in missing:
        folder = storage.cell_dir(root, cell_id)
        history = storage.read_frame(folder / "history.parquet").to_dict("records")
        record_cell(tracker, parent, storage.read_json(folder / "cell.json"), history, runs)
    return len(missing)


def _sha(root: storage.Location, cell_id: str) -> str:
    """The content hash recorded by the cell, so the later stages rerun when embeddings change."""
    path = storage.cell_dir(root, cell_id) / "cell.json"
    return str(storage.read_json(path).get("embeddings_sha256", "")) if path.exists() else ""


def main(argv: list[str] | None = None) -> int:
    params = resolved_params()
    cells = expand(params)
    dataset = storage.read_dataset(dataset_path(params.data.name))
    meta = {"git_sha": git_sha(), "dataset_hash": dataset.content_hash(), "code_version": __version__}
    snaps = params.stats.epochs
    root = cells_root(params)
    CELLS.mkdir(parents=True, exist_ok=True)  # the DVC output; empty when cells live at a URI
    done = [c.cell_id for c in cells if storage.cell_done(root, c.cell_id, snaps)]
    todo = [c for c in cells if c.cell_id not in set(done)]
    print(f"train: {len(cells)} cells in the grid: {len(done)} already done (skipped), "
          f"{len(todo)} to train")
    tracker = Tracker(params.tracking.uri, params.tracking.experiment)
    parent = tracker.start_parent("train", {"git_sha": meta["git_sha"], "n_cells": str(len(cells))})
    runs = tracker.cell_runs()
    synced = _sync_done(tracker, parent, done, runs, root)
    if synced:
        print(f"train: logged {synced} done cells that had no finished MLflow run")

    def on_done(outcome: CellOutcome) -> None:
        if outcome.record:
            record_cell(tracker, parent, outcome.record, outcome.history, runs)
        if outcome.status != "ok":
            print(f"\ntrain: cell {outcome.cell_id} failed: {outcome.reason.splitlines()[0]}",
                  file=sys.stderr)

    outcomes = run_cells(todo, dataset, root, meta, params.compute,
                         params.train.threads, snaps, on_done, params.plugins)
    failed = {o.cell_id: o.reason for o in outcomes if o.status != "ok"}
    storage.atomic_write_json(GRID, {"cells": [
        {"cell_id": c.cell_id, "status": "failed" if c.cell_id in failed else "ok",
         "reason": failed.get(c.cell_id, ""), "embeddings_sha256": _sha(root, c.cell_id),
         **c.grid_values()} for c in cells]})
    tracker.end(parent, failed=bool(failed))
    print(f"train: trained {len(outcomes) - len(failed)}, failed {len(failed)}, "
          f"skipped {len(done)}; cells in {root}/")
    if failed:  # the grid goes on; the report lists them and its exit status says how many
        print(f"train: {len(failed)} cell(s) failed; the next run retries them", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
