"""Dask graphs over all cells' Parquet: statistics, search and bounds, one ``compute`` per stage.

Each Dask task evaluates a batch of consecutive cells (:func:`batches`: about
:data:`BATCHES_PER_WORKER` tasks per worker), so a grid of many small cells costs the cells' own
work and not a scheduler round trip per statistic: a task of a few milliseconds costs the
distributed scheduler about as much again. A batch calls the per-cell function in a loop —
:func:`stats_cell` (read the file, then per representation the column tests in blocks of
``stats.block_cols``, the summary, the intervals and the null reference), :func:`search_one`,
:func:`bounds_one` — the same functions ``bench/grid_scale.py`` calls in one process to measure
what the stages add. Every step is a :func:`pipeline.runtime.tasks.task`: a cell whose data is
bad gets a failed row with the reason, and nothing here raises for one cell's data. Each stage
shows a progress bar with an ETA on stderr, advanced as batches finish.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any, Protocol, TypeVar

import numpy as np
import pandas as pd
from dask import delayed
from dask.delayed import Delayed
from tqdm import tqdm

from pipeline.bounds.cell import bounds_cell
from pipeline.config import BoundsConfig, ComputeConfig, SearchConfig, StatsConfig
from pipeline.datasets import Dataset
from pipeline.grid import Cell
from pipeline.runtime import layout, storage
from pipeline.runtime.evaluate import load_encoders
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
BATCHES_PER_WORKER = 16  # tasks per worker: balanced load and a progress bar that moves
T = TypeVar("T")


class Run(Protocol):
    """What :func:`scheduler` yields: ``tasks`` computed together (inputs they share, once), their
    values in order, with a progress bar ``desc`` that advances by ``sizes[i]`` (counted in
    ``unit``) when task ``i`` finishes."""

    def __call__(self, tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
                 unit: str = "cell") -> list[Any]: ...


def batches(items: Sequence[T], n_workers: int,
            per_worker: int = BATCHES_PER_WORKER) -> list[list[T]]:
    """``items`` in ``min(len(items), n_workers * per_worker)`` runs of consecutive items, in
    order, whose sizes differ by at most one (the longer first); none when there are no items."""
    for name, value in (("n_workers", n_workers), ("per_worker", per_worker)):
        if value < 1:
            raise ValueError(f"{name} = {value}: must be an integer >= 1")
    count = min(len(items), n_workers * per_worker)
    if count == 0:
        return []
    size, longer = divmod(len(items), count)
    out, start = [], 0
    for i in range(count):
        stop = start + size + (i < longer)
        out.append(list(items[start:stop]))
        start = stop
    return out


def progress(total: int, desc: str, unit: str = "cell") -> tqdm:
    """The stages' progress bar on stderr: done of ``total``, rate and ETA (tqdm's default
    refresh interval, as the train stage's)."""
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)


def _run_distributed(client: Any) -> Run:
    from distributed import as_completed

    def run(tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
            unit: str = "cell") -> list[Any]:
        futures = client.compute(list(tasks))
        size = {f.key: n for f, n in zip(futures, sizes, strict=True)}
        with progress(sum(sizes), desc, unit) as bar:
            for done in as_completed(futures):
                bar.update(size[done.key])
        return list(client.gather(futures))

    return run


def _run_ray() -> Run:
    import ray
    from dask import compute
    from ray.util.dask import ray_dask_get

    def run(tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
            unit: str = "cell") -> list[Any]:
        # ray_persist: the tasks' object refs instead of their values, to follow them finishing
        (refs,) = compute(list(tasks), scheduler=ray_dask_get, ray_persist=True)
        size = {ref: n for ref, n in zip(refs, sizes, strict=True)}
        pending = list(refs)
        with progress(sum(sizes), desc, unit) as bar:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                bar.update(size[ready[0]])
        return list(ray.get(list(refs)))

    return run


@contextlib.contextmanager
def scheduler(compute_cfg: ComputeConfig, n_workers: int) -> Iterator[Run]:
    """Dask on Ray when a Ray address is configured, else a local distributed cluster on 127.0.0.1.

    Yields a :class:`Run`: ``run(tasks, desc, sizes)``.
    """
    # imports Ray: here rather than at the top, so that the workers unpickling this module's
    # tasks do not pay for it
    from pipeline.runtime.executor import LOOPBACK, init_ray, ray_address

    if ray_address(compute_cfg):
        init_ray(compute_cfg)
        yield _run_ray()
        return
    from distributed import Client, LocalCluster

    # One single-threaded worker per core: torch's spinning OpenMP threads in several workers
    # would fight over the cores (the stats engine ran 3-6x slower that way here).
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host=LOOPBACK,
                      dashboard_address=None, env=env, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        yield _run_distributed(client)


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


StatsKey = tuple[str, int, str]  # (cell_id, epoch, representation)
# (summary, column tests, interval bounds, null reference); each may be Failed
StatsResult = tuple[Any, Any, Any, Any]


def representations(cfg: StatsConfig) -> tuple[str, ...]:
    """summarize()'s raw and normalized, plus random projections when stats.projections > 0."""
    return REPRESENTATIONS + (("projected",) if cfg.projections else ())


