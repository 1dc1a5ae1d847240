"""Where the stages read and write, the resolved params, and provenance (git commit)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd

from pipeline.config import Cell, ConfigError, Params, expand, load
from pipeline.runtime.storage import (
    ObjectPath,
    atomic_write_bytes,
    location,
    read_json,
    read_metadata,
)

RESOLVED = Path("params.resolved.yaml")  # written by `stages.resolve`, read by every other stage
DATA = Path("data")
DATASETS = DATA / "datasets"
CELLS = DATA / "cells"
GRID = DATA / "grid.json"  # the cells of the current grid, with their status
STATS = DATA / "stats.parquet"
STATS_DETAIL = DATA / "stats_detail.parquet"
SEARCH = DATA / "search.parquet"
FINITE_K = DATA / "finite_k.parquet"  # CE − R_k per cell, encoder and k
BOUNDS = DATA / "bounds.parquet"
REPORTS = Path("reports")


def cells_root(params: Params) -> Path | ObjectPath:
    """Where the cells live: ``<compute.storage>/cells`` (a URI) or ``data/cells`` here
    (absolute, so workers with another working directory write to the same folder)."""
    if params.compute.storage:
        return location(params.compute.storage) / "cells"
    return CELLS.resolve()


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


def git_sha() -> str:
    """The commit of the working tree, with ``-dirty`` when it has uncommitted changes."""
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def read_grid() -> pd.DataFrame:
    """The current grid's cells (``data/grid.json``): grid values, status and failure reason."""
    cells = pd.DataFrame(read_json(GRID)["cells"])
    return cells.drop(columns=["embeddings_sha256"], errors="ignore")


def trained_cells(params: Params) -> list[Cell]:
    """The current grid's cells whose training finished (status ok in ``data/grid.json``)."""
    ok = set(read_grid().query("status == 'ok'").cell_id)
    return [c for c in expand(params) if c.cell_id in ok]


def dataset_path(name: str) -> Path:
    return DATASETS / f"{name}.parquet"
