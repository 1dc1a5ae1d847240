"""The report stage's MLflow side: each cell's report metrics into its training's run, reports/
as artifacts (:func:`track`), from the cell runs' latest metrics
(:func:`pipeline.runtime.tracking.runs.cell_metrics`).

The report stage runs these in a second process while it builds and writes the report
(:class:`pipeline.runtime.tracking.report_logger.ReportLogger`), or inline through :func:`sync`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from pipeline.grid import GRID_AXES
from pipeline.runtime.tracking.runs import Tracker, cell_metrics, run_key

Runs = Mapping[str, tuple[str, Mapping[str, float]]]  # run key -> (run id, latest metrics)


def sync(uri: str, experiment: str, grid: pd.DataFrame,
         metrics: Mapping[str, list[tuple[str, float]]], reports: Path,
         runs: Runs | None = None) -> tuple[int, str | None]:
    """:func:`track` into the store at ``uri``: the report stage's one call."""
    return track(Tracker(uri, experiment), grid, metrics, reports, runs)


def _run_metrics(runs: Mapping[str, str], grid: pd.DataFrame,
                 values: Mapping[str, list[tuple[str, float]]]) -> dict[str, list]:
    """Each cell's final metrics (``values``) by the run id of its training's MLflow run
    (``runs``: :func:`~pipeline.runtime.tracking.runs.run_key` → run id). Cells that share a
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


def log_metrics(tracker: Tracker, grid: pd.DataFrame,
                metrics: Mapping[str, list[tuple[str, float]]], runs: Runs | None = None) -> int:
    """Each cell's ``metrics`` into its training's run (:func:`_run_metrics`), the values the run
    holds already left out (:meth:`Tracker.log_changed`); ``runs`` as :func:`cell_metrics` reads
    them (read here when None). Returns how many runs got metrics."""
    if runs is None:
        runs = cell_metrics(tracker.uri, tracker.experiment)
    run_ids = {key: run_id for key, (run_id, _) in runs.items()}
    return tracker.log_changed(dict(runs.values()), _run_metrics(run_ids, grid, metrics))


def log_reports(tracker: Tracker, reports: Path) -> str | None:
    """The folder ``reports`` as artifacts (``reports/``) of the newest invocation run of this
    workspace when that is a train run without reports yet (the train run of this
    ``dvc repro``), else of a new, finished report run; nothing when the newest invocation
    already holds these very reports (:func:`folder_digest`). Returns the id of the run that
    got them, or None."""
    digest = folder_digest(reports)
    newest = tracker.newest_invocation()
    tags = newest.data.tags if newest is not None else {}
    if tags.get(REPORTS_TAG) == digest:
        return None
    own = not (tags.get("cbench.stage") == "train" and REPORTS_TAG not in tags)
    run_id = tracker.start_parent("report", {}) if own else str(newest.info.run_id)
    tracker.client.log_artifacts(run_id, str(reports), artifact_path="reports")
    tracker.client.set_tag(run_id, REPORTS_TAG, digest)
    if own:
        tracker.end(run_id)
    return run_id


def track(tracker: Tracker, grid: pd.DataFrame, metrics: Mapping[str, list[tuple[str, float]]],
          reports: Path, runs: Runs | None = None
          ) -> tuple[int, str | None]:
    """Log the report: each cell's ``metrics`` (cell id → (name, value)) into its training's run,
    those already logged with the same value left out (:func:`log_metrics`), then the folder
    ``reports`` (:func:`log_reports`). ``runs``: the cell runs as :func:`cell_metrics` read them
    (read here when None). Returns (how many runs got metrics, the id of the run that got the
    reports or None)."""
    return log_metrics(tracker, grid, metrics, runs), log_reports(tracker, reports)
