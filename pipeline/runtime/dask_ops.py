"""Dask graphs over all cells' Parquet: statistics and search, one ``compute`` per stage.

Tasks: one read per cell and view, one task per (cell, representation, column block) for the
per-coordinate tests, one summary per (cell, representation). A cell whose data is bad gets a
failed row with the reason; nothing here raises for one cell's data.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd
from dask import compute, delayed

from pipeline.config import ComputeConfig, StatsConfig
from pipeline.runtime import storage
from pipeline.runtime.executor import LOOPBACK, init_ray
from pipeline.runtime.storage import read_embeddings
from pipeline.seeding import numpy_generator
from pipeline.stats import (
    CellSummary,
    ColumnTests,
    column_tests,
    concat_column_tests,
    random_projections,
    summarize,
)
from pipeline.stats.intervals import summary_intervals
from pipeline.stats.null import gaussian_null
from pipeline.stats.uncertainty import check_level

REPRESENTATIONS = ("raw", "normalized")  # plus "projected" when stats.projections > 0
INTERVAL_LEVEL = "ci_level"  # column: the confidence level of a row's <stat>_lo / <stat>_hi


@contextlib.contextmanager
def scheduler(compute_cfg: ComputeConfig, n_workers: int) -> Iterator[dict[str, Any]]:
    """Dask on Ray when a Ray address is configured, else a local distributed cluster on 127.0.0.1.

    Yields the keyword arguments for :func:`dask.compute`.
    """
    if compute_cfg.ray_address or os.environ.get("RAY_ADDRESS"):
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


def _read(path: str, view: int) -> np.ndarray | str:
    try:
        return read_embeddings(path, view)
    except Exception as err:  # noqa: BLE001 — a missing or corrupt file fails this cell only
        return f"cannot read {path} view {view}: {type(err).__name__}: {err}"


def _represent(z: np.ndarray | str, representation: str, projections: int,
               cell_id: str) -> np.ndarray | str:
    """raw; rows L2-normalised; or raw rows projected on random orthonormal directions."""
    if isinstance(z, str) or representation == "raw":
        return z
    if representation == "projected":
        if not np.isfinite(z).all():
            return z  # summarize() reports the bad values
        return random_projections(z, projections, numpy_generator(cell_id, "projections"))
    with np.errstate(invalid="ignore", divide="ignore"):
        z64 = np.asarray(z, dtype=np.float64)
        return z64 / np.linalg.norm(z64, axis=1, keepdims=True)


def _intervals(z: np.ndarray | str, parts: Sequence[ColumnTests | None], n_boot: int,
               cell_id: str, representation: str, level: float) -> dict[str, float]:
    """Intervals at confidence ``level`` of the summaries as ``<stat>_lo`` / ``<stat>_hi``
    columns, and ``ci_level`` = level ({} when bad data)."""
    if isinstance(z, str) or any(p is None for p in parts) or not np.isfinite(z).all():
        return {}
    tests = concat_column_tests(parts)  # type: ignore[arg-type]
    # the same resamples at every level: a level changes the quantiles read, not the draws
    rng = numpy_generator(cell_id, "bootstrap", representation)
    try:
        cis = summary_intervals(np.asarray(z, dtype=np.float64), tests, n_boot, rng, level)
    except Exception:  # noqa: BLE001 — a cell without intervals still has its summary
        return {}
    bounds = {f"{k}_{end}": getattr(ci, "low" if end == "lo" else "high")
              for k, ci in cis.items() for end in ("lo", "hi")}
    return {**bounds, INTERVAL_LEVEL: level}


def _null(z: np.ndarray | str, cell_id: str, draws: int) -> dict[str, float]:
    """``null_<stat>``: the diagnostics of Gaussian data with z's shape, mean and covariance."""
    if isinstance(z, str) or not np.isfinite(z).all() or z.shape[0] < 8:
        return {}
    ref = gaussian_null(z, numpy_generator(cell_id, "null"), draws)
    return {f"null_{k}": v for k, v in asdict(ref).items() if k != "draws"}


def _block_tests(z: np.ndarray | str, start: int, stop: int) -> ColumnTests | None:
    if isinstance(z, str):
        return None
    try:
        return column_tests(z[:, start:stop])
    except Exception:  # noqa: BLE001 — summarize() recomputes and reports the reason
        return None


def _summary(z: np.ndarray | str, z_pos: np.ndarray | str, parts: Sequence[ColumnTests | None],
             representation: str) -> CellSummary:
    if isinstance(z, str):
        return CellSummary(status="failed", reason=z, n=0, d=0)
    pos = None if isinstance(z_pos, str) else z_pos
    tests = None if any(p is None for p in parts) else concat_column_tests(parts)  # type: ignore[arg-type]
    try:
        # summarize() makes the normalised representation from raw z itself (our column blocks
        # were computed on that same representation); projections arrive already projected.
        if representation == "projected":
            return summarize(z, None, tests, "raw")
        return summarize(z, pos, tests, representation)
    except Exception as err:  # noqa: BLE001
        return CellSummary(status="failed", reason=f"{type(err).__name__}: {err}", n=0, d=0)


def stats_graph(paths: dict[tuple[str, int], storage.Location], cfg: StatsConfig, *,
                level: float) -> dict[tuple[str, int, str], Any]:
    """Delayed (summary, column tests, interval bounds) per (cell_id, epoch, representation).

    paths: the embeddings file of each (cell_id, epoch) — the final one and the snapshots.
    level: confidence level of the intervals (the stage passes ``report.level``).
    """
    check_level(level)
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
            summary = delayed(_summary)(zr if rep == "projected" else z, z_pos, parts, rep,
                                        dask_key_name=f"summary-{key}-{rep}")
            bounds = (delayed(_intervals)(zr, parts, cfg.bootstrap, cell_id, rep, level,
                                          dask_key_name=f"intervals-{key}-{rep}")
                      if cfg.bootstrap else {})
            null = (delayed(_null)(z, cell_id, cfg.null_draws, dask_key_name=f"null-{key}")
                    if rep == "raw" and cfg.null_draws else {})
            out[(cell_id, epoch, rep)] = (summary, parts, bounds, null)
    return out


