"""The Dask graphs of the stats, search and bounds stages: one ``compute`` per stage (per layer
for stats), over every trained cell.

Each task evaluates a batch of consecutive cells
(:func:`pipeline.runtime.backends.scheduler.batches`) by calling the per-cell functions of
:mod:`pipeline.runtime.cells.analyses` in a loop
(:func:`~pipeline.runtime.cells.analyses.stats_cell`,
:func:`~pipeline.runtime.cells.analyses.search_one`,
:func:`~pipeline.runtime.cells.analyses.bounds_one`) on the stage's scheduler
(:func:`pipeline.runtime.backends.scheduler.scheduler`); :mod:`pipeline.runtime.cells.tables` shapes
the results. A cell whose data is bad gets a failed row with the reason: nothing here raises for one
cell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from dask import delayed
from dask.delayed import Delayed

from pipeline.config import BoundsConfig, ComputeConfig, Params, SearchConfig, StatsConfig
from pipeline.datasets import Dataset
from pipeline.encoders.features import BACKBONE, HEAD
from pipeline.grid import GRID_AXES, Cell
from pipeline.runtime.backends.scheduler import Opaque, Shared, batches, scheduler, shared
from pipeline.runtime.cells.analyses import StatsResult, bounds_one, search_one, stats_cell
from pipeline.runtime.cells.tables import bounds_table, search_tables, stats_tables
from pipeline.runtime.context import cell_folders, trained_rows
from pipeline.runtime.store import files, layout
from pipeline.stats.uncertainty import check_level

LAYERS = (HEAD, BACKBONE)  # the stats stage's layers: the encoder's output, its head's input


def _stats_batch(items: Sequence[tuple[str, int, str]], cfg: StatsConfig,
                 level: float) -> list[StatsResult]:
    return [got for cell_id, epoch, path in items
            for got in stats_cell(cell_id, epoch, path, cfg, level)]


def stats_graph(paths: Mapping[tuple[str, int], files.Location], cfg: StatsConfig, *,
                level: float, n_workers: int = 1) -> tuple[list[Delayed], list[int]]:
    """(tasks, files per task): each task computes a batch of files'
    :func:`~pipeline.runtime.cells.analyses.stats_cell` results, one list of
    :class:`~pipeline.runtime.cells.analyses.StatsResult`; the batches in ``paths``' order, about
    :data:`~pipeline.runtime.backends.scheduler.BATCHES_PER_WORKER` per worker.

    paths: the embeddings file of each (cell_id, epoch) — the final one and the snapshots.
    level: confidence level of the intervals (the stage passes ``report.level``).
    """
    check_level(level)
    items = [(cell_id, epoch, str(path)) for (cell_id, epoch), path in paths.items()]
    runs = batches(items, n_workers)
    tasks = [delayed(_stats_batch)(run, cfg, level, dask_key_name=f"stats-{i}")
             for i, run in enumerate(runs)]
    return tasks, [len(run) for run in runs]


def compute_stats(paths: Mapping[tuple[str, int], files.Location], cfg: StatsConfig,
                  compute_cfg: ComputeConfig, *,
                  level: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary table, per-coordinate detail table) for all cells in one Dask compute.

    Interval columns ``<stat>_lo`` / ``<stat>_hi`` (cv, ad_mean, ad_pass_frac, dp_p_mean,
    dp_pass_frac) are at confidence ``level`` (the stage passes ``report.level``), recorded per
    row in ``ci_level``.
    """
    tasks, sizes = stats_graph(paths, cfg, level=level, n_workers=cfg.n_workers)
    results: list[StatsResult] = []
    if tasks:
        with scheduler(compute_cfg, cfg.n_workers) as run:
            for part in run(tasks, "stats", sizes, unit="file"):
                results += part
    return stats_tables(results)


def layer_paths(cells: Sequence[str], folders: Mapping[str, files.Dir], epochs: Sequence[int],
                final: int, layer: str) -> dict[tuple[str, int], files.Location]:
    """The held-out views of each (cell, epoch) of ``layer``: the final encoder's at ``final``
    (``train.epochs``), the snapshots' at the other ``epochs`` (0: the untrained control); a
    cell without a backbone file (an encoder without a head) has no backbone rows."""
    final_name, snapshot = ((layout.EMBEDDINGS, layout.snapshot) if layer == HEAD
                            else (layout.BACKBONE, layout.backbone_snapshot))
    paths: dict[tuple[str, int], files.Location] = {}
    for c in cells:
        if layer == BACKBONE and not files.exists(folders[c] / layout.BACKBONE):
            continue
        paths[(c, final)] = folders[c] / final_name
        for epoch in epochs:  # snapshots: 0 is the untrained control
            if epoch != final:
                paths[(c, epoch)] = folders[c] / snapshot(epoch)
    return paths


