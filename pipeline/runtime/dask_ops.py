"""Dask graphs over all cells' Parquet: statistics, search and bounds, one ``compute`` per stage.

Stats tasks: one read per cell and view, one task per (cell, representation, column block) for
the per-coordinate tests, one summary per (cell, representation). Every task is a
:func:`pipeline.runtime.tasks.task`: a cell whose data is bad gets a failed row with the reason,
and nothing here raises for one cell's data.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd
from dask import compute, delayed

from pipeline.bounds.cell import bounds_cell
from pipeline.config import BoundsConfig, ComputeConfig, SearchConfig, StatsConfig
from pipeline.datasets import Dataset
from pipeline.grid import Cell
from pipeline.runtime import storage
from pipeline.runtime.evaluate import load_encoders
from pipeline.runtime.executor import LOOPBACK, init_ray, ray_address
from pipeline.runtime.tasks import CellDataError, Failed, task
from pipeline.search import heldout_infonce_risk, loo_majority_knn_accuracy, recall_at_k
from pipeline.search.cell import CellSearch, search_cell
from pipeline.seeding import numpy_generator
from pipeline.stats import (
    CellSummary,
    ColumnTests,
    check_embeddings,
    column_tests,
    concat_column_tests,
    random_projections,
    summarize,
)
from pipeline.stats.intervals import summary_intervals
from pipeline.stats.null import gaussian_null
from pipeline.stats.summary import REPRESENTATIONS
from pipeline.stats.uncertainty import check_level

INTERVAL_LEVEL = "ci_level"  # column: the confidence level of a row's <stat>_lo / <stat>_hi


@contextlib.contextmanager
def scheduler(compute_cfg: ComputeConfig, n_workers: int) -> Iterator[dict[str, Any]]:
    """Dask on Ray when a Ray address is configured, else a local distributed cluster on 127.0.0.1.

    Yields the keyword arguments for :func:`dask.compute`.
    """
    if ray_address(compute_cfg):
        from ray.util.dask import ray_dask_get

        init_ray(compute_cfg)
        yield {"scheduler": ray_dask_get}
        return
    from distributed import Client, LocalCluster

    # One single-threaded worker per core: torch's spinning OpenMP threads in several workers
    # would fight over the cores (the stats engine ran 3-6x slower that way here).
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host=LOOPBACK,
                      dashboard_address=None, env=env, silence_logs=logging.ERROR) as cluster, \
            Client(cluster):
        yield {}


@task()
def _read(path: str, view: int) -> np.ndarray:
    try:
        return storage.read_embeddings(path, view)
    except Exception as err:  # a missing or corrupt file: this cell's reason
        raise CellDataError(f"cannot read {path} view {view}: {type(err).__name__}: {err}") from err


@task()
def _represent(z: np.ndarray, representation: str, projections: int, cell_id: str) -> np.ndarray:
    """raw; rows L2-normalised; or raw rows projected on random orthonormal directions."""
    if representation == "raw":
        return z
    if representation == "projected":
        if not np.isfinite(z).all():
            raise CellDataError(check_embeddings(z))
        return random_projections(z, projections, numpy_generator(cell_id, "projections"))
    with np.errstate(invalid="ignore", divide="ignore"):
        z64 = np.asarray(z, dtype=np.float64)
        return z64 / np.linalg.norm(z64, axis=1, keepdims=True)


@task()
def _block_tests(z: np.ndarray, start: int, stop: int) -> ColumnTests:
    return column_tests(z[:, start:stop])


@task()
def _tests(parts: list[ColumnTests]) -> ColumnTests:
    """The column blocks' results in column order (``Failed`` if any block failed)."""
    return concat_column_tests(parts)


@task("z_pos", "tests")
def _summary(z: np.ndarray, z_pos: np.ndarray | None, tests: ColumnTests | None,
             representation: str) -> CellSummary:
    """summarize() with the blocks' tests; without them (a block failed) it recomputes the tests
    and reports why; without readable positives alignment is NaN."""
    # summarize() makes the normalised representation from raw z itself (our column blocks were
    # computed on that same representation); projections arrive already projected.
    if representation == "projected":
        return summarize(z, None, tests, "raw")
    return summarize(z, z_pos, tests, representation)


@task()
def _intervals(z: np.ndarray, tests: ColumnTests, n_boot: int, cell_id: str,
               representation: str, level: float) -> dict[str, float]:
    """Intervals at confidence ``level`` of the summaries as ``<stat>_lo`` / ``<stat>_hi``
    columns, and ``ci_level`` = level."""
    if not np.isfinite(z).all():
        raise CellDataError("non-finite embeddings: no intervals")
    # the same resamples at every level: a level changes the quantiles read, not the draws
    rng = numpy_generator(cell_id, "bootstrap", representation)
    cis = summary_intervals(np.asarray(z, dtype=np.float64), tests, n_boot, rng, level)
    bounds = {f"{k}_{end}": getattr(ci, "low" if end == "lo" else "high")
              for k, ci in cis.items() for end in ("lo", "hi")}
    return {**bounds, INTERVAL_LEVEL: level}


