"""Benchmark: the orchestration cost of the train stage (Ray tasks + MLflow + Parquet).

    python bench/orchestration.py [--cells 8] [--seconds 5] [--repeats 1]

Cells: the pipeline's own cells (laplace data, MLP encoder, InfoNCE; one grid seed per cell)
with ``train.epochs`` calibrated so that one cell takes about ``--seconds`` of CPU on one thread.
(a) bare loop: ``torch.set_num_threads(1)`` and ``pipeline.runtime.cells.one_cell.run_cell`` for
each cell
    in turn, in this process (training, held-out embeddings, Parquet and safetensors files).
(p) parallel bare loop: the same ``run_cell`` calls on a pool of one process per core
    (multiprocessing, spawned and warmed up before timing), cells handed out one at a time —
    the parallelism of (b) without Ray, MLflow or the stage: what the hardware gives two cells
    running at once (shared caches and memory bandwidth), the ceiling for (b).
(b) pipeline: ``stages.train.main()`` itself (``CBENCH_TRAIN_WORKERS=ray``: the stage's Ray path,
    not its forked local workers), run in a throw-away project folder: one Ray task per
    cell on a local Ray instance (127.0.0.1, one CPU per cell), each finished cell logged to MLflow
    (a fresh experiment in a SQLite store) by the driver, ``data/grid.json`` written at the end.
Fixed start-up costs are timed on their own and kept out of (b), as they are paid once per Ray
instance (a cluster is already running) and not per cell: ``ray.init``; starting one worker per
core (process spawn, importing the cell code, and torch._dynamo, which the first torch.optim
optimizer of a process imports, which takes seconds), done by one warm-up task per core;
and creating the MLflow SQLite store (schema migrations, once per store). The speed-up with
``ray.init`` and the worker start included is printed too.
speed-up = bare / pipeline; per-cell overhead = (pipeline × cores − bare) / cells, shown as a
share of the mean bare cell. Wall times on a machine shared with other work also measure that
work, so CPU seconds are reported too: of this process around each bare cell, of the Ray worker
around each cell (the submitted task is ``executor._task`` wrapped to record it), and in total
(the driver plus every process below it: raylet, GCS, workers); their per-cell overhead is
(pipeline CPU − bare CPU) / cells. Medians over repeats; bare and pipeline alternate so that load
from other processes hits both. Targets: speed-up ≥ 1.8 on 2 cores, overhead ≤ 5%
of a 5-second cell.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# glibc reads its malloc tuning at process start: run with the values `make run` exports (see
# DESIGN.md), in this process as in the Ray workers it starts, so (a) and (b) see the same
# allocator.
_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "1000000000", "MALLOC_TRIM_THRESHOLD_": "1000000000"}
if any(k not in os.environ for k in _MALLOC) and not os.environ.get("CBENCH_BENCH_REEXEC"):
    os.environ.update({k: os.environ.get(k, v) for k, v in _MALLOC.items()},
                      CBENCH_BENCH_REEXEC="1")
    os.execv(sys.executable, [sys.executable, *sys.argv])
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.pop("RAY_ADDRESS", None)  # always a local instance on 127.0.0.1, never a cluster
# Read by `import ray`, just below: a local node on 127.0.0.1 (pipeline.runtime.backends.executor,
# which sets it too, is imported after ray here)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import psutil  # noqa: E402
import ray  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

sys.path.insert(0, str(ROOT))

from pipeline import __version__  # noqa: E402
from pipeline.config import Cell, Params, expand, from_mapping, merge, read_yaml  # noqa: E402
from pipeline.datasets import Dataset, load_dataset  # noqa: E402
from pipeline.runtime import context  # noqa: E402
from pipeline.runtime.backends import executor  # noqa: E402
from pipeline.runtime.backends.executor import init_ray  # noqa: E402
from pipeline.runtime.cells.failures import RetryPolicy  # noqa: E402
from pipeline.runtime.cells.one_cell import CellOutcome, run_cell  # noqa: E402
from pipeline.runtime.store import files  # noqa: E402
from pipeline.runtime.tracking.runs import Tracker  # noqa: E402
from stages import train as train_stage  # noqa: E402

BASE: dict = {}  # params.yaml, read once (the file may change while the benchmark runs)


def bench_params(cells: int, epochs: int, experiment: str = "bench") -> Params:
    grid = {"objective": ["contrastive"], "loss": ["infonce"], "k": [16], "tau": [0.5],
            "tau_schedule": ["constant"], "n": [2000], "arch": ["mlp"], "embed_dim": [16],
            "seed": list(range(cells))}
    over = {"grid": grid, "train": {"epochs": epochs, "threads": 1},
            "compute": {"ray_address": None, "num_cpus": 1, "num_gpus": 0},
            "tracking": {"uri": "sqlite:///mlruns.db", "experiment": experiment}}
    if not BASE:
        BASE.update(read_yaml(ROOT / "params.yaml"))
    return from_mapping(merge(BASE, over))


@dataclass
class Run:
    seconds: float  # wall time of the whole loop / stage
    cpu: float  # CPU seconds of every process involved
    cell_walls: list[float]  # run_cell's own wall time per cell
    cell_cpus: list[float]  # CPU seconds of the process around each run_cell
    cell_threads: list[float]  # CPU seconds of the calling thread alone (torch runs on 1 thread)


CPU_FILE = "bench_cpu.txt"  # written next to cell.json by the wrapped Ray task


_TASK = executor._task  # what run_cells submits


def _task_with_cpu(cell: Cell, dataset: Dataset, folder: str, meta: Mapping[str, Any],
                   threads: int, snapshot_epochs: Sequence[int],
                   plugins: Sequence[str], policy: RetryPolicy) -> CellOutcome:
    """executor._task, also writing the task's CPU seconds (the worker process, and the calling
    thread) next to the cell's cell.json, in its folder of the store."""
    cpu, thread = time.process_time(), time.thread_time()
    out = _TASK(cell, dataset, folder, meta, threads, snapshot_epochs, plugins, policy)
    (Path(folder) / CPU_FILE).write_text(
        f"{time.process_time() - cpu} {time.thread_time() - thread}")
    return out


