"""MLflow: one parent run per invocation, exactly one run per cell, batched logging.

The driver is the single writer (the local store is one SQLite file). A cell's run is looked up
by its ``cell_id`` tag before one is created, so resumed or repeated invocations never duplicate
it. Metrics go in batches: one ``log_metric`` into SQLite costs ~6 ms here, a batch ~80 µs/metric.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

_BATCH = 900  # below MLflow's 1000-entity limit per log_batch


class Tracker:
    """A thin wrapper over :class:`MlflowClient` bound to one experiment."""

    def __init__(self, uri: str, experiment: str):
        self.client = MlflowClient(tracking_uri=uri)
        exp = self.client.get_experiment_by_name(experiment)
        self.experiment_id = exp.experiment_id if exp else self.client.create_experiment(experiment)

    def start_parent(self, stage: str, tags: Mapping[str, str]) -> str:
        run = self.client.create_run(self.experiment_id, run_name=f"{stage}-{time.strftime('%Y%m%d-%H%M%S')}",
                                     tags={"cbench.kind": "invocation", "cbench.stage": stage, **tags})
        return str(run.info.run_id)

    def latest_parent(self) -> str | None:
        runs = self.client.search_runs([self.experiment_id], "tags.`cbench.kind` = 'invocation'",
                                       order_by=["attributes.start_time DESC"], max_results=1)
        return str(runs[0].info.run_id) if runs else None

    def end(self, run_id: str, failed: bool = False) -> None:
        status = RunStatus.to_string(RunStatus.FAILED if failed else RunStatus.FINISHED)
        self.client.set_terminated(run_id, status=status)

    def cell_runs(self) -> dict[str, Any]:
        """Every run that carries a cell_id tag, keyed by cell id."""
        runs = self.client.search_runs([self.experiment_id], "tags.cell_id != ''", max_results=50000)
        return {r.data.tags["cell_id"]: r for r in runs}

    def cell_run(self, cell_id: str, parent_id: str | None, tags: Mapping[str, str],
                 existing: Mapping[str, Any] | None = None) -> str:
        """The id of the cell's run: found by tag, else created under ``parent_id``."""
        found = existing.get(cell_id) if existing is not None else self._find(cell_id)
        if found is not None:
            return str(found.info.run_id)
        all_tags = {"cell_id": cell_id, MLFLOW_RUN_NAME: cell_id, **tags}
        if parent_id:
            all_tags[MLFLOW_PARENT_RUN_ID] = parent_id
        return str(self.client.create_run(self.experiment_id, tags=all_tags).info.run_id)

    def _find(self, cell_id: str) -> Any:
        runs = self.client.search_runs([self.experiment_id], f"tags.cell_id = '{cell_id}'", max_results=2)
        return runs[0] if runs else None

    def log(self, run_id: str, params: Mapping[str, Any] | None = None,
            metrics: Iterable[tuple[str, float, int]] = (), tags: Mapping[str, str] | None = None) -> None:
        """Params, tags and (key, value, step) metrics in as few ``log_batch`` calls as possible."""
        now = int(time.time() * 1000)
        entities: list[Any] = [Param(k, _param_str(v)) for k, v in (params or {}).items()]
        entities += [RunTag(k, str(v)) for k, v in (tags or {}).items()]
        entities += [Metric(k, float(v), now, int(step)) for k, v, step in metrics
                     if v is not None and not (isinstance(v, float) and math.isnan(v))]
        for start in range(0, len(entities), _BATCH):
            chunk = entities[start:start + _BATCH]
            self.client.log_batch(run_id,
                                  metrics=[e for e in chunk if isinstance(e, Metric)],
                                  params=[e for e in chunk if isinstance(e, Param)],
                                  tags=[e for e in chunk if isinstance(e, RunTag)])


def _param_str(value: Any) -> str:
    return str(value)[:6000]


def flatten(prefix: str, obj: Any) -> dict[str, Any]:
    """Nested config → flat ``a.b.c`` keys for MLflow params."""
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    return {prefix: obj}


def record_cell(tracker: Tracker, parent_id: str | None, record: Mapping[str, Any],
                history: Iterable[Mapping[str, float]], existing: Mapping[str, Any] | None = None) -> str:
    """Log one cell (its ``cell.json`` record and per-epoch history) to its single run."""
    cell_id = str(record["cell_id"])
    tags = {"git_sha": str(record.get("git_sha", "")), "dataset_hash": str(record.get("dataset_hash", "")),
            "status": str(record["status"])}
    run_id = tracker.cell_run(cell_id, parent_id, tags, existing)
    metrics = [(f"train_{k}", h[k], int(h["epoch"])) for h in history for k in ("loss", "tau_mean", "seconds") if k in h]
    metrics.append(("wall_seconds", float(record.get("wall_seconds") or 0.0), 0))
    reason = str(record.get("reason", ""))
    tags = {**tags, **({"failure_reason": reason[:5000]} if reason else {})}
    tracker.log(run_id, params=flatten("", record["config"]), metrics=metrics, tags=tags)
    tracker.end(run_id, failed=record["status"] != "ok")
    return run_id