def stats_cell(cell_id: str, epoch: int, path: storage.Location, cfg: StatsConfig,
               level: float) -> dict[StatsKey, StatsResult]:
    """(summary, column tests, interval bounds, null reference) of one embeddings file per
    representation; each may be :class:`~pipeline.runtime.tasks.Failed`, nothing raises.

    The column tests run in blocks of ``stats.block_cols`` columns, concatenated; the null
    reference is computed for the raw representation only (``{}`` elsewhere and when
    ``stats.null_draws`` is 0), the intervals when ``stats.bootstrap`` > 0.
    """
    z = _read(str(path), 0)
    z_pos = _read(str(path), 1)
    d = 0 if isinstance(z, Failed) else int(np.shape(z)[1])
    out: dict[StatsKey, StatsResult] = {}
    for rep in representations(cfg):
        width = cfg.projections if rep == "projected" else d
        # the same directions for every epoch of a cell: the control is projected alike
        zr = _represent(z, rep, cfg.projections, cell_id)
        tests = _tests([_block_tests(zr, a, min(a + cfg.block_cols, width))
                        for a in range(0, max(width, 1), cfg.block_cols)])
        summary = _summary(zr if rep == "projected" else z, z_pos, tests, rep)
        bounds = (_intervals(zr, tests, cfg.bootstrap, cell_id, rep, level)
                  if cfg.bootstrap else {})
        null = _null(z, cell_id, cfg.null_draws) if rep == "raw" and cfg.null_draws else {}
        out[(cell_id, epoch, rep)] = (summary, tests, bounds, null)
    return out


def _stats_batch(items: Sequence[tuple[str, int, str]], cfg: StatsConfig,
                 level: float) -> dict[StatsKey, StatsResult]:
    out: dict[StatsKey, StatsResult] = {}
    for cell_id, epoch, path in items:
        out |= stats_cell(cell_id, epoch, path, cfg, level)
    return out


def stats_graph(paths: Mapping[tuple[str, int], storage.Location], cfg: StatsConfig, *,
                level: float, n_workers: int = 1) -> tuple[list[Delayed], list[int]]:
    """(tasks, files per task): each task computes a batch of files' :func:`stats_cell`
    results, one dict keyed by (cell_id, epoch, representation); the batches in ``paths``'
    order, about :data:`BATCHES_PER_WORKER` per worker.

    paths: the embeddings file of each (cell_id, epoch) — the final one and the snapshots.
    level: confidence level of the intervals (the stage passes ``report.level``).
    """
    check_level(level)
    items = [(cell_id, epoch, str(path)) for (cell_id, epoch), path in paths.items()]
    runs = batches(items, n_workers)
    tasks = [delayed(_stats_batch)(run, cfg, level, dask_key_name=f"stats-{i}")
             for i, run in enumerate(runs)]
    return tasks, [len(run) for run in runs]


def _stats_row(cell_id: str, epoch: int, rep: str, summary: CellSummary | Failed,
               bounds: dict[str, float] | Failed, null: dict[str, float] | Failed) -> dict[str, Any]:
    if isinstance(summary, Failed):
        summary = CellSummary(status="failed", reason=summary.reason, n=0, d=0)
    row = asdict(summary)
    row["n_samples"] = row.pop("n")  # held-out rows; `n` is the grid's training size
    extras = [x for x in (bounds, null) if not isinstance(x, Failed)]  # optional columns
    return {"cell_id": cell_id, "epoch": epoch, "representation": rep, **row,
            **{k: v for x in extras for k, v in x.items()}}


def stats_tables(results: Mapping[StatsKey, StatsResult]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary table, per-coordinate detail table) of :func:`stats_cell` results, in order;
    no detail rows for a cell whose data failed the checks."""
    rows, parts = [], []
    for (cell_id, epoch, rep), (summary, tests, bounds, null) in results.items():
        rows.append(_stats_row(cell_id, epoch, rep, summary, bounds, null))
        if isinstance(summary, Failed) or summary.status != "ok" or isinstance(tests, Failed):
            continue
        parts.append((cell_id, epoch, rep, tests))
    if not parts:
        return pd.DataFrame(rows), pd.DataFrame()
    counts = [t.ad.size for *_, t in parts]
    detail = pd.DataFrame({
        "cell_id": np.repeat(np.array([p[0] for p in parts], dtype=object), counts),
        "epoch": np.repeat(np.array([p[1] for p in parts], dtype=np.int64), counts),
        "representation": np.repeat(np.array([p[2] for p in parts], dtype=object), counts),
        "coord": np.concatenate([np.arange(n) for n in counts]),
        **{col: np.concatenate([getattr(p[3], col) for p in parts])
           for col in ("ad", "ad_pass", "dp_stat", "dp_p")}})
    return pd.DataFrame(rows), detail


def compute_stats(paths: Mapping[tuple[str, int], storage.Location], cfg: StatsConfig,
                  compute_cfg: ComputeConfig, *, level: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary table, per-coordinate detail table) for all cells in one Dask compute.

    Interval columns ``<stat>_lo`` / ``<stat>_hi`` (cv, ad_mean, ad_pass_frac, dp_p_mean,
    dp_pass_frac) are at confidence ``level`` (the stage passes ``report.level``), recorded per
    row in ``ci_level``.
    """
    tasks, sizes = stats_graph(paths, cfg, level=level, n_workers=cfg.n_workers)
    results: dict[StatsKey, StatsResult] = {}
    if tasks:
        with scheduler(compute_cfg, cfg.n_workers) as run:
            for part in run(tasks, "stats", sizes, unit="file"):
                results |= part
    return stats_tables(results)


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
def search_one(cell: Cell, dataset: Dataset, folder: str, cfg: SearchConfig) -> CellSearch:
    """Retrieval and the similarity-search quantities of one cell."""
    where = storage.location(folder)
    row = _retrieval_row(str(where / layout.EMBEDDINGS), cell, cfg, dataset.y_heldout)
    if cell.objective != "contrastive":
        return CellSearch(row, [])
    summary, sweep = search_cell(cell, dataset, load_encoders(cell, dataset, where), cfg)
    return CellSearch({**row, **summary}, sweep)