def _tree_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of every process below this one: raylet, GCS, Ray workers."""
    out = {}
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


def bare(params: Params, dataset, root: Path, meta: dict[str, str]) -> Run:
    torch.set_num_threads(1)
    shutil.rmtree(root, ignore_errors=True)
    walls, cpus, threads = [], [], []
    start, cpu0 = time.perf_counter(), time.process_time()
    for cell in expand(params):
        cpu, thread = time.process_time(), time.thread_time()
        out = run_cell(cell, dataset, root / cell.cell_id, meta, params.train.threads,
                       params.stats.epochs)
        cpus.append(time.process_time() - cpu)
        threads.append(time.thread_time() - thread)
        assert out.status == "ok", out.reason
        walls.append(out.wall_seconds)
    return Run(time.perf_counter() - start, time.process_time() - cpu0, walls, cpus, threads)


_POOL: dict = {}  # what each pool process of the parallel bare loop holds


def _pool_init(dataset, root: Path, meta: dict[str, str]) -> None:
    torch.set_num_threads(1)
    _POOL.update(dataset=dataset, root=root, meta=meta)
    _warm(0.0)  # the same one-off imports the Ray workers pay in warm_workers


def _pool_cell(args) -> tuple[float, float, float]:
    cell, threads, epochs = args
    cpu, thread = time.process_time(), time.thread_time()
    out = run_cell(cell, _POOL["dataset"], _POOL["root"] / cell.cell_id, _POOL["meta"], threads,
                   epochs)
    assert out.status == "ok", out.reason
    return out.wall_seconds, time.process_time() - cpu, time.thread_time() - thread


def parallel_bare(pool, params: Params, root: Path) -> Run:
    shutil.rmtree(root, ignore_errors=True)
    jobs = [(c, params.train.threads, params.stats.epochs) for c in expand(params)]
    start = time.perf_counter()
    res = list(pool.imap_unordered(_pool_cell, jobs, chunksize=1))
    walls, cpus, threads = (list(col) for col in zip(*res, strict=True))
    return Run(time.perf_counter() - start, sum(cpus), walls, cpus, threads)


def pipeline(params: Params) -> Run:
    """``stages.train.main()`` in the current (throw-away) project folder, with an empty cell
    store (``$CBENCH_STORE``, set by :func:`main` to a folder of its own)."""
    shutil.rmtree(os.environ["CBENCH_STORE"], ignore_errors=True)
    context.GRID.unlink(missing_ok=True)
    text = yaml.safe_dump(params.model_dump(mode="json"), sort_keys=False)
    files.atomic_write_bytes(context.RESOLVED, text.encode())
    tree0 = _tree_cpu()
    start, cpu0 = time.perf_counter(), time.process_time()
    rc = train_stage.main([])
    seconds, driver = time.perf_counter() - start, time.process_time() - cpu0
    tree = sum(t - tree0.get(pid, 0.0) for pid, t in _tree_cpu().items())
    assert rc == 0
    in_store = context.cell_folders()
    folders = [Path(str(in_store[c.cell_id])) for c in expand(params)]
    records = [files.read_json(f / "cell.json") for f in folders]
    assert all(r["status"] == "ok" for r in records), [r["reason"] for r in records]
    cpu = [[float(v) for v in (f / CPU_FILE).read_text().split()] for f in folders]
    return Run(seconds, driver + tree, [float(r["wall_seconds"]) for r in records],
               [c[0] for c in cpu], [c[1] for c in cpu])


def calibrate(params_at, dataset, root: Path, meta: dict[str, str], seconds: float) -> int:
    """Epochs for a cell of ~``seconds`` CPU seconds on its thread (robust to other load), from
    a line through cells of 1 and 4 epochs."""
    t = {}
    for e in (1, 4):
        cell = expand(params_at(e))[0]
        runs = []
        for r in range(2):
            thread = time.thread_time()
            run_cell(cell, dataset, root / f"cal{e}-{r}", meta, 1, params_at(e).stats.epochs)
            runs.append(time.thread_time() - thread)
        t[e] = min(runs)
    per_epoch = max((t[4] - t[1]) / 3, 1e-3)
    fixed = max(t[1] - per_epoch, 0.0)
    print(f"calibration: {per_epoch:.3f} s/epoch + {fixed:.3f} s fixed per cell (CPU, one thread)")
    return max(1, round((seconds - fixed) / per_epoch))


def _warm(seconds: float) -> int:
    """What a fresh worker pays once: importing the cell code, and torch._dynamo (imported by the
    first ``torch.optim`` optimizer a process builds, which takes seconds)."""
    from pipeline.runtime.cells.one_cell import prepare_worker

    prepare_worker()
    time.sleep(seconds)  # hold the worker so that each warm-up task gets its own
    return os.getpid()


def warm_workers(n: int) -> set[int]:
    """One warm-up task per CPU, shaped like a cell task (num_cpus=1), so the cells reuse them."""
    task = ray.remote(num_cpus=1)(_warm)
    return set(ray.get([task.remote(0.5) for _ in range(n)]))


def _med(runs: list[Run], key) -> float:
    return statistics.median(key(r) for r in runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5.0,
                    help="target single-thread time of one cell")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=0,
                    help="skip calibration and train this many epochs")
    args = ap.parse_args(argv)
    cores, n = os.cpu_count() or 1, args.cells
    load = os.getloadavg()[0]
    executor._task = _task_with_cpu  # run_cells submits executor._task; same call, plus CPU time
    # (b) is the Ray path: a local CPU grid would otherwise train on workers forked from the stage
    os.environ["CBENCH_TRAIN_WORKERS"] = "ray"

    with tempfile.TemporaryDirectory(prefix="cbench-orch-") as tmp:
        # Everything, Ray's workers included (they inherit the raylet's working directory), writes
        # under this folder: the stage's relative paths (data/cells, mlruns.db) resolve here.
        os.chdir(tmp)
        os.environ["CBENCH_STORE"] = str(Path(tmp) / "store")  # never the shared cell store
        probe = bench_params(n, 1)
        d = probe.data
        dataset = load_dataset(d.name, d.n_train, d.n_heldout, d.seed, d.options)
        files.write_dataset(dataset, context.dataset_path(d.name))
        dataset = files.read_dataset(context.dataset_path(d.name))
        meta = {"git_sha": context.git_sha(), "dataset_hash": dataset.content_hash(),
                "code_version": __version__}
        torch.set_num_threads(1)
        _warm(0.0)  # this process pays the same one-off imports before the bare loop
        epochs = args.epochs or calibrate(lambda e: bench_params(1, e), dataset, Path(tmp) / "cal",
                                          meta, args.seconds)
        print(f"cells: {n} x (laplace n=2000, mlp, infonce k=16, {epochs} epochs, "
              f"1 thread); cores {cores}; load average at start {load:.2f}")

        t0 = time.perf_counter()
        Tracker(probe.tracking.uri, "bench-setup")
        store_s = time.perf_counter() - t0
        ray_s = warm_s = 0.0

        pool = multiprocessing.get_context("spawn").Pool(
            cores, initializer=_pool_init, initargs=(dataset, Path(tmp) / "par", meta))
        pool.map(time.sleep, [0.5] * cores, chunksize=1)  # every process started and warm

        bares: list[Run] = []
        pars: list[Run] = []
        pipes: list[Run] = []
        for r in range(args.repeats):
            bares.append(bare(bench_params(n, epochs), dataset, Path(tmp) / "bare", meta))
            print(f"repeat {r + 1}: bare loop {bares[-1].seconds:.2f} s")
            pars.append(parallel_bare(pool, bench_params(n, epochs), Path(tmp) / "par"))
            print(f"repeat {r + 1}: parallel bare loop {pars[-1].seconds:.2f} s")
            if r == 0:
                t0 = time.perf_counter()
                init_ray(probe.compute)
                ray_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                pids = warm_workers(cores)
                warm_s = time.perf_counter() - t0
                assert len(pids) == cores, pids
            pipes.append(pipeline(bench_params(n, epochs, f"bench-{r}")))
            print(f"repeat {r + 1}: pipeline {pipes[-1].seconds:.2f} s")
        ray.shutdown()
        pool.close()
        pool.join()
        os.chdir(ROOT)

    bare_t, pipe_t = _med(bares, lambda r: r.seconds), _med(pipes, lambda r: r.seconds)
    cell_t = _med(bares, lambda r: statistics.mean(r.cell_walls))
    task_t = _med(pipes, lambda r: statistics.mean(r.cell_walls))
    overhead = (pipe_t * cores - bare_t) / n
    gap = _med(pipes, lambda r: (r.seconds * cores - sum(r.cell_walls)) / n)
    bare_cpu, pipe_cpu = _med(bares, lambda r: r.cpu), _med(pipes, lambda r: r.cpu)
    cell_cpu = _med(bares, lambda r: statistics.mean(r.cell_cpus))
    task_cpu = _med(pipes, lambda r: statistics.mean(r.cell_cpus))
    orch_cpu = _med(pipes, lambda r: (r.cpu - sum(r.cell_cpus)) / n)
    fixed = ray_s + warm_s
    print()
    print(f"fixed start-up, not in the pipeline time: ray.init {ray_s:.2f} s; starting {cores} "
          f"workers (spawn, imports, torch._dynamo; 0.5 s hold included) {warm_s:.2f} s; "
          f"MLflow SQLite store creation {store_s:.2f} s")
    print(f"bare loop total       {bare_t:8.2f} s   (mean cell {cell_t:.2f} s)")
    print(f"pipeline total        {pipe_t:8.2f} s   (mean cell inside its Ray task {task_t:.2f} s)")
    par_t = _med(pars, lambda r: r.seconds)
    par_cell = _med(pars, lambda r: statistics.mean(r.cell_walls))
    print(f"parallel bare total   {par_t:8.2f} s   (mean cell {par_cell:.2f} s; {cores} processes, "
          f"no Ray: the hardware's ceiling {bare_t / par_t:.2f} x)")
    print(f"speed-up              {bare_t / pipe_t:8.2f} x   (target >= 1.8 on {cores} cores; "
          f"{bare_t / (pipe_t + fixed):.2f} x with ray.init and the worker start)")
    print(f"per-cell overhead     {overhead:8.2f} s = {100 * overhead / cell_t:5.1f}% of a "
          f"{cell_t:.2f} s cell   (target <= 5%; (pipeline x {cores} - bare) / {n})")
    print(f"  outside the cells   {gap:8.2f} s = {100 * gap / cell_t:5.1f}%   "
          f"((pipeline x {cores} - sum of in-task cell times) / {n}: idle cores and "
          "orchestration, not slower cells)")
    vs_par = (pipe_t - par_t) * cores / n
    print(f"  against parallel    {vs_par:8.2f} s = {100 * vs_par / cell_t:5.1f}%   ((pipeline - "
          f"parallel bare) x {cores} / {n}: what Ray, MLflow and the stage add to cells that run "
          f"{cores} at a time anyway)")
    print("CPU seconds (robust to other load on the machine):")
    cell_thr = _med(bares, lambda r: statistics.mean(r.cell_threads))
    task_thr = _med(pipes, lambda r: statistics.mean(r.cell_threads))
    par_thr = _med(pars, lambda r: statistics.mean(r.cell_threads))
    print(f"  mean cell           {cell_cpu:8.2f} s bare, {task_cpu:.2f} s inside a Ray task "
          f"(the cell's thread alone: {cell_thr:.2f} s bare, {par_thr:.2f} s in the parallel bare "
          f"loop, {task_thr:.2f} s in the task)")
    print(f"  total               {bare_cpu:8.2f} s bare, {pipe_cpu:.2f} s pipeline (driver + "
          f"raylet, GCS, workers)")
    print(f"  per-cell overhead   {(pipe_cpu - bare_cpu) / n:8.2f} s = "
          f"{100 * (pipe_cpu - bare_cpu) / n / cell_cpu:5.1f}%   ((pipeline - bare) / {n}); "
          f"outside the cells {orch_cpu:.2f} s = {100 * orch_cpu / cell_cpu:.1f}%")
    print(f"load average at end   {os.getloadavg()[0]:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
