"""Benchmark: the analysis stages' cost per cell, against the same computations in one process.

    python bench/grid_scale.py [--sizes 100 1000 10000] [--repeats 3] [--workdir DIR] [--code DIR]

Grids: profiles/grid-1000.yaml (4 losses x 5 k x 5 tau x 2 embedding sizes x 5 seeds = 1000
tiny linear cells, 1 epoch on 500 Laplace points) and its 100-cell part (tau = 0.1, d = 8:
4 x 5 x 1 x 1 x 5, settings of 5 seeds as in the 1000), whose cells are among the 1000, so the
cell store trains them once; 10 000: profiles/grid-10000.yaml (4 x 5 x 5 x 4 embedding sizes x
5 training sizes x 5 seeds), which holds the 1000. Each grid gets a workspace
(params.resolved.yaml, data/, reports/, mlruns.db); resolve, prepare and train run there
first, train timed apart (it skips the cells the store holds: ``$CBENCH_STORE``, as the
pipeline).
(a) stage: ``python -m stages.<name>`` as DVC runs it, a subprocess in the workspace (wall time):
    stats, search, bounds, probe, report. On Linux that process hands the stage to the warm
    interpreter (pipeline/runtime/warm.py) that the workspace's first stage started, as under
    ``make run``; ``CBENCH_WARM=off`` in this bench's environment times them cold. ``--code
    DIR``: the stages of another checkout (e.g. the code before a change; (b) always runs this
    checkout's).
(b) in-process: the computations each stage runs, called in a loop in this process, one thread
    (as each Dask worker), no Dask, no subprocess: stats: ``analyses.stats_cell`` per
    embeddings file and ``stats_tables``; search: ``search_one`` per cell and
    ``search_tables``; bounds: ``bounds_one`` per cell and ``bounds_table``; probe:
    ``probe_cell`` per cell and the raw inputs' row (nothing on unlabelled data such as these
    grids: the stage only writes an empty table); report: ``stages.report.read_inputs`` (the
    stage tables and every cell's record and history), ``build`` and ``write`` (every table and
    figure). The cells' own files are read in both. Imports are done and each function has run
    once before timing.
First, at every size, each stage after train runs once in dvc.yaml's order, timed as end to end
(the first report logs every cell's metrics to MLflow); then (a) and (b) ``--repeats`` times
(0: the first run only). Every run records its peak memory: the RSS summed over the stage's
process and all its children (Dask and Ray workers), sampled every 0.1 s (``PeakMemory``).
What (a) adds to (b) is the stages' overhead: interpreter start and imports, the Dask cluster's
start and stop, shipping batches and results, writing the stage tables, the report's MLflow
logging. The Dask stages use ``stats.n_workers`` worker processes, (b) one: on a quiet machine
with that many cores a ratio below 1 is the parallel speed-up.
The train stage is set against its cells' own time: the new trainings' ``wall_seconds``
(``cell.json``) summed, and that sum over the cores (one cell a core, the stage's best). Right
after it, in a fresh interpreter in the workspace, Ray's start is timed as the stage pays it
(``measure_ray_start``): the local instance, one worker per CPU made ready for cells (importing
the cell code, and torch._dynamo, which a process's first torch.optim optimizer imports; as
bench/orchestration.py counts a worker's start), and the shutdown. The bar for the stage
is 1.2 x the cells' sum plus Ray's start; what it took above the cells is the interpreter,
imports, plan, Ray's start, and the driver's MLflow logging and claims.
Printed per grid, per stage, in total and for the target's four stages (``target``: stats,
search, bounds, report; probe computes nothing on these unlabelled grids): seconds, milliseconds
per cell, ratio (a) / (b); then
the marginal cost per cell between the two grids, (T_1000 - T_100) / 900, for (a) and (b), and
its ratio: fixed costs (interpreter, imports, cluster start) cancel in it, and (a)'s fixed part
is estimated as T_100 - 100 x marginal. Medians of ``--repeats``, (a) and (b) interleaved stage
by stage so that load from other processes hits both. Target: per cell, the stats,
search, bounds and report stages together cost at most 1.5x (b).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.pop("RAY_ADDRESS", None)  # a local instance on 127.0.0.1 for train, never a cluster

import psutil  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

sys.path.insert(0, str(ROOT))

from pipeline.datasets import DATASETS  # noqa: E402
from pipeline.probe.frozen import ProbeSettings  # noqa: E402
from pipeline.report.grid.build import build  # noqa: E402
from pipeline.report.grid.figure_plan import norm_cells  # noqa: E402
from pipeline.report.render.publish import write  # noqa: E402
from pipeline.runtime import context  # noqa: E402
from pipeline.runtime.backends.probe_ops import probe_cell, probe_inputs  # noqa: E402
from pipeline.runtime.cells import analyses, tables  # noqa: E402
from pipeline.runtime.store import files, layout  # noqa: E402
from stages import report as report_stage  # noqa: E402

PROFILES = ROOT / "profiles"
# size -> (profile, grid keys laid over it); the 100 cells are among the 1000, the 1000 among the
# 10 000 (n = 500, embed_dim 8 and 16), so the cell store trains each cell once
SUBSETS: dict[int, tuple[str, dict]] = {
    100: ("grid-1000.yaml", {"tau": [0.1], "embed_dim": [8]}),
    1000: ("grid-1000.yaml", {}),
    10000: ("grid-10000.yaml", {}),
}
STAGES = ("stats", "search", "bounds", "probe", "report")
FIRST = ("stats", "search", "bounds", "probe", "geometry", "report")  # dvc.yaml's order after train
TARGET = ("stats", "search", "bounds", "report")  # together at most 1.5x in-process
SETUP = ("resolve", "prepare", "train")


def make_workspace(folder: Path, size: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    name, overrides = SUBSETS[size]
    profile = yaml.safe_load((PROFILES / name).read_text())
    profile["grid"].update(overrides)
    (folder / "profile.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return folder


def stage_env(code: Path, workspace: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(code), DVC_ROOT=str(workspace), PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return env


class PeakMemory:
    """Peak resident memory of a process and all its descendants (Dask and Ray workers, Ray's
    daemons), sampled every ``interval`` seconds in a thread: the sum of their RSS, so pages
    they share (the torch library, mapped files) count once per process, an upper bound.
    ``pid_file``: where a stage handed to the warm server (pipeline/runtime/warm.py) writes its
    pid; that process and its descendants count too (they are the server's children, not the
    starting process's)."""

    def __init__(self, pid: int, interval: float = 0.1, pid_file: Path | None = None):
        self.process, self.interval, self.peak = psutil.Process(pid), interval, 0
        self.pid_file = pid_file
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _roots(self) -> list[psutil.Process]:
        roots = [self.process]
        if self.pid_file is not None and self.pid_file.exists():
            for pid in self.pid_file.read_text().split():
                with contextlib.suppress(psutil.Error, ValueError):
                    roots.append(psutil.Process(int(pid)))
        return roots

    def _rss(self) -> int:
        total = 0
        family = []
        for root in self._roots():
            with contextlib.suppress(psutil.Error):
                family += [root, *root.children(recursive=True)]
        for p in family:
            try:
                total += p.memory_info().rss
            except psutil.Error:  # ended between the listing and the read
                pass
        return total

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_stage(name: str, code: Path, workspace: Path, log: Path) -> tuple[float, int]:
    """Wall seconds and peak memory (bytes, :class:`PeakMemory`) of ``python -m stages.<name>``
    in ``workspace``; its output goes to ``log``."""
    args = [sys.executable, "-m", f"stages.{name}"]
    if name == "resolve":
        args += ["--params", str(ROOT / "params.yaml"), "--profile", "profile.yaml"]
    pids = log.with_name(f"{log.name}.pids")
    pids.unlink(missing_ok=True)
    env = dict(stage_env(code, workspace), CBENCH_WARM_PID_FILE=str(pids))
    start = time.perf_counter()
    with open(log, "ab") as out:
        child = subprocess.Popen(args, cwd=workspace, env=env, stdout=out,
                                 stderr=subprocess.STDOUT)
        with PeakMemory(child.pid, pid_file=pids) as memory:
            returncode = child.wait()
    seconds = time.perf_counter() - start
    if returncode not in (0, 3 if name == "report" else 0):  # 3: some cells failed
        raise SystemExit(f"stages.{name} in {workspace} exited {returncode}; see {log}")
    return seconds, memory.peak


def _stats() -> None:
    """What stages/stats.py computes: every ok cell's final and snapshot embeddings."""
    params, grid = context.resolved_params(), context.read_grid()
    ok = context.trained_rows(grid)
    folders, final = context.cell_folders(ok), params.train.epochs
    paths = {(c, final): folders[c] / layout.EMBEDDINGS for c in ok.cell_id}
    for epoch in params.stats.epochs:
        if epoch != final:
            paths.update({(c, epoch): folders[c] / layout.snapshot(epoch)
                          for c in ok.cell_id})
    results: list = []
    for (cell_id, epoch), path in paths.items():
        results += analyses.stats_cell(cell_id, epoch, path, params.stats, params.report.level)
    tables.stats_tables(results)


def _cells_and_dataset() -> tuple:
    params = context.resolved_params()
    cells = context.trained_cells(params)
    return params, cells, files.read_dataset(context.shared_dataset(params)), \
        context.cell_folders()


def _search() -> None:
    params, cells, dataset, folders = _cells_and_dataset()
    results = [analyses.search_one(c, dataset, str(folders[c.cell_id]), params.search)
               for c in cells]
    tables.search_tables(cells, results)


def _bounds() -> None:
    params, cells, dataset, folders = _cells_and_dataset()
    results = [analyses.bounds_one(c, dataset, str(folders[c.cell_id]), params.bounds)
               for c in cells]
    tables.bounds_table(cells, results)


def _probe() -> None:
    params = context.resolved_params()
    if DATASETS[params.data.name].labels != "class":
        return  # the stage writes an empty table: no computation
    _, cells, dataset, folders = _cells_and_dataset()
    p = params.probe
    settings = ProbeSettings(p.c_grid, p.val_fraction, p.knn_k, p.knn_temperature,
                             params.report.level)
    for c in cells:
        probe_cell(c, dataset, str(folders[c.cell_id]), settings)
    probe_inputs(dataset, settings, params.data.seed)


def _report(out: Path) -> None:
    params, grid = context.resolved_params(), context.read_grid()
    report = build(report_stage.read_inputs(params, grid))
    write(report, out, report_stage.read_norms(grid, norm_cells(report.figures)))


IN_PROCESS: dict[str, Callable[[], None]] = {
    "stats": _stats, "search": _search, "bounds": _bounds, "probe": _probe,
    "report": lambda: _report(Path("bench-reports"))}


def in_process(name: str, workspace: Path) -> tuple[float, int]:
    """Wall seconds of stage ``name``'s computations in this process, and this process's peak
    resident memory meanwhile (bytes)."""
    here = Path.cwd()
    os.chdir(workspace)
    try:
        with PeakMemory(os.getpid()) as memory:
            start = time.perf_counter()
            IN_PROCESS[name]()
            seconds = time.perf_counter() - start
        return seconds, memory.peak
    finally:
        os.chdir(here)


def warm_up(workspace: Path, stages: list[str]) -> None:
    """Run each in-process computation once on the smallest grid, untimed (lazy imports, torch
    and matplotlib initialisation)."""
    for name in stages:
        in_process(name, workspace)


MB = 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000], choices=sorted(SUBSETS))
    ap.add_argument("--repeats", type=int, default=3,
                    help="reruns of each stage against its in-process work (0: the first run "
                         "only)")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="keep the workspaces here (reused by a later run); default: a temporary "
                         "folder")
    ap.add_argument("--code", type=Path, default=ROOT,
                    help="checkout whose stages (a) runs (default: this one)")
    ap.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    args = ap.parse_args(argv)
    if args.repeats < 0:
        ap.error(f"--repeats must be 0 or more, got {args.repeats}")
    load = os.getloadavg()
    print(f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"{os.cpu_count()} cores; stages from {args.code.resolve()}; "
          f"store {os.environ.get('CBENCH_STORE', '(default)')}; median of {args.repeats}",
          flush=True)
    torch.set_num_threads(1)
    tmp = None if args.workdir else tempfile.mkdtemp(prefix="cbench-grid-scale-")
    workdir = args.workdir or Path(tmp)  # type: ignore[arg-type]
    sizes = sorted(args.sizes)
    spaces = {n: make_workspace(workdir / f"grid-{n}", n) for n in sizes}
    log = workdir / "stages.log"
    times: dict[tuple[int, str, str], list[float]] = {}
    peaks: dict[tuple[int, str, str], int] = {}
    first: dict[tuple[int, str], tuple[float, int]] = {}
    own: dict[int, tuple[int, float, float]] = {}
    ray_start: dict[int, dict[str, float]] = {}
    try:
        for n in sizes:
            for name in SETUP:
                began = time.time()
                first[(n, name)] = run_stage(name, ROOT, spaces[n], log)
                if name == "train":
                    own[n] = cells_own_time(spaces[n], began)
                    ray_start[n] = measure_ray_start(ROOT, spaces[n])
            cells = len(files.read_json(spaces[n] / context.GRID)["cells"])
            assert cells == n, (cells, n)
            # the rest of the pipeline once, as `dvc repro` runs it: the first report logs every
            # cell's metrics to MLflow; the stage tables are then there for the warm-up and (b)
            for name in FIRST:
                first[(n, name)] = run_stage(name, args.code, spaces[n], log)
            print(f"grid {n}, first run: " + ", ".join(
                f"{s} {first[(n, s)][0]:.1f} s" for s in (*SETUP, *FIRST))
                + " (train skips the cells already in the store)", flush=True)
        if args.repeats:
            warm_up(spaces[sizes[0]], args.stages)
        for r in range(args.repeats):
            for n in sizes:
                for name in args.stages:
                    for kind, (seconds, peak) in (("stage", run_stage(name, args.code, spaces[n],
                                                                       log)),
                                                  ("in", in_process(name, spaces[n]))):
                        times.setdefault((n, name, kind), []).append(seconds)
                        peaks[(n, name, kind)] = max(peaks.get((n, name, kind), 0), peak)
                print(f"repeat {r + 1}, {n} cells: stages "
                      + ", ".join(f"{s} {times[(n, s, 'stage')][-1]:.1f}" for s in args.stages)
                      + " s; in-process "
                      + ", ".join(f"{s} {times[(n, s, 'in')][-1]:.1f}" for s in args.stages)
                      + " s", flush=True)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    report_first(first, sizes)
    report_train(first, own, ray_start, sizes)
    if args.repeats:
        med = {k: statistics.median(v) for k, v in times.items()}
        report(med, peaks, sizes, args.stages)
    load = os.getloadavg()
    print(f"load average at end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


def cells_own_time(workspace: Path, since: float) -> tuple[int, float, float]:
    """The trainings the train stage just ran (their ``cell.json`` started at or after
    ``since``): how many, and the sums of their ``wall_seconds`` (training, export, files) and
    ``train_seconds`` (the epochs' loops)."""
    grid = files.read_json(workspace / context.GRID)["cells"]
    records = [files.read_json(Path(p) / layout.RECORD)
               for p in sorted({c["path"] for c in grid})]
    new = [r for r in records if float(r.get("started_at") or 0) >= since]
    return (len(new), sum(float(r.get("wall_seconds") or 0) for r in new),
            sum(float(r.get("train_seconds") or 0) for r in new))


# Ray's start as the train stage pays it, measured in a fresh interpreter in the workspace: a
# local instance (executor.start_local), one task per CPU that makes its worker ready for cells
# (importing the cell tasks' module and one_cell.prepare_worker), held HOLD seconds so that each
# task gets a worker of its own (the hold is subtracted), and ray.shutdown. JSON on stdout.
RAY_START = """
import json, sys, time
from pipeline.runtime.backends import executor
ray = executor.ray
HOLD = float(sys.argv[1])

def ready():
    from pipeline.runtime.cells import one_cell  # noqa: F401  what a cell task unpickles
    from pipeline.runtime.backends import executor
    one_cell.prepare_worker()
    time.sleep(HOLD)

t0 = time.perf_counter()
executor.start_local()
t1 = time.perf_counter()
task = ray.remote(num_cpus=1)(ready)
ray.get([task.remote() for _ in range(int(ray.cluster_resources()["CPU"]))])
t2 = time.perf_counter()
ray.shutdown()
t3 = time.perf_counter()
print(json.dumps({"init": t1 - t0, "workers": t2 - t1 - HOLD, "shutdown": t3 - t2}))
"""
HOLD = 0.5


def measure_ray_start(code: Path, workspace: Path) -> dict[str, float]:
    """Seconds of Ray's start as the train stage pays it (:data:`RAY_START`): ``init``,
    ``workers`` (spawned and ready for cells, one per CPU, in parallel), ``shutdown``, and
    ``total``."""
    done = subprocess.run([sys.executable, "-c", RAY_START, str(HOLD)], cwd=workspace,
                          env=stage_env(code, workspace), capture_output=True, text=True,
                          check=True)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return {**got, "total": got["init"] + got["workers"] + got["shutdown"]}


def report_train(first: dict[tuple[int, str], tuple[float, int]],
                 own: dict[int, tuple[int, float, float]], ray: dict[int, dict[str, float]],
                 sizes: list[int]) -> None:
    """The train stage against its cells' own time: the sum of the new
    trainings' wall seconds (``cell.json``), Ray's start measured beside it
    (:func:`measure_ray_start`: instance, workers ready, shutdown), the bar (1.2 x the sum plus
    Ray's start) and the stage's time against it; also that sum spread over the cores (one cell
    a core: the stage's best)."""
    slots = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"\ntrain against its cells' own time (the new trainings' cell.json wall seconds; "
          f"{slots} cores, one cell each; Ray's start = init + one worker per CPU ready for "
          "cells + shutdown, measured after the stage)")
    print("  cells  trainings   stage s   cells' sum s   Ray's start s (init+workers+stop)   "
          "bar s (1.2 sum + Ray)   stage - bar s   sum / cores s   loops' sum s")
    for n in sizes:
        count, wall, loops = own[n]
        stage, best, r = first[(n, "train")][0], wall / max(slots or 1, 1), ray[n]
        bar = 1.2 * wall + r["total"]
        parts = f"({r['init']:.1f}+{r['workers']:.1f}+{r['shutdown']:.1f})"
        print(f"  {n:5d} {count:10d} {stage:9.1f} {wall:14.1f} {r['total']:15.1f} {parts:>19s}"
              f"   {bar:21.1f} {stage - bar:15.1f} {best:15.1f} {loops:14.1f}")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:6.2f}x" if b > 0 else "     -"


