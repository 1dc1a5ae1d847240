"""Train every cell of the grid that the cell store does not hold yet, one Ray task per cell.

Cells are reused from the store (shared by every workspace, branch and experiment of the
project) when their config and the code that trains them are unchanged; a cell trained by other
code is stale and ``train.on_code_change`` decides (retrain | keep | fail). Drivers sharing the
store claim the cells they train. Each finished cell is logged to its single MLflow run. Writes
``data/grid.json``: the grid's cells with their version, folder, status and failure reason. A
failing cell does not stop the grid: the report stage lists it and exits non-zero. The work is
:func:`pipeline.runtime.driver.train_grid`.

DVC runs this stage on every ``dvc repro``. When the resolved params, the prepared dataset, the
code and the environment are those of the last successful run, ``data/grid.json`` is untouched,
every file of every grid cell is still in the store with its size and time, and the local
tracking database is still there, there is nothing to train: it says so and stops before
importing the driver (:mod:`pipeline.runtime.memo`). A grid with a cell whose environment failed
(retried on the next run) is not memoised.
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


def memoisable(params: Mapping[str, Any]) -> bool:
    """Whether a run of these resolved params may be memoised: no plugins (code the memo's key
    does not cover) and a local store (whose files the memo can stat)."""
    return not params.get("plugins") and not (params.get("compute") or {}).get("storage")


def tracking_db(params: Mapping[str, Any]) -> dict[str, Any]:
    """A local SQLite tracking store's path and whether it exists (a deleted store makes the full
    stage log the done cells again); empty for a tracking server."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or (params.get("tracking") or {}).get("uri", "")
    file = sqlite_path(str(uri))
    if file is None:
        return {}
    path = Path(file)
    if not path.is_absolute():  # relative to the project's root, as pipeline.runtime.context
        path = Path(os.environ.get("DVC_ROOT") or ".") / path
    return {"tracking_db": str(path), "exists": path.exists()}


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
    memo_key = memo.key("train", [RESOLVED], tracking_db(raw) if isinstance(raw, dict) else {})
    if isinstance(raw, dict) and memoisable(raw) and memo.fresh("train", memo_key) is not None:
        print(settled_line(json.loads(GRID.read_text())["cells"])
              + "; nothing changed since the last train (params, code, cell files)")
        return 0
    memo.forget("train")
    # imported here: the driver imports torch, Ray and MLflow
    from pipeline.runtime import storage
    from pipeline.runtime.context import resolved_params
    from pipeline.runtime.driver import StaleCellsError, train_grid

    params = resolved_params()
    try:
        got = train_grid(params)
    except StaleCellsError as err:
        print(f"train: {err}", file=sys.stderr)
        return 2
    storage.atomic_write_json(GRID, {"cells": got.rows})
    print(f"train: trained {sum(o.status == 'ok' for o in got.trained.values())}, failed "
          f"{got.failed} in all, reused {got.done} (and {len(got.reused)} another driver trained "
          f"meanwhile); cells in {got.root}/")
    if got.failed:  # the grid goes on; the report lists them and its exit status says how many
        print(f"train: {got.failed} cell(s) failed; their reasons are in the leaderboard",
              file=sys.stderr)
    retried = any(r.get("failure_class") == "environment" for r in got.rows)
    if isinstance(raw, dict) and memoisable(raw) and not retried:
        datasets = sorted(p for p in DATASETS.rglob("*") if p.is_file())
        # the key again: the run may have created the tracking database
        after = memo.key("train", [RESOLVED], tracking_db(raw), environ)
        memo.save("train", after, files=[GRID, *datasets],
                  folders=sorted({str(r["path"]) for r in got.rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
