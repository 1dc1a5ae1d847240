"""Model: a grid's wall time on N nodes x G GPUs, from measured per-cell costs.

    python bench/cluster_model.py --cells 100000 --nodes 1 2 4 8 16 32 --gpus 8 --cells-per-gpu 4
        [--store-root DIR | --cell-seconds S ...] [--bytes-per-cell B] [--driver-per-cell S]
        [--store-bandwidth MB/s] [--store-cells-per-second R] [--measure]

The arithmetic is :mod:`pipeline.runtime.backends.capacity` (its docstring derives the crossover
``N* = t̄ / (s · d)``): wall = max(compute, driver, store) + startup, where compute is list
scheduling of the cells onto N · s slots (s = :func:`capacity.slots_per_node`: G · cells per GPU,
capped by the node's CPUs), driver = cells x the driver's serial seconds per cell, store =
cells x bytes per cell / the store's aggregate bandwidth (or cells / its cells per second).

Cell times: ``--store-root`` reads every ok ``cell.json`` under a cell store (``<store>``,
``<store>/cells`` or a folder of cell folders): its ``wall_seconds`` (training and writing the
files) and the bytes of its ``files``; ``--cells`` times are drawn from them with replacement
(``--seed``). Else ``--cell-seconds`` (cycled) and ``--bytes-per-cell``.

Overheads (defaults: :data:`MEASURED`, on this machine, see its comment; ``--measure`` measures
them again and uses them):
(d) the driver's serial seconds per cell, the sum of
    - bookkeeping: ``pipeline.runtime.driver.train_grid`` itself on a fresh store and MLflow
      SQLite database, with its executor replaced by one that returns each cell's outcome at
      once (no Ray, no training): planning the cell against the store, its code fingerprint,
      claiming it, logging it to MLflow, releasing the claim, the manifest row. Marginal:
      (T_big - T_small) / (big - small) cells, so the fixed costs cancel;
    - Ray: no-op tasks submitted at once and collected one by one as ``executor.run_cells``
      does (``ray.wait(num_returns=1)``, ``ray.get``), on a local instance; marginal the same
      way. Its wall time per task is used (an upper bound: it includes the no-op's run on this
      machine's cores); the driver's CPU per task is printed beside it.
(w) the worker's store seconds per cell after training (run in parallel, one per slot):
    ``folders.checksums`` of a copied cell folder, its ``cell.json`` written and
    ``folders.publish`` onto a fresh path, for cells of ``--store-root`` (or the default store).
The store's aggregate bandwidth is a property of the cluster's shared volume or object store,
not of this machine: give it (``--store-bandwidth``, default 1000 MB/s, an assumption).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# capacity is pure: the heavy imports are in measure_*
from pipeline.runtime.backends import capacity  # noqa: E402

# The driver, measured on 2026-12-04 (2 vCPUs of an AMD EPYC, quiet) with
#   python bench/cluster_model.py --measure --repeats 3 --store-root <a store of tiny cells>
# bookkeeping 1.1 ms/cell (100 and 500 cells: 1.66/1.06, 0.62/1.50, 0.63/1.07 s; MLflow on
# SQLite in one transaction per batch of cells, pipeline.runtime.tracking.sql_writer) + Ray 0.65
# ms/task (driver CPU 0.49 ms); startup: ray.init and a warm task per core, 3.2 s. Before the
# batched MLflow writes (2026-12-02, 2 vCPUs shared with four other jobs, load average 3-6):
# bookkeeping 104 ms/cell, Ray 1.4 ms, startup 11.9 s. The worker's store work, from that earlier
# run: checksums + cell.json + publish of 1.3 MB cells, 10.9 ms (the tiny cells of 2026-12-04, 0.11
# MB: 0.9 ms).
MEASURED = {"driver_per_cell": 0.0018, "worker_store_per_cell": 0.011, "startup": 3.2}
STORE_MBPS = 1000.0  # an assumption, not a measurement: a shared volume's aggregate writes


def read_records(root: Path) -> list[dict]:
    """Every ``cell.json`` under ``root`` (a store, its ``cells/``, or cell folders), at most two
    folders down from ``cells/``."""
    base = root / "cells" if (root / "cells").is_dir() else root
    paths = sorted({*base.glob("*/*/cell.json"), *base.glob("*/cell.json")})
    out = []
    for p in paths:
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    return out


@dataclass(frozen=True)
class DriverCost:
    """Seconds per cell at the driver: bookkeeping (wall and CPU) and Ray per task (wall, CPU);
    ray_start: ``ray.init`` plus one warm task per core, once per run."""

    bookkeeping: float
    bookkeeping_cpu: float
    ray_task: float
    ray_task_cpu: float
    ray_start: float

    @property
    def per_cell(self) -> float:
        return self.bookkeeping + self.ray_task


def _tiny_params(cells: int) -> dict:
    from pipeline.config import merge, read_yaml

    over = {"data": {"name": "laplace", "n_train": 600, "n_heldout": 200, "seed": 0,
                     "options": {"input_dim": 16}},
            "grid": {"objective": ["contrastive"], "loss": ["infonce"], "k": [4], "tau": [0.5],
                     "tau_schedule": ["constant"], "n": [256], "arch": ["linear"],
                     "embed_dim": [8], "batch_size": [64], "seed": list(range(cells))},
            "train": {"epochs": 1, "threads": 1},
            "stats": {"block_cols": 4, "n_workers": 1, "projections": 4, "bootstrap": 10,
                      "epochs": [0], "null_draws": 1},
            "search": {"k_eval": 16, "anchors": 50, "positives": 4, "k_sweep": [2, 4],
                       "fit_k_min": 2},
            "bounds": {"tuples": 200},
            "compute": {"ray_address": None, "num_cpus": 1, "num_gpus": 0},
            "tracking": {"uri": "sqlite:///mlruns.db", "experiment": "cluster-model"}}
    return merge(read_yaml(ROOT / "params.yaml"), over)


def _bookkeeping(cells: int, folder: Path) -> tuple[float, float]:
    """Wall and CPU seconds of ``driver.train_grid`` on ``cells`` cells whose executor returns
    each outcome at once (one real cell, trained first, is every cell's template)."""
    import yaml

    from pipeline.runtime import context, driver
    from pipeline.runtime.cells.one_cell import CellOutcome, run_cell
    from stages import prepare, resolve

    folder.mkdir(parents=True)
    os.chdir(folder)
    os.environ["CBENCH_STORE"] = str(folder / "store")
    os.environ.pop("DVC_ROOT", None)
    Path("params.yaml").write_text(yaml.safe_dump(_tiny_params(cells)))
    assert resolve.main([]) == 0 and prepare.main([]) == 0
    params = context.resolved_params()
    from pipeline.config import expand
    from pipeline.runtime.store import files

    dataset = files.read_dataset(context.dataset_path(params.data.name))
    template = run_cell(expand(params)[0], dataset, folder / "template", {}, 1, [0])
    assert template.status == "ok", template.reason

    def at_once(cells, dataset, folders, metas, compute, threads, snaps, on_done, plugins,
                ready=None):
        if ready is not None:
            ready()
        out = []
        for cell in cells:
            record = {**template.record, "cell_id": cell.training_id, **metas[cell.cell_id]}
            outcome = CellOutcome(cell.cell_id, "ok", "", template.wall_seconds,
                                  template.history, record)
            on_done(outcome)
            out.append(outcome)
        return out

    driver.run_cells = at_once  # type: ignore[assignment]  # this process only: a benchmark
    start, cpu = time.perf_counter(), time.process_time()
    got = driver.train_grid(params)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert len(got.trained) == cells and got.failed == 0, (len(got.trained), got.failed)
    return seconds, cpu


def _noop(i: int, shared: object) -> int:
    return i


def _ray_tasks(sizes: Sequence[int]) -> tuple[dict[int, tuple[float, float]], float]:
    """Wall and driver-CPU seconds of ``n`` no-op tasks, submitted at once and collected one by
    one as ``executor.run_cells`` does; and the seconds ``ray.init`` and a warm-up took."""
    os.environ.pop("RAY_ADDRESS", None)
    from pipeline.runtime.backends import (
        executor,  # imports ray itself: a local instance on 127.0.0.1
    )

    ray = executor.ray
    cores = os.cpu_count() or 1
    start = time.perf_counter()
    executor.start_local(num_cpus=cores)
    task = ray.remote(num_cpus=1, max_retries=0)(_noop)
    shared = ray.put(b"x" * 1_000_000)  # a dataset, in the object store once
    ray.get([task.remote(i, shared) for i in range(4 * cores)])
    started = time.perf_counter() - start
    out = {}
    try:
        for n in sizes:
            start, cpu = time.perf_counter(), time.process_time()
            pending = [task.remote(i, shared) for i in range(n)]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                ray.get(ready[0])
            out[n] = (time.perf_counter() - start, time.process_time() - cpu)
    finally:
        ray.shutdown()
    return out, started


def measure_driver(small: int = 100, big: int = 500, tasks: Sequence[int] = (100, 500),
                   repeats: int = 1) -> DriverCost:
    """The driver's serial seconds per cell (see the module docstring, (d)); medians of
    ``repeats``."""
    here = os.getcwd()
    store = os.environ.get("CBENCH_STORE")
    tmp = Path(tempfile.mkdtemp(prefix="cbench-cluster-model-"))
    book: list[tuple[float, float]] = []
    try:
        for r in range(repeats):
            (s_wall, s_cpu), (b_wall, b_cpu) = (
                _bookkeeping(n, tmp / f"r{r}-{n}") for n in (small, big))
            book.append(((b_wall - s_wall) / (big - small), (b_cpu - s_cpu) / (big - small)))
            print(f"driver bookkeeping, repeat {r + 1}: {small} cells {s_wall:.2f} s, {big} cells "
                  f"{b_wall:.2f} s", flush=True)
    finally:
        os.chdir(here)
        if store is None:
            os.environ.pop("CBENCH_STORE", None)
        else:
            os.environ["CBENCH_STORE"] = store
        shutil.rmtree(tmp, ignore_errors=True)
    times, started = _ray_tasks(tasks)
    lo, hi = min(tasks), max(tasks)
    ray_wall = (times[hi][0] - times[lo][0]) / (hi - lo)
    ray_cpu = (times[hi][1] - times[lo][1]) / (hi - lo)
    print(f"ray no-op tasks: {lo} in {times[lo][0]:.2f} s, {hi} in {times[hi][0]:.2f} s; "
          f"start {started:.2f} s", flush=True)
    return DriverCost(statistics.median(b[0] for b in book),
                      statistics.median(b[1] for b in book), ray_wall, ray_cpu, started)


def measure_worker_store(root: Path, cells: int = 20) -> tuple[float, float]:
    """Seconds per cell of ``folders.checksums`` + writing ``cell.json`` + ``folders.publish`` on
    copies of up to ``cells`` ok cell folders under ``root`` (the copy is not timed); and
    their mean bytes."""
    from pipeline.runtime.store import files, folders, layout

    base = root / "cells" if (root / "cells").is_dir() else root
    cell_dirs = [p.parent for p in sorted(base.glob("*/*/cell.json"))
               if (folders.read_record(p.parent) or {}).get("status") == "ok"][:cells]
    if not cell_dirs:
        raise SystemExit(f"--store-root {root}: no ok cell.json under it to measure the store")
    seconds, sizes = [], []
    with tempfile.TemporaryDirectory(prefix="cbench-store-") as tmp:
        for i, f in enumerate(cell_dirs):
            final = Path(tmp) / "cells" / f"c{i}" / "v"
            work = Path(files.staging_dir(final))  # a local path
            shutil.copytree(f, work, dirs_exist_ok=True)
            record = json.loads((work / layout.RECORD).read_text())
            (work / layout.RECORD).unlink()
            names = sorted(n for n in os.listdir(work) if not n.startswith("."))
            start = time.perf_counter()
            record["files"] = folders.checksums(work, names)
            files.atomic_write_json(work / layout.RECORD, record)
            published = folders.publish(work, final)
            seconds.append(time.perf_counter() - start)
            assert not published.kept
            sizes.append(sum(v["bytes"] for v in record["files"].values()))
    return statistics.median(seconds), statistics.mean(sizes)


def _fmt(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def table(times: Sequence[float], nodes: Sequence[int], per_node: int,
          over: capacity.Overheads, order: str) -> list[capacity.Prediction]:
    print(f"\n{'nodes':>6} {'slots':>7} {'compute':>10} {'driver':>10} {'store':>10} "
          f"{'wall':>10}  bottleneck")
    rows = []
    for n in nodes:
        p = capacity.predict(times, n, per_node, over, order)
        rows.append(p)
        print(f"{p.nodes:6d} {p.slots:7d} {_fmt(p.compute):>10} {_fmt(p.driver):>10} "
              f"{_fmt(p.store):>10} {_fmt(p.wall):>10}  {p.bottleneck}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, default=100_000)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node (0: CPU nodes)")
    ap.add_argument("--cells-per-gpu", type=float, default=4.0,
                    help="1 / compute.num_gpus (4: num_gpus 0.25; 0.5: two GPUs per cell)")
    ap.add_argument("--cpus-per-node", type=float, default=128.0)
    ap.add_argument("--cpus-per-cell", type=float, default=1.0, help="compute.num_cpus")
    ap.add_argument("--store-root", type=Path, default=None,
                    help="read the cells' wall_seconds and bytes from this cell store")
    ap.add_argument("--cell-seconds", type=float, nargs="+", default=None,
                    help="cell times (s), cycled over --cells, when there is no --store-root")
    ap.add_argument("--bytes-per-cell", type=float, default=None,
                    help="bytes one cell writes (default: the mean of --store-root's cells)")
    ap.add_argument("--driver-per-cell", type=float, default=None,
                    help=f"the driver's serial s per cell (default {MEASURED['driver_per_cell']})")
    ap.add_argument("--worker-store-per-cell", type=float, default=None,
                    help="a worker's store s per cell after training (default "
                         f"{MEASURED['worker_store_per_cell']})")
    ap.add_argument("--store-bandwidth", type=float, default=STORE_MBPS,
                    help="the store's aggregate write bandwidth, MB/s (0: unlimited)")
    ap.add_argument("--store-cells-per-second", type=float, default=0.0,
                    help="the most cells the store publishes per second (0: unlimited)")
    ap.add_argument("--startup", type=float, default=None, help="seconds once per run")
    ap.add_argument("--order", choices=capacity.ORDERS, default="given")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1, help="of --measure's bookkeeping runs")
    ap.add_argument("--measure", action="store_true",
                    help="measure the driver's and the worker's per-cell costs here first")
    args = ap.parse_args(argv)
    if args.cells < 1:
        ap.error(f"--cells {args.cells}: must be a whole number >= 1")

    costs = capacity.cell_costs(read_records(args.store_root)) if args.store_root else []
    if args.store_root and not costs:
        ap.error(f"--store-root {args.store_root}: no ok cell.json under it")
    if costs:
        draw = random.Random(args.seed).choices([c.seconds for c in costs], k=args.cells)
        mean_bytes = statistics.mean(c.bytes for c in costs)
        print(f"{len(costs)} ok cells in {args.store_root}: wall_seconds median "
              f"{statistics.median(c.seconds for c in costs):.2f}, mean "
              f"{statistics.mean(c.seconds for c in costs):.2f}, max "
              f"{max(c.seconds for c in costs):.2f}; {mean_bytes / 1e6:.3f} MB per cell; "
              f"{args.cells} drawn with replacement (seed {args.seed})")
    else:
        given = args.cell_seconds or [60.0]
        draw = [given[i % len(given)] for i in range(args.cells)]
        mean_bytes = 0.0
    measured = dict(MEASURED)
    if args.measure:
        load = os.getloadavg()[0]
        cost = measure_driver(repeats=args.repeats)
        measured["driver_per_cell"] = cost.per_cell
        measured["startup"] = cost.ray_start
        print(f"driver per cell: bookkeeping {1000 * cost.bookkeeping:.1f} ms (CPU "
              f"{1000 * cost.bookkeeping_cpu:.1f} ms) + Ray task {1000 * cost.ray_task:.2f} ms "
              f"(driver CPU {1000 * cost.ray_task_cpu:.2f} ms) = {1000 * cost.per_cell:.1f} ms; "
              f"Ray start {cost.ray_start:.1f} s; load average {load:.2f} -> "
              f"{os.getloadavg()[0]:.2f}")
        root = args.store_root or Path(os.environ.get("CBENCH_STORE") or
                                       Path.home() / ".cache" / "contrastive-bench")
        w, b = measure_worker_store(root)
        measured["worker_store_per_cell"] = w
        print(f"worker store per cell (checksums + cell.json + publish, {b / 1e6:.3f} MB): "
              f"{1000 * w:.1f} ms = {b / w / 1e6:.0f} MB/s on this disk")

    def pick(flag: float | None, key: str) -> float:
        return float(measured[key]) if flag is None else flag

    bytes_per_cell = mean_bytes if args.bytes_per_cell is None else args.bytes_per_cell
    over = capacity.Overheads(
        driver_per_cell=pick(args.driver_per_cell, "driver_per_cell"),
        worker_store_per_cell=pick(args.worker_store_per_cell, "worker_store_per_cell"),
        bytes_per_cell=bytes_per_cell, store_bandwidth=args.store_bandwidth * 1e6,
        store_cells_per_second=args.store_cells_per_second,
        startup=pick(args.startup, "startup"))
    per_node = capacity.slots_per_node(args.gpus, args.cells_per_gpu, args.cpus_per_node,
                                       args.cpus_per_cell)
    print(f"{args.cells} cells; {per_node} slots per node ({args.gpus} GPUs x "
          f"{args.cells_per_gpu:g} cells, {args.cpus_per_node:g} CPUs / {args.cpus_per_cell:g});"
          f" driver {1000 * over.driver_per_cell:.1f} ms/cell, worker store "
          f"{1000 * over.worker_store_per_cell:.1f} ms/cell, store "
          f"{1000 * over.store_per_cell:.2f} ms/cell ({bytes_per_cell / 1e6:.3f} MB at "
          f"{args.store_bandwidth:g} MB/s), startup {over.startup:.1f} s; order {args.order}")
    table(draw, args.nodes, per_node, over, args.order)
    cross = capacity.crossover_nodes(draw, per_node, over)
    mean = statistics.mean(draw) + over.worker_store_per_cell
    for term, n_star, unit in (("driver", cross.driver, over.driver_per_cell),
                               ("store", cross.store, over.store_per_cell)):
        if n_star is None:
            print(f"the {term} never becomes the bottleneck: its {_fmt(args.cells * unit)} "
                  f"are less than the longest cell ({_fmt(max(draw))})")
        else:
            where = (f"{math.floor(n_star) + 1} or more" if n_star >= 1
                     else "already on one node")
            print(f"the {term} becomes the bottleneck above N* = t_mean / (s x cost) = "
                  f"{mean:.3g} / ({per_node} x {unit:.4g}) = {n_star:.3g} nodes ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
