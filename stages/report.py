"""Report stage: build the report from the stage tables, write it under reports/, log to MLflow.

MLflow (:func:`track`) gets each cell's report metrics in its training's run, only those whose
value changed (one ``log_batch`` per such run), and reports/ as the artifacts of the workspace's
train run, or of a report run of its own; a rerun that writes the same reports logs nothing and
creates no run.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.config import Params
from pipeline.grid import GRID_AXES
from pipeline.report.build import Inputs, build
from pipeline.report.figure_plan import norm_cells
from pipeline.report.publish import write
from pipeline.runtime import context as ctx
from pipeline.runtime import layout, storage
from pipeline.runtime.store import read_verify_checks, store_root
from pipeline.runtime.tracking import Tracker, run_key


def read_inputs(params: Params, grid: pd.DataFrame) -> Inputs:
    """The stage tables and the cells' records as :class:`Inputs`."""
    checks = read_verify_checks(store_root(params.compute.storage), grid.to_dict("records"))
    grid = grid.assign(reproduced=grid.cell_id.map(  # cbench verify's result, where it ran
        lambda c: bool(checks[c]["reproduced"]) if c in checks else None))
    folders = ctx.cell_folders(grid)
    records = {c: storage.read_json(f / layout.RECORD) for c, f in folders.items()
               if (f / layout.RECORD).exists()}
    # a shared training's history is each of its cells' (their folders are one)
    histories = storage.read_frames({c: f / layout.HISTORY for c, f in folders.items()
                                     if (f / layout.HISTORY).exists()}, "cell_id")
    return Inputs(grid, records, pd.read_parquet(ctx.STATS), pd.read_parquet(ctx.SEARCH),
                  pd.read_parquet(ctx.BOUNDS), pd.read_parquet(ctx.FINITE_K),
                  histories,
                  params, storage.file_sha256(ctx.RESOLVED)[:12], pd.read_parquet(ctx.PROBE),
                  pd.read_parquet(ctx.PROBE_FEWSHOT_SUMMARY)
                  if ctx.PROBE_FEWSHOT_SUMMARY.exists() else pd.DataFrame())


def read_norms(grid: pd.DataFrame, cell_ids: Sequence[str]) -> dict[str, np.ndarray]:
    """Cell id → the norms of its held-out embeddings (the norm histograms' data), for
    ``cell_ids``."""
    folders = ctx.cell_folders(grid)
    return {c: np.linalg.norm(storage.read_embeddings(folders[c] / layout.EMBEDDINGS, 0),
                              axis=1) for c in cell_ids}


def _run_metrics(runs: dict, grid: pd.DataFrame,
                 values: dict[str, list[tuple[str, float]]]) -> dict[str, list]:
    """Each cell's final metrics for its training's MLflow run. Cells that share a training (they
    differ only in keys it does not read, such as k for a loss without negatives) share its run,
    so their metrics carry the grid values that tell them apart (``recall_at_1/k_16``: MLflow
    allows no ``=`` or ``,`` in a metric name)."""
    training = dict(zip(grid.cell_id, grid.get("training_id", grid.cell_id), strict=True))
    version = dict(zip(grid.cell_id, grid.version, strict=True))
    sharing = grid.groupby(grid.get("training_id", grid.cell_id)).cell_id.transform("size")
    shared = dict(zip(grid.cell_id, sharing > 1, strict=True))
    axes = [a for a in GRID_AXES if a in grid]
    out: dict[str, list] = {}
    for cell_id, metrics in values.items():
        run = runs.get(run_key(training.get(cell_id, cell_id), version.get(cell_id, "")))
        if run is None:
            continue
        suffix = ""
        if shared.get(cell_id):
            same = grid[grid.get("training_id", grid.cell_id) == training[cell_id]]
            row = grid[grid.cell_id == cell_id].iloc[0]
            suffix = "".join(f"/{a}_{row[a]}" for a in axes if same[a].nunique() > 1)
        out.setdefault(run.info.run_id, []).extend((k + suffix, v, 0) for k, v in metrics)
    return out


REPORTS_TAG = "cbench.reports"  # on the run holding reports/: the folder's digest (folder_digest)


def folder_digest(folder: Path) -> str:
    """sha256 (hex) over every file under ``folder``: its path relative to ``folder`` and its
    bytes, in path order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix().encode("utf-8")
        data = path.read_bytes()
        digest.update(b"%d:%s%d:" % (len(name), name, len(data)))
        digest.update(data)
    return digest.hexdigest()


def track(tracker: Tracker, grid: pd.DataFrame, metrics: dict[str, list[tuple[str, float]]],
          reports: Path) -> tuple[int, str | None]:
    """Log the report: each cell's ``metrics`` (cell id → (name, value)) into its training's run,
    those already logged with the same value left out (:meth:`Tracker.log_changed`), and the
    folder ``reports`` as artifacts (``reports/``) of the newest invocation run of this
    workspace when that is a train run without reports yet (the train run of this
    ``dvc repro``), else of a new, finished report run; nothing when the newest invocation
    already holds these very reports (:func:`folder_digest`). Returns (how many runs got
    metrics, the id of the run that got the reports or None)."""
    runs = tracker.cell_runs()
    logged = tracker.log_changed(runs.values(), _run_metrics(runs, grid, metrics))
    digest = folder_digest(reports)
    newest = tracker.newest_invocation()
    tags = newest.data.tags if newest is not None else {}
    if tags.get(REPORTS_TAG) == digest:
        return logged, None
    own = not (tags.get("cbench.stage") == "train" and REPORTS_TAG not in tags)
    run_id = tracker.start_parent("report", {}) if own else str(newest.info.run_id)
    tracker.client.log_artifacts(run_id, str(reports), artifact_path="reports")
    tracker.client.set_tag(run_id, REPORTS_TAG, digest)
    if own:
        tracker.end(run_id)
    return logged, run_id


def main(argv: list[str] | None = None) -> int:
    if argv:
        return ctx.usage_error("report", argv)
    params, grid = ctx.resolved_params(), ctx.read_grid()
    report = build(read_inputs(params, grid))
    write(report, ctx.REPORTS, read_norms(grid, norm_cells(report.figures)))
    track(Tracker(ctx.tracking_uri(params), params.tracking.experiment), grid, report.mlflow,
          ctx.REPORTS)
    print(f"report: leaderboard of {len(report.cells)} cells ({report.failed} failed) -> "
          f"{(ctx.REPORTS / 'leaderboard.md').resolve()}")
    if report.failed:
        print(f"report: {report.failed} of {len(report.cells)} cells failed; reasons in the "
              "leaderboard", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
