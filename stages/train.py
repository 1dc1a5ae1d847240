"""Train every cell of the grid that the cell store does not hold yet, one Ray task per cell.

Cells are reused from the store (shared by every workspace, branch and experiment of the
project) when their config and the code that trains them are unchanged; a cell trained by other
code is stale and ``train.on_code_change`` decides (retrain | keep | fail). Drivers sharing the
store claim the cells they train. Each finished cell is logged to its single MLflow run. Writes
``data/grid.json``: the grid's cells with their version, folder, status and failure reason. A
failing cell does not stop the grid: the report stage lists it and exits non-zero. The work is
:func:`pipeline.runtime.driver.train_grid`.

DVC runs this stage on every ``dvc repro``. When the resolved params, the prepared dataset, the
code and the environment are those the last successful run read at its start,
``data/grid.json`` is untouched, every file of every grid cell is in the store with the size
and time that run saw (or wrote), and the local tracking database is the one it left (its
runs, not only its file), there is nothing to train: it says so and stops before importing the
driver (:mod:`pipeline.runtime.memo`). A grid with a cell whose environment failed (retried on
the next run), and one tracked by a server (whose runs the memo cannot check), are not
memoised.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from pipeline.runtime import memo
from pipeline.runtime.paths import DATASETS, GRID, RESOLVED, sqlite_path


def memoisable(params: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a run of these resolved params may be memoised: no plugins (code the memo's key
    does not cover), a local store (whose files the memo can stat) and a local SQLite tracking
    store (whose runs the memo can read; a server's it cannot)."""
    return (not params.get("plugins") and not (params.get("compute") or {}).get("storage")
            and tracking_db(params, environ) is not None)


def tracking_db(params: Mapping[str, Any],
                environ: Mapping[str, str] = os.environ) -> Path | None:
    """The file of a local SQLite tracking store (``$MLFLOW_TRACKING_URI``, else
    ``tracking.uri``), as the driver opens it; None for a tracking server."""
    uri = environ.get("MLFLOW_TRACKING_URI") or (params.get("tracking") or {}).get("uri", "")
    file = sqlite_path(str(uri))
    if file is None:
        return None
    path = Path(file)
    if not path.is_absolute():  # relative to the project's root, as pipeline.runtime.context
        path = Path(environ.get("DVC_ROOT") or ".") / path
    return path


def start_key(raw: Any, environ: Mapping[str, str]) -> str | None:
    """The memo's key of a train that starts now (:func:`memo.key`: what it reads, taken before
    any work): the resolved params, the prepared dataset's bytes, the code, the environment it
    starts with and the tracking store's path; None when the run may not be memoised."""
    if not isinstance(raw, dict) or not memoisable(raw, environ):
        return None
    datasets = sorted(p for p in DATASETS.rglob("*") if p.is_file())
    return memo.key("train", [RESOLVED, *datasets],
                    {"tracking_db": str(tracking_db(raw, environ))}, environ)


def store_cells(environ: Mapping[str, str]) -> Path:
    """The local store's cells (``<store>/cells``, :mod:`pipeline.runtime.store.folders`)."""
    from pipeline.config.store_path import default_store  # imports the registries: full path

    return default_store(environ) / "cells"


def settled_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """The plan line of a grid with nothing left to train (as the driver prints it)."""
    failed = sum(r.get("status") != "ok" for r in rows)
    return (f"train: {len(rows)} cells in the grid: {len(rows) - failed} already done (skipped), "
            "0 to train" + (f", {failed} failed before (not retried)" if failed else ""))


def main(argv: list[str] | None = None) -> int:
    if argv:
        from pipeline.runtime.context import usage_error
        return usage_error("train", argv)
    raw = yaml.safe_load(RESOLVED.read_text()) if RESOLVED.exists() else None
    environ = dict(os.environ)  # as the stage started (Ray adds RAY_* variables to it)
    memo_key = start_key(raw, environ)  # what this run reads, before it reads it
    if memo_key is not None and memo.fresh("train", memo_key) is not None:
        print(settled_line(json.loads(GRID.read_text())["cells"])
              + "; nothing changed since the last train (params, code, cell files, tracking "
              "database)")
        return 0
    memo.forget("train")
    seen = memo.snapshot(store_cells(environ)) if memo_key is not None else {}
    # imported here: the driver imports torch, Ray and MLflow
    from pipeline.runtime.context import resolved_params
    from pipeline.runtime.driver import StaleCellsError, train_grid
    from pipeline.runtime.store import files

    params = resolved_params()
    try:
        got = train_grid(params)
    except StaleCellsError as err:
        print(f"train: {err}", file=sys.stderr)
        return 2
    files.atomic_write_json(GRID, {"cells": got.rows})
    print(f"train: trained {sum(o.status == 'ok' for o in got.trained.values())}, failed "
          f"{got.failed} in all, reused {got.done} (and {len(got.reused)} another driver trained "
          f"meanwhile); cells in {got.root}/")
    if got.failed:  # the grid goes on; the report lists them and its exit status says how many
        print(f"train: {got.failed} cell(s) failed; their reasons are in the leaderboard",
              file=sys.stderr)
    retried = any(r.get("failure_class") == "environment" for r in got.rows)
    if memo_key is not None and isinstance(raw, dict) and not retried:
        # the key of the start, not of the files now on disk (code edited meanwhile is not
        # what this run used); the cells as the run saw them, but for those it wrote; the
        # tracking database as the run left it
        wrote = {str(r["path"]) for r in got.rows
                 if r["cell_id"] in got.trained or r["cell_id"] in got.reused}
        memo.save("train", memo_key, files=[GRID],
                  folders=sorted({str(r["path"]) for r in got.rows}), seen=seen,
                  written=wrote, databases=[db for db in [tracking_db(raw, environ)] if db])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