@task()
def bounds_one(cell: Cell, dataset: Dataset, folder: str, cfg: BoundsConfig) -> dict[str, Any]:
    """Theorem 1's terms of one cell and ``bound_status``."""
    needs_weights = cell.objective == "contrastive"  # bounds_cell skips the others at once
    encoders = load_encoders(cell, dataset, folder) if needs_weights else {}
    result = bounds_cell(cell, dataset, encoders, cfg)
    return {"bound_status": result.status, **(asdict(result.terms) if result.terms else {})}


def _each(fn: Callable[..., Any], items: Sequence[tuple[Cell, str]], dataset: Dataset,
          cfg: Any) -> list[Any]:
    """``fn(cell, dataset, folder, cfg)`` for each (cell, folder) of a batch."""
    return [fn(cell, dataset, folder, cfg) for cell, folder in items]


def per_cell(fn: Callable[..., Any], cells: Sequence[Cell], dataset_path: storage.Location,
             folders: Mapping[str, storage.Location], cfg: Any, compute_cfg: ComputeConfig,
             n_workers: int, desc: str) -> list[Any]:
    """``fn(cell, dataset, folder, cfg)`` of every cell, in order, in batches of consecutive
    cells on the stage's scheduler; the dataset is read once and shared by every batch."""
    if not cells:
        return []
    dataset = delayed(storage.read_dataset)(str(dataset_path), dask_key_name="dataset")
    runs = batches([(c, str(folders[c.cell_id])) for c in cells], n_workers)
    tasks = [delayed(_each)(fn, run, dataset, cfg, dask_key_name=f"{desc}-{i}")
             for i, run in enumerate(runs)]
    with scheduler(compute_cfg, n_workers) as run_all:
        return [got for part in run_all(tasks, desc, [len(r) for r in runs]) for got in part]


def search_tables(cells: Sequence[Cell],
                  results: Sequence[CellSearch | Failed]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per cell, the k-sweep rows) of :func:`search_one` results."""
    rows, sweep = [], []
    for cell, got in zip(cells, results, strict=True):
        head = {"cell_id": cell.cell_id}
        if isinstance(got, Failed):
            rows.append({**head, "search_status": "failed", "search_reason": got.reason})
            continue
        rows.append({**head, "search_status": "ok", "search_reason": "", **got.summary})
        sweep += got.sweep
    return pd.DataFrame(rows), pd.DataFrame(sweep)


def bounds_table(cells: Sequence[Cell], results: Sequence[dict[str, Any] | Failed]) -> pd.DataFrame:
    """One row per cell of :func:`bounds_one` results; a failed cell's ``bound_status`` is
    ``failed: <reason>``."""
    return pd.DataFrame([{"cell_id": c.cell_id, **(
        {"bound_status": f"failed: {got.reason}"} if isinstance(got, Failed) else got)}
        for c, got in zip(cells, results, strict=True)])


def compute_search(cells: Sequence[Cell], dataset_path: storage.Location,
                   folders: Mapping[str, storage.Location], cfg: SearchConfig,
                   compute_cfg: ComputeConfig, n_workers: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per cell, the k-sweep rows) for every cell in one Dask compute; ``folders``:
    each cell's folder in the store. A failed cell's row has ``search_status`` failed and its
    ``search_reason``."""
    results = per_cell(search_one, cells, dataset_path, folders, cfg, compute_cfg, n_workers,
                       "search")
    return search_tables(cells, results)


def compute_bounds(cells: Sequence[Cell], dataset_path: storage.Location,
                   folders: Mapping[str, storage.Location], cfg: BoundsConfig,
                   compute_cfg: ComputeConfig, n_workers: int) -> pd.DataFrame:
    """Theorem 1's terms for every cell in one Dask compute; a failed cell's
    ``bound_status`` is ``failed: <reason>``."""
    results = per_cell(bounds_one, cells, dataset_path, folders, cfg, compute_cfg, n_workers,
                       "bounds")
    return bounds_table(cells, results)