def _embed_dim(path: storage.Location) -> int:
    try:
        return storage.embed_dim(path)
    except Exception:  # noqa: BLE001 — the read task reports the problem
        return 0


def compute_stats(paths: dict[tuple[str, int], storage.Location], cfg: StatsConfig,
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
    for (cell_id, epoch, rep), (summary, parts, bounds, null) in results.items():
        row = asdict(summary)
        row["n_samples"] = row.pop("n")  # held-out rows; `n` is the grid's training size
        rows.append({"cell_id": cell_id, "epoch": epoch, "representation": rep, **row, **bounds,
                     **null})
        if summary.status != "ok" or any(p is None for p in parts):
            continue  # no per-coordinate detail for a cell whose data failed the checks
        tests = concat_column_tests(parts)
        detail.append(pd.DataFrame({"cell_id": cell_id, "epoch": epoch, "representation": rep,
                                    "coord": np.arange(tests.ad.size), "ad": tests.ad,
                                    "ad_pass": tests.ad_pass, "dp_stat": tests.dp_stat,
                                    "dp_p": tests.dp_p}))
    detail_df = pd.concat(detail, ignore_index=True) if detail else pd.DataFrame()
    return pd.DataFrame(rows), detail_df


def _retrieval_row(path: str, cell_id: str, k: int, k_eval: int, tau: float,
                   labels: np.ndarray | None) -> dict[str, Any]:
    from pipeline.search import heldout_infonce_risk, knn_accuracy, recall_at_k

    z0, z1 = read_embeddings(path, 0), read_embeddings(path, 1)
    if not (np.isfinite(z0).all() and np.isfinite(z1).all()):
        raise ValueError("embeddings contain NaN or infinite values")
    row: dict[str, Any] = {}
    for name, kk in (("risk_k", max(k, 1)), ("risk_keval", k_eval)):
        r = heldout_infonce_risk(z0, z1, kk, tau if tau > 0 else 1.0,
                                 numpy_generator(cell_id, "search", kk))
        row[name], row[f"{name}_se"] = r.risk, r.se
    row.update({f"recall_at_{k_}": v for k_, v in recall_at_k(z0, z1).items()})
    if labels is not None:
        row["knn_accuracy"] = knn_accuracy(z0, labels)
    return row


def _search_cell(cell: Any, dataset: Any, path: str, cfg: Any) -> tuple[dict[str, Any], list]:
    """Retrieval and the similarity-search quantities of one cell; failures become a status."""
    from pipeline.runtime.evaluate import search_cell

    folder = storage.location(path)
    row: dict[str, Any] = {"cell_id": cell.cell_id, "search_status": "ok", "search_reason": ""}
    sweep: list[dict[str, Any]] = []
    try:
        row.update(_retrieval_row(str(folder / "embeddings.parquet"), cell.cell_id, cell.k,
                                  cfg.k_eval, cell.tau, dataset.y_heldout))
        if cell.objective == "contrastive":
            summary, sweep = search_cell(cell, dataset, folder, cfg)
            row.update(summary)
    except Exception as err:  # noqa: BLE001 — one cell's failure is recorded, not raised
        row.update(search_status="failed", search_reason=f"{type(err).__name__}: {err}")
    return row, sweep


def _bounds_cell(cell: Any, dataset: Any, path: str, cfg: Any) -> dict[str, Any]:
    from pipeline.runtime.evaluate import bounds_cell

    try:
        return bounds_cell(cell, dataset, storage.location(path), cfg)
    except Exception as err:  # noqa: BLE001
        return {"cell_id": cell.cell_id, "bound_status": f"failed: {type(err).__name__}: {err}"}


def compute_search(cells: Sequence[Any], dataset_path: storage.Location,
                   folders: Mapping[str, storage.Location], cfg: Any, compute_cfg: ComputeConfig,
                   n_workers: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per cell, the k-sweep rows) for every cell in one Dask compute; ``folders``:
    each cell's folder in the store."""
    from pipeline.runtime.storage import read_dataset

    dataset = delayed(read_dataset)(str(dataset_path), dask_key_name="dataset")
    tasks = [delayed(_search_cell)(c, dataset, str(folders[c.cell_id]), cfg,
                                   dask_key_name=f"search-{c.cell_id}") for c in cells]
    with scheduler(compute_cfg, n_workers) as kwargs:
        (results,) = compute(tasks, **kwargs)
    rows = pd.DataFrame([r for r, _ in results])
    sweep = pd.DataFrame([s for _, part in results for s in part])
    return rows, sweep


def compute_bounds(cells: Sequence[Any], dataset_path: storage.Location,
                   folders: Mapping[str, storage.Location], cfg: Any, compute_cfg: ComputeConfig,
                   n_workers: int) -> pd.DataFrame:
    """Theorem 1's terms for every cell, one Dask task per cell."""
    from pipeline.runtime.storage import read_dataset

    dataset = delayed(read_dataset)(str(dataset_path), dask_key_name="dataset")
    tasks = [delayed(_bounds_cell)(c, dataset, str(folders[c.cell_id]), cfg,
                                   dask_key_name=f"bounds-{c.cell_id}") for c in cells]
    with scheduler(compute_cfg, n_workers) as kwargs:
        (rows,) = compute(tasks, **kwargs)
    return pd.DataFrame(rows)