@dataclass(frozen=True)
class LayerStats:
    """The stats stage's tables. summary: one row per (cell, epoch, layer, representation), the
    grid's cell id and axes first; detail: one row per coordinate of those; cells: how many
    cells each layer has (a cell without a backbone has no backbone rows)."""

    summary: pd.DataFrame
    detail: pd.DataFrame
    cells: Mapping[str, int]


def compute_layer_stats(grid: pd.DataFrame, params: Params) -> LayerStats:
    """:func:`compute_stats` of every layer of the cells of ``grid`` (the manifest,
    ``data/grid.json``) whose training finished, one Dask compute per layer, with the intervals
    at ``report.level`` (the level the report reads them back with)."""
    trained = trained_rows(grid)
    folders = cell_folders(trained)
    final = params.train.epochs
    summaries, details, counts = [], [], {}
    for layer in LAYERS:
        paths = layer_paths(list(trained.cell_id), folders, list(params.stats.epochs), final,
                            layer)
        counts[layer] = len({c for c, _ in paths})
        if not paths and layer == BACKBONE:
            continue
        summary, detail = compute_stats(paths, params.stats, params.compute,
                                        level=params.report.level)
        summaries.append(summary.assign(layer=layer))
        details.append(detail.assign(layer=layer) if len(detail) else detail)
    summary = pd.concat(summaries, ignore_index=True)
    table = grid[["cell_id", *GRID_AXES]].merge(summary, on="cell_id", how="inner")
    return LayerStats(table, pd.concat(details, ignore_index=True), counts)


def _each(fn: Callable[..., Any], items: Opaque, dataset: Dataset | Shared,
          cfg: Any) -> list[Any]:
    """``fn(cell, dataset, folder, cfg)`` for each (cell, folder) of a batch (``items.value``);
    ``dataset``: the value, or where the run's
    :meth:`~pipeline.runtime.backends.scheduler.Run.share` holds it."""
    data = shared(dataset)
    return [fn(cell, data, folder, cfg) for cell, folder in items.value]


def per_cell(fn: Callable[..., Any], cells: Sequence[Cell], dataset_path: files.Location,
             folders: Mapping[str, files.Location], cfg: Any, compute_cfg: ComputeConfig,
             n_workers: int, desc: str) -> list[Any]:
    """``fn(cell, dataset, folder, cfg)`` of every cell, in order, in batches of consecutive
    cells on the stage's scheduler; the dataset is read once and shared by every batch."""
    if not cells:
        return []
    runs = batches([(c, str(folders[c.cell_id])) for c in cells], n_workers)
    with scheduler(compute_cfg, n_workers) as run_all:
        dataset = run_all.share("dataset", files.read_dataset, str(dataset_path))
        tasks = [delayed(_each)(fn, Opaque(run), dataset, cfg, dask_key_name=f"{desc}-{i}")
                 for i, run in enumerate(runs)]
        return [got for part in run_all(tasks, desc, [len(r) for r in runs]) for got in part]


def compute_search(cells: Sequence[Cell], dataset_path: files.Location,
                   folders: Mapping[str, files.Location], cfg: SearchConfig,
                   compute_cfg: ComputeConfig,
                   n_workers: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per cell, the k-sweep rows) for every cell in one Dask compute; ``folders``:
    each cell's folder in the store. A failed cell's row has ``search_status`` failed and its
    ``search_reason``."""
    results = per_cell(search_one, cells, dataset_path, folders, cfg, compute_cfg, n_workers,
                       "search")
    return search_tables(cells, results)


def compute_bounds(cells: Sequence[Cell], dataset_path: files.Location,
                   folders: Mapping[str, files.Location], cfg: BoundsConfig,
                   compute_cfg: ComputeConfig, n_workers: int) -> pd.DataFrame:
    """Theorem 1's terms for every cell in one Dask compute; a failed cell's
    ``bound_status`` is ``failed: <reason>``."""
    results = per_cell(bounds_one, cells, dataset_path, folders, cfg, compute_cfg, n_workers,
                       "bounds")
    return bounds_table(cells, results)
