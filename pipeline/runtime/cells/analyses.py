"""One cell's work in the stats, search and bounds stages: plain functions, no scheduler.

:func:`stats_cell` reads one embeddings file, then per representation runs the column tests in
blocks of ``stats.block_cols``, the summary, the intervals and the null reference;
:func:`search_one` and :func:`bounds_one` read a cell's files and hand them to the pure
:mod:`pipeline.search.cell` and :mod:`pipeline.bounds.cell`. The Dask graphs
(:mod:`pipeline.runtime.backends.dask_ops`) call them in a loop per batch of cells, and
``bench/grid_scale.py`` calls the same functions in one process to measure what the stages add.

Every step is a :func:`pipeline.runtime.cells.task.task`: a cell whose data is bad gets a failed
value with the reason, and nothing here raises for one cell's data. This module imports no
scheduler (dask, distributed, ray) and no table library (``tests/test_layering.py``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from pipeline.bounds.cell import bounds_cell
from pipeline.config import BoundsConfig, SearchConfig, StatsConfig
from pipeline.datasets import Dataset
from pipeline.grid import Cell
from pipeline.runtime.cells.evaluate import load_encoders
from pipeline.runtime.cells.task import CellDataError, Failed, task
from pipeline.runtime.store import files, layout
from pipeline.search import (
    heldout_infonce_risk,
    loo_majority_knn_accuracy,
    positive_ranks,
    recalls,
    split_recall,
)
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

INTERVAL_LEVEL = "ci_level"  # column: the confidence level of a row's <stat>_lo / <stat>_hi


@task()
def _read(path: str, view: int) -> np.ndarray:
    try:
        return files.read_embeddings(path, view)
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


@dataclass(frozen=True)
class StatsResult:
    """The statistics of one embeddings file of a cell (its ``epoch``) in one representation;
    each of the last four fields may be :class:`Failed`.

    summary: the :class:`~pipeline.stats.CellSummary`; tests: the per-coordinate
    :class:`~pipeline.stats.ColumnTests`; intervals: ``<stat>_lo`` / ``<stat>_hi`` columns and
    ``ci_level`` (``{}`` when ``stats.bootstrap`` is 0); null: ``null_<stat>`` columns of the
    Gaussian reference (``{}`` but for the raw representation, or when ``stats.null_draws`` is 0).
    """

    # a dataclass, not a NamedTuple: distributed's serialisation returns a tuple subclass as a
    # plain tuple, a dataclass as itself
    cell_id: str
    epoch: int
    representation: str
    summary: CellSummary | Failed
    tests: ColumnTests | Failed
    intervals: dict[str, float] | Failed
    null: dict[str, float] | Failed


def representations(cfg: StatsConfig) -> tuple[str, ...]:
    """summarize()'s raw and normalized, plus random projections when stats.projections > 0."""
    return REPRESENTATIONS + (("projected",) if cfg.projections else ())


def stats_cell(cell_id: str, epoch: int, path: files.Location, cfg: StatsConfig,
               level: float) -> list[StatsResult]:
    """The :class:`StatsResult` of one embeddings file per representation, in the order of
    :func:`representations`; a result's values may be
    :class:`~pipeline.runtime.cells.task.Failed`, nothing raises.

    The column tests run in blocks of ``stats.block_cols`` columns, concatenated; the null
    reference is computed for the raw representation only (``{}`` elsewhere and when
    ``stats.null_draws`` is 0), the intervals when ``stats.bootstrap`` > 0.
    """
    z = _read(str(path), 0)
    z_pos = _read(str(path), 1)
    d = 0 if isinstance(z, Failed) else int(np.shape(z)[1])
    out: list[StatsResult] = []
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
        out.append(StatsResult(cell_id, epoch, rep, summary, tests, bounds, null))
    return out


def _retrieval_row(path: str, cell: Cell, cfg: SearchConfig,
                   labels: np.ndarray | None) -> dict[str, Any]:
    """Recall@{1,5,10}, the held-out risk at the cell's k and at ``search.k_eval``, and the
    leave-one-out kNN accuracy where there are labels."""
    z0, z1 = files.read_embeddings(path, 0), files.read_embeddings(path, 1)
    if not (np.isfinite(z0).all() and np.isfinite(z1).all()):
        raise CellDataError("embeddings contain NaN or infinite values")
    rank = positive_ranks(z0, z1)  # the anchors' held-out positives among all held-out views
    row: dict[str, Any] = {f"recall_at_{k}": v for k, v in recalls(rank).items()}
    row |= split_recall(rank)  # the halves that choose and report a loss's best setting
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
    where = files.location(folder)
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
