"""Where the stages read and write, the resolved params, and provenance (git commit).

The stage tables (``data/``, ``reports/``) live in the workspace; the cells live in the cell
store (:mod:`pipeline.runtime.store.folders`), shared by every workspace of the project, and
``data/grid.json`` is the manifest that says which version of each cell this workspace's grid
uses and where its folder is.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from pipeline.config import Cell, ConfigError, Params, expand, load
from pipeline.runtime.paths import (  # noqa: F401  (re-exported: the stages' paths)
    BOUNDS,
    CELLS,
    DATA,
    DATASETS,
    FINITE_K,
    GRID,
    PROBE,
    PROBE_FEWSHOT,
    PROBE_FEWSHOT_SUMMARY,
    REPORTS,
    RESOLVED,
    SEARCH,
    STATS,
    STATS_DETAIL,
    TRACKED,
    sqlite_path,
)
from pipeline.runtime.store.files import (
    ObjectPath,
    atomic_write_bytes,
    location,
    read_json,
    read_metadata,
)
from pipeline.runtime.store.folders import project_root, store_root


def cells_root(params: Params) -> Path | ObjectPath:
    """Where the cells live: ``<store>/cells``
    (see :func:`pipeline.runtime.store.folders.store_root`)."""
    return store_root(params.compute.storage) / "cells"


def tracking_uri(params: Params) -> str:
    """``tracking.uri`` with a relative SQLite path resolved against the project root, so that
    DVC experiments run in a temporary copy log into the project's own database."""
    uri = params.tracking.uri
    path = sqlite_path(uri)
    if path is None or Path(path).is_absolute():
        return uri
    head, _, rest = uri.partition(":///")  # rest: the path, then any query string
    return f"{head}:///{project_root() / path}{rest[len(path):]}"


def shared_dataset(params: Params) -> Path | ObjectPath:
    """The prepared dataset where every worker can read it: ``data/datasets/<name>.parquet``, or
    with ``compute.storage`` its copy under ``<storage>/datasets/``, uploaded when missing or
    when its content hash differs from the local one."""
    local = dataset_path(params.data.name).resolve()
    if not params.compute.storage:
        return local
    remote = location(params.compute.storage) / "datasets" / local.name
    want = read_metadata(local)["dataset_hash"]
    if not remote.exists() or read_metadata(remote).get("dataset_hash") != want:
        atomic_write_bytes(remote, local.read_bytes())
    return remote


def resolved_params() -> Params:
    if not RESOLVED.exists():
        raise ConfigError(f"{RESOLVED} is missing: run `make run` (or `python -m stages.resolve`) "
                          "to validate params.yaml and write it")
    return load(RESOLVED)


# What the pipeline itself rewrites as it runs: a change there does not make the code dirty.
PIPELINE_WRITES = (":(exclude)dvc.lock", ":(exclude)**/dvc.lock")


def git_sha() -> str:
    """The commit of the working tree, with ``-dirty`` when its tracked files other than the
    ones DVC rewrites as it runs (``dvc.lock``) have uncommitted changes."""
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                ".", *PIPELINE_WRITES],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def read_grid() -> pd.DataFrame:
    """The current grid's cells (``data/grid.json``): grid values, status, failure reason,
    version, folder, whether stale, and the embeddings' hash."""
    return pd.DataFrame(read_json(GRID)["cells"])


def cell_folders(grid: pd.DataFrame | None = None) -> dict[str, Path | ObjectPath]:
    """Each cell's folder in the store, from the manifest."""
    grid = read_grid() if grid is None else grid
    return {row.cell_id: location(row.path) for row in grid.itertuples() if row.path}


def trained_rows(grid: pd.DataFrame) -> pd.DataFrame:
    """The manifest rows of the cells whose training finished (status ok): what every stage
    after ``train`` evaluates."""
    return grid[grid.status == "ok"]


def trained_cells(params: Params, grid: pd.DataFrame | None = None) -> list[Cell]:
    """The current grid's cells whose training finished (:func:`trained_rows` of ``grid``,
    default ``data/grid.json``), in the grid's order."""
    ok = set(trained_rows(read_grid() if grid is None else grid).cell_id)
    return [c for c in expand(params) if c.cell_id in ok]


def dataset_path(name: str) -> Path:
    return DATASETS / f"{name}.parquet"


def usage_error(stage: str, argv: Sequence[str]) -> int:
    """Say on stderr that ``stage`` takes no arguments (its settings come from params.yaml, as
    resolved by ``stages.resolve``); the exit status 2 of a usage error."""
    print(f"{stage}: takes no arguments (got {list(argv)}); settings come from params.yaml "
          f"(resolved into {RESOLVED} by `python -m stages.resolve`)", file=sys.stderr)
    return 2
