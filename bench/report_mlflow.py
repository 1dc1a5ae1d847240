"""Benchmark: the report stage's MLflow part at many cells.

    python bench/report_mlflow.py [--cells 1000] [--metrics 40] [--repeats 3]

A fresh SQLite store (a temporary folder) holds one finished run per cell, as the train stage
leaves it. Each repeat times, on that store, the report stage's logging of ``--metrics`` report
metrics per cell (what ``Report.mlflow`` holds), the search of the cell runs included:
(old) one ``log_batch`` into each cell's run, every metric (the stage before);
(new) ``Tracker.log_changed``: the metrics whose value the run does not hold yet, on this
      SQLite store every run's in one transaction (``pipeline.runtime.tracking.sql_writer``; one
      ``log_batch`` per run elsewhere; here every value is new: the first report after
      training);
(level) new, with only the interval bounds changed (``*_lo``/``*_hi``, half the metrics: a
      report rerun after ``report.level`` changed);
(noop) new, with the values just logged (a report rerun that computed the same numbers), and
      ``pipeline.runtime.tracking.report_metrics.track`` as a whole on it (metrics, the reports/
      digest, the search for the workspace's invocation run): no call writes, no run is created.
Each repeat logs other values than the one before, so old and new both write every metric.
Medians over repeats; the ratios are old / new, measured in the same process on the same store.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from pipeline.runtime.tracking import report_metrics  # noqa: E402
from pipeline.runtime.tracking.runs import Tracker, run_key  # noqa: E402

Values = dict[str, list[tuple[str, float]]]


def _values(cells: int, metrics: int, shift: float, bounds_only: bool = False,
            base: float = 0.0) -> Values:
    """Per cell id, ``metrics`` (name, value): half point values, half their ``_lo``/``_hi``
    bounds; ``shift`` moves the bounds (and, unless ``bounds_only``, the point values)."""
    names = [f"m{j}" for j in range(metrics // 2)]
    names += [f"{n}_{end}" for n in names[:(metrics - len(names)) // 2] for end in ("lo", "hi")]
    names = (names + [f"extra{j}" for j in range(metrics)])[:metrics]
    out: Values = {}
    for i in range(cells):
        row = []
        for j, n in enumerate(names):
            bound = n.endswith(("_lo", "_hi"))
            moved = shift if bound or not bounds_only else base
            row.append((n, float(i * 1000 + j) / 7.0 + moved))
        out[f"c{i:05d}"] = row
    return out


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    got = fn()
    return time.perf_counter() - start, got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=1000, help="cells (one MLflow run each)")
    ap.add_argument("--metrics", type=int, default=40, help="report metrics per cell")
    ap.add_argument("--repeats", type=int, default=3, help="repeats (medians are printed)")
    args = ap.parse_args(argv)
    for name in ("cells", "metrics", "repeats"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} = {getattr(args, name)}: expected an integer >= 1")

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        tracker = Tracker(f"sqlite:///{folder / 'mlruns.db'}", "bench-report")
        grid = pd.DataFrame({"cell_id": [f"c{i:05d}" for i in range(args.cells)],
                             "version": "v1"})
        grid["training_id"] = grid.cell_id
        start = time.perf_counter()
        for cell in grid.cell_id:
            tracker.end(tracker.cell_run(run_key(cell, "v1"), None, {}, existing={}))
        print(f"setup: {args.cells} finished cell runs in {time.perf_counter() - start:.1f} s")
        reports = folder / "reports"
        reports.mkdir()
        (reports / "leaderboard.md").write_text("board\n")

        def old(values: Values) -> int:
            run_ids = {key: run.info.run_id for key, run in tracker.cell_runs().items()}
            by_run = report_metrics._run_metrics(run_ids, grid, values)
            for run_id, metrics in by_run.items():
                tracker.log(run_id, metrics=metrics)
            return len(by_run)

        def new(values: Values) -> int:
            return report_metrics.log_metrics(tracker, grid, values)

        times: dict[str, list[float]] = {k: [] for k in ("old", "new", "level", "noop", "track")}
        for r in range(args.repeats):
            base = 10.0 * r
            first = _values(args.cells, args.metrics, base + 1)
            t, n = _timed(partial(old, first))
            times["old"].append(t)
            print(f"repeat {r}: old   {t:7.2f} s ({n} log_batch calls)", flush=True)
            for key, values in (
                    ("new", _values(args.cells, args.metrics, base + 2)),
                    ("level", _values(args.cells, args.metrics, base + 3, True, base + 2)),
                    ("noop", _values(args.cells, args.metrics, base + 3, True, base + 2))):
                t, n = _timed(partial(new, values))
                times[key].append(t)
                print(f"repeat {r}: {key:5s} {t:7.2f} s ({n} log_batch calls)", flush=True)
            same = _values(args.cells, args.metrics, base + 3, True, base + 2)
            report_metrics.track(tracker, grid, same, reports)  # the reports' run, once
            runs = len(tracker.client.search_runs([tracker.experiment_id], max_results=50_000))
            t, got = _timed(partial(report_metrics.track, tracker, grid, same, reports))
            after = len(tracker.client.search_runs([tracker.experiment_id], max_results=50_000))
            times["track"].append(t)
            print(f"repeat {r}: track {t:7.2f} s (no-op: {got}; runs {runs} -> {after})",
                  flush=True)

    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{args.cells} cells x {args.metrics} metrics, median of {args.repeats}:")
    print(f"  old, one log_batch per run, every metric:        {med['old']:7.2f} s")
    for key, what in (("new", "new, every value new (first report):"),
                      ("level", "new, bounds changed (report.level):"),
                      ("noop", "new, nothing changed (rerun):"),
                      ("track", "report_tracking.track, nothing changed:")):
        print(f"  {what:48s} {med[key]:7.2f} s   old/new = {med['old'] / med[key]:6.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
