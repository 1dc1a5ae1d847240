"""Report stage: build the report from the stage tables, write it under reports/, log to MLflow.

MLflow (:func:`track`) gets each cell's report metrics in its training's run, only those whose
value changed (one ``log_batch`` per such run), and reports/ as the artifacts of the workspace's
train run, or of a report run of its own; a rerun that writes the same reports logs nothing and
creates no run. MLflow's search of the cell runs (seconds at a thousand runs) runs in a process
of its own while the report is built, where this process may use a second core.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.config import Params
from pipeline.config.rules import local_cores
from pipeline.grid import GRID_AXES
from pipeline.report.build import Inputs, build
from pipeline.report.figure_plan import norm_cells
from pipeline.report.publish import write
from pipeline.runtime import context as ctx
from pipeline.runtime import layout, storage
from pipeline.runtime.store import read_verify_checks, store_root
from pipeline.runtime.tracking import Tracker, cell_metrics, run_key


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


def _run_metrics(runs: Mapping[str, str], grid: pd.DataFrame,
                 values: dict[str, list[tuple[str, float]]]) -> dict[str, list]:
    """Each cell's final metrics (``values``) by the run id of its training's MLflow run
    (``runs``: :func:`~pipeline.runtime.tracking.run_key` → run id). Cells that share a
    training (they differ only in keys it does not read, such as k for a loss without
    negatives) share its run, so their metrics carry the grid values that tell them apart
    (``recall_at_1/k_16``: MLflow allows no ``=`` or ``,`` in a metric name)."""
    trainings = grid.get("training_id", grid.cell_id)
    training = dict(zip(grid.cell_id, trainings, strict=True))
    version = dict(zip(grid.cell_id, grid.version, strict=True))
    axes = [a for a in GRID_AXES if a in grid]
    suffixes: dict[str, str] = {}  # a shared training's cells: the axes that tell them apart
    for _, same in grid.groupby(trainings, sort=False):
        if len(same) > 1:
            varying = [a for a in axes if same[a].nunique() > 1]
            for cell_id, *keys in zip(same.cell_id, *(same[a] for a in varying), strict=True):
                suffixes[cell_id] = "".join(f"/{a}_{v}" for a, v in zip(varying, keys,
                                                                         strict=True))
    out: dict[str, list] = {}
    for cell_id, metrics in values.items():
        run_id = runs.get(run_key(training.get(cell_id, cell_id), version.get(cell_id, "")))
        if run_id is None:
            continue
        suffix = suffixes.get(cell_id, "")
        out.setdefault(run_id, []).extend((k + suffix, v, 0) for k, v in metrics)
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


def log_metrics(tracker: Tracker, grid: pd.DataFrame, metrics: dict[str, list[tuple[str, float]]],
                runs: Mapping[str, tuple[str, Mapping[str, float]]] | None = None) -> int:
    """Each cell's ``metrics`` into its training's run (:func:`_run_metrics`), the values the run
    holds already left out (:meth:`Tracker.log_changed`); ``runs`` as :func:`cell_metrics` reads
    them (read here when None). Returns how many runs got metrics."""
    if runs is None:
        runs = cell_metrics(tracker.uri, tracker.experiment)
    run_ids = {key: run_id for key, (run_id, _) in runs.items()}
    return tracker.log_changed(dict(runs.values()), _run_metrics(run_ids, grid, metrics))


def track(tracker: Tracker, grid: pd.DataFrame, metrics: dict[str, list[tuple[str, float]]],
          reports: Path, runs: Mapping[str, tuple[str, Mapping[str, float]]] | None = None
          ) -> tuple[int, str | None]:
    """Log the report: each cell's ``metrics`` (cell id → (name, value)) into its training's run,
    those already logged with the same value left out (:meth:`Tracker.log_changed`), and the
    folder ``reports`` as artifacts (``reports/``) of the newest invocation run of this
    workspace when that is a train run without reports yet (the train run of this
    ``dvc repro``), else of a new, finished report run; nothing when the newest invocation
    already holds these very reports (:func:`folder_digest`). ``runs``: the cell runs as
    :func:`cell_metrics` read them (read here when None). Returns (how many runs got metrics,
    the id of the run that got the reports or None)."""
    logged = log_metrics(tracker, grid, metrics, runs)
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
    tracking = (ctx.tracking_uri(params), params.tracking.experiment)
    with contextlib.ExitStack() as stack:
        runs: Future | None = None
        if local_cores() > 1:  # MLflow's search of the cell runs, in a process of its own meanwhile
            pool = stack.enter_context(ProcessPoolExecutor(1, mp_context=get_context("spawn")))
            runs = pool.submit(cell_metrics, *tracking)
        report = build(read_inputs(params, grid))
        write(report, ctx.REPORTS, read_norms(grid, norm_cells(report.figures)))
        track(Tracker(*tracking), grid, report.mlflow, ctx.REPORTS,
              runs.result() if runs is not None else None)
    print(f"report: leaderboard of {len(report.cells)} cells ({report.failed} failed) -> "
          f"{(ctx.REPORTS / 'leaderboard.md').resolve()}")
    if report.failed:
        print(f"report: {report.failed} of {len(report.cells)} cells failed; reasons in the "
              "leaderboard", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
