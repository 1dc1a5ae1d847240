"""Train every cell of the grid that the cell store does not hold yet, one Ray task per cell.

Cells are reused from the store (shared by every workspace, branch and experiment of the
project) when their config and the code that trains them are unchanged; a cell trained by other
code is stale and ``train.on_code_change`` decides (retrain | keep | fail). Drivers sharing the
store claim the cells they train. Each finished cell is logged to its single MLflow run. Writes
``data/grid.json``: the grid's cells with their version, folder, status and failure reason. A
failing cell does not stop the grid: the report stage lists it and exits non-zero. The work is
:func:`pipeline.runtime.driver.train_grid`.
"""

from __future__ import annotations

import sys

from pipeline.runtime import storage
from pipeline.runtime.context import GRID, resolved_params, usage_error
from pipeline.runtime.driver import StaleCellsError, train_grid


def main(argv: list[str] | None = None) -> int:
    if argv:
        return usage_error("train", argv)
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
