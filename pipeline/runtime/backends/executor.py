"""Ray: one task per cell, submitted at once, collected as they finish (with a progress bar).

The train stage runs its cells here when they need Ray (a cluster, GPUs, several torch threads
a cell, or ``$CBENCH_TRAIN_WORKERS=ray``); a local CPU grid runs on processes forked from the
stage instead (:mod:`pipeline.runtime.backends.cell_workers`).

Shared inputs (the dataset) go to the object store once. A cell's environment failures (out of
memory, too many open files, a timeout) are retried inside its task by ``run_cell``
(:class:`pipeline.runtime.cells.failures.RetryPolicy`); Ray's own ``max_retries`` covers lost
workers and nodes. A cell's own failures are recorded, never retried.

A local Ray instance binds every process to 127.0.0.1 through public means only. Ray picks a
node's address once per process, when ``ray`` is imported: the machine's external address,
unless the environment variable ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` is ``0`` — Ray's
documented switch for its single-machine mode (the default on macOS and Windows), in which the
node address (``ray.util.get_node_ip_address()``), the GCS, raylet, workers and agents are all
on the loopback address. This module sets it before its own ``import ray`` unless the process is
pointed at a cluster (``RAY_ADDRESS`` set: a KubeRay pod, a Ray job), so the pipeline's stages,
which import Ray here first, start local instances on 127.0.0.1 with a plain
``ray.init(address="local")``; every process Ray starts inherits it. A process that imported Ray
earlier (a test session) must set the variable itself before that import (tests/conftest.py
does); :func:`loopback_only` says so instead of starting Ray on another address.
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

SINGLE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
if not os.environ.get("RAY_ADDRESS"):
    os.environ.setdefault(SINGLE_MACHINE_ENV, "0")  # read by `import ray`, just below

import ray  # noqa: E402

from pipeline.config import Cell, ComputeConfig  # noqa: E402
from pipeline.datasets import Dataset  # noqa: E402
from pipeline.plugins import load_plugins  # noqa: E402
from pipeline.runtime.backends.addresses import LOOPBACK, ray_address  # noqa: E402  (re-exported)
from pipeline.runtime.backends.following import follow  # noqa: E402
from pipeline.runtime.cells.failures import ENVIRONMENT, RetryPolicy  # noqa: E402
from pipeline.runtime.cells.one_cell import (  # noqa: E402
    CellOutcome,
    prepare_worker,
    run_cell,
    torch_threads,
)

_local = {"started": False}  # whether this process's Ray instance is one start_local() made


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def loopback_only() -> None:
    """Check that Ray, in this process, puts a new local node on the loopback address.

    Sets :data:`SINGLE_MACHINE_ENV` for the processes started from here on, and raises when
    Ray was imported before it was set (the setting is read once, at import).
    """
    os.environ.setdefault(SINGLE_MACHINE_ENV, "0")
    address = ray.util.get_node_ip_address()  # a new local node's address, while not connected
    if not ray.is_initialized() and not _is_loopback(address):
        raise RuntimeError(
            f"a local Ray node would listen on {address}, not on {LOOPBACK}: Ray was imported "
            f"before {SINGLE_MACHINE_ENV}=0 was set (Ray reads it once, at import). Set it in the "
            "environment of the process, or import pipeline.runtime.backends.executor before ray")


def start_local(num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """A new local Ray instance on 127.0.0.1, sized by Ray's own (cgroup-aware) detection.

    ``num_cpus`` / ``num_gpus``: logical counts instead (tests use them to simulate GPUs).
    ``address="local"``: never attach to an instance someone else started on this machine.
    """
    loopback_only()
    ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False,
             log_to_driver=False)
    nodes = {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
    if not all(_is_loopback(a) for a in nodes):  # the invariant DESIGN.md states; never silent
        ray.shutdown()
        raise RuntimeError(f"the local Ray instance listens on {sorted(nodes)}, not {LOOPBACK}")
    _local["started"] = True


def init_ray(compute: ComputeConfig) -> None:
    """Connect to :func:`ray_address`, else start a local instance on 127.0.0.1."""
    if ray.is_initialized():
        return
    address = ray_address(compute)
    if address:
        ray.init(address=address, log_to_driver=False)
        _local["started"] = False
    else:
        start_local()


def check_resources(compute: ComputeConfig) -> None:
    """Ray gives a task a share of one GPU or whole GPUs: ``num_gpus`` above 1 must be whole."""
    g = compute.num_gpus
    if g > 1 and not float(g).is_integer():
        raise ValueError(f"compute.num_gpus = {g}: above 1 it must be a whole number of GPUs "
                         f"(e.g. {math.floor(g)} or {math.ceil(g)}); below 1 a fraction packs "
                         "several cells onto one GPU (0.25: four per GPU)")


def check_gpus_exist(compute: ComputeConfig) -> None:
    """On a local instance, cells asking for more CPUs than a node has, or for GPUs it lacks,
    would wait forever: refuse them, naming the key.

    (A cluster's autoscaler may still add GPU nodes, so there the cells are left to wait.)
    """
    if not _local["started"]:
        return
    biggest = max((n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n["Alive"]), default=0.0)
    if compute.num_cpus > biggest:
        raise ValueError(f"compute.num_cpus = {compute.num_cpus:g}: the local Ray instance's "
                         f"largest node has {biggest:g} CPUs, so no cell could ever start; "
                         f"allowed: at most {biggest:g}")
    have = ray.cluster_resources().get("GPU", 0.0)
    if compute.num_gpus > have:
        raise ValueError(f"compute.num_gpus = {compute.num_gpus}: the local Ray instance has "
                         f"{have:g} GPUs, so no cell could ever start; set compute.num_gpus: 0 "
                         "to train here (train.device: auto or cpu), or point "
                         "compute.ray_address / RAY_ADDRESS at a cluster with GPU nodes")


def _task(cell: Cell, dataset: Dataset, folder: str, meta: Mapping[str, Any], threads: int,
          snapshot_epochs: Sequence[int], plugins: Sequence[str],
          policy: RetryPolicy) -> CellOutcome:
    load_plugins(plugins)  # a worker process registers the user's losses before training
    prepare_worker()  # a fresh worker's one-off imports, outside the cell's timed run
    return run_cell(cell, dataset, folder, meta, threads, snapshot_epochs, policy)


def run_cells(cells: Sequence[Cell], dataset: Dataset, folders: Mapping[str, str | Path],
              metas: Mapping[str, Mapping[str, Any]], compute: ComputeConfig, threads: int,
              snapshot_epochs: Sequence[int], on_done: Callable[[CellOutcome], None],
              plugins: Sequence[str] = (), ready: Callable[[], object] | None = None
              ) -> list[CellOutcome]:
    """Run every cell as a Ray task writing to its folder; ``on_done`` is called in the driver as
    each one finishes. ``metas``: each cell's record fields (git commit, version, fingerprint).
    ``ready``: called once Ray is up, before any cell is submitted (the driver waits there for
    its MLflow store, which opened while Ray started)."""
    if not cells:
        return []
    check_resources(compute)
    init_ray(compute)
    check_gpus_exist(compute)
    if ready is not None:
        ready()
    remote = ray.remote(num_cpus=compute.num_cpus, num_gpus=compute.num_gpus,
                        max_retries=compute.max_retries, retry_exceptions=False)(_task)
    data_ref = ray.put(dataset)
    plugin_paths = [str(Path(p).resolve()) if p.endswith(".py") else p for p in plugins]
    policy = RetryPolicy(compute.max_retries, compute.retry_backoff_s, compute.cell_timeout_s)
    by_ref = {remote.remote(c, data_ref, str(folders[c.cell_id]), metas[c.cell_id], threads,
                            list(snapshot_epochs), plugin_paths, policy): c
              for c in cells}
    cpus = float(ray.cluster_resources().get("CPU", 1.0))

    def finished() -> Iterator[CellOutcome]:
        pending = list(by_ref)
        while pending:
            got, pending = ray.wait(pending, num_returns=1)
            try:
                yield ray.get(got[0])
            except ray.exceptions.RayError as err:  # worker lost beyond max_retries, etc.
                yield CellOutcome(by_ref[got[0]].cell_id, "failed",
                                  f"{type(err).__name__}: {err}"[:2000],
                                  failure_class=ENVIRONMENT)  # no record: retried next run

    return follow(finished(), len(by_ref), max(1, int(cpus // max(compute.num_cpus, 1e-9))),
                  on_done)


def _measure(cell: Cell, input_shape: tuple[int, ...], threads: int,
             plugins: Sequence[str]) -> dict[str, Any]:
    from pipeline.train import measure_compute_mode

    load_plugins(plugins)
    with torch_threads(threads):
        return measure_compute_mode(cell, input_shape).as_record()


def resolve_auto_modes(cells: Sequence[Cell], input_shape: tuple[int, ...],
                       compute: ComputeConfig, threads: int,
                       plugins: Sequence[str] = ()) -> tuple[list[Cell], dict[str, dict[str, Any]]]:
    """``train.precision`` / ``train.memory_format: auto`` measured before any cell is looked
    up, so that a cell's version names the setting it trains in (a bfloat16 result never stands
    in for a float32 one). Measured once per (architecture, options, input shape, batch, device)
    where the cells run: in this process on a local run whose device is here, else in one Ray
    task with a cell's resources. Returns the cells with the measured settings (ids unchanged)
    and, per cell id, the measurement (recorded with the cell)."""
    import torch

    auto = [c for c in cells if "auto" in (c.train.precision, c.train.memory_format)]
    if not auto:
        return list(cells), {}
    local = ray_address(compute) is None and (
        not auto[0].train.device.startswith("cuda") or torch.cuda.is_available())

    def key(c: Cell) -> tuple[Any, ...]:
        return (c.arch, tuple(sorted((k, str(v)) for k, v in c.arch_options.items())),
                c.embed_dim, c.train.batch_size, c.train.device, c.train.precision,
                c.train.memory_format)

    first = {key(c): c for c in reversed(auto)}
    if local:
        modes = {k: _measure(c, input_shape, threads, plugins) for k, c in first.items()}
    else:
        init_ray(compute)
        remote = ray.remote(num_cpus=compute.num_cpus, num_gpus=compute.num_gpus)(_measure)
        refs = {k: remote.remote(c, input_shape, threads, list(plugins)) for k, c in first.items()}
        modes = {k: ray.get(r) for k, r in refs.items()}
    out, measured, ids = [], {}, {c.cell_id for c in auto}
    for c in cells:
        if c.cell_id in ids:
            mode = modes[key(c)]
            c = replace(c, train=replace(c.train, precision=mode["precision"],
                                         memory_format=mode["memory_format"]))
            measured[c.cell_id] = mode
        out.append(c)
    return out, measured