def report_first(first: dict[tuple[int, str], tuple[float, int]], sizes: list[int]) -> None:
    """The first run of every stage, as end to end: seconds and peak memory (MiB) per size, and
    the ratio of each size's time to the size below it."""
    names = (*SETUP, *FIRST)
    print("\nfirst run (end to end; train skips cells already in the store): seconds, peak "
          "MiB (RSS summed over the stage's processes)")
    print("  stage     " + "".join(f"{n:>10d} s {'MiB':>7s}" for n in sizes)
          + "".join(f"   {hi}/{lo}" for lo, hi in zip(sizes, sizes[1:], strict=False)))
    for name in (*names, "total"):
        parts = names if name == "total" else (name,)
        t = {n: sum(first[(n, s)][0] for s in parts) for n in sizes}
        m = {n: max(first[(n, s)][1] for s in parts) / MB for n in sizes}
        ratios = "".join(f"   {t[hi] / t[lo]:{len(str(hi)) + len(str(lo)) + 1}.2f}"
                         for lo, hi in zip(sizes, sizes[1:], strict=False))
        print(f"  {name:9s} " + "".join(f"{t[n]:12.1f} {m[n]:7.0f}" for n in sizes) + ratios)


def report(med: dict[tuple[int, str, str], float], peaks: dict[tuple[int, str, str], int],
           sizes: list[int], stages: list[str]) -> None:
    target = [s for s in TARGET if s in stages]
    rows = [*stages, "total", *(["target"] if len(target) == len(TARGET) else [])]

    def t(n: int, name: str, kind: str) -> float:
        if name in ("total", "target"):
            return sum(med[(n, s, kind)] for s in (stages if name == "total" else target))
        return med[(n, name, kind)]

    def m(n: int, name: str, kind: str) -> float:
        keys = stages if name == "total" else target if name == "target" else [name]
        return max(peaks[(n, s, kind)] for s in keys) / MB

    for n in sizes:
        print(f"\n{n} cells, reruns   stage s   ms/cell  peak MiB   in-process s   ms/cell  "
              "peak MiB   stage / in-process")
        for name in rows:
            a, b = t(n, name, "stage"), t(n, name, "in")
            print(f"  {name:15s} {a:9.2f} {1000 * a / n:9.1f} {m(n, name, 'stage'):9.0f} "
                  f"{b:14.2f} {1000 * b / n:9.1f} {m(n, name, 'in'):9.0f}   {_ratio(a, b)}")
    if len(sizes) < 2:
        return
    for lo, hi in zip(sizes, sizes[1:], strict=False):
        print(f"\nmarginal per cell, {lo} -> {hi} cells (fixed costs cancel; stage fixed part = "
              f"T_{lo} - {lo} x marginal)")
        print("  stage       stage ms/cell   in-process ms/cell   ratio   stage fixed s")
        for name in rows:
            da = (t(hi, name, "stage") - t(lo, name, "stage")) / (hi - lo)
            db = (t(hi, name, "in") - t(lo, name, "in")) / (hi - lo)
            fixed = t(lo, name, "stage") - lo * da
            print(f"  {name:10s} {1000 * da:13.2f} {1000 * db:20.2f}   {_ratio(da, db)} "
                  f"{fixed:11.2f}")


if __name__ == "__main__":
    sys.exit(main())
