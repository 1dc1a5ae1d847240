"""Suite report stage: the leaderboard across the tasks of a suite, run in the suite's folder
(``runs/<suite>/``).

Reads ``suite.json`` there (``name``, ``primary``, ``group_by``, ``level``, ``alpha``,
``bootstrap``, and ``tasks``: each ``name``, ``type``, ``labelled``, ``folder``), each task's
``<folder>/reports/cells.csv`` (required) and ``<folder>/data/probe_fewshot_summary.parquet``
(optional: absent means no few-shot rows), builds the board
(:func:`pipeline.report.suite.board.suite_board`) and writes ``reports/`` here
(:func:`pipeline.report.suite.publish.write_suite`). Exits 3 (after writing) when some task
has failed cells, as the project's report stage does: the tasks' own report stages do not stop
the suite for them, this one says so at the end.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.report.suite.board import TaskInput, suite_board
from pipeline.report.suite.publish import write_suite
from pipeline.runtime import context as ctx
from pipeline.runtime.progress import SUITE_JSON

SUITE = Path(SUITE_JSON)
KEYS = ("name", "primary", "group_by", "level", "alpha", "bootstrap", "tasks")
TASK_KEYS = ("name", "type", "labelled", "folder")


def _require(entry: Mapping[str, Any], keys: tuple[str, ...], where: str) -> None:
    missing = [k for k in keys if k not in entry]
    if missing:
        raise ValueError(f"{SUITE}: {where} lacks {', '.join(missing)}; expected the keys "
                         f"{', '.join(keys)}")


def read_suite(path: Path = SUITE) -> dict[str, Any]:
    """``suite.json`` with its keys checked (ValueError naming the missing ones)."""
    if not path.exists():
        raise FileNotFoundError(f"{path.resolve()}: no suite file; suite_report runs in a "
                                "suite's folder (runs/<suite>/), which holds suite.json")
    suite = json.loads(path.read_text(encoding="utf-8"))
    _require(suite, KEYS, "the suite")
    if not isinstance(suite["tasks"], list) or not suite["tasks"]:
        raise ValueError(f"{SUITE}: tasks = {suite['tasks']!r}; expected a non-empty list")
    for i, task in enumerate(suite["tasks"]):
        _require(task, TASK_KEYS, f"tasks[{i}]")
    return dict(suite)


def read_task(task: Mapping[str, Any]) -> TaskInput:
    """One task's cells (its ``reports/cells.csv``; FileNotFoundError naming it when absent)
    and few-shot summary (empty when absent)."""
    folder = Path(str(task["folder"]))
    cells_csv = folder / ctx.REPORTS / "cells.csv"
    if not cells_csv.exists():
        raise FileNotFoundError(f"task {task['name']!r}: {cells_csv} does not exist; run the "
                                "task's pipeline (its report stage writes it) first")
    fewshot = folder / ctx.PROBE_FEWSHOT_SUMMARY
    return TaskInput(str(task["name"]), str(task["type"]), bool(task["labelled"]),
                     pd.read_csv(cells_csv),
                     pd.read_parquet(fewshot) if fewshot.exists() else pd.DataFrame())


def main(argv: list[str] | None = None) -> int:
    if argv:
        return ctx.usage_error("suite_report", argv)
    suite = read_suite()
    tasks = [read_task(t) for t in suite["tasks"]]
    board = suite_board(tasks, suite["primary"], list(suite["group_by"]),
                        level=float(suite["level"]), alpha=float(suite["alpha"]),
                        n_boot=int(suite["bootstrap"]), seed_key=str(suite["name"]),
                        name=str(suite["name"]))
    write_suite(board, ctx.REPORTS)
    print(f"suite_report: {len(board.tasks)} tasks, {len(board.losses)} losses -> "
          f"{ctx.REPORTS / 'suite.md'}")
    failed = {t.name: int((t.cells["status"] != "ok").sum()) for t in tasks
              if "status" in t.cells}
    if any(failed.values()):  # as the project's report stage: written, then said, exit 3
        where = ", ".join(f"{name} {n}" for name, n in failed.items() if n)
        print(f"suite_report: {sum(failed.values())} of {sum(len(t.cells) for t in tasks)} cells "
              f"failed ({where}); their reasons are in each task's leaderboard", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
