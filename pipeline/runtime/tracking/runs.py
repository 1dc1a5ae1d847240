"""MLflow: a parent run per invocation that logs, exactly one run per cell version, batches.

An invocation's parent run is created when its first child needs it (:class:`Invocation`), so a
rerun with nothing to do adds no run. The driver is the single writer (the local store is one
SQLite file). A cell's run is looked up by its ``cell_id`` and ``cell_version`` tags before one
is created, so resumed or repeated invocations never duplicate it (and drivers sharing a store
create it only under the cell's claim). A run carries the cell's real start and end time,
MLflow's source tags and its dataset as an input; the experiment opens in the UI's
model-training view. Metrics go in batches (one ``log_metric`` is a transaction of its own, a
batch shares one; docs/speed.md has the measurements); a batch holds one run's data (MLflow's
API has none across runs), and :meth:`Tracker.log_changed` leaves out the values a run already
holds. On a local SQLite store the train driver's new cell runs (:func:`record_cells`) and the
report's metrics (:meth:`Tracker.log_changed`) go in one transaction for many runs
(:mod:`pipeline.runtime.tracking.sql_writer`), written as the client's calls would write them.

The tracking URI is ``$MLFLOW_TRACKING_URI`` when it is set (MLflow's own convention: a cluster
passes it, with ``MLFLOW_TRACKING_USERNAME`` / ``_PASSWORD`` / ``_TOKEN``, which MLflow reads
itself, from a Kubernetes Secret), else ``tracking.uri``. An invocation run is tagged with the
workspace folder and host that started it, so the report stage finds the train run of its own
workspace (``invocation_parent``), never the newest run of another driver sharing the server.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunStatus, RunTag
from mlflow.store.tracking.dbmodels.models import SqlExperiment, SqlLatestMetric, SqlRun, SqlTag
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import (
    MLFLOW_DATASET_CONTEXT,
    MLFLOW_GIT_COMMIT,
    MLFLOW_PARENT_RUN_ID,
    MLFLOW_RUN_NAME,
    MLFLOW_SOURCE_NAME,
    MLFLOW_SOURCE_TYPE,
)
from sqlalchemy import event
from sqlalchemy.engine import Engine

from pipeline.runtime.paths import sqlite_path
from pipeline.runtime.store.files import exclusive
from pipeline.runtime.tracking import sql_writer

_BATCH = 900  # below MLflow's 1000-entity limit per log_batch
_PAGE = 10_000  # runs per search_runs page
# MLflow 3 opens an experiment without this tag on its GenAI overview
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")


def _first_use(uri: str) -> contextlib.AbstractContextManager[None]:
    """An exclusive lock beside a local SQLite store while a client creates its tables and the
    experiment (two drivers creating one database at once break its schema migration)."""
    path = sqlite_path(uri)
    if path is None:
        return contextlib.nullcontext()
    return exclusive(Path(path + ".lock"))


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    """On every SQLite connection SQLAlchemy opens in this process (MLflow's SQL store is
    SQLAlchemy's): the write-ahead log (kept in the file: every later client uses it) and
    ``synchronous = NORMAL``. Logging a cell's run takes several commits, each of which waits
    for the disk in SQLite's default rollback journal; in WAL mode with NORMAL only checkpoints
    do (docs/speed.md has the timings). What a power cut can cost is the last commits,
    never the file; the cell store holds the cells, and the next train logs any cell whose run is
    missing (:func:`pipeline.runtime.driver.sync_runs`). A database another process holds in a
    transaction at this moment keeps its journal mode until the next connection."""
    if not isinstance(connection, sqlite3.Connection):
        return
    cursor = connection.cursor()
    try:
        cursor.execute("PRAGMA busy_timeout = 20000")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.OperationalError:  # locked, or a file system without shared memory
        pass
    finally:
        cursor.close()


WAL_ENV = "CBENCH_MLFLOW_WAL"  # "0": leave SQLite's journal as it is (a network file system)


def _use_wal(uri: str) -> None:
    """Register :func:`_sqlite_pragmas` once, before the first client of a SQLite store, unless
    ``$CBENCH_MLFLOW_WAL`` is ``0``: WAL needs the processes that open the file on one host
    (shared memory), which a store on a network file system read from several hosts is not."""
    if os.environ.get(WAL_ENV, "1") == "0":
        if event.contains(Engine, "connect", _sqlite_pragmas):
            event.remove(Engine, "connect", _sqlite_pragmas)
        return
    if uri.startswith("sqlite:") and not event.contains(Engine, "connect", _sqlite_pragmas):
        event.listen(Engine, "connect", _sqlite_pragmas)


def effective_uri(configured: str) -> str:
    """``$MLFLOW_TRACKING_URI`` when set, else ``configured`` (``tracking.uri``, resolved)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or configured


def _origin() -> dict[str, str]:
    """Where an invocation runs: its workspace (DVC allows one ``dvc repro`` at a time in one)
    and host."""
    return {"cbench.workspace": str(Path.cwd().resolve()), "cbench.host": socket.gethostname()}


@dataclass(frozen=True)
class RunRef:
    """A run's id and status (RUNNING, FINISHED, FAILED, ...)."""

    run_id: str
    status: str


class Tracker:
    """A thin wrapper over :class:`MlflowClient` bound to one experiment."""

    def __init__(self, uri: str, experiment: str):
        uri = self.uri = effective_uri(uri)
        self.experiment = experiment
        _use_wal(uri)
        with _first_use(uri):  # drivers sharing a SQLite file must not create it twice at once
            self.client = MlflowClient(tracking_uri=uri)
            exp = self.client.get_experiment_by_name(experiment)
            self.experiment_id = exp.experiment_id if exp else self.client.create_experiment(
                experiment, tags=dict([EXPERIMENT_KIND]))
            if exp is not None and exp.tags.get(EXPERIMENT_KIND[0]) is None:
                self.client.set_experiment_tag(self.experiment_id, *EXPERIMENT_KIND)

    def start_parent(self, stage: str, tags: Mapping[str, str],
                     start_time: int | None = None) -> str:
        """A new invocation run of ``stage``; start_time: ms since the epoch (default: now)."""
        start = time.time() if start_time is None else start_time / 1000
        name = f"{stage}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(start))}"
        run = self.client.create_run(self.experiment_id, start_time=start_time, run_name=name,
                                     tags={"cbench.kind": "invocation", "cbench.stage": stage,
                                           **_origin(), **tags})
        return str(run.info.run_id)

    def newest_invocation(self, stage: str | None = None) -> Any:
        """The run of the newest invocation of this workspace on this host, of ``stage`` (any
        stage when None), or None."""
        origin = {"cbench.kind": "invocation", **({"cbench.stage": stage} if stage else {}),
                  **_origin()}
        if any("'" in v for v in origin.values()):
            return None  # not expressible in a filter string: the caller starts its own run
        where = " and ".join(f"tags.`{k}` = '{v}'" for k, v in origin.items())
        runs = self.client.search_runs([self.experiment_id], where,
                                       order_by=["attributes.start_time DESC"], max_results=1)
        return runs[0] if runs else None

    def invocation_parent(self, stage: str = "train") -> str | None:
        """The run id of the newest ``stage`` invocation of this workspace on this host (the one
        of this ``dvc repro``), or None."""
        run = self.newest_invocation(stage)
        return str(run.info.run_id) if run is not None else None

    def end(self, run_id: str, failed: bool = False, end_time: int | None = None) -> None:
        status = RunStatus.to_string(RunStatus.FAILED if failed else RunStatus.FINISHED)
        self.client.set_terminated(run_id, status=status, end_time=end_time)

    def _search(self, filter_string: str) -> list[Any]:
        """Every run matching ``filter_string``, page by page."""
        runs, token = [], None
        while True:
            page = self.client.search_runs([self.experiment_id], filter_string,
                                           max_results=_PAGE, page_token=token)
            runs += list(page)
            token = page.token
            if not token:
                return runs

    def cell_runs(self) -> dict[str, Any]:
        """Every run that carries a cell_id tag, keyed by :func:`run_key`."""
        return {run_key(r.data.tags["cell_id"], r.data.tags.get("cell_version", "")): r
                for r in self._search("tags.cell_id != ''")}

    def cell_run_refs(self) -> dict[str, RunRef]:
        """:meth:`cell_runs`' ids and statuses: on a local SQLite store from two queries of
        MLflow's tables (:func:`_sqlite_cell_runs`), not a search that builds every run's
        params, tags and metrics (its cost grows with every run's params and metrics)."""
        if sql_writer.is_local_sqlite(self.uri):
            return {key: RunRef(run_id, status) for key, (run_id, status, _)
                    in _sqlite_cell_runs(self.uri, self.experiment, with_metrics=False).items()}
        return {key: RunRef(str(r.info.run_id), str(r.info.status))
                for key, r in self.cell_runs().items()}

    def cell_run(self, key: str, parent_id: str | None, tags: Mapping[str, str],
                 existing: Mapping[str, RunRef] | None = None,
                 start_time: int | None = None) -> str:
        """The id of the run of ``key`` (cell_id/version): found by tag (in ``existing`` when
        given), else created."""
        found = existing.get(key) if existing is not None else self.find(key)
        if found is not None:
            return found.run_id
        cell_id, _, version = key.partition("/")
        return str(self.client.create_run(
            self.experiment_id, start_time=start_time,
            tags={**_key_tags(cell_id, version, parent_id), **tags}).info.run_id)

    def find(self, key: str) -> RunRef | None:
        """The run of ``key`` (cell_id/version), or None."""
        cell_id, _, version = key.partition("/")
        runs = self._search(f"tags.cell_id = '{cell_id}' and tags.cell_version = '{version}'")
        return RunRef(str(runs[0].info.run_id), str(runs[0].info.status)) if runs else None

    def log(self, run_id: str, params: Mapping[str, Any] | None = None,
            metrics: Iterable[tuple[str, float, int]] = (),
            tags: Mapping[str, str] | None = None) -> None:
        """Params, tags and (key, value, step) metrics in as few ``log_batch`` calls as possible."""
        entities: list[Any] = [Param(k, _param_str(v)) for k, v in (params or {}).items()]
        entities += [RunTag(k, str(v)) for k, v in (tags or {}).items()]
        entities += _metrics(metrics, int(time.time() * 1000))
        for start in range(0, len(entities), _BATCH):
            chunk = entities[start:start + _BATCH]
            self.client.log_batch(run_id,
                                  metrics=[e for e in chunk if isinstance(e, Metric)],
                                  params=[e for e in chunk if isinstance(e, Param)],
                                  tags=[e for e in chunk if isinstance(e, RunTag)])

    def log_changed(self, latest: Mapping[str, Mapping[str, float]],
                    metrics: Mapping[str, Iterable[tuple[str, float, int]]]) -> int:
        """(key, value, step) metrics per run id, the metrics whose value differs from the run's
        latest one left out (``latest``: run id → metric name → its latest value, as
        :func:`cell_metrics` reads them), so a rerun that computed the same values logs nothing.
        On a local SQLite store every run's values go in one transaction
        (:func:`pipeline.runtime.tracking.sql_writer.log_metrics`); elsewhere one ``log_batch`` per
        run with a changed metric, the fewest MLflow's API allows (a batch holds one run's data).
        Returns how many runs were logged."""
        changed: dict[str, list[tuple[str, float, int]]] = {}
        for run_id, entries in metrics.items():
            now = latest.get(run_id, {})
            values = [(k, v, step) for k, v, step in entries if now.get(k) != float(v)]
            if values:
                changed[run_id] = values
        if sql_writer.is_local_sqlite(self.uri):  # every run's batch in one transaction
            stamp = int(time.time() * 1000)
            sql_writer.log_metrics(self.uri, {run_id: _metrics(values, stamp)
                                                for run_id, values in changed.items()})
        else:
            for run_id, values in changed.items():
                self.log(run_id, metrics=values)
        return len(changed)

    def log_release(self, name: str, commit: str, archive: Path,
                    counts: Mapping[str, int]) -> str:
        """One finished run for the release ``name`` (tags: ``cbench.kind = release``, its name
        and commit; its cell counts as params), its ``.tar.gz`` as the run's artifact, so the
        MLflow UI lists releases beside the cells. Returns the run's id."""
        run = self.client.create_run(
            self.experiment_id, run_name=f"release-{name}",
            tags={"cbench.kind": "release", "cbench.release": name, MLFLOW_GIT_COMMIT: commit,
                  **_origin()})
        run_id = str(run.info.run_id)
        self.log(run_id, params={f"cells.{k}": v for k, v in counts.items()})
        self.client.log_artifact(run_id, str(archive))
        self.end(run_id)
        return run_id


class Invocation:
    """The parent run of one invocation, created when a child run first needs it (:attr:`run_id`),
    with the invocation's start time: an invocation that logs nothing (a rerun with every cell
    done) leaves no run behind."""

    def __init__(self, tracker: Tracker, stage: str, tags: Mapping[str, str]):
        self.tracker, self.stage, self.tags = tracker, stage, dict(tags)
        self.start_time = int(time.time() * 1000)  # ms since the epoch
        self._run_id: str | None = None

    @property
    def run_id(self) -> str:
        """The run's id; the run is created on the first call."""
        if self._run_id is None:
            self._run_id = self.tracker.start_parent(self.stage, self.tags, self.start_time)
        return self._run_id

    @property
    def started(self) -> bool:
        """Whether the run exists (:attr:`run_id` was read)."""
        return self._run_id is not None


def _param_str(value: Any) -> str:
    return str(value)[:6000]


def cell_metrics(uri: str, experiment: str) -> dict[str, tuple[str, dict[str, float]]]:
    """Every cell run of ``experiment`` (:meth:`Tracker.cell_runs`), keyed by :func:`run_key`:
    its run id and its latest metric values. Plain values, so that a process of its own can read
    them while the report stage builds its tables.

    A local SQLite store (``sqlite:///``) is read in three queries on MLflow's own tables
    (:func:`_sqlite_cell_runs`): MLflow's search builds an object for every param, tag and
    metric of every run, where these queries read the rows. Any other store goes through the
    search."""
    uri = effective_uri(uri)
    if sql_writer.is_local_sqlite(uri):
        return {key: (run_id, metrics) for key, (run_id, _, metrics)
                in _sqlite_cell_runs(uri, experiment).items()}
    runs = Tracker(uri, experiment).cell_runs()
    return {key: (str(r.info.run_id), dict(r.data.metrics)) for key, r in runs.items()}


def _sqlite_cell_runs(uri: str, experiment: str, with_metrics: bool = True
                      ) -> dict[str, tuple[str, str, dict[str, float]]]:
    """Every cell run of a SQLite store, keyed by :func:`run_key`: (run id, status, its latest
    metrics, or none without ``with_metrics``), read with SQLAlchemy from the tables of MLflow's
    models (``runs``, ``tags``, ``latest_metrics``, ``experiments``), as its search returns
    them: the active runs with a non-empty ``cell_id`` tag; where two runs have one key, the
    one the search lists last (start time descending, then run id); a metric logged as NaN is
    NaN. A store or experiment that does not exist yet has no runs."""
    path = sqlite_path(uri)
    if path is None or not Path(path).exists():
        return {}
    _use_wal(uri)
    runs, tags, latest = SqlRun.__table__, SqlTag.__table__, SqlLatestMetric.__table__
    experiments = SqlExperiment.__table__
    cell, version = tags.alias("cell"), tags.alias("version")
    engine = sql_writer.engine(uri)
    try:
        with engine.connect() as db:
            found = db.execute(sqlalchemy.select(experiments.c.experiment_id).where(
                experiments.c.name == experiment)).scalar()
            if found is None:
                return {}
            chosen = (sqlalchemy.select(runs.c.run_uuid, runs.c.status, cell.c.value,
                                        version.c.value)
                      .join(cell, (cell.c.run_uuid == runs.c.run_uuid) & (cell.c.key == "cell_id"))
                      .outerjoin(version, (version.c.run_uuid == runs.c.run_uuid)
                                 & (version.c.key == "cell_version"))
                      .where(runs.c.experiment_id == found, runs.c.lifecycle_stage == "active",
                             cell.c.value != "")
                      .order_by(runs.c.start_time.desc(), runs.c.run_uuid))
            keys = {run_id: (run_key(cell_id, ver or ""), status)
                    for run_id, status, cell_id, ver in db.execute(chosen)}
            metrics: dict[str, dict[str, float]] = {run_id: {} for run_id in keys}
            if with_metrics:
                rows = db.execute(sqlalchemy.select(latest.c.run_uuid, latest.c.key,
                                                    latest.c.value, latest.c.is_nan)
                                  .where(latest.c.run_uuid.in_(chosen.with_only_columns(
                                      runs.c.run_uuid).order_by(None))))
                for run_id, key, value, is_nan in rows:
                    metrics[run_id][key] = math.nan if is_nan else float(value)
    finally:
        engine.dispose()
    return {key: (run_id, str(status), metrics[run_id])
            for run_id, (key, status) in keys.items()}


def flatten(prefix: str, obj: Any) -> dict[str, Any]:
    """Nested config → flat ``a.b.c`` keys for MLflow params."""
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    return {prefix: obj}


def run_key(cell_id: str, version: str) -> str:
    return f"{cell_id}/{version}"


def _ms(seconds: Any) -> int | None:
    return int(float(seconds) * 1000) if seconds not in (None, "") else None


def _cell_content(record: Mapping[str, Any], history: Iterable[Mapping[str, float]],
                  source: str) -> tuple[dict[str, str], dict[str, Any],
                                        list[tuple[str, float, int]], DatasetInput]:
    """What a cell's run holds: (tags, params, (key, value, step) metrics, its dataset input),
    from its ``cell.json`` record and per-epoch history."""
    tags = {"git_sha": str(record.get("git_sha", "")),
            "dataset_hash": str(record.get("dataset_hash", "")),
            "code_fingerprint": str(record.get("code_fingerprint", {}).get("digest", "")),
            "status": str(record["status"]), MLFLOW_GIT_COMMIT: str(record.get("git_sha", "")),
            MLFLOW_SOURCE_NAME: source, MLFLOW_SOURCE_TYPE: "LOCAL"}
    metrics = [(f"train_{k}", h[k], int(h["epoch"])) for h in history
               for k in ("loss", "tau_mean", "seconds") if k in h]
    metrics.append(("wall_seconds", float(record.get("wall_seconds") or 0.0), 0))
    reason = str(record.get("reason", ""))
    if reason:
        tags["failure_reason"] = reason[:5000]
    compute = record.get("compute") or {}
    tags |= {k: str(compute[k]) for k in ("precision", "memory_format") if k in compute}
    data = record["config"]["data"]
    dataset = DatasetInput(
        Dataset(name=str(data["name"]), digest=str(record.get("dataset_hash", ""))[:36],
                source_type="local",
                source=json.dumps({"prepared": f"data/datasets/{data['name']}.parquet",
                                   "n_train": data["n_train"], "n_heldout": data["n_heldout"]})),
        [InputTag(MLFLOW_DATASET_CONTEXT, "train")])
    return tags, flatten("", record["config"]), metrics, dataset


def _key_tags(cell_id: str, version: str, parent_id: str | None) -> dict[str, str]:
    """The tags a cell's run is created with: its key (found again by them), name and parent."""
    tags = {"cell_id": cell_id, "cell_version": version, MLFLOW_RUN_NAME: cell_id}
    if parent_id:
        tags[MLFLOW_PARENT_RUN_ID] = parent_id
    return tags


def record_cell(tracker: Tracker, parent_id: str | None, record: Mapping[str, Any],
                history: Iterable[Mapping[str, float]],
                existing: Mapping[str, RunRef] | None = None,
                source: str = "stages/train.py") -> str:
    """Log one cell (its ``cell.json`` record and per-epoch history) to its single run, through
    the client: found by its key (``existing``, else a search), else created."""
    cell_id, version = str(record["cell_id"]), str(record.get("version", ""))
    tags, params, metrics, dataset = _cell_content(record, history, source)
    run_id = tracker.cell_run(run_key(cell_id, version), parent_id, tags, existing,
                              start_time=_ms(record.get("started_at")))
    tracker.log(run_id, params=params, metrics=metrics, tags=tags)
    tracker.client.log_inputs(run_id, [dataset])
    tracker.end(run_id, failed=record["status"] != "ok", end_time=_ms(record.get("finished_at")))
    return run_id


def record_cells(tracker: Tracker, parent_id: str | None,
                 cells: Sequence[tuple[Mapping[str, Any], Iterable[Mapping[str, float]]]],
                 existing: Mapping[str, RunRef], source: str = "stages/train.py") -> list[str]:
    """Log many cells ((record, history) pairs) to their runs; their run ids, in order.

    ``existing``: the runs that exist, by :func:`run_key` (:meth:`Tracker.cell_run_refs`). A
    cell whose run exists is logged into it through the client (:func:`record_cell`); on a
    local SQLite store the new runs are all written in one transaction
    (:func:`pipeline.runtime.tracking.sql_writer.create_runs`), each exactly as the client's calls
    would leave it; elsewhere one by one through the client."""
    ids: list[str | None] = [None] * len(cells)
    new: list[sql_writer.NewRun] = []
    bulk = sql_writer.is_local_sqlite(tracker.uri)
    now = int(time.time() * 1000)
    for i, (record, history) in enumerate(cells):
        cell_id, version = str(record["cell_id"]), str(record.get("version", ""))
        if not bulk or run_key(cell_id, version) in existing:
            ids[i] = record_cell(tracker, parent_id, record, history, existing, source)
            continue
        tags, params, metrics, dataset = _cell_content(record, history, source)
        start, end = _ms(record.get("started_at")), _ms(record.get("finished_at"))
        run = sql_writer.NewRun(
            sql_writer.new_run_id(), now if start is None else start,
            now if end is None else end,
            RunStatus.to_string(RunStatus.FINISHED if record["status"] == "ok"
                                else RunStatus.FAILED),
            {**_key_tags(cell_id, version, parent_id), **tags},
            {k: _param_str(v) for k, v in params.items()},
            _metrics(metrics, now), [dataset])
        new.append(run)
        ids[i] = run.run_id
    sql_writer.create_runs(tracker.uri, tracker.experiment_id, new)
    return [str(i) for i in ids]


def _metrics(metrics: Iterable[tuple[str, float, int]], now: int) -> list[Metric]:
    """(key, value, step) → MLflow metrics at ``now`` (ms), None and NaN left out (as
    :meth:`Tracker.log`)."""
    return [Metric(k, float(v), now, int(step)) for k, v, step in metrics
            if v is not None and not (isinstance(v, float) and math.isnan(v))]
