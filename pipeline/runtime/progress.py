"""Progress you can read: where a stage is in its suite, and the train stage's tally.

Every stage's progress bar (``scheduler.progress``, the train stage's cells) is one line on
stderr. In a suite's task folder (``runs/<suite>/<task>/``, whose parent holds the
``suite.json`` that ``cbench suite`` wrote) the line starts with the suite, the task and its
place (``cpu 2/5 gaussian_mixture · search``), and the train stage's line adds the suite's
totals: cells done of all the suite's cells, running, failed, and an ETA for the training left
in the suite (the later tasks' analysis stages are not in it) from the cells' measured costs:
the median wall time of the cells this stage finished, times the cells left, over the parallel
slots. The ETA counts every cell of the later tasks as still to train (an upper bound where the
store already holds some of them); before the first cell finishes there is no measured cost and
the line says so.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

SUITE_JSON = "suite.json"  # in runs/<suite>/: pipeline.runtime.suite_plan writes it, the
# progress lines and stages/suite_report.py read it


@dataclass(frozen=True)
class SuiteTask:
    """This folder's task in its suite: its 1-based ``index`` of ``tasks``, the cells of the
    tasks before it, its own and those after it (from ``suite.json``)."""

    suite: str
    name: str
    index: int
    tasks: int
    cells_before: int
    cells: int
    cells_after: int

    @property
    def total(self) -> int:
        return self.cells_before + self.cells + self.cells_after

    def prefix(self) -> str:
        return f"{self.suite} {self.index}/{self.tasks} {self.name} · "


def suite_task(folder: Path | None = None) -> SuiteTask | None:
    """The suite task whose folder is ``folder`` (default: the working directory), or None when
    it is not a suite's task folder."""
    folder = (folder or Path.cwd()).resolve()
    path = folder.parent / SUITE_JSON
    if not path.is_file():
        return None
    try:
        info = json.loads(path.read_text())
        tasks = info["tasks"]
        names = [str(t["folder"]) for t in tasks]
        i = names.index(folder.name)
        counts = [int(t["cells"]) for t in tasks]
    except (ValueError, KeyError, TypeError):  # not ours, or another task's layout
        return None
    return SuiteTask(str(info["name"]), folder.name, i + 1, len(tasks), sum(counts[:i]),
                     counts[i], sum(counts[i + 1:]))


def stage_desc(desc: str) -> str:
    """A progress bar's description: ``desc``, after the suite task's prefix in a suite."""
    task = suite_task()
    return task.prefix() + desc if task else desc


def duration(seconds: float) -> str:
    """``1h02m``, ``3m10s`` or ``42s``."""
    s = max(0, round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


@dataclass
class Tally:
    """The train stage's counts: ``to_train`` cells submitted on ``slots`` parallel slots, of
    which ``finished`` (their wall seconds) and ``failed``; ``suite``: this task's place."""

    to_train: int
    slots: int
    suite: SuiteTask | None = None
    walls: list[float] = field(default_factory=list)
    failed: int = 0

    def finished(self, status: str, wall_seconds: float) -> None:
        self.walls.append(float(wall_seconds))
        self.failed += status != "ok"

    @property
    def pending(self) -> int:
        return self.to_train - len(self.walls)

    def eta_seconds(self) -> float | None:
        """Seconds left for this stage's pending cells and the later tasks' cells, from the
        median measured wall time per cell; None before any cell has finished."""
        if not self.walls:
            return None
        left = self.pending + (self.suite.cells_after if self.suite else 0)
        return statistics.median(self.walls) * left / max(1, self.slots)

    def postfix(self) -> str:
        """``running 2, failed 0 · suite 40/90 done · training ETA 3m10s`` (the suite part in a
        suite only)."""
        parts = [f"running {min(self.pending, self.slots)}, failed {self.failed}"]
        if self.suite is not None:
            done = self.suite.cells_before + self.suite.cells - self.pending
            parts.append(f"suite {done}/{self.suite.total} done")
        eta = self.eta_seconds()
        parts.append(f"training ETA {duration(eta)}" if eta is not None
                     else "training ETA after the first cell")
        return " · ".join(parts)