@task()
def _null(z: np.ndarray, cell_id: str, draws: int) -> dict[str, float]:
    """``null_<stat>``: the diagnostics of Gaussian data with z's shape, mean and covariance."""
    if not np.isfinite(z).all() or z.shape[0] < 8:
        raise CellDataError("non-finite embeddings or fewer than 8 rows: no null reference")
    ref = gaussian_null(z, numpy_generator(cell_id, "null"), draws)
    return {f"null_{k}": v for k, v in asdict(ref).items() if k != "draws"}


def stats_graph(paths: Mapping[tuple[str, int], storage.Location], cfg: StatsConfig, *,
                level: float) -> dict[tuple[str, int, str], tuple[Any, ...]]:
    """Delayed (summary, column tests, interval bounds, null reference) per (cell_id, epoch,
    representation); each may compute to :class:`~pipeline.runtime.tasks.Failed`.

    paths: the embeddings file of each (cell_id, epoch) — the final one and the snapshots.
    level: confidence level of the intervals (the stage passes ``report.level``).
    """
    check_level(level)
    # summarize()'s raw and normalized, plus random projections when stats.projections > 0
    reps = REPRESENTATIONS + (("projected",) if cfg.projections else ())
    out = {}
    for (cell_id, epoch), path in paths.items():
        key = f"{cell_id}-e{epoch}"
        z = delayed(_read)(str(path), 0, dask_key_name=f"read-{key}-0")
        z_pos = delayed(_read)(str(path), 1, dask_key_name=f"read-{key}-1")
        d = _embed_dim(path)  # from the Parquet schema, once per file
        for rep in reps:
            width = cfg.projections if rep == "projected" else d
            # the same directions for every epoch of a cell: the control is projected alike
            zr = delayed(_represent)(z, rep, cfg.projections, cell_id,
                                     dask_key_name=f"rep-{key}-{rep}")
            parts = [delayed(_block_tests)(zr, a, min(a + cfg.block_cols, width),
                                           dask_key_name=f"tests-{key}-{rep}-{a}")
                     for a in range(0, max(width, 1), cfg.block_cols)]
            tests = delayed(_tests)(parts, dask_key_name=f"concat-{key}-{rep}")
            summary = delayed(_summary)(zr if rep == "projected" else z, z_pos, tests, rep,
                                        dask_key_name=f"summary-{key}-{rep}")
            bounds = (delayed(_intervals)(zr, tests, cfg.bootstrap, cell_id, rep, level,
                                          dask_key_name=f"intervals-{key}-{rep}")
                      if cfg.bootstrap else {})
            null = (delayed(_null)(z, cell_id, cfg.null_draws, dask_key_name=f"null-{key}")
                    if rep == "raw" and cfg.null_draws else {})
            out[(cell_id, epoch, rep)] = (summary, tests, bounds, null)
    return out


def _embed_dim(path: storage.Location) -> int:
    try:
        return storage.embed_dim(path)
    except Exception:  # noqa: BLE001 — the read task reports the problem
        return 0


def _stats_row(cell_id: str, epoch: int, rep: str, summary: CellSummary | Failed,
               bounds: dict[str, float] | Failed, null: dict[str, float] | Failed) -> dict[str, Any]:
    if isinstance(summary, Failed):
        summary = CellSummary(status="failed", reason=summary.reason, n=0, d=0)
    row = asdict(summary)
    row["n_samples"] = row.pop("n")  # held-out rows; `n` is the grid's training size
    extras = [x for x in (bounds, null) if not isinstance(x, Failed)]  # optional columns
    return {"cell_id": cell_id, "epoch": epoch, "representation": rep, **row,
            **{k: v for x in extras for k, v in x.items()}}


