"""The report stage's MLflow logging in a second process, alongside the build.

Importing MLflow and SQLAlchemy takes the report stage about 3 s before it logs anything, and
logging 1000 cells' metrics about 2 s more; none of it needs the report until its metrics exist.
:class:`ReportLogger` forks a process at the start of the stage that imports MLflow and reads
the cell runs' latest metrics (:func:`pipeline.runtime.tracking.runs.cell_metrics`) while this
process builds the report; it logs the metrics (:func:`~pipeline.runtime.tracking.report_metrics.
log_metrics`) as soon as :meth:`ReportLogger.metrics` hands them over, while this process
renders and writes the files, and logs ``reports/``
(:func:`~pipeline.runtime.tracking.report_metrics. log_reports`) once :meth:`ReportLogger.reports`
says they are written. What it logs is what
:func:`~pipeline.runtime.tracking.report_metrics.sync` logs inline; off Linux, or on one core, the
logger runs that inline instead.

Failures: an error in the logging process is raised here by the next call that can see it
(:meth:`metrics` when it has come by then, else :meth:`reports`), with its traceback; if this
process fails first, leaving the ``with`` block stops the logger before it logs anything more.
This module imports no MLflow itself (only the forked process does), so the stage's own imports
stay off MLflow's.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import traceback
from collections.abc import Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import Any

import pandas as pd

Metrics = Mapping[str, list[tuple[str, float]]]  # cell id -> (registry name, value)
STOP_SECONDS = 30.0  # how long a stopped logger gets to finish the call it is in


def _forkable() -> bool:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return cores >= 2 and sys.platform.startswith("linux")


def _serve(conn: Connection, uri: str, experiment: str, grid: pd.DataFrame) -> None:
    """The logging process: import, read the runs, then log what the stage sends, in order."""
    try:
        from pipeline.runtime.tracking import report_metrics
        from pipeline.runtime.tracking.runs import Tracker, cell_metrics

        tracker = Tracker(uri, experiment)
        runs = cell_metrics(uri, experiment)
        kind, values = conn.recv()
        if kind != "metrics":
            return
        logged = report_metrics.log_metrics(tracker, grid, values, runs)
        kind, folder = conn.recv()
        if kind != "reports":
            return
        conn.send(("done", (logged, report_metrics.log_reports(tracker, Path(folder)))))
    except EOFError:  # the stage ended without a word: nothing more to log
        return
    except BaseException:  # noqa: BLE001 — sent to the stage, which raises it
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


class ReportLogger:
    """Log a report to the MLflow store at ``uri`` (experiment ``experiment``) for the cells of
    ``grid``: ``metrics(report.mlflow)`` once built, ``reports(folder)`` once written (returns
    what :func:`~pipeline.runtime.tracking.report_metrics.track` returns); use it as a context
    manager."""

    def __init__(self, uri: str, experiment: str, grid: pd.DataFrame,
                 background: bool | None = None) -> None:
        self.uri, self.experiment, self.grid = uri, experiment, grid
        self._values: Metrics | None = None
        self._conn: Connection | None = None
        self._process: Any = None
        if background if background is not None else _forkable():
            ctx = multiprocessing.get_context("fork")
            self._conn, theirs = ctx.Pipe()
            self._process = ctx.Process(target=_serve, name="cbench-report-mlflow",
                                        args=(theirs, uri, experiment, grid), daemon=True)
            self._process.start()
            theirs.close()

    @property
    def background(self) -> bool:
        """Whether the logging runs in its own process."""
        return self._process is not None

    def _receive(self) -> tuple[str, Any]:
        assert self._conn is not None
        try:
            message: tuple[str, Any] = self._conn.recv()
        except EOFError:
            self._process.join(STOP_SECONDS)
            raise RuntimeError("report: the MLflow logging process ended without a result "
                               f"(exit code {self._process.exitcode})") from None
        if message[0] == "error":
            raise RuntimeError(f"report: MLflow logging failed in its process:\n{message[1]}")
        return message

    def _send(self, kind: str, body: Any) -> None:
        assert self._conn is not None
        if self._conn.poll():  # it has failed already: say so before handing it more
            self._receive()
        try:
            self._conn.send((kind, body))
        except (BrokenPipeError, ConnectionResetError):  # it has ended: its reason, if it left one
            self._receive()
            raise

    def metrics(self, values: Metrics) -> None:
        """Hand over each cell's report metrics; raises an error the logger has already hit."""
        if self._conn is None:
            self._values = values
        else:
            self._send("metrics", values)

    def reports(self, folder: Path) -> tuple[int, str | None]:
        """``folder`` is written: log it, wait for the logger, and return (how many runs got
        metrics, the id of the run that got the reports or None)."""
        if self._conn is None:
            from pipeline.runtime.tracking import report_metrics

            if self._values is None:
                raise RuntimeError("ReportLogger.reports: metrics() was not called first")
            return report_metrics.sync(self.uri, self.experiment, self.grid, self._values,
                                        folder)
        self._send("reports", str(folder))
        logged, run_id = self._receive()[1]
        self._process.join(STOP_SECONDS)
        return int(logged), run_id

    def close(self) -> None:
        """Stop the logger (it logs nothing more) and wait for it."""
        if self._process is None:
            return
        if self._process.is_alive() and self._conn is not None:
            try:
                self._conn.send(("stop", None))
            except (BrokenPipeError, OSError):
                pass
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._process.join(STOP_SECONDS)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()

    def __enter__(self) -> ReportLogger:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
