"""Many MLflow runs, or many runs' metrics, in one transaction of a local SQLite store.

MLflow's API holds one run per call: creating a cell's run, logging its params and history, its
dataset input and its end are four calls, each a session of its own with the run read back
and checked (most of the train driver's own time on a grid of tiny cells),
and the first report after training sends one ``log_batch`` per cell's run. For a local SQLite
store (``sqlite:///``: one file, the driver its single writer) this module writes what those
calls write, for a whole batch of runs, in one transaction through SQLAlchemy Core on the
tables of MLflow's own models (``mlflow.store.tracking.dbmodels.models``), with MLflow's own
validation of every metric, param and tag first:

- :func:`create_runs`: new, finished runs (``runs``, ``tags``, ``params``, ``metrics``,
  ``latest_metrics``, ``datasets``, ``inputs``, ``input_tags``), as ``create_run``,
  ``log_batch``, ``log_inputs`` and ``set_terminated`` leave them;
- :func:`log_metrics`: metrics into existing runs (``metrics`` and ``latest_metrics``), as
  ``log_batch`` leaves them.

``tests/runtime/test_tracking_sql.py`` writes the same runs both ways and compares what
``MlflowClient`` reads back (info, tags, params, latest metrics, every metric's history, the
dataset inputs), so a change of MLflow's schema or of its semantics fails there. The tables are
those of :data:`MLFLOW_TESTED` (``pyproject.toml`` bounds mlflow to it): before writing, each
transaction compares the database's tables with :data:`SCHEMA` and refuses one that differs
(:class:`SchemaMismatch`), rather than leave out a column it does not know (MLflow 2.16's
``inputs`` has no ``step``). Any other store (a tracking server) goes through the client
(:mod:`pipeline.runtime.tracking.runs`).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import sqlalchemy
from mlflow.entities import DatasetInput, LifecycleStage, Metric, Param, RunTag, SourceType
from mlflow.store.tracking.dbmodels.models import (
    SqlDataset,
    SqlExperiment,
    SqlInput,
    SqlInputTag,
    SqlLatestMetric,
    SqlMetric,
    SqlParam,
    SqlRun,
    SqlTag,
)
from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME, MLFLOW_USER
from mlflow.utils.uri import append_to_uri_path
from mlflow.utils.validation import (
    _validate_batch_log_data,
    _validate_dataset_inputs,
    _validate_param_keys_unique,
)

from pipeline.runtime.paths import sqlite_path

MLFLOW_TESTED = "3.17"  # the MLflow whose tables this module writes (pyproject.toml's bound)
# The columns of the tables written here, as MLflow 3.17 makes them: a database whose columns
# differ is refused before anything is written (a missing one would be left out of the rows, an
# extra one left empty, both silently).
SCHEMA: dict[str, frozenset[str]] = {table: frozenset(columns.split()) for table, columns in {
    "runs": "run_uuid name source_type source_name entry_point_name user_id status start_time "
            "end_time source_version lifecycle_stage artifact_uri experiment_id deleted_time",
    "tags": "key value run_uuid",
    "params": "key value run_uuid",
    "metrics": "key value timestamp run_uuid step is_nan",
    "latest_metrics": "key value timestamp step is_nan run_uuid",
    "datasets": "dataset_uuid experiment_id name digest dataset_source_type dataset_source "
                "dataset_schema dataset_profile",
    "inputs": "input_uuid source_type source_id destination_type destination_id step",
    "input_tags": "input_uuid name value"}.items()}
READ = {"experiments": frozenset({"experiment_id", "artifact_location"})}  # may hold more
_CHUNK = 500  # rows per executemany and run ids per IN (...): well under SQLite's variable limit
_MAX = 1.7976931348623157e308  # MLflow stores ±inf as the largest finite doubles


@dataclass
class NewRun:
    """One run as the client calls would leave it: created with ``tags`` at ``start_time``
    (ms since the epoch), ``params``, ``metrics`` and ``tags`` logged, ``datasets`` as
    inputs, ended with ``status`` (FINISHED | FAILED) at ``end_time``."""

    run_id: str
    start_time: int
    end_time: int | None
    status: str
    tags: dict[str, str]
    params: dict[str, str] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    datasets: list[DatasetInput] = field(default_factory=list)


def new_run_id() -> str:
    """A run id as MLflow makes them (32 hex digits)."""
    return uuid.uuid4().hex


def is_local_sqlite(uri: str) -> bool:
    """Whether ``uri`` is a SQLite file (``sqlite:///<path>``, a query string allowed)."""
    return sqlite_path(uri) is not None


def _stored(value: float) -> tuple[float, bool]:
    """(value, is_nan) as MLflow's SQL store keeps a metric: NaN as 0, ±inf as ±max double."""
    if math.isnan(value):
        return 0.0, True
    if math.isinf(value):
        return (_MAX if value > 0 else -_MAX), False
    return float(value), False


def _validated(run: NewRun) -> None:
    """MLflow's own checks of each metric, param and tag of a ``log_batch`` and of a
    ``log_inputs`` (names, lengths, values), raising its ``MlflowException`` before anything is
    written. No count limit: ``MlflowClient.log_batch`` splits any number of entities into
    requests within MLflow's per-request limits, so the client's path takes them all too."""
    params = [Param(k, v) for k, v in run.params.items()]
    tags = [RunTag(k, v) for k, v in run.tags.items()]
    _validate_batch_log_data(run.metrics, params, tags)
    _validate_param_keys_unique(params)
    if run.datasets:
        _validate_dataset_inputs(run.datasets)


class SchemaMismatch(RuntimeError):
    """A tracking database whose tables are not the ones this module writes (:data:`SCHEMA`)."""


def check_schema(db: sqlalchemy.Connection, uri: str) -> None:
    """Raise :class:`SchemaMismatch`, naming the database, each table that differs, its missing
    and extra columns and the MLflow expected, unless the tables are :data:`SCHEMA` (and
    :data:`READ` has the columns read)."""
    inspector = sqlalchemy.inspect(db)
    present = set(inspector.get_table_names())
    problems = []
    for table, expected in {**SCHEMA, **READ}.items():
        if table not in present:
            problems.append(f"table {table} is missing")
            continue
        found = {column["name"] for column in inspector.get_columns(table)}
        missing = sorted(expected - found)
        extra = sorted(found - expected) if table in SCHEMA else []
        differs = ([f"lacks column(s) {', '.join(missing)}"] if missing else []) + (
            [f"has extra column(s) {', '.join(extra)}"] if extra else [])
        if differs:
            problems.append(f"table {table} {' and '.join(differs)}")
    if problems:
        where = Path(sqlite_path(uri) or uri).resolve()
        raise SchemaMismatch(
            f"MLflow database {where}: {'; '.join(problems)}: {__name__} writes the tables of "
            f"MLflow {MLFLOW_TESTED} (installed: mlflow {metadata.version('mlflow')}); install "
            f"mlflow {MLFLOW_TESTED}.x (pyproject.toml) and upgrade the database (`mlflow db "
            "upgrade <uri>`), or log to a tracking server")


def engine(uri: str) -> sqlalchemy.Engine:
    """An engine on the store without a pool: each use opens and closes its connection."""
    return sqlalchemy.create_engine(uri, poolclass=sqlalchemy.pool.NullPool)


def _insert(db: sqlalchemy.Connection, into: sqlalchemy.Table | sqlalchemy.Insert,
            rows: Sequence[dict]) -> None:
    """``rows`` into a table (or through an insert statement), in chunks."""
    statement = into.insert() if isinstance(into, sqlalchemy.Table) else into
    for start in range(0, len(rows), _CHUNK):
        db.execute(statement, list(rows[start:start + _CHUNK]))


def _latest(metrics: Iterable[dict]) -> dict[tuple[str, str], dict]:
    """Per (run, key), the row MLflow keeps in ``latest_metrics``: the largest (step,
    timestamp, value)."""
    out: dict[tuple[str, str], dict] = {}
    for m in metrics:
        key = (m["run_uuid"], m["key"])
        now = out.get(key)
        if now is None or (m["step"], m["timestamp"], m["value"]) > (
                now["step"], now["timestamp"], now["value"]):
            out[key] = m
    return out


def _metric_rows(run_id: str, metrics: Iterable[Metric]) -> list[dict]:
    """Rows of ``metrics``, the exact duplicates within the batch left out (as MLflow does)."""
    rows, seen = [], set()
    for m in metrics:
        value, is_nan = _stored(float(m.value))
        row = {"run_uuid": run_id, "key": m.key, "value": value, "timestamp": int(m.timestamp),
               "step": int(m.step), "is_nan": is_nan}
        identity = (m.key, row["timestamp"], row["step"], value, is_nan)
        if identity not in seen:
            seen.add(identity)
            rows.append(row)
    return rows


def create_runs(uri: str, experiment_id: str, runs: Sequence[NewRun]) -> None:
    """Write ``runs`` (new run ids) into the experiment, all in one transaction."""
    if not runs:
        return
    for run in runs:
        _validated(run)
    experiments = SqlExperiment.__table__
    db_engine = engine(uri)
    try:
        with db_engine.begin() as db:
            check_schema(db, uri)
            location = db.execute(sqlalchemy.select(experiments.c.artifact_location).where(
                experiments.c.experiment_id == int(experiment_id))).scalar_one()
            run_rows, tag_rows, param_rows, metric_rows = [], [], [], []
            for run in runs:
                tags = dict(run.tags)
                name = tags.setdefault(MLFLOW_RUN_NAME, run.run_id)
                run_rows.append({
                    "run_uuid": run.run_id, "name": name,
                    "source_type": SourceType.to_string(SourceType.UNKNOWN), "source_name": "",
                    "entry_point_name": "", "user_id": tags.get(MLFLOW_USER, "unknown"),
                    "status": run.status, "start_time": int(run.start_time),
                    "end_time": None if run.end_time is None else int(run.end_time),
                    "deleted_time": None, "source_version": "",
                    "lifecycle_stage": LifecycleStage.ACTIVE,
                    "artifact_uri": append_to_uri_path(location, run.run_id, "artifacts"),
                    "experiment_id": int(experiment_id)})
                tag_rows += [{"run_uuid": run.run_id, "key": k, "value": v}
                             for k, v in tags.items()]
                param_rows += [{"run_uuid": run.run_id, "key": k, "value": v}
                               for k, v in run.params.items()]
                metric_rows += _metric_rows(run.run_id, run.metrics)
            _insert(db, SqlRun.__table__, run_rows)
            _insert(db, SqlTag.__table__, tag_rows)
            _insert(db, SqlParam.__table__, param_rows)
            _insert(db, SqlMetric.__table__, metric_rows)
            _insert(db, SqlLatestMetric.__table__, list(_latest(metric_rows).values()))
            _write_inputs(db, int(experiment_id), runs)
    finally:
        db_engine.dispose()


def _write_inputs(db: sqlalchemy.Connection, experiment_id: int, runs: Sequence[NewRun]) -> None:
    """The runs' dataset inputs: one ``datasets`` row per (experiment, name, digest), reused
    when it exists, an ``inputs`` edge per run and its ``input_tags`` (as ``log_inputs``)."""
    datasets = SqlDataset.__table__
    wanted = {(d.dataset.name, d.dataset.digest): d.dataset for r in runs for d in r.datasets}
    if not wanted:
        return
    known: dict[tuple[str, str], str] = {}
    names = sorted({name for name, _ in wanted})
    for row in db.execute(sqlalchemy.select(datasets.c.name, datasets.c.digest,
                                            datasets.c.dataset_uuid)
                          .where(datasets.c.experiment_id == experiment_id,
                                 datasets.c.name.in_(names))):
        known.setdefault((row.name, row.digest), row.dataset_uuid)
    new: list[dict[str, Any]] = [
        {"dataset_uuid": uuid.uuid4().hex, "experiment_id": experiment_id, "name": d.name,
         "digest": d.digest, "dataset_source_type": d.source_type, "dataset_source": d.source,
         "dataset_schema": d.schema, "dataset_profile": d.profile}
        for key, d in wanted.items() if key not in known]
    known |= {(str(row["name"]), str(row["digest"])): str(row["dataset_uuid"]) for row in new}
    _insert(db, datasets, new)
    inputs, input_tags = [], []
    for run in runs:
        firsts: dict[tuple[str, str], DatasetInput] = {}
        for d in run.datasets:  # the first input of each (name, digest), as log_inputs
            firsts.setdefault((d.dataset.name, d.dataset.digest), d)
        for key, d in firsts.items():
            input_id = uuid.uuid4().hex
            inputs.append({"input_uuid": input_id, "source_type": "DATASET",
                           "source_id": known[key], "destination_type": "RUN",
                           "destination_id": run.run_id, "step": 0})
            input_tags += [{"input_uuid": input_id, "name": t.key, "value": t.value}
                           for t in d.tags]
    _insert(db, SqlInput.__table__, inputs)
    _insert(db, SqlInputTag.__table__, input_tags)


def log_metrics(uri: str, metrics: Mapping[str, Sequence[Metric]]) -> None:
    """``metrics`` (run id → metrics) into existing runs, in one transaction: every value into
    ``metrics`` (an identical (key, timestamp, step, value) already there is left out, as
    MLflow does), ``latest_metrics`` updated where the new (step, timestamp, value) is larger."""
    metrics = {run_id: list(ms) for run_id, ms in metrics.items() if ms}
    if not metrics:
        return
    for ms in metrics.values():
        _validate_batch_log_data(ms, [], [])
    table, latest = SqlMetric.__table__, SqlLatestMetric.__table__
    runs = SqlRun.__table__
    db_engine = engine(uri)
    try:
        with db_engine.begin() as db:
            check_schema(db, uri)
            ids = sorted(metrics)
            active: set[str] = set()
            now: dict[tuple[str, str], dict] = {}
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start:start + _CHUNK]
                active |= set(db.execute(sqlalchemy.select(runs.c.run_uuid).where(
                    runs.c.run_uuid.in_(chunk),
                    runs.c.lifecycle_stage == LifecycleStage.ACTIVE)).scalars())
                for held in db.execute(sqlalchemy.select(latest).where(
                        latest.c.run_uuid.in_(chunk))).mappings():
                    now[(held["run_uuid"], held["key"])] = dict(held)
            missing = sorted(set(ids) - active)
            if missing:
                raise ValueError(f"run ids {missing[:3]}: no such active run in {uri}")
            rows = [r for run_id in ids for r in _metric_rows(run_id, metrics[run_id])]
            # a value identical to one the run holds (the table's primary key) is left out
            _insert(db, table.insert().prefix_with("OR IGNORE"), rows)
            updates: list[dict[str, Any]] = []
            inserts: list[dict[str, Any]] = []
            for key, row in _latest(rows).items():
                old = now.get(key)
                if old is None:
                    inserts.append(row)
                elif (row["step"], row["timestamp"], row["value"]) > (
                        old["step"], old["timestamp"], old["value"]):
                    updates.append({"b_run": row["run_uuid"], "b_key": row["key"],
                                    **{c: row[c] for c in ("value", "timestamp", "step",
                                                           "is_nan")}})
            _insert(db, latest, inserts)
            if updates:
                statement = latest.update().where(
                    latest.c.run_uuid == sqlalchemy.bindparam("b_run"),
                    latest.c.key == sqlalchemy.bindparam("b_key")).values(
                    value=sqlalchemy.bindparam("value"),
                    timestamp=sqlalchemy.bindparam("timestamp"),
                    step=sqlalchemy.bindparam("step"), is_nan=sqlalchemy.bindparam("is_nan"))
                for start in range(0, len(updates), _CHUNK):
                    db.execute(statement, updates[start:start + _CHUNK])
    finally:
        db_engine.dispose()