def compute_stats(paths: Mapping[tuple[str, int], storage.Location], cfg: StatsConfig,
                  compute_cfg: ComputeConfig, *, level: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary table, per-coordinate detail table) for all cells in one Dask compute.

    Interval columns ``<stat>_lo`` / ``<stat>_hi`` (cv, ad_mean, ad_pass_frac, dp_p_mean,
    dp_pass_frac) are at confidence ``level`` (the stage passes ``report.level``), recorded per
    row in ``ci_level``.
    """
    graph = stats_graph(paths, cfg, level=level)
    with scheduler(compute_cfg, cfg.n_workers) as kwargs:
        (results,) = compute(graph, **kwargs)
    rows, detail = [], []
    for (cell_id, epoch, rep), (summary, tests, bounds, null) in results.items():
        rows.append(_stats_row(cell_id, epoch, rep, summary, bounds, null))
        if isinstance(summary, Failed) or summary.status != "ok" or isinstance(tests, Failed):
            continue  # no per-coordinate detail for a cell whose data failed the checks
        detail.append(pd.DataFrame({"cell_id": cell_id, "epoch": epoch, "representation": rep,
                                    "coord": np.arange(tests.ad.size), "ad": tests.ad,
                                    "ad_pass": tests.ad_pass, "dp_stat": tests.dp_stat,
                                    "dp_p": tests.dp_p}))
    detail_df = pd.concat(detail, ignore_index=True) if detail else pd.DataFrame()
    return pd.DataFrame(rows), detail_df


def _retrieval_row(path: str, cell: Cell, cfg: SearchConfig,
                   labels: np.ndarray | None) -> dict[str, Any]:
    """Recall@{1,5,10}, the held-out risk at the cell's k and at ``search.k_eval``, and the
    leave-one-out kNN accuracy where there are labels."""
    z0, z1 = storage.read_embeddings(path, 0), storage.read_embeddings(path, 1)
    if not (np.isfinite(z0).all() and np.isfinite(z1).all()):
        raise CellDataError("embeddings contain NaN or infinite values")
    row: dict[str, Any] = {f"recall_at_{k}": v for k, v in recall_at_k(z0, z1).items()}
    for name, k in (("risk_k", max(cell.k, 1)), ("risk_keval", cfg.k_eval)):
        # R(φ; k, τ) is a property of an encoder trained at τ: a supervised cell has no τ
        # (pipeline.grid.SUPERVISED sets it to 0), so its risk is not defined rather than
        # read at some other temperature.
        if cell.objective != "contrastive":
            row[name] = row[f"{name}_se"] = float("nan")
            continue
        r = heldout_infonce_risk(z0, z1, k, cell.tau, numpy_generator(cell.cell_id, "search", k))
        row[name], row[f"{name}_se"] = r.risk, r.se
    if labels is not None:
        row["knn_loo_majority"] = loo_majority_knn_accuracy(z0, labels, cfg.knn_k)
    return row


@task()
def _search_cell(cell: Cell, dataset: Dataset, folder: str, cfg: SearchConfig) -> CellSearch:
    """Retrieval and the similarity-search quantities of one cell."""
    where = storage.location(folder)
    row = _retrieval_row(str(where / "embeddings.parquet"), cell, cfg, dataset.y_heldout)
    if cell.objective != "contrastive":
        return CellSearch(row, [])
    summary, sweep = search_cell(cell, dataset, load_encoders(cell, dataset, where), cfg)
    return CellSearch({**row, **summary}, sweep)


@task()
def _bounds_cell(cell: Cell, dataset: Dataset, folder: str, cfg: BoundsConfig) -> dict[str, Any]:
    needs_weights = cell.objective == "contrastive"  # bounds_cell skips the others at once
    encoders = load_encoders(cell, dataset, folder) if needs_weights else {}
    result = bounds_cell(cell, dataset, encoders, cfg)
    return {"bound_status": result.status, **(asdict(result.terms) if result.terms else {})}


def _datasets(dataset_path: storage.Location) -> Any:
    """The prepared dataset as one delayed read that every cell's task shares."""
    return delayed(storage.read_dataset)(str(dataset_path), dask_key_name="dataset")


def compute_search(cells: Sequence[Cell], dataset_path: storage.Location,
                   folders: Mapping[str, storage.Location], cfg: SearchConfig,
                   compute_cfg: ComputeConfig, n_workers: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per cell, the k-sweep rows) for every cell in one Dask compute; ``folders``:
    each cell's folder in the store. A failed cell's row has ``search_status`` failed and its
    ``search_reason``."""
    dataset = _datasets(dataset_path)
    tasks = [delayed(_search_cell)(c, dataset, str(folders[c.cell_id]), cfg,
                                   dask_key_name=f"search-{c.cell_id}") for c in cells]
    with scheduler(compute_cfg, n_workers) as kwargs:
        (results,) = compute(tasks, **kwargs)
    rows, sweep = [], []
    for cell, got in zip(cells, results, strict=True):
        head = {"cell_id": cell.cell_id}
        if isinstance(got, Failed):
            rows.append({**head, "search_status": "failed", "search_reason": got.reason})
            continue
        rows.append({**head, "search_status": "ok", "search_reason": "", **got.summary})
        sweep += got.sweep
    return pd.DataFrame(rows), pd.DataFrame(sweep)


def compute_bounds(cells: Sequence[Cell], dataset_path: storage.Location,
                   folders: Mapping[str, storage.Location], cfg: BoundsConfig,
                   compute_cfg: ComputeConfig, n_workers: int) -> pd.DataFrame:
    """Theorem 1's terms for every cell, one Dask task per cell; a failed cell's
    ``bound_status`` is ``failed: <reason>``."""
    dataset = _datasets(dataset_path)
    tasks = [delayed(_bounds_cell)(c, dataset, str(folders[c.cell_id]), cfg,
                                   dask_key_name=f"bounds-{c.cell_id}") for c in cells]
    with scheduler(compute_cfg, n_workers) as kwargs:
        (results,) = compute(tasks, **kwargs)
    return pd.DataFrame([{"cell_id": c.cell_id, **(
        {"bound_status": f"failed: {got.reason}"} if isinstance(got, Failed) else got)}
        for c, got in zip(cells, results, strict=True)])
