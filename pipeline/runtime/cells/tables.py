"""The stats, search and bounds stages' tables, from the per-cell results of
:mod:`pipeline.runtime.cells.analyses`: where named results become rows.

A failed cell is a row with its status and reason (``status``/``reason``, ``search_status``/
``search_reason``, ``bound_status``), never a missing one. No scheduler here: the same
functions shape the tables of a Dask run and of ``bench/grid_scale.py``'s in-process one
(``tests/test_layering.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd

from pipeline.grid import Cell
from pipeline.runtime.cells.analyses import StatsResult
from pipeline.runtime.cells.task import Failed
from pipeline.search.cell import CellSearch
from pipeline.stats import CellSummary


def _stats_row(got: StatsResult) -> dict[str, Any]:
    summary = got.summary
    if isinstance(summary, Failed):
        summary = CellSummary(status="failed", reason=summary.reason, n=0, d=0)
    row = asdict(summary)
    row["n_samples"] = row.pop("n")  # held-out rows; `n` is the grid's training size
    # optional columns
    extras = [x for x in (got.intervals, got.null) if not isinstance(x, Failed)]
    return {"cell_id": got.cell_id, "epoch": got.epoch, "representation": got.representation,
            **row, **{k: v for x in extras for k, v in x.items()}}


def stats_tables(results: Sequence[StatsResult]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary table, per-coordinate detail table) of
    :func:`~pipeline.runtime.cells.analyses.stats_cell` results, in order; no detail rows for a
    cell whose data failed the checks."""
    rows, parts = [], []
    for got in results:
        rows.append(_stats_row(got))
        summary, tests = got.summary, got.tests
        if isinstance(summary, Failed) or summary.status != "ok" or isinstance(tests, Failed):
            continue
        parts.append((got, tests))
    if not parts:
        return pd.DataFrame(rows), pd.DataFrame()
    counts = [t.ad.size for _, t in parts]
    detail = pd.DataFrame({
        "cell_id": np.repeat(np.array([k.cell_id for k, _ in parts], dtype=object), counts),
        "epoch": np.repeat(np.array([k.epoch for k, _ in parts], dtype=np.int64), counts),
        "representation": np.repeat(np.array([k.representation for k, _ in parts],
                                             dtype=object), counts),
        "coord": np.concatenate([np.arange(n) for n in counts]),
        **{col: np.concatenate([getattr(t, col) for _, t in parts])
           for col in ("ad", "ad_pass", "dp_stat", "dp_p")}})
    return pd.DataFrame(rows), detail


def search_tables(cells: Sequence[Cell],
                  results: Sequence[CellSearch | Failed]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per cell, the k-sweep rows) of :func:`~pipeline.runtime.cells.analyses.search_one`
    results."""
    rows, sweep = [], []
    for cell, got in zip(cells, results, strict=True):
        head = {"cell_id": cell.cell_id}
        if isinstance(got, Failed):
            rows.append({**head, "search_status": "failed", "search_reason": got.reason})
            continue
        rows.append({**head, "search_status": "ok", "search_reason": "", **got.summary})
        sweep += got.sweep
    return pd.DataFrame(rows), pd.DataFrame(sweep)


def bounds_table(cells: Sequence[Cell],
                 results: Sequence[dict[str, Any] | Failed]) -> pd.DataFrame:
    """One row per cell of :func:`~pipeline.runtime.cells.analyses.bounds_one` results; a failed
    cell's ``bound_status`` is ``failed: <reason>``."""
    return pd.DataFrame([{"cell_id": c.cell_id, **(
        {"bound_status": f"failed: {got.reason}"} if isinstance(got, Failed) else got)}
        for c, got in zip(cells, results, strict=True)])
